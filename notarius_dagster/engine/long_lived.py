"""What a process imports lives until it exits: the cycle collector need not keep walking it,
and the process need not take it apart at exit.

Why (issue 22, measured on one `notarius run` of a 2,070-unit session with the complete profile,
against the loopback latency server, on an idle 2-core machine; `gc.callbacks` timing):

- Importing Dagster, the code location and litellm allocates a few million objects. Python's
  full (generation 2) collection is triggered as that heap grows and walks all of it each
  time: nine full collections, 1.6–1.9 s of CPU, every one of them during an import; none
  after, once the lanes run.
- Tearing that heap down at interpreter exit (module dictionaries, pydantic validators,
  litellm's provider tables) took 2.0–2.6 s more, after the run's last line was printed.

Both are paid for nothing: the modules live as long as the process. `loading_for_life` pauses
the collector while such code is imported and then moves what was imported to the permanent
generation (`gc.freeze`), which later collections skip; `exit_without_teardown` ends the
console command after Python's exit handlers have run, without the teardown. Both only change
when memory is reclaimed, never what a command does or writes."""

from __future__ import annotations

import atexit
import contextlib
import gc
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn


@contextmanager
def loading_for_life() -> Iterator[None]:
    """Import code that lives until the process exits: no collection while it loads, and what
    it left (with everything allocated before it) frozen afterwards. A collector that was
    already disabled stays disabled."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def exit_without_teardown(status: int) -> NoReturn:
    """End the process with `status` as Python would, minus tearing down its objects: buffered
    output flushed, logging shut down, every `atexit` handler run (Dagster's, litellm's and
    multiprocessing's among them), then `os._exit`.

    Only for the console command's own process, after its command has returned: threads still
    running (none of ours; at most a litellm logging callback, which we do not register) are
    not waited for. Never call it where Python code runs on afterwards (tests calling `main`)."""
    logging.shutdown()
    # atexit's own runner: the handlers in their documented order, as interpreter exit runs them.
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        # A closed pipe or stream: nothing more can be said.
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(status)
