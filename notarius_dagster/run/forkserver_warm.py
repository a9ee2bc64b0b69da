"""Imported by the forkserver of a run (notarius_dagster/run/step_processes.py: PRELOAD_MODULES),
before it serves its first fork: litellm's lazy first-call work done once here
(notarius_dagster/llm/warm.py), so no step process pays it. Listed for the daemon's and the UI's
runs too (the code location's executor preloads the same modules)."""

from __future__ import annotations

from notarius_dagster.llm.warm import warm_litellm

warm_litellm()
