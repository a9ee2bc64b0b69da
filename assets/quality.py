"""Quality against gold, per session partition: an asset check on `session_bundle` and the
scores as metadata of the bundle's materialization.

When the store holds a gold file for the session (`NOTARIUS_DATA/gold/SESSION-ID.json`), the
bundle's step scores what it has just published against it (`notarius_dagster.engine.evaluation`)
once, and records the numbers twice:
  - as the `quality_vs_gold` check's metadata: per lane F1 by name, grounded F1 and citation
    precision, and the micro-averaged totals (`quality_metadata`);
  - as numeric metadata of the `session_bundle` materialization, the same figures prefixed
    `quality.` (`quality_materialization_metadata`). A materialization belongs to one
    partition, so Dagster's plots of the asset by partition show each session its own figures;
    a check's metadata plots by time mix every session's executions.

The check's outcomes:
  - no gold file: passed, description "no gold for this session", metadata `gold: false`
    (a session without gold is normal, not a problem);
  - scored: passed (the check records quality, it does not judge it; read the numbers);
  - the gold file is invalid, or was read from another transcript: failed, WARN severity
    (the run is not failed), with a content-safe description naming the file and key path.
Metadata holds numbers, counts and lane ids only, never names or text."""

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetKey,
    PreviewWarning,
)

from assets.partitions import sessions_partitions
from notarius_dagster.engine.errors import NotariusError
from notarius_dagster.engine.evaluation import EvaluationReport, MatchFields, evaluate
from notarius_dagster.engine.failure_causes import cause_of
from notarius_dagster.store import GOLD_FOLDER, gold_file

BUNDLE_ASSET = AssetKey("session_bundle")
CHECK_NAME = "quality_vs_gold"
NO_GOLD = "no gold for this session"
MATERIALIZATION_PREFIX = "quality."
"""The bundle materialization's quality keys: `quality.total.f1`, `quality.npcs.grounded_f1`."""


@dataclass(frozen=True)
class Scoring:
    """What the gold says of one session's published bundle: nothing (no gold file), a
    report, or why the gold file cannot be used (`problem`, content-safe)."""

    report: EvaluationReport | None = None
    problem: str | None = None

    @property
    def has_gold(self) -> bool:
        return self.report is not None or self.problem is not None


def score_session(
    store_root: Path, bundles: Path, session_id: str, match_fields: Mapping[str, MatchFields]
) -> Scoring:
    """Score the session's published bundle against its gold file, when there is one. The
    bundle is already published when this runs (in its step): a gold file that cannot be read
    is a problem of the score, never a failure of the bundle's materialization."""
    gold = gold_file(store_root, session_id)
    if not gold.is_file():
        return Scoring()
    try:
        return Scoring(report=evaluate(bundles / session_id, gold, match_fields))
    except NotariusError as exc:
        return Scoring(problem=str(exc))
    except OSError as exc:
        return Scoring(problem=f"gold file {gold.name!r} cannot be scored: {cause_of(exc)}")


def quality_metadata(report: EvaluationReport) -> dict[str, Any]:
    """Flat numeric metadata, one key per lane and measure (keys the UI can plot). A measure
    that is undefined (nothing to measure) is left out rather than shown as a number."""
    out: dict[str, Any] = {
        "gold": True,
        "gold_lanes": len(report.totals.lanes),
        "source_checked": report.source_checked,
    }
    out.update(_scores(report))
    out["lanes_missing_from_bundle"] = sum(
        1 for lane in report.lanes if lane.status == "missing_from_bundle"
    )
    return out


def _scores(report: EvaluationReport) -> dict[str, float]:
    """`<lane>.f1`, `<lane>.grounded_f1`, `<lane>.citation_precision` per gold lane and for the
    totals; undefined measures left out."""
    rows: list[tuple[str, Any]] = [
        (lane.lane_id, lane) for lane in report.lanes if lane.status != "missing_from_gold"
    ]
    rows.append(("total", report.totals))
    out: dict[str, float] = {}
    for name, row in rows:
        values = {
            "f1": row.by_name.f1,
            "grounded_f1": row.grounded.f1,
            "citation_precision": row.citation.precision,
        }
        out.update({f"{name}.{key}": value for key, value in values.items() if value is not None})
    return out


def quality_materialization_metadata(scoring: Scoring) -> dict[str, float]:
    """The scores for the bundle's materialization, `quality.`-prefixed; nothing without a
    usable gold (a session without gold has no quality to plot)."""
    if scoring.report is None:
        return {}
    return {
        f"{MATERIALIZATION_PREFIX}{key}": value for key, value in _scores(scoring.report).items()
    }


def quality_check_result(scoring: Scoring) -> AssetCheckResult:
    """The `quality_vs_gold` check's result for one scoring."""
    if scoring.problem is not None:
        return AssetCheckResult(
            asset_key=BUNDLE_ASSET,
            check_name=CHECK_NAME,
            passed=False,
            severity=AssetCheckSeverity.WARN,
            description=scoring.problem,
            metadata={"gold": True},
        )
    if scoring.report is None:
        return AssetCheckResult(
            asset_key=BUNDLE_ASSET,
            check_name=CHECK_NAME,
            passed=True,
            description=NO_GOLD,
            metadata={"gold": False},
        )
    totals = scoring.report.totals
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
        metadata=quality_metadata(scoring.report),
    )


def _shown(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def quality_check_spec() -> AssetCheckSpec:
    """The quality check, declared on `session_bundle` and evaluated by its step."""
    with warnings.catch_warnings():
        # Partitioned checks are a preview feature in Dagster 1.13 (as in assets/checks.py).
        warnings.simplefilter("ignore", PreviewWarning)
        return AssetCheckSpec(
            CHECK_NAME,
            asset=BUNDLE_ASSET,
            partitions_def=sessions_partitions,
            # No angle brackets: descriptions render as Markdown, which takes them for HTML.
            description="Scores the published bundle against the session's gold file, when "
            f"the store has one (`{GOLD_FOLDER}/SESSION-ID.json` under the store root): per "
            "lane F1 by name, grounded F1 and citation precision. The same figures are "
            "metadata of the bundle's materialization (`quality.*`), plotted per session.",
        )
