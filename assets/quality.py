"""Quality against gold, per session partition: an asset check on `session_bundle`.

When the store holds a gold file for the session (`<NOTARIUS_DATA>/gold/<session-id>.json`),
the check scores the published bundle against it (`notarius_dagster.engine.evaluation`) and
records the numbers as metadata: per lane F1 by name, grounded F1 and citation precision, and
the micro-averaged totals. The Dagster UI plots a check's numeric metadata over its executions,
so a prompt edit followed by a backfill shows as a step in these lines, per session.

Outcomes:
  - no gold file: passed, description "no gold for this session", metadata `gold: false`
    (a session without gold is normal, not a problem);
  - scored: passed (the check records quality, it does not judge it; read the numbers);
  - the gold file is invalid, or was read from another transcript: failed, WARN severity
    (the run is not failed), with a content-safe description naming the file and key path.
Metadata holds numbers, counts and lane ids only, never names or text."""

import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetKey,
    PreviewWarning,
    multi_asset_check,
)

from assets.partitions import sessions_partitions
from notarius_dagster.engine.errors import NotariusError
from notarius_dagster.engine.evaluation import EvaluationReport, MatchFields, evaluate
from notarius_dagster.store import GOLD_FOLDER, gold_file
from resources.bundle_store import BundleStore

BUNDLE_ASSET = AssetKey("session_bundle")
CHECK_NAME = "quality_vs_gold"
NO_GOLD = "no gold for this session"


def quality_metadata(report: EvaluationReport) -> dict[str, Any]:
    """Flat numeric metadata, one key per lane and measure (keys the UI can plot). A measure
    that is undefined (nothing to measure) is left out rather than shown as a number."""
    out: dict[str, Any] = {
        "gold": True,
        "gold_lanes": len(report.totals.lanes),
        "source_checked": report.source_checked,
    }
    rows: list[tuple[str, Any]] = [
        (lane.lane_id, lane) for lane in report.lanes if lane.status != "missing_from_gold"
    ]
    rows.append(("total", report.totals))
    for name, row in rows:
        values = {
            "f1": row.by_name.f1,
            "grounded_f1": row.grounded.f1,
            "citation_precision": row.citation.precision,
        }
        out.update({f"{name}.{key}": value for key, value in values.items() if value is not None})
    out["lanes_missing_from_bundle"] = sum(
        1 for lane in report.lanes if lane.status == "missing_from_bundle"
    )
    return out


def quality_result(
    store_root: Path, bundles: Path, session_id: str, match_fields: Mapping[str, MatchFields]
) -> AssetCheckResult:
    """The check's result for one session (separate from Dagster so tests can call it)."""
    gold = gold_file(store_root, session_id)
    if not gold.is_file():
        return AssetCheckResult(
            asset_key=BUNDLE_ASSET,
            check_name=CHECK_NAME,
            passed=True,
            description=NO_GOLD,
            metadata={"gold": False},
        )
    try:
        report = evaluate(bundles / session_id, gold, match_fields)
    except NotariusError as exc:
        return AssetCheckResult(
            asset_key=BUNDLE_ASSET,
            check_name=CHECK_NAME,
            passed=False,
            severity=AssetCheckSeverity.WARN,
            description=str(exc),
            metadata={"gold": True},
        )
    totals = report.totals
    description = (
        f"F1 {_shown(totals.by_name.f1)} by name, {_shown(totals.grounded.f1)} "
        f"grounded, citation precision {_shown(totals.citation.precision)} over "
        f"{len(totals.lanes)} gold lane(s)"
    )
    return AssetCheckResult(
        asset_key=BUNDLE_ASSET,
        check_name=CHECK_NAME,
        passed=True,
        severity=AssetCheckSeverity.WARN,
        description=description,
        metadata=quality_metadata(report),
    )


def _shown(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def build_quality_checks(match_fields: Mapping[str, MatchFields]) -> list[AssetChecksDefinition]:
    """The quality check on `session_bundle`, matching records with `match_fields` (the
    domain's table of match fields per artifact kind)."""
    with warnings.catch_warnings():
        # Partitioned checks are a preview feature in Dagster 1.13 (as in assets/checks.py).
        warnings.simplefilter("ignore", PreviewWarning)
        spec = AssetCheckSpec(
            CHECK_NAME,
            asset=BUNDLE_ASSET,
            partitions_def=sessions_partitions,
            description="Scores the published bundle against the session's gold file "
            f"(<store>/{GOLD_FOLDER}/<session-id>.json), when there is one: "
            "per lane F1 by name, grounded F1 and citation precision.",
        )

        @multi_asset_check(
            name="session_quality_checks",
            specs=[spec],
            description="Quality of the published bundle against gold.",
        )
        def quality_checks(
            context: AssetCheckExecutionContext, store: BundleStore
        ) -> Iterator[AssetCheckResult]:
            yield quality_result(
                Path(store.root), store.bundles, context.partition_key, match_fields
            )

    return [quality_checks]
