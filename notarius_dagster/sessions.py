"""Sessions on a Dagster instance: listing them and deleting one with everything stored for it.

A session is a partition of `sessions`; what is stored for it lives in the store (`StorePaths`:
its published bundle, transcript and per-asset values) and on the instance (its runs with their
materializations, check results and logs). `notarius sessions list|delete` prints what these
functions return; the tests call them too. They take a `DagsterInstance` and use its API, but
are not Dagster definitions."""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import NotRequired, TypedDict

from dagster import (
    AssetKey,
    AssetMaterialization,
    AssetRecordsFilter,
    DagsterInstance,
    DagsterRun,
    RunRecord,
    RunsFilter,
)

from notarius_dagster.engine.bundle import remove_bundle
from notarius_dagster.engine.transcripts import read_transcript, remove_transcript, store_transcript
from notarius_dagster.report.publish import remove_report
from notarius_dagster.run_guard import refuse_if_busy
from notarius_dagster.store import StorePaths, session_lock

SESSIONS_PARTITIONS = "sessions"
BUNDLE_ASSET = "session_bundle"
TRANSCRIPT_ASSET = "transcript"
# Dagster's run tag for the partition a run materializes.
PARTITION_TAG = "dagster/partition"
IN_PROGRESS = frozenset({"QUEUED", "NOT_STARTED", "STARTING", "STARTED", "CANCELING"})


def _iso(timestamp: float | None) -> str | None:
    if not timestamp:
        return None
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="seconds")


def session_runs(
    instance: DagsterInstance, session_id: str, limit: int | None = None
) -> list[RunRecord]:
    """The run records of one session, newest first."""
    return list(
        instance.get_run_records(filters=RunsFilter(tags={PARTITION_TAG: session_id}), limit=limit)
    )


def runs_in_progress(instance: DagsterInstance, session_id: str) -> list[DagsterRun]:
    """The session's runs still queued or running (a dead `notarius run` leaves one STARTED)."""
    return [
        r.dagster_run
        for r in session_runs(instance, session_id)
        if r.dagster_run.status.value in IN_PROGRESS
    ]


def is_session(instance: DagsterInstance, session_id: str) -> bool:
    return instance.has_dynamic_partition(SESSIONS_PARTITIONS, session_id)


class LastRun(TypedDict):
    """A session's last run, as `notarius sessions list --json` prints it."""

    run_id: str
    status: str
    at: str | None


class SessionRow(TypedDict):
    """One session, as `notarius sessions list --json` prints it."""

    session_id: str
    last_run: LastRun | None
    bundle_materialized_at: str | None
    bundle_published: bool
    stale: NotRequired[list[str] | None]
    """The assets whose code changed (None: unknown); the command adds it."""


def session_rows(instance: DagsterInstance, store: StorePaths) -> list[SessionRow]:
    """One row per partition of `sessions`, in the order they were added: its last run, when
    its bundle was last materialized, and whether a bundle is published."""
    rows: list[SessionRow] = []
    for session_id in instance.get_dynamic_partitions(SESSIONS_PARTITIONS):
        runs = session_runs(instance, session_id, limit=1)
        last = runs[0] if runs else None
        materialized = instance.fetch_materializations(
            AssetRecordsFilter(asset_key=AssetKey(BUNDLE_ASSET), asset_partitions=[session_id]),
            limit=1,
            ascending=False,
        ).records
        rows.append(
            {
                "session_id": session_id,
                "last_run": None
                if last is None
                else {
                    "run_id": last.dagster_run.run_id,
                    "status": last.dagster_run.status.value,
                    "at": _iso(
                        last.end_time or last.start_time or last.create_timestamp.timestamp()
                    ),
                },
                "bundle_materialized_at": _iso(materialized[0].timestamp) if materialized else None,
                "bundle_published": (store.bundles / session_id / "index.json").is_file(),
            }
        )
    return rows


@dataclass(frozen=True)
class Registration:
    """What `add_session` did: the session, whether its partition is new, and whether the
    stored transcript changed (a new file, or different content)."""

    session_id: str
    new_partition: bool
    transcript_changed: bool
    sha256: str


def add_session(
    instance: DagsterInstance, session_id: str, source: Path, store: StorePaths
) -> Registration:
    """Register a session without running it: store its transcript, add its partition and
    record a materialization of the external `transcript` asset (sha256 and size, no content).

    That event is what declarative automation watches (assets/automation.py): with the
    automation sensor on, the session's assets run on its next tick; without it, the session
    waits for a click in the UI or `notarius run`. Adding the same content again records
    nothing new, so it asks for no run.

    The file is read once, by the one reader (a regular file within the default transcript
    limit), before anything is stored; the transcript is replaced holding the session's lock
    and only while no run of the session is queued or in progress (SessionBusyError): the
    transcript a run is reading is never replaced under it."""
    content = read_transcript(source)
    sha256 = hashlib.sha256(content).hexdigest()
    with session_lock(store, session_id, doing="replace its transcript"):
        refuse_if_busy(instance, session_id, "add it again")
        previous = _recorded_transcript_sha(instance, session_id)
        store_transcript(
            store.transcripts, session_id, content, extension=source.suffix, name=source.name
        )
    new_partition = not is_session(instance, session_id)
    if new_partition:
        instance.add_dynamic_partitions(SESSIONS_PARTITIONS, [session_id])
    changed = previous != sha256
    if changed:
        instance.report_runless_asset_event(
            AssetMaterialization(
                asset_key=TRANSCRIPT_ASSET,
                partition=session_id,
                metadata={"sha256": sha256, "bytes": len(content), "recorded_by": "sessions add"},
            )
        )
    return Registration(session_id, new_partition, changed, sha256)


def _recorded_transcript_sha(instance: DagsterInstance, session_id: str) -> str | None:
    records = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=AssetKey(TRANSCRIPT_ASSET), asset_partitions=[session_id]),
        limit=1,
    ).records
    if not records or records[0].asset_materialization is None:
        return None
    value = records[0].asset_materialization.metadata.get("sha256")
    return str(value.value) if value is not None else None


@dataclass
class Deletion:
    """What `delete_session` did (for the report) and what it could not do (warnings)."""

    done: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def delete_session(instance: DagsterInstance, session_id: str, store: StorePaths) -> Deletion:
    """Remove everything stored for one session.

    Files go first and the partition last, so an interrupted delete can simply be repeated.
    Dagster OSS storage cannot wipe single asset partitions (`wipe_asset_partitions` is
    implemented only by Dagster+ storage), so the session's materializations, check results and
    logs are removed with its runs (`delete_run`; every run of the session job materializes
    exactly one partition). Anything still recorded for the partition afterwards (for example a
    multi-partition backfill run) is wiped where the storage supports it, and reported.
    Checkpoints stay: they are keyed by content and shared by sessions."""
    deletion = Deletion()
    done = deletion.done
    if remove_bundle(store.bundles, session_id):
        done.append("published bundle and its versions")
    if remove_report(store.bundles, session_id):
        done.append("session report")
    had_transcript = any(store.transcripts.glob(f"{session_id}.*"))
    remove_transcript(store.transcripts, session_id)
    if had_transcript:
        done.append("stored transcript")
    values = store.session_values(session_id)
    if values.is_dir():
        shutil.rmtree(values)
        done.append("per-asset values")

    keys: list[AssetKey] = [
        k
        for k in instance.get_asset_keys()
        if session_id in instance.get_materialized_partitions(k)
    ]
    run_ids = [record.dagster_run.run_id for record in session_runs(instance, session_id)]
    checks_removed = _delete_check_executions(instance, run_ids)
    for run_id in run_ids:
        instance.delete_run(run_id)
    if run_ids:
        done.append(
            f"{len(run_ids)} run(s) with their materializations, "
            + ("check results " if checks_removed else "")
            + "and logs"
        )
    if run_ids and not checks_removed:
        deletion.warnings.append(
            "this event log storage keeps the asset check results of deleted runs"
        )
    left = [k for k in keys if session_id in instance.get_materialized_partitions(k)]
    for key in left:
        try:
            instance.wipe_asset_partitions(key, [session_id])
        except NotImplementedError:
            if key == AssetKey(TRANSCRIPT_ASSET):
                # `sessions add` records the transcript without a run (add_session).
                deletion.warnings.append(
                    f"the transcript registration of {session_id!r} (its sha256 and size, no "
                    "content) stays on the instance: this storage cannot wipe a single partition"
                )
                continue
            deletion.warnings.append(
                f"{key.to_user_string()} still has materializations of "
                f"{session_id!r} from runs of other partitions; this storage cannot wipe a "
                "single partition"
            )
    if keys:
        instance.wipe_asset_cached_status(keys)
    instance.delete_dynamic_partition(SESSIONS_PARTITIONS, session_id)
    done.append(f"partition {session_id!r} of {SESSIONS_PARTITIONS!r}")
    return deletion


def _delete_check_executions(instance: DagsterInstance, run_ids: list[str]) -> bool:
    """Remove the asset check results of the given runs. Dagster 1.13 has no public API for
    this: `delete_run` removes a run's events but leaves their index rows in the
    `asset_check_executions` table, so the UI would keep showing a deleted run's check
    results. On Dagster's SQL event log storages (SQLite, PostgreSQL) those rows are deleted
    here; on any other storage this returns False and the caller says so."""
    # The only private Dagster imports left in the Dagster layer and the CLI (checked for
    # Dagster 1.13.27): the instance has no public call that deletes check results, and
    # `wipe_asset_partitions` is not implemented by OSS storages. Imported late so nothing else
    # depends on them. tests/test_cli_sessions.py (test_delete_removes_one_session_...) asserts
    # the deleted session's check history is gone, so a rename or removal fails a test.
    from dagster._core.storage.event_log.schema import AssetCheckExecutionsTable
    from dagster._core.storage.event_log.sql_event_log import SqlEventLogStorage

    if not run_ids:
        return True
    storage = instance.event_log_storage
    if not isinstance(storage, SqlEventLogStorage):
        return False
    if storage.has_table(AssetCheckExecutionsTable.name):
        with storage.index_connection() as conn:
            conn.execute(
                AssetCheckExecutionsTable.delete().where(
                    AssetCheckExecutionsTable.c.run_id.in_(run_ids)
                )
            )
    return True
