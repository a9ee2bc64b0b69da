"""Imported by the forkserver of `notarius run`'s session workers
(notarius_dagster/run/workers.py: PRELOAD_MODULES), before it serves its first fork: litellm's
lazy first-call work done once here (notarius_dagster/llm/warm.py), so no worker pays it."""

from __future__ import annotations

from notarius_dagster.llm.warm import warm_litellm

warm_litellm()
