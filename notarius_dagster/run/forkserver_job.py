"""Imported last by the forkserver of a parallel run (notarius_dagster/run/step_processes.py:
PRELOAD_MODULES): builds the session job that `notarius run` announced in NOTARIUS_STEP_JOB into
the runner's cache, so every step forked from here finds it built. Imported anywhere else (the
variable is set only while the forkserver starts), it does nothing."""

from __future__ import annotations

import json

from notarius_dagster.run.runner import session_job
from notarius_dagster.settings import load_settings


def build_announced_job() -> None:
    """A job that fails to build is left to the step process, which builds it again and reports
    the error the usual way."""
    raw = load_settings().step_job
    if not raw:
        return
    try:
        session_job(**json.loads(raw))
    except Exception:  # noqa: BLE001 - reported by the step that needs the job
        return


build_announced_job()
