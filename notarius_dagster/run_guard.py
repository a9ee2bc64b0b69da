"""One writer per session, as `notarius run` sees it: the run tags that name a run's session
and the CLI process that runs it, and the checks made before the CLI runs a session.

Runs the daemon launches (sensor, UI, backfill) are kept apart by the run queue's tag
concurrency limits (`dagster.yaml`: one run per `notarius/session` and per `dagster/partition`).
`notarius run` executes in its own process and never passes through the queue, so before it
runs a session it (1) reports as failed its own earlier runs on this host whose process is
gone (a `notarius run` killed with -9 leaves its run STARTED for good: nobody else will end
it), and (2) refuses while any run of the session is queued or in progress, naming the run.
It refuses rather than waits: a waiting command would hold a terminal for as long as the other
run takes, and the transcript it was given would replace the one the other run is reading.

The check, the transcript registration and the run's creation are one transaction: the CLI makes
them holding the session's lock (`store.py: session_lock`), which `sessions add` and the inbox
take too before they replace a transcript, so two starts of one session give one run and one
refusal. The publication lock (engine/bundle.py) is the last line of defence."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator

from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

from notarius_dagster.store import SessionBusyError as SessionBusyError  # re-export
from notarius_dagster.store import StorePaths, session_lock

SESSION_TAG = "notarius/session"
CLI_PID_TAG = "notarius/cli-pid"
CLI_HOST_TAG = "notarius/cli-host"
PARTITION_TAG = "dagster/partition"  # set by Dagster on every partitioned run

NOT_FINISHED = [
    DagsterRunStatus.QUEUED,
    DagsterRunStatus.NOT_STARTED,
    DagsterRunStatus.STARTING,
    DagsterRunStatus.STARTED,
    DagsterRunStatus.CANCELING,
]
"""Statuses of a run that may still write the session's asset values and bundle."""


def session_tags(session_id: str) -> dict[str, str]:
    """The tag every run the project launches carries (the queue limits one run per value)."""
    return {SESSION_TAG: session_id}


def cli_run_tags(session_id: str) -> dict[str, str]:
    """The tags of a run `notarius run` executes in this process."""
    return {
        **session_tags(session_id),
        CLI_PID_TAG: str(os.getpid()),
        CLI_HOST_TAG: socket.gethostname(),
    }


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def fail_orphaned_cli_runs(instance: DagsterInstance) -> list[str]:
    """Report as failed every unfinished run a `notarius run` on this host started whose
    process is gone; returns their run ids. Runs of other hosts are left alone (their pids
    mean nothing here); daemon-launched runs are the daemon's run monitoring's."""
    host = socket.gethostname()
    failed = []
    for run in instance.get_runs(RunsFilter(statuses=NOT_FINISHED, tags={CLI_HOST_TAG: host})):
        raw_pid = run.tags.get(CLI_PID_TAG, "")
        if not raw_pid.isdigit() or int(raw_pid) == os.getpid() or _alive(int(raw_pid)):
            continue
        instance.report_run_failed(
            run,
            message=(
                f"the notarius run process (pid {raw_pid} on this host) that executed this run "
                "ended without finishing it (killed or crashed); marked failed by a later "
                "notarius command"
            ),
        )
        failed.append(run.run_id)
    return failed


def guard_session_run(session_id: str, instance: DagsterInstance | None = None) -> None:
    """What `notarius run` checks before it touches the session: orphaned CLI runs are failed,
    then any run of the session still queued or in progress refuses this one (SessionBusyError,
    naming the run and its status)."""
    if instance is None:
        with DagsterInstance.get() as owned:  # disposed here: the run opens its own
            guard_session_run(session_id, owned)
        return
    fail_orphaned_cli_runs(instance)
    refuse_if_busy(instance, session_id, "run again")


@contextlib.contextmanager
def session_start(
    store: StorePaths, session_id: str, instance: DagsterInstance | None = None
) -> Iterator[None]:
    """One transaction per session start: hold the session's lock (`store.py: session_lock`),
    then make `guard_session_run`'s checks; the caller registers the transcript and runs the
    session inside the block, and the lock is released when it ends. Refused when another
    command holds the lock, naming the run in progress when one is recorded (the lock's own
    message, naming the holder's pid, otherwise)."""
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(session_lock(store, session_id, doing="start a run of it"))
        except SessionBusyError:
            guard_session_run(session_id, instance)  # names the run when one is recorded
            raise
        guard_session_run(session_id, instance)
        yield


def refuse_if_busy(instance: DagsterInstance, session_id: str, then: str) -> None:
    """SessionBusyError naming every run of the session still queued or in progress (by the
    session tag, or the partition tag of a run launched without it); `then` is what the user
    may do once it is over (`run again`)."""
    busy = {}
    for tag in (SESSION_TAG, PARTITION_TAG):
        for run in instance.get_runs(
            RunsFilter(statuses=NOT_FINISHED, tags={tag: session_id}), limit=10
        ):
            busy[run.run_id] = run.status.value
    if busy:
        shown = ", ".join(f"{run_id} ({status})" for run_id, status in sorted(busy.items()))
        raise SessionBusyError(
            f"session {session_id!r} has a run queued or in progress: {shown}; wait for it to "
            f"finish (or cancel it in the UI) and {then}: one writer per session"
        )


def sessions_in_progress(instance: DagsterInstance) -> set[str]:
    """The sessions with a run queued or in progress (by the session tag, or the partition tag
    of a run launched without it): whose transcript must not be replaced now."""
    busy: set[str] = set()
    for run in instance.get_runs(RunsFilter(statuses=NOT_FINISHED), limit=1000):
        for tag in (SESSION_TAG, PARTITION_TAG):
            if run.tags.get(tag):
                busy.add(run.tags[tag])
    return busy
