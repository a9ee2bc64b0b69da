"""The forkserver `notarius run` forks its session workers from, when it is given several
transcripts (`--jobs` sessions at a time), and what that forkserver holds before the first fork.

A worker is a fork of the forkserver, so whatever the forkserver imported is there for free, and
whatever it did not is paid again by every worker: the code location, the LLM client with
litellm (seconds of CPU to import) and the instance's storage modules, frozen before the first
fork (`forkserver_freeze.py`). Each worker then runs its sessions in process, one after another
(a session is one process: its lanes of one level run on threads inside their level's step,
assets/factory.py). One session alone runs in the command's own process, without a forkserver.
"""

from __future__ import annotations

import contextlib
import importlib.util
import multiprocessing
import os
import signal
from multiprocessing import forkserver, resource_tracker

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
    # The LLM client (litellm alone costs seconds of CPU), so no worker imports it.
    "notarius_dagster.llm.client",
    *_STORAGE_MODULES,
    # Last: everything above frozen for the workers' lives.
    "notarius_dagster.run.forkserver_freeze",
]
"""Modules a session worker needs, imported once by the forkserver so each worker is a fork,
not an import."""


def start_forkserver() -> None:
    """Start the forkserver now, in the background, so its imports overlap with this process's
    own start-up; the worker pool finds it running and forks its workers from it. A forkserver
    already running is kept."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD_MODULES)
    forkserver.ensure_running()


def stop_forkserver() -> None:
    """Stop this process's forkserver, if it started one, and wait for it: what `notarius run`
    does before it exits, so no process of the command outlives it. Left alone, the forkserver
    exits only when it next reads its parent's pipe, seconds later (and not before it has
    finished its own imports). Every worker has ended by then, so it is ended at once, and so
    is the multiprocessing resource tracker it shared."""
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
