"""`notarius`: the command line. Every command runs the same Dagster code location as the UI
and the sensor, on the instance under DAGSTER_HOME (the embedded SQLite one by default)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from notarius_dagster.cli_backfill import add_backfill_parser
from notarius_dagster.cli_common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, ensure_dagster_home
from notarius_dagster.cli_eval import add_eval_parser
from notarius_dagster.settings import REPO_ROOT


def _print_summary(bundle_dir: Path, wall: float) -> None:
    from rich.console import Console
    from rich.table import Table

    manifest = json.loads((bundle_dir / "manifest.json").read_text())
    console = Console(stderr=False, width=120)
    console.print(f"[bold]bundle[/bold] {bundle_dir}")
    table = Table(
        "lane",
        "status",
        "records",
        "chunks",
        "model calls",
        "reused",
        "rejections",
        "warnings",
        "rungs",
    )
    for lane in manifest["artifact_lanes"]:
        rungs = lane["llm"]["structured_output_rungs"]
        table.add_row(
            lane["lane_id"],
            lane["status"],
            str(lane["records"]),
            str(lane["chunks"]["total"]),
            str(lane["llm"]["calls"]),
            str(lane["chunks"]["reused"]),
            str(lane["rejections"]),
            str(lane["warnings"]),
            ", ".join(f"{k}:{v}" for k, v in rungs.items()),
        )
    console.print(table)
    t = manifest["totals"]
    console.print(
        f"validation: {manifest['validation_status']} · rejections: {len(manifest['rejected'])} · "
        f"warnings: {manifest['warnings']} · LLM calls: {t['llm_calls']} · tokens: "
        f"{t['prompt_tokens']}+{t['completion_tokens']} · cost: ${t['cost_usd']:.4f} · "
        f"wall time: {wall:.1f}s"
    )


def cmd_run(args: argparse.Namespace) -> int:
    from notarius_dagster.engine.errors import NotariusError
    from notarius_dagster.engine.resolution import RuntimeBinding
    from notarius_dagster.engine.session_ids import session_id_from_filename, validate_session_id
    from notarius_dagster.engine.transcripts import register_transcript
    from notarius_dagster.runner import run_session

    path = Path(args.path)
    if not path.is_file():
        print(f"error: transcript {path.name!r} not found", file=sys.stderr)
        return EXIT_USAGE
    try:
        session_id = (
            validate_session_id(args.session_id)
            if args.session_id
            else session_id_from_filename(path.name)
        )
        ensure_dagster_home()
        data_root = Path(args.data or os.environ.get("NOTARIUS_DATA") or REPO_ROOT / "var/data")
        register_transcript(data_root.resolve() / "transcripts", session_id, path)
        refs = [
            RuntimeBinding(selector=s, path=p)
            for s, _, p in (r.partition("=") for r in args.reference)
        ]
        print(f"session {session_id}: materializing with {Path(args.config).name}", file=sys.stderr)
        started = time.monotonic()
        outcome = run_session(
            session_id=session_id,
            profile=Path(args.config),
            data_root=data_root.resolve(),
            bundles_root=Path(args.out).resolve(),
            llm_profile=args.llm_profile,
            runtime_references=refs,
            runtime_unbinds=args.unbind,
            lanes=args.lanes.split(",") if args.lanes else None,
        )
    except NotariusError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if not outcome.success:
        print(f"error: run {outcome.run_id} failed: {outcome.error}", file=sys.stderr)
        return EXIT_FAILED
    _print_summary(Path(args.out).resolve() / session_id, time.monotonic() - started)
    return EXIT_OK


def cmd_validate(args: argparse.Namespace) -> int:
    from notarius_dagster.engine.errors import NotariusError
    from notarius_dagster.engine.resolution import resolve_profile_file
    from notarius_dagster.modules import load_modules

    load_modules()
    try:
        resolved = resolve_profile_file(Path(args.config), llm_profile=args.llm_profile)
    except NotariusError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    summary: dict[str, Any] = {
        "pipeline": resolved.pipeline_id,
        "digest": resolved.digest,
        "llm_profile": resolved.llm_profile_name,
        "chunker": resolved.chunk.module,
        "lanes": {
            lane.id: {
                "kind": lane.kind,
                "depends_on": list(lane.depends_on),
                "modules": [s.module for s in lane.stages()],
            }
            for lane in resolved.lanes
        },
    }
    print(json.dumps(summary, indent=2))
    return EXIT_OK


# --- sessions -------------------------------------------------------------------------------

SESSIONS_PARTITIONS = "sessions"
BUNDLE_ASSET = "session_bundle"
# Dagster's run tag for the partition a run materializes.
PARTITION_TAG = "dagster/partition"


def _store_paths(args: argparse.Namespace) -> tuple[Path, Path]:
    """(store root, bundle root) from the options, else the environment (as the code location
    reads it: NOTARIUS_DATA, NOTARIUS_BUNDLES)."""
    from notarius_dagster.settings import load_settings

    settings = load_settings()
    data = Path(args.data).resolve() if args.data else settings.data_root
    if args.bundles:
        return data, Path(args.bundles).resolve()
    if args.data:
        return data, settings.bundles_root or data / "bundles"
    return data, settings.bundles


def _open_instance() -> Any:
    """The Dagster instance under DAGSTER_HOME, or None after printing why it cannot open."""
    from dagster import DagsterInstance

    home = ensure_dagster_home()
    try:
        return DagsterInstance.get()
    except Exception as exc:  # a broken dagster.yaml or an unreachable database
        first_line = (str(exc).strip().splitlines() or [""])[0][:300]
        hint = (
            f"check {home / 'dagster.yaml'} (and for PostgreSQL that the server is up "
            "and NOTARIUS_PG_URL is set)"
        )
        if "psycopg" in first_line:
            hint = (
                "name the driver in the PostgreSQL URL: postgresql+psycopg2://... "
                "(a bare postgresql:// asks SQLAlchemy for psycopg 3, not installed)"
            )
        print(
            f"error: cannot open the Dagster instance at DAGSTER_HOME={home}: "
            f"{type(exc).__name__}: {first_line}\nhint: {hint}",
            file=sys.stderr,
        )
        return None


def _iso(timestamp: float | None) -> str | None:
    from datetime import UTC, datetime

    if not timestamp:
        return None
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="seconds")


def _session_runs(instance: Any, session_id: str, limit: int | None = None) -> list[Any]:
    from dagster import RunsFilter

    return list(
        instance.get_run_records(filters=RunsFilter(tags={PARTITION_TAG: session_id}), limit=limit)
    )


def session_rows(instance: Any, bundles: Path) -> list[dict[str, Any]]:
    """One row per partition of `sessions`, in the order they were added."""
    from dagster import AssetKey, AssetRecordsFilter

    rows = []
    for session_id in instance.get_dynamic_partitions(SESSIONS_PARTITIONS):
        runs = _session_runs(instance, session_id, limit=1)
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
                "bundle_published": (bundles / session_id / "index.json").is_file(),
            }
        )
    return rows


def cmd_sessions_list(args: argparse.Namespace) -> int:
    instance = _open_instance()
    if instance is None:
        return EXIT_FAILED
    _, bundles = _store_paths(args)
    with instance:
        rows = session_rows(instance, bundles)
    if args.json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    from rich.console import Console
    from rich.table import Table

    console = Console(width=120)
    if not rows:
        console.print("no sessions yet: drop a transcript into the inbox or use `notarius run`")
        return EXIT_OK
    table = Table(
        "session", "last run", "run id", "run at (UTC)", "bundle materialized (UTC)", "published"
    )
    for row in rows:
        run = row["last_run"] or {}
        table.add_row(
            row["session_id"],
            run.get("status", "-"),
            (run.get("run_id") or "-")[:8],
            run.get("at") or "-",
            row["bundle_materialized_at"] or "-",
            "yes" if row["bundle_published"] else "no",
        )
    console.print(table)
    return EXIT_OK


_IN_PROGRESS = frozenset({"QUEUED", "NOT_STARTED", "STARTING", "STARTED", "CANCELING"})


def _confirm(question: str) -> bool:
    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline()
    return answer.strip().lower() in {"y", "yes"}


def delete_session(instance: Any, session_id: str, *, data: Path, bundles: Path) -> list[str]:
    """Remove everything stored for one session; returns what was done, for the report.

    Files go first and the partition last, so an interrupted delete can simply be repeated.
    Dagster OSS storage cannot wipe single asset partitions (`wipe_asset_partitions` is
    implemented only by Dagster+ storage), so the session's materializations, check results and
    logs are removed with its runs (`delete_run`; every run of the session job materializes
    exactly one partition). Anything still recorded for the partition afterwards (for example a
    multi-partition backfill run) is wiped where the storage supports it, and reported."""
    from dagster import AssetKey

    from notarius_dagster.engine.bundle import remove_bundle
    from notarius_dagster.engine.transcripts import remove_transcript

    done = []
    if remove_bundle(bundles, session_id):
        done.append("published bundle and its versions")
    transcripts = data / "transcripts"
    had_transcript = any(transcripts.glob(f"{session_id}.*"))
    remove_transcript(transcripts, session_id)
    if had_transcript:
        done.append("stored transcript")
    values = data / "assets" / session_id
    if values.is_dir():
        shutil.rmtree(values)
        done.append("per-asset values")

    keys: list[AssetKey] = [
        k
        for k in instance.get_asset_keys()
        if session_id in instance.get_materialized_partitions(k)
    ]
    run_ids = [record.dagster_run.run_id for record in _session_runs(instance, session_id)]
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
        print(
            "warning: this event log storage keeps the asset check results of deleted runs",
            file=sys.stderr,
        )
    left = [k for k in keys if session_id in instance.get_materialized_partitions(k)]
    for key in left:
        try:
            instance.wipe_asset_partitions(key, [session_id])
        except NotImplementedError:
            print(
                f"warning: {key.to_user_string()} still has materializations of "
                f"{session_id!r} from runs of other partitions; this storage cannot wipe a "
                "single partition",
                file=sys.stderr,
            )
    if keys:
        instance.wipe_asset_cached_status(keys)
    instance.delete_dynamic_partition(SESSIONS_PARTITIONS, session_id)
    done.append(f"partition {session_id!r} of {SESSIONS_PARTITIONS!r}")
    return done


def _delete_check_executions(instance: Any, run_ids: list[str]) -> bool:
    """Remove the asset check results of the given runs. Dagster 1.13 has no public API for
    this: `delete_run` removes a run's events but leaves their index rows in the
    `asset_check_executions` table, so the UI would keep showing a deleted run's check
    results. On Dagster's SQL event log storages (SQLite, PostgreSQL) those rows are deleted
    here; on any other storage this returns False and the caller says so."""
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


def cmd_sessions_delete(args: argparse.Namespace) -> int:
    from notarius_dagster.engine.errors import SessionIdError
    from notarius_dagster.engine.session_ids import validate_session_id

    try:
        session_id = validate_session_id(args.session_id)
    except SessionIdError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    instance = _open_instance()
    if instance is None:
        return EXIT_FAILED
    data, bundles = _store_paths(args)
    with instance:
        if not instance.has_dynamic_partition(SESSIONS_PARTITIONS, session_id):
            print(
                f"error: unknown session {session_id!r}: it is not a partition of "
                f"{SESSIONS_PARTITIONS!r} on the instance at DAGSTER_HOME="
                f"{os.environ['DAGSTER_HOME']}; `notarius sessions list` shows the sessions",
                file=sys.stderr,
            )
            return EXIT_FAILED
        busy = [
            r.dagster_run
            for r in _session_runs(instance, session_id)
            if r.dagster_run.status.value in _IN_PROGRESS
        ]
        if busy and not args.force:
            print(
                f"error: session {session_id!r} has {len(busy)} run(s) in progress "
                f"({', '.join(r.run_id[:8] + ' ' + r.status.value for r in busy)}); wait or "
                "cancel them in the UI, or pass --force if they are dead (an interrupted "
                "`notarius run` leaves its run STARTED)",
                file=sys.stderr,
            )
            return EXIT_FAILED
        if not args.yes:
            if not sys.stdin.isatty():
                print(
                    f"error: refusing to delete session {session_id!r} without confirmation: "
                    "no terminal to ask on; pass --yes to confirm",
                    file=sys.stderr,
                )
                return EXIT_USAGE
            if not _confirm(
                f"Delete session {session_id!r}: its partition, runs, "
                "materializations, bundle, transcript and asset values?"
            ):
                print("nothing deleted", file=sys.stderr)
                return EXIT_FAILED
        done = delete_session(instance, session_id, data=data, bundles=bundles)
    print(f"deleted session {session_id}: " + "; ".join(done))
    return EXIT_OK


# --- the parser ------------------------------------------------------------------------------


def add_run_command(sub: Any) -> None:
    run = sub.add_parser(
        "run",
        help="materialize one transcript through the session asset job",
        description="Register a transcript as a session and materialize it "
        "in process; prints a summary of the published bundle.",
    )
    run.add_argument("path", help="transcript (.jsonl, .vtt, .srt, .txt)")
    run.add_argument("--config", required=True, help="pipeline profile (configs/*.yaml)")
    run.add_argument("--out", required=True, help="bundle root: the bundle goes to OUT/<session>")
    run.add_argument("--session-id", help="default: derived from the file name")
    run.add_argument("--llm-profile", help="override the profile's LLM profile (e.g. test-double)")
    run.add_argument(
        "--data",
        help="store root (transcripts, asset values, checkpoints); "
        "default NOTARIUS_DATA or ./var/data",
    )
    run.add_argument(
        "--reference",
        action="append",
        default=[],
        metavar="SLOT=PATH",
        help="bind a reference slot to a file (relative to the working folder)",
    )
    run.add_argument(
        "--unbind",
        action="append",
        default=[],
        metavar="SLOT",
        help="remove an optional reference binding",
    )
    run.add_argument("--lanes", help="comma-separated subset of the profile's lanes")
    run.set_defaults(func=cmd_run)


def add_validate_command(sub: Any) -> None:
    validate = sub.add_parser(
        "validate",
        help="resolve a profile without running anything",
        description="Resolve a pipeline profile (lanes, modules, "
        "references, LLM profile) and print the result.",
    )
    validate.add_argument("config")
    validate.add_argument("--llm-profile")
    validate.set_defaults(func=cmd_validate)


def _store_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", help="store root (default NOTARIUS_DATA or ./var/data)")
    parser.add_argument("--bundles", help="bundle root (default NOTARIUS_BUNDLES or DATA/bundles)")


def add_sessions_commands(sub: Any) -> None:
    sessions = sub.add_parser(
        "sessions",
        help="list or delete sessions (partitions of `sessions`)",
        description="Sessions on the Dagster instance under DAGSTER_HOME.",
    )
    actions = sessions.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser(
        "list",
        help="every session with its last run and bundle",
        description="Every session partition with its last run's status, when its bundle was "
        "last materialized, and whether a bundle is published.",
    )
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    _store_options(listing)
    listing.set_defaults(func=cmd_sessions_list)
    delete = actions.add_parser(
        "delete",
        help="remove a session and everything stored for it",
        description="Remove a session: its published bundle, stored transcript and per-asset "
        "values, its runs with their materializations and check results, and its "
        "partition. Asks first unless --yes. Checkpoints stay (they are shared by "
        "content, not owned by a session).",
    )
    delete.add_argument("session_id", metavar="ID", help="the session id (see `sessions list`)")
    delete.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    delete.add_argument(
        "--force", action="store_true", help="delete even if a run of the session looks in progress"
    )
    _store_options(delete)
    delete.set_defaults(func=cmd_sessions_delete)


# One registrar per top-level command, in the order `--help` lists them. A new command (the
# references issue's `backfill`) is one more `add_..._command(sub)` function added here.
COMMANDS = (add_run_command, add_validate_command, add_sessions_commands, add_backfill_parser,
            add_eval_parser)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="notarius", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for register in COMMANDS:
        register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
