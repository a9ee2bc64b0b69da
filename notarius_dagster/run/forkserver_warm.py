"""Imported by the forkserver of `notarius run`'s session workers
(notarius_dagster/run/workers.py: PRELOAD_MODULES), before it serves its first fork: litellm's
lazy first-call work done once here (notarius_dagster/llm/warm.py), so no worker pays it.
Imported last: what the forkserver loaded is then frozen (`gc.freeze`, through
`loading_for_life`), so no worker's collections walk it and the pages stay shared with the
forkserver instead of being copied into each worker by the collector's writes (Python's own
advice for a process that forks: https://docs.python.org/3/library/gc.html#gc.freeze)."""

from __future__ import annotations

from notarius_dagster.engine.long_lived import loading_for_life
from notarius_dagster.llm.warm import warm_litellm

with loading_for_life():
    warm_litellm()
