"""What a process imports lives until it exits: the cycle collector need not keep walking it.

Why (issue 22, measured on one `notarius run` of a 2,070-unit session with the complete profile,
against the loopback latency server, on an idle 2-core machine; `gc.callbacks` timing):
importing Dagster, the code location and litellm allocates a few million objects, and Python's
full (generation 2) collection, triggered as that heap grows, walks all of it each time: nine
full collections, 1.5–1.9 s of CPU, every one during an import and none once the lanes run.
Tearing the heap down at exit, after the last `atexit` handler, cost 1.7–1.9 s more, most of
it the interpreter's last collections over the same objects.

`loading_for_life` pauses the collector while such code is imported and then moves what was
imported to the permanent generation (`gc.freeze`), which later collections, the last ones at
exit included, skip. Collection and teardown together went from 3.7–3.8 s to 0.5–0.6 s of CPU
on that run. It changes only when memory is reclaimed, never what a command does or writes;
the price is that a cycle made unreachable before a freeze is never collected (a process loads
its code once, so that is bounded).

Tried and not kept: ending the command with `os._exit` after the `atexit` handlers, to skip the
rest of the teardown (0.45 s less CPU). It also skips the shutdown of Python's thread and
process pools, which `atexit` does not run: after SIGTERM, `notarius run --jobs` then waited
for ever on workers that were never told to stop."""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def loading_for_life() -> Iterator[None]:
    """Import code that lives until the process exits: no collection while it loads, and what
    it left (with everything allocated before it) frozen afterwards. A collector that was
    already disabled stays disabled.

    Frozen only when the block loaded a module: a block whose imports were all done already
    (the second session of one `notarius run`, every level step after a process's first)
    freezes nothing, so the garbage of the work between two such blocks is still collected."""
    enabled = gc.isenabled()
    loaded = len(sys.modules)
    gc.disable()
    try:
        yield
    finally:
        if len(sys.modules) > loaded:
            gc.freeze()
        if enabled:
            gc.enable()
