"""`notarius`: the command line. Every command runs the same Dagster code location as the UI
and the sensor, on the instance under DAGSTER_HOME (the embedded SQLite one by default)."""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from pydantic import JsonValue

from notarius_dagster.cli.backfill import add_backfill_parser
from notarius_dagster.cli.campaign import add_campaign_parser
from notarius_dagster.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    CommandError,
    add_command,
    add_store_options,
    ensure_dagster_home,
    open_instance,
)
from notarius_dagster.cli.evaluate import add_eval_parser
from notarius_dagster.cli.report import add_report_parser
from notarius_dagster.cli.ui import add_ui_parser
from notarius_dagster.settings import load_settings, store_paths

if TYPE_CHECKING:
    from dagster import DagsterInstance

    from notarius_dagster.cli.common import Subcommands
    from notarius_dagster.llm.profiles import LLMProfile

SESSIONS_AT_ONCE = 4
"""Default of `notarius run --jobs`: sessions in flight at once when several are given."""


def cmd_run(args: argparse.Namespace) -> int:
    """One or more transcripts, start-up paid once: one session runs here, in this process
    (the lanes of one level at the same time, in their level's step); several run `--jobs` at
    a time in worker processes forked from one preloaded forkserver, each session in process
    (docs/operations.md, "Concurrency and retries"). No process of the command outlives it:
    the forkserver, if one was started, is stopped before it returns. Not on Ctrl-C or
    SIGTERM: stopping it waits for the resource tracker, which waits for every worker still
    winding its run down; they end with their parent's pipe instead, as they always did."""
    from notarius_dagster.run.workers import stop_forkserver

    status = _cmd_run(args)
    stop_forkserver()
    return status


def _cmd_run(args: argparse.Namespace) -> int:
    paths = [Path(p) for p in args.path]
    problem = _choose_profile(args)
    if problem is not None:  # before any session is named as "materializing"
        print(f"error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    if args.session_id and len(paths) > 1:
        print("error: --session-id names one session; give one transcript", file=sys.stderr)
        return EXIT_USAGE
    from notarius_dagster.engine.reading import path_problem

    for path in paths:
        problem = path_problem(path)  # a folder, a FIFO or /dev/zero is said as such
        if problem is not None:
            print(f"error: transcript: {problem}", file=sys.stderr)
            return EXIT_USAGE
    llm_problem = _llm_not_ready(args)
    if llm_problem is not None:  # before any partition, transcript copy or run exists
        print(f"error: {llm_problem}", file=sys.stderr)
        return EXIT_FAILED
    jobs = min(args.jobs or SESSIONS_AT_ONCE, len(paths))
    if jobs > 1:
        duplicate = _duplicate_session(paths)
        if duplicate is not None:
            print(f"error: {duplicate}", file=sys.stderr)
            return EXIT_USAGE
        return _run_in_workers(args, paths, jobs)
    # One session at a time, here, in this process: the lanes of one level run at the same
    # time inside their level's step (assets/factory.py).
    return max(_run_one(args, path) for path in paths)


def _choose_profile(args: argparse.Namespace) -> str | None:
    """`--config`, else the profile the code location is built from (NOTARIUS_PROFILE, else
    configs/offline.yaml), and `--llm-profile`, else NOTARIUS_LLM_PROFILE, as `backfill` and
    the UI use; a profile that is not a file is said here, naming where it came from."""
    from notarius_dagster.settings import load_settings

    settings = load_settings()
    given = args.config is not None
    args.config = args.config if given else str(settings.profile)
    args.llm_profile = args.llm_profile or settings.llm_profile
    if Path(args.config).is_file():
        return None
    source = "--config" if given else "NOTARIUS_PROFILE"
    return f"profile {args.config!r} ({source}) does not exist or is not a file"


def _llm_not_ready(args: argparse.Namespace) -> str | None:
    """Why the profile's model cannot be called (no key, no provider package), or None. A
    profile that does not resolve is left to the run, which reports it with its key path."""
    from notarius_dagster.engine.errors import NotariusError
    from notarius_dagster.engine.resolution import resolve_profile_file
    from notarius_dagster.llm.preflight import readiness_problems
    from notarius_dagster.llm.profiles import LLMProfile
    from notarius_dagster.modules import registry

    try:
        resolved = resolve_profile_file(
            Path(args.config), llm_profile=args.llm_profile, registry=registry()
        )
    except NotariusError:
        return None
    from notarius_dagster.settings import api_key

    llm = LLMProfile.model_validate(resolved.llm_profile)
    problems = readiness_problems(llm, api_key(llm.api_key_env))
    return "; ".join(problems) if problems else None


def _run_in_workers(args: argparse.Namespace, paths: list[Path], jobs: int) -> int:
    """Several sessions, `jobs` at a time: each worker is a fork of the preloaded forkserver
    (Dagster, the code location and litellm imported once, not once per session) and runs its
    sessions in process, one after another. Processes, not threads: Dagster's event logging
    is not safe for runs executing side by side in one process (two runs in threads deadlocked
    on the logging lock). Model calls stay bounded by the `llm` pool and each lane's
    max_concurrency."""
    import multiprocessing

    from notarius_dagster.run.workers import start_forkserver

    start_forkserver()
    open_instance().dispose()  # created once here: workers creating it at once would race
    server = _offline_server(args)  # the bundled model, loaded once for every session
    context = multiprocessing.get_context("forkserver")
    pool = ProcessPoolExecutor(
        max_workers=jobs, mp_context=context, initializer=_start_worker, initargs=(server,)
    )
    try:
        statuses = list(pool.map(_run_one_quietly, [args] * len(paths), paths))
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the workers stop their runs too
        pool.shutdown(wait=False, cancel_futures=True)
        for worker in multiprocessing.active_children():
            worker.terminate()
        raise
    pool.shutdown()
    return max(statuses)


def _offline_server(args: argparse.Namespace) -> str | None:
    """This process's offline model server for the profile, if it uses the bundled model: the
    workers, forked from a forkserver started before it, adopt its address (runner.py)."""
    from notarius_dagster.run.runner import offline_server_for

    store = store_paths(data=args.data, bundles=args.out)
    return offline_server_for(
        profile=Path(args.config),
        data_root=store.root,
        bundles_root=store.bundles,
        llm_profile=args.llm_profile,
    )


def _start_worker(offline_server: str | None) -> None:
    """A worker's start: SIGTERM stops its run, and its lanes use the command's model server."""
    from notarius_dagster.run.runner import adopt_offline_server

    stop_on_sigterm()
    adopt_offline_server(offline_server)


def _run_one_quietly(args: argparse.Namespace, path: Path) -> int:
    """A worker's session: in process, without step-by-step progress lines (several sessions'
    would interleave)."""
    return _run_one(args, path, progress_level="ERROR")


def _duplicate_session(paths: list[Path]) -> str | None:
    """Two transcripts of one command that name the same session would race for it; said
    before anything runs (their file names, not their paths)."""
    from notarius_dagster.engine.errors import SessionIdError
    from notarius_dagster.engine.session_ids import session_id_from_filename

    seen: dict[str, str] = {}
    for path in paths:
        try:
            session_id = session_id_from_filename(path.name)
        except SessionIdError:
            continue  # reported by that transcript's own run
        if session_id in seen:
            return (
                f"transcripts {seen[session_id]!r} and {path.name!r} both name session "
                f"{session_id!r}; run them separately or rename one"
            )
        seen[session_id] = path.name
    return None


def _run_one(args: argparse.Namespace, path: Path, *, progress_level: str = "INFO") -> int:
    """One session: register its transcript, run what is not up to date, print its summary.
    Several sessions at once show errors only (`progress_level` ERROR): their step-by-step
    progress lines would interleave."""
    from notarius_dagster.engine.config import load_profile
    from notarius_dagster.engine.errors import NotariusError, SessionIdError
    from notarius_dagster.engine.long_lived import loading_for_life
    from notarius_dagster.engine.redaction import redact_secrets
    from notarius_dagster.engine.resolution import RuntimeBinding
    from notarius_dagster.engine.session_ids import session_id_from_filename, validate_session_id
    from notarius_dagster.engine.transcripts import check_same_source, register_transcript
    from notarius_dagster.run_guard import session_start

    with loading_for_life():  # Dagster and the code location live until the command exits
        import notarius_dagster.run.definitions  # noqa: F401  (what run_session builds on)
        from notarius_dagster.run.runner import run_session
        from notarius_dagster.run.summary import print_summary

    store = store_paths(data=args.data, bundles=args.out)
    try:
        # A usage error (exit 2): an explicit id must be valid, and an empty one is no id.
        if args.session_id is not None:
            session_id = validate_session_id(args.session_id)
        else:
            session_id = session_id_from_filename(path.name)
            check_same_source(store.transcripts, session_id, path.name)
    except SessionIdError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    hold = contextlib.ExitStack()  # the session's lock, released when the run has ended
    try:
        ensure_dagster_home()
        limits = load_profile(Path(args.config)).pipeline.limits  # checked before any copy
        # One transaction per session start, under the session's lock: the busy check, the
        # transcript registration and the run (notarius_dagster/run_guard.py).
        hold.enter_context(session_start(store, session_id))
        register_transcript(
            store.transcripts, session_id, path, max_bytes=limits.max_transcript_bytes
        )
        refs = [
            RuntimeBinding(selector=s, path=p)
            for s, _, p in (r.partition("=") for r in args.reference)
        ]
        print(f"session {session_id}: materializing with {Path(args.config).name}", file=sys.stderr)
        started = time.monotonic()
        outcome = run_session(
            session_id=session_id,
            profile=Path(args.config),
            data_root=store.root,
            bundles_root=store.bundles,
            llm_profile=args.llm_profile,
            runtime_references=refs,
            runtime_unbinds=args.unbind,
            lanes=args.lanes.split(",") if args.lanes else None,
            max_calls=args.max_calls,
            only_stale=True,
            retry_rejected=args.retry_rejected,
            progress_level=progress_level,
        )
    except NotariusError as exc:
        print(f"error: {redact_secrets(str(exc))}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        hold.close()
    if not outcome.success:
        print(f"error: run {outcome.run_id} failed: {outcome.error}", file=sys.stderr)
        return EXIT_FAILED
    if outcome.run_id is None:
        print(f"session {session_id}: up to date (nothing changed; no run)", file=sys.stderr)
    elif outcome.up_to_date:
        print(f"  up to date: {', '.join(outcome.up_to_date)}", file=sys.stderr)
    print_summary(store.bundles / session_id, time.monotonic() - started)
    return EXIT_OK


def cmd_validate(args: argparse.Namespace) -> int:
    """Resolve a pipeline profile (lanes, modules, references, LLM profile), check that its
    model can be called (key set, provider package installed; with --ping, one tiny real
    call) and print the result."""
    from notarius_dagster.engine.errors import NotariusError
    from notarius_dagster.engine.resolution import resolve_profile_file
    from notarius_dagster.llm.profiles import LLMProfile
    from notarius_dagster.modules import registry

    try:
        resolved = resolve_profile_file(
            Path(args.config), llm_profile=args.llm_profile, registry=registry()
        )
    except NotariusError as exc:
        raise CommandError(exc) from None
    profile = LLMProfile.model_validate(resolved.llm_profile)
    summary: dict[str, JsonValue] = {
        "pipeline": resolved.pipeline_id,
        "digest": resolved.digest,
        "llm_profile": resolved.llm_profile_name,
        "llm": _llm_summary(profile, ping=args.ping),
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


def _llm_summary(profile: LLMProfile, *, ping: bool) -> dict[str, JsonValue]:
    """The model, its provider family and first rung, and whether it can be called; raises
    `CommandError` (exit 1) when it cannot."""
    from notarius_dagster.engine.errors import NotariusError
    from notarius_dagster.llm.families import family_of
    from notarius_dagster.llm.preflight import readiness_problems
    from notarius_dagster.llm.structured import choose_rung
    from notarius_dagster.settings import api_key

    key = api_key(profile.api_key_env)
    problems = readiness_problems(profile, key)
    if problems:
        raise CommandError("; ".join(problems), EXIT_FAILED)
    family = family_of(profile)
    summary: dict[str, JsonValue] = {
        "model": profile.model,
        "family": family.name,
        "structured_output": choose_rung(profile, family),
        "prices": "profile" if profile.priced else "litellm",
    }
    if ping:  # litellm (and the offline server, for the bundled model) only now
        from notarius_dagster.llm.offline import ensure_server
        from notarius_dagster.llm.preflight import ping as ping_model

        try:
            with ensure_server(profile, load_settings().offline_server) as api_base:
                result = ping_model(profile, api_key=key, api_base_override=api_base)
        except NotariusError as exc:
            raise CommandError(exc, EXIT_FAILED) from None
        summary["ping"] = {
            "rung": result.rung,
            "seconds": result.seconds,
            "prompt_tokens": result.prompt_tokens,
            "completion_tokens": result.completion_tokens,
            "cost_usd": result.cost_usd if result.cost_usd is not None else "unpriced",
        }
    return summary


# --- sessions -------------------------------------------------------------------------------


def cmd_sessions_list(args: argparse.Namespace) -> int:
    """Every session partition with its last run's status, when its bundle was last
    materialized, and whether a bundle is published."""
    from notarius_dagster.run_guard import fail_orphaned_cli_runs
    from notarius_dagster.sessions import session_rows

    instance = open_instance()
    fail_orphaned_cli_runs(instance)  # a killed `notarius run` must not look in progress
    with instance:
        rows = session_rows(instance, store_paths(data=args.data, bundles=args.bundles))
        stale, why_unknown = _stale_assets(instance)
    for row in rows:  # null: unknown (the profile does not build; said below the table)
        row["stale"] = None if stale is None else stale.get(row["session_id"], [])
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
        "session",
        "last run",
        "run id",
        "run at (UTC)",
        "bundle materialized (UTC)",
        "published",
        "stale (code changed)",
    )
    for row in rows:
        run = row["last_run"]
        table.add_row(
            row["session_id"],
            run["status"] if run else "-",
            run["run_id"][:8] if run else "-",
            (run["at"] if run else None) or "-",
            row["bundle_materialized_at"] or "-",
            "yes" if row["bundle_published"] else "no",
            "?" if row["stale"] is None else (", ".join(row["stale"]) or "up to date"),
        )
    console.print(table)
    if why_unknown:
        console.print(f"stale: unknown ({why_unknown})", markup=False)
    elif any(row["stale"] for row in rows):
        console.print("`notarius backfill --stale --dry-run` shows what re-running them costs")
    return EXIT_OK


def _stale_assets(instance: DagsterInstance) -> tuple[dict[str, list[str]] | None, str | None]:
    """Per session, the assets whose code version changed since they were materialized under
    the profile the code location is built from (NOTARIUS_PROFILE), as `backfill --stale` sees
    them; or None and why, when that profile does not build."""
    from assets.staleness import find_stale
    from notarius_dagster.engine.errors import NotariusError
    from notarius_dagster.run.definitions import build_definitions
    from notarius_dagster.settings import load_settings

    try:
        defs = build_definitions(load_settings())
    except NotariusError as exc:
        return None, str(exc)
    plan = find_stale(instance, defs.resolve_all_asset_specs())
    return {
        session: sorted(key.to_user_string() for key in keys)
        for session, keys in plan.changed.items()
    }, None


def _session_id(given: str | None, *, transcript: Path | None = None) -> str:
    """The session a `sessions` command acts on: `given` when it is set, else the id derived
    from the transcript's file name. Not a valid session id: a usage error (exit 2)."""
    from notarius_dagster.engine.errors import SessionIdError
    from notarius_dagster.engine.session_ids import session_id_from_filename, validate_session_id

    try:
        if given is not None or transcript is None:  # `--session-id ""` is no id: refused
            return validate_session_id(given or "")
        return session_id_from_filename(transcript.name)
    except SessionIdError as exc:
        raise CommandError(exc, EXIT_USAGE) from None


def cmd_sessions_add(args: argparse.Namespace) -> int:
    """Store the transcript under the session id (derived from the file name unless
    --session-id), add its partition and record the transcript on the instance. Nothing runs:
    the automation sensor, the UI or `notarius run` materialize it."""
    from notarius_dagster.engine.errors import NotariusError
    from notarius_dagster.engine.reading import path_problem
    from notarius_dagster.sessions import add_session

    path = Path(args.path)
    problem = path_problem(path)
    if problem is not None:
        raise CommandError(f"transcript: {problem}", EXIT_USAGE)
    session_id = _session_id(args.session_id, transcript=path)
    with open_instance() as instance:
        try:
            added = add_session(
                instance, session_id, path, store_paths(data=args.data, bundles=args.bundles)
            )
        except NotariusError as exc:
            raise CommandError(exc) from None
    what = (
        "added" if added.new_partition else "updated" if added.transcript_changed else "unchanged"
    )
    print(
        f"session {session_id} {what}; transcript sha256 {added.sha256[:12]}. Nothing ran: "
        "materialize it in the UI, with `notarius run`, or let the automation sensor do it"
    )
    return EXIT_OK


def _confirm(question: str) -> bool:
    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline()
    return answer.strip().lower() in {"y", "yes"}


def cmd_sessions_delete(args: argparse.Namespace) -> int:
    """Remove a session: its published bundle, stored transcript and per-asset values, its
    runs with their materializations and check results, and its partition. Asks first unless
    --yes. Checkpoints stay (they are shared by content, not owned by a session)."""
    from notarius_dagster.sessions import (
        SESSIONS_PARTITIONS,
        delete_session,
        is_session,
        runs_in_progress,
    )

    session_id = _session_id(args.session_id)
    with open_instance() as instance:
        if not is_session(instance, session_id):
            raise CommandError(
                f"unknown session {session_id!r}: it is not a partition of "
                f"{SESSIONS_PARTITIONS!r} on the instance at DAGSTER_HOME="
                f"{load_settings().dagster_home}; `notarius sessions list` shows the sessions"
            )
        busy = runs_in_progress(instance, session_id)
        if busy and not args.force:
            raise CommandError(
                f"session {session_id!r} has {len(busy)} run(s) in progress "
                f"({', '.join(r.run_id[:8] + ' ' + r.status.value for r in busy)}); wait or "
                "cancel them in the UI, or pass --force if they are dead (an interrupted "
                "`notarius run` leaves its run STARTED)"
            )
        if not args.yes:
            if not sys.stdin.isatty():
                raise CommandError(
                    f"refusing to delete session {session_id!r} without confirmation: "
                    "no terminal to ask on; pass --yes to confirm",
                    EXIT_USAGE,
                )
            if not _confirm(
                f"Delete session {session_id!r}: its partition, runs, "
                "materializations, bundle, transcript and asset values?"
            ):
                print("nothing deleted", file=sys.stderr)
                return EXIT_FAILED
        deletion = delete_session(
            instance, session_id, store_paths(data=args.data, bundles=args.bundles)
        )
    for warning in deletion.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(f"deleted session {session_id}: " + "; ".join(deletion.done))
    return EXIT_OK


# --- the parser ------------------------------------------------------------------------------


def add_run_command(sub: Subcommands) -> None:
    run = sub.add_parser(
        "run",
        help="materialize transcripts through the session asset job",
        description="Register each transcript as a session and materialize what is not up "
        "to date, in this process (several sessions --jobs at a time); prints a summary of "
        "each published bundle.",
    )
    run.add_argument("path", nargs="+", help="transcripts (.jsonl, .vtt, .srt, .txt)")
    run.add_argument(
        "--config",
        help="pipeline profile (configs/*.yaml; default NOTARIUS_PROFILE or configs/offline.yaml)",
    )
    run.add_argument(
        "--out",
        help="bundle root: the bundle goes to OUT/<session> (default NOTARIUS_BUNDLES or "
        "DATA/bundles)",
    )
    run.add_argument("--session-id", help="default: derived from the file name")
    run.add_argument("--llm-profile", help="override the profile's LLM profile (e.g. offline)")
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
    run.add_argument(
        "--max-calls",
        type=_positive_int,
        metavar="N",
        help="refuse the run if it needs more than N model calls (default: the profile's "
        "pipeline.budget.max_calls, 2000)",
    )
    run.add_argument(
        "--retry-rejected",
        action="store_true",
        help="ask the model again for chunks whose extraction was rejected before "
        "(by default a stored rejection is reused)",
    )
    run.add_argument(
        "--jobs",
        type=_positive_int,
        metavar="N",
        help=f"sessions at once when several transcripts are given (default {SESSIONS_AT_ONCE}); "
        "model calls stay bounded by the llm pool and each lane's max_concurrency",
    )
    run.set_defaults(func=cmd_run)


def _positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1 (a wrong one exits 2 with a message)."""
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return int(text)


def add_validate_command(sub: Subcommands) -> None:
    validate = add_command(
        sub, "validate", cmd_validate, help="resolve a profile without running anything"
    )
    validate.add_argument("config")
    validate.add_argument("--llm-profile")
    validate.add_argument(
        "--ping", action="store_true", help="also make one tiny real call to the model"
    )


def add_sessions_commands(sub: Subcommands) -> None:
    sessions = sub.add_parser(
        "sessions",
        help="list, add or delete sessions (partitions of `sessions`)",
        description="Sessions on the Dagster instance under DAGSTER_HOME.",
    )
    actions = sessions.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = add_command(
        actions, "list", cmd_sessions_list, help="every session with its last run and bundle"
    )
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    add_store_options(listing)
    add = add_command(
        actions,
        "add",
        cmd_sessions_add,
        help="register a session (store its transcript, add its partition) without running it",
    )
    add.add_argument("path", metavar="PATH", help="transcript (.jsonl, .vtt, .srt, .txt)")
    add.add_argument("--session-id", help="default: derived from the file name")
    add_store_options(add)
    delete = add_command(
        actions, "delete", cmd_sessions_delete, help="remove a session and everything stored for it"
    )
    delete.add_argument("session_id", metavar="ID", help="the session id (see `sessions list`)")
    delete.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    delete.add_argument(
        "--force", action="store_true", help="delete even if a run of the session looks in progress"
    )
    add_store_options(delete)


# One registrar per top-level command, in the order `--help` lists them. A new command (the
# references issue's `backfill`) is one more `add_..._command(sub)` function added here.
COMMANDS = (
    add_run_command,
    add_validate_command,
    add_sessions_commands,
    add_backfill_parser,
    add_report_parser,
    add_ui_parser,
    add_campaign_parser,
    add_eval_parser,
)


def build_parser() -> argparse.ArgumentParser:
    from notarius_dagster import __version__

    parser = argparse.ArgumentParser(prog="notarius", description=__doc__)
    parser.add_argument("--version", action="version", version=f"notarius {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for register in COMMANDS:
        register(sub)
    return parser


def stop_on_sigterm() -> None:
    """SIGTERM (`kill`, a supervisor stopping the command) stops a run as Ctrl-C does: it is
    handed to the SIGINT handler (Dagster's own while a run executes, which stops the run's
    step processes and records the run as ended), instead of this process vanishing and
    leaving its step processes calling the model."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        handler = signal.getsignal(signal.SIGINT)  # Dagster's while a run executes
        if callable(handler):
            handler(signal.SIGINT, frame)
        else:
            raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    stop_on_sigterm()
    try:
        return int(args.func(args))
    except CommandError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.status
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
