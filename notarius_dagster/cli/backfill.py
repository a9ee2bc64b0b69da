"""`notarius backfill --stale`: find session partitions whose lanes carry an old code version
(after a prompt, schema or lane-configuration change) and re-run those lanes and everything
downstream of them, in this process, one session after another (for scripts).

Dagster 1.13 has no public API to submit an asset backfill for the daemon, so this command
runs the work itself (`execute_in_process` of the session job with an asset selection, public
API). With the daemon running, the automation sensor (assets/automation.py) re-runs the same
(asset, session) pairs on its own once switched on; `--dry-run` shows what either would run."""

from __future__ import annotations

import argparse
import contextlib
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from notarius_dagster.cli.common import EXIT_FAILED, EXIT_OK, ensure_dagster_home

if TYPE_CHECKING:
    from dagster import DagsterInstance, Definitions

    from notarius_dagster.cli.common import Subcommands
    from notarius_dagster.engine.bundle_documents import Manifest
    from notarius_dagster.store import StorePaths

STALE_RERUN_TAG = "notarius/stale-rerun"


def add_backfill_parser(sub: Subcommands) -> None:
    parser = sub.add_parser("backfill", help="re-run lanes whose prompt/schema/config changed")
    parser.add_argument(
        "--stale",
        action="store_true",
        required=True,
        help="select partitions whose lanes carry an old code version",
    )
    parser.add_argument("--config", help="pipeline profile (default NOTARIUS_PROFILE)")
    parser.add_argument("--llm-profile", help="override the profile's LLM profile")
    parser.add_argument("--dry-run", action="store_true", help="list what would run, run nothing")
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="accepted for older scripts: the re-run always happens in this process "
        "(the daemon's route is the automation sensor)",
    )
    parser.set_defaults(func=cmd_backfill)


@dataclass(frozen=True)
class CallEstimate:
    """At most how many model calls a re-run makes, and the tokens and cost they would take at
    the per-call averages of the lanes' last published run (None: nothing to average from, or
    a call that could not be priced)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0
    unknown_lanes: tuple[str, ...] = ()

    def __add__(self, other: CallEstimate) -> CallEstimate:
        cost = (
            None
            if self.cost_usd is None or other.cost_usd is None
            else self.cost_usd + other.cost_usd
        )
        return CallEstimate(
            self.calls + other.calls,
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            cost,
            self.unknown_lanes + other.unknown_lanes,
        )

    def words(self) -> str:
        text = f"at most {self.calls} model call(s), about " + _tokens_and_cost(
            self.prompt_tokens, self.completion_tokens, self.cost_usd
        )
        if self.unknown_lanes:
            text += f" (no earlier call to estimate {', '.join(self.unknown_lanes)} from)"
        return text


def _tokens_and_cost(prompt: int, completion: int, cost_usd: float | None) -> str:
    cost = "unpriced" if cost_usd is None else f"${cost_usd:.4f}"
    return f"{prompt:,} prompt + {completion:,} completion tokens, {cost}"


def _published_manifest(bundles: Path, session: str) -> Manifest | None:
    """The session's published `manifest.json`, or None when there is none to read."""
    from notarius_dagster.engine.bundle_documents import read_manifest
    from notarius_dagster.engine.errors import NotariusError

    try:
        return read_manifest(bundles / session)
    except (NotariusError, OSError, ValueError):
        return None


def rerun_estimate(bundles: Path, session: str, asset_names: set[str]) -> CallEstimate:
    """The upper bound for re-running `asset_names` of `session`: every chunk of every lane
    among them calls the model (a changed lane does; a lane downstream of it calls only for the
    chunks whose inputs changed, often none), at its last run's tokens and cost per call
    (`manifest.json`). A session never published has nothing to estimate from."""
    from assets.factory import asset_name

    manifest = _published_manifest(bundles, session)
    if manifest is None:
        return CallEstimate(unknown_lanes=(session,))
    total = CallEstimate()
    for lane in manifest.artifact_lanes:
        if asset_name(lane.lane_id) not in asset_names:
            continue
        usage, chunks = lane.llm, lane.chunks.total
        if not usage.calls:
            total += CallEstimate(calls=chunks, unknown_lanes=(lane.lane_id,))
            continue
        cost = None if usage.cost_usd is None else usage.cost_usd / usage.calls * chunks
        total += CallEstimate(
            calls=chunks,
            prompt_tokens=round(usage.prompt_tokens / usage.calls * chunks),
            completion_tokens=round(usage.completion_tokens / usage.calls * chunks),
            cost_usd=cost,
        )
    return total


def _spent(bundles: Path, session: str) -> str:
    """What the run just published says it spent (`manifest.json` totals)."""
    manifest = _published_manifest(bundles, session)
    if manifest is None:
        return "no manifest to read its calls from"
    totals = manifest.totals
    return f"{totals.llm_calls} model call(s), " + _tokens_and_cost(
        totals.prompt_tokens, totals.completion_tokens, totals.cost_usd
    )


def stale_backfill(
    *,
    instance: DagsterInstance,
    defs: Definitions,
    in_process: bool = True,
    dry_run: bool,
    out: TextIO = sys.stdout,
    store: StorePaths | None = None,
) -> int:
    """Shared by the command and the tests. `in_process` is kept for callers; every re-run
    happens in this process, holding the session's lock in `store` (when given) from its busy
    check to its run's end, as `notarius run` does."""
    from assets.jobs import SESSION_JOB_NAME, with_execution_sets
    from assets.staleness import find_stale
    from notarius_dagster.run_guard import (
        SessionBusyError,
        cli_run_tags,
        guard_session_run,
        session_start,
    )

    specs = defs.resolve_all_asset_specs()
    plan = find_stale(instance, specs)
    if plan.is_empty():
        print(
            "nothing is stale: every materialized lane matches its current code version", file=out
        )
        return EXIT_OK
    bundles = store.bundles if store is not None else None
    overall = CallEstimate()
    for partition in sorted(plan.to_run):
        changed = ", ".join(sorted(k.to_user_string() for k in plan.changed[partition]))
        names = sorted(k.to_user_string() for k in plan.to_run[partition])
        print(f"{partition}: changed {changed}; re-runs {', '.join(names)}", file=out)
        if bundles is not None:
            estimate = rerun_estimate(bundles, partition, set(names))
            overall += estimate
            print(f"{partition}: {estimate.words()}", file=out)
    if bundles is not None:
        print(
            f"total: {len(plan.to_run)} session(s), {overall.words()}; estimated from each "
            "lane's last run, every chunk counted (unchanged chunks reuse their checkpoints)",
            file=out,
        )
    if dry_run:
        return EXIT_OK
    job = defs.resolve_job_def(SESSION_JOB_NAME)
    job_tags = dict(job.tags)
    failed = []
    for partition in sorted(plan.to_run):
        hold = contextlib.ExitStack()
        try:  # one writer per session; with the store, one transaction per start
            if store is not None:
                hold.enter_context(session_start(store, partition, instance))
            else:
                guard_session_run(partition, instance)
        except SessionBusyError as exc:
            hold.close()
            print(f"{partition}: not run: {exc}", file=out)
            failed.append(partition)
            continue
        with hold:
            result = job.execute_in_process(
                instance=instance,
                partition_key=partition,
                raise_on_error=False,
                asset_selection=with_execution_sets(defs, plan.to_run[partition]),
                run_config={"loggers": {"progress": {"config": {"log_level": "INFO"}}}},
                tags={**job_tags, **cli_run_tags(partition), STALE_RERUN_TAG: "true"},
            )
        status = "succeeded" if result.success else "FAILED"
        spent = f": {_spent(bundles, partition)}" if bundles is not None and result.success else ""
        print(f"{partition}: run {result.run_id} {status}{spent}", file=out)
        if not result.success:
            failed.append(partition)
    return EXIT_FAILED if failed else EXIT_OK


def cmd_backfill(args: argparse.Namespace) -> int:
    from dagster import DagsterInstance

    from notarius_dagster.engine.errors import NotariusError
    from notarius_dagster.run.definitions import build_definitions
    from notarius_dagster.settings import load_settings

    ensure_dagster_home()
    settings = load_settings()
    if args.config:
        settings = replace(settings, profile=Path(args.config).resolve())
    if args.llm_profile:
        settings = replace(settings, llm_profile=args.llm_profile)
    try:
        defs = build_definitions(settings)
    except NotariusError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return stale_backfill(
        instance=DagsterInstance.get(),
        defs=defs,
        in_process=args.in_process,
        dry_run=args.dry_run,
        store=settings.store,
    )
