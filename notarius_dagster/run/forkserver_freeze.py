"""Imported last by the forkserver of `notarius run`'s session workers
(notarius_dagster/run/workers.py: PRELOAD_MODULES), before it serves its first fork: everything
the forkserver loaded is frozen (`gc.freeze`), so no worker's collections walk it and its pages
stay shared with the forkserver instead of being copied into each worker by the collector's
writes (Python's own advice for a process that forks:
https://docs.python.org/3/library/gc.html#gc.freeze).

litellm's first-call work is not done here, though it would save each worker 0.4–0.5 s of CPU:
a completion leaves litellm's logging threads running, and a worker forked while one of them
held a lock (an import lock, when it was tried) hangs for ever. Each worker warms itself after
the fork, before its first lane's deadline (`LLMResource.load_client`)."""

from __future__ import annotations

import gc

gc.freeze()
