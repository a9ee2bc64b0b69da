"""What a step process of a parallel run costs, paid once: the forkserver the multiprocess
executor forks every step from, and what it holds before the first fork.

A step process is a fork of the forkserver, so whatever the forkserver imported or built is
there for free, and whatever it did not is paid again by every step (16 of them in a six-lane
run). Measured per step before this module (cProfile inside each child): the instance's storage
modules (SQLAlchemy, alembic, Dagster's SQL storages) were imported afresh, and the session job
was rebuilt twice (the execution plan and the step each reconstruct it). So the forkserver
imports PRELOAD_MODULES, which include these, and `notarius run` tells it (NOTARIUS_STEP_JOB,
the job's plain arguments) which job to build before it serves its first fork.

`notarius_dagster/run/forkserver_job.py` does that build; it is the last entry of PRELOAD_MODULES,
so everything it needs is already imported. A run the UI or the daemon launches gets the same
preloaded forkserver from the executor, without a job announced; the in-process path (tests,
`execute_in_process`) never starts one."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import multiprocessing
import os
import signal
from collections.abc import Sequence
from multiprocessing import forkserver, resource_tracker
from pathlib import Path
from typing import NotRequired, TypedDict

from notarius_dagster.settings import STEP_JOB_ENV
from notarius_dagster.store import StorePaths

# The instance's storage: the embedded SQLite one, and PostgreSQL when dagster-postgres is
# installed (a deployment's instance may use it; an unused import costs the forkserver only).
_STORAGE_MODULES = [
    "dagster._core.storage.sqlite_storage",
    "dagster._core.storage.event_log.sqlite.sqlite_event_log",
    "dagster._core.storage.runs.sqlite.sqlite_run_storage",
    "dagster._core.storage.schedules.sqlite.sqlite_schedule_storage",
    *(["dagster_postgres"] if importlib.util.find_spec("dagster_postgres") else []),
]

PRELOAD_MODULES = [
    "notarius_dagster.run.definitions",
    "notarius_dagster.run.runner",
    # The LLM client (litellm alone costs seconds of CPU), so no lane step imports it, and
    # litellm's first-call work (0.35-0.5 s of CPU per step otherwise), so no step pays it.
    "notarius_dagster.llm.client",
    "notarius_dagster.run.forkserver_warm",
    *_STORAGE_MODULES,
    "notarius_dagster.run.forkserver_job",  # last: builds the job NOTARIUS_STEP_JOB names
]
"""Modules a step process needs, imported once by the forkserver so each step is a fork, not
an import."""


class StepJobArguments(TypedDict):
    """What `runner.session_job` rebuilds a run's job from: plain values, so they travel as
    JSON (NOTARIUS_STEP_JOB) and as `build_reconstructable_job` keyword arguments."""

    profile: str
    data_root: str
    bundles_root: str
    llm_profile: str | None
    lanes: list[str] | None
    pipeline_digest: NotRequired[str]
    offline_server: NotRequired[str | None]


def step_job_arguments(
    profile: Path, store: StorePaths, llm_profile: str | None, lanes: Sequence[str] | None
) -> StepJobArguments:
    """The plain arguments `runner.session_job` rebuilds a run's job from (what its step
    processes receive), the same whether `notarius run` announces them to the forkserver or
    the runner hands them to the executor."""
    return {
        "profile": str(profile.resolve()),
        "data_root": str(store.root),
        "bundles_root": str(store.bundles),
        "llm_profile": llm_profile,
        "lanes": list(lanes) if lanes else None,
    }


def start_forkserver(job_arguments: StepJobArguments | None = None) -> None:
    """Start the forkserver now, in the background, rather than when the executor launches the
    first step, so its imports overlap with this process's own start-up (resolving the profile,
    opening the instance). With `job_arguments` (what `runner.session_job` takes) it also builds
    that job before serving. The executor finds it running and forks its steps from it; a
    forkserver already running (an earlier session of the same command) is kept."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["dagster._core.executor.multiprocess", *PRELOAD_MODULES])
    if job_arguments is not None:
        os.environ[STEP_JOB_ENV] = json.dumps(dict(job_arguments), sort_keys=True)
    try:
        forkserver.ensure_running()  # the forkserver takes this environment when it starts
    finally:
        os.environ.pop(STEP_JOB_ENV, None)  # and no other process of ours inherits it


def stop_forkserver() -> None:
    """Stop this process's forkserver, if it started one, and wait for it: what `notarius run`
    does before it exits, so no process of the command outlives it. Left alone, the forkserver
    exits only when it next reads its parent's pipe, seconds later (and not before it has
    finished its own imports). Every step process has ended by then (the run is over), so it
    is ended at once, and so is the multiprocessing resource tracker it shared."""
    server = forkserver._forkserver  # type: ignore[attr-defined]  # the module's one instance
    pid = getattr(server, "_forkserver_pid", None)
    if pid is None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    server._stop()  # type: ignore[attr-defined]  # closes its pipe, reaps it, forgets its address
    # The resource tracker the forkserver shared with this process: it ends when the last
    # holder of its pipe closes it, so with the forkserver gone it ends now; reaped here.
    resource_tracker._resource_tracker._stop()  # type: ignore[attr-defined]
