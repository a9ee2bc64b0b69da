"""Asset checks on each lane and on the published bundle, per session partition.

Per lane:
  - `schema_valid`          the accepted payload validates against its artifact kind's schema
  - `source_refs_in_document` every source reference names this session and existing units
  - `rejection_rate`        rejected share at or under NOTARIUS_MAX_REJECTION_RATE (WARN); with
                            the profile's `pipeline.publish.blocking_checks`, the publish
                            policy instead (accepted share at least
                            `pipeline.publish.min_accepted_chunk_share`), blocking (ERROR):
                            a lane below it stops its downstream assets (the bundle)
On `session_bundle`:
  - `files_match_index`     every file index.json lists exists and parses (the bundle's own
                            documents validate); every lane file is listed; no stray files
                            (`engine/bundle_check.py`, the check publication also runs)

Each check is declared on the asset it checks (`check_specs` of `@asset`, assets/factory.py) and
evaluated by that asset's own step, right after its value: no step of its own (a run of the
complete profile had 8 check steps, each a process, of 18), and the lane value and source
document the step already holds are checked as they are. So a check runs whenever its asset is
materialized, and never alone: Dagster offers no "Execute" for a check that shares its asset's
step (docs/operations.md, "Checks").

The checks are partitioned by session (`partitions_def` on each `AssetCheckSpec`, a preview
feature in Dagster 1.13): a run of partition `session-042` evaluates them for `session-042`, and
the UI shows results per partition. The bundle check reads the published files, because the
bundle asset's value is the folder itself. Check results carry counts and problem paths, never
payload values or transcript text."""

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
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
from notarius_dagster.engine.artifact_kinds import ArtifactKind
from notarius_dagster.engine.bundle_check import check_published_bundle
from notarius_dagster.engine.config import PublishConfig
from notarius_dagster.engine.errors import NotariusError
from notarius_dagster.engine.lane_runner import LaneResult
from notarius_dagster.engine.models import SourceDocument
from notarius_dagster.engine.publish_policy import POLICY_KEY, below_policy
from notarius_dagster.engine.validators import ref_problems, schema_problems
from notarius_dagster.settings import MAX_REJECTION_RATE_ENV, load_settings

DEFAULT_MAX_REJECTION_RATE = 0.5
MAX_LISTED_PROBLEMS = 10
BUNDLE_ASSET = AssetKey("session_bundle")


def max_rejection_rate() -> float:
    """The threshold from the environment; a value that is not a number in [0, 1] is an error
    that names the variable (the code location does not load with it)."""
    raw = load_settings().max_rejection_rate
    if not raw:
        return DEFAULT_MAX_REJECTION_RATE
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise NotariusError(
            f"{MAX_REJECTION_RATE_ENV} must be a number from 0 to 1 (the "
            f"share of a lane's chunks that may be rejected), got {raw!r}"
        )
    return value


def rejection_rate(result: LaneResult) -> float:
    """Rejected chunk extractions over the lane's chunks. A lane without an accepted payload
    (its merge or normalize was rejected, or chunking was) counts as 1.0: nothing got through."""
    if result.payload is None:
        return 1.0
    if result.stats.chunks == 0:
        return 0.0
    return result.stats.rejected / result.stats.chunks


def _problems_metadata(problems: list[str]) -> dict[str, Any]:
    return {"problems": len(problems), "first_problems": problems[:MAX_LISTED_PROBLEMS]}


def _nothing_accepted(
    lane_key: AssetKey, check_name: str, description: str, metadata: dict[str, Any]
) -> AssetCheckResult:
    """A lane check that passes because the lane accepted no payload: there is nothing for it
    to check (`rejection_rate` is the check that fails for that)."""
    return AssetCheckResult(
        asset_key=lane_key,
        check_name=check_name,
        passed=True,
        description=description,
        metadata=metadata,
    )


def schema_result(lane_key: AssetKey, result: LaneResult, kind: ArtifactKind) -> AssetCheckResult:
    if result.payload is None:
        return _nothing_accepted(
            lane_key,
            "schema_valid",
            "no accepted payload to validate (see rejection_rate)",
            {"kind": result.kind},
        )
    problems = schema_problems(kind, result.payload)
    return AssetCheckResult(
        asset_key=lane_key,
        check_name="schema_valid",
        passed=not problems,
        description=None
        if not problems
        else f"{len(problems)} schema problem(s) in the accepted {result.kind} payload",
        metadata={"kind": result.kind, **_problems_metadata(problems)},
    )


def refs_result(
    lane_key: AssetKey, result: LaneResult, document: SourceDocument, kind: ArtifactKind
) -> AssetCheckResult:
    if result.payload is None:
        return _nothing_accepted(
            lane_key, "source_refs_in_document", "no accepted payload to check", {"references": 0}
        )
    try:
        artifact = result.artifact(kind)
    except ValueError as exc:  # pydantic ValidationError: the schema check says where
        return AssetCheckResult(
            asset_key=lane_key,
            check_name="source_refs_in_document",
            passed=False,
            description="the payload does not parse as "
            f"{result.kind} ({type(exc).__name__}); see schema_valid",
            metadata={"references": 0},
        )
    refs = list(kind.project_source_refs(artifact)) if artifact is not None else []
    problems = ref_problems(refs, document.source_id, document.position_index())
    return AssetCheckResult(
        asset_key=lane_key,
        check_name="source_refs_in_document",
        passed=not problems,
        description=None
        if not problems
        else f"{len(problems)} of {len(refs)} source reference(s) point outside the document",
        metadata={
            "references": len(refs),
            "units_in_document": len(document.units),
            **_problems_metadata(problems),
        },
    )


def rejection_result(lane_key: AssetKey, result: LaneResult, threshold: float) -> AssetCheckResult:
    rate = rejection_rate(result)
    passed = rate <= threshold
    return AssetCheckResult(
        asset_key=lane_key,
        check_name="rejection_rate",
        passed=passed,
        severity=AssetCheckSeverity.WARN,
        description=None
        if passed
        else f"{rate:.0%} rejected, above the {threshold:.0%} allowed by {MAX_REJECTION_RATE_ENV}",
        metadata={
            "rejection_rate": round(rate, 4),
            "max_rejection_rate": threshold,
            "rejected_chunks": result.stats.rejected,
            "chunks": result.stats.chunks,
            "rejections": len(result.rejections),
            "status": result.status,
        },
    )


def policy_result(
    lane_key: AssetKey, result: LaneResult, policy: PublishConfig
) -> AssetCheckResult:
    """The blocking form of `rejection_rate`: the publish policy, ERROR when the lane is below."""
    problem = below_policy(policy, result)
    return AssetCheckResult(
        asset_key=lane_key,
        check_name="rejection_rate",
        passed=problem is None,
        severity=AssetCheckSeverity.ERROR,
        description=problem,
        metadata={
            "rejection_rate": round(rejection_rate(result), 4),
            "min_accepted_chunk_share": policy.min_accepted_chunk_share,
            "rejected_chunks": result.stats.rejected,
            "chunks": result.stats.chunks,
            "rejections": len(result.rejections),
            "records_rejected": result.stats.records_rejected,
            "status": result.status,
        },
    )


def lane_check_specs(
    key: AssetKey,
    kind_name: str,
    threshold: float,
    policy: PublishConfig | None = None,
) -> list[AssetCheckSpec]:
    """The lane's checks, declared on the lane asset (`check_specs`) and evaluated by its own
    step (`lane_check_results`); with a blocking `policy` (`policy.blocking_checks`) the
    rejection check is the publish policy and blocks downstream assets."""
    blocking = policy is not None and policy.blocking_checks
    rate_description = (
        f"At least {policy.min_accepted_chunk_share:.0%} of the lane's chunk extractions are "
        f"accepted ({POLICY_KEY}; blocking)"
        if policy is not None and blocking
        else f"At most {threshold:.0%} of the lane's chunk extractions are rejected "
        f"({MAX_REJECTION_RATE_ENV}; WARN)."
    )
    with _partitioned_checks():
        return [
            AssetCheckSpec(
                "schema_valid",
                asset=key,
                partitions_def=sessions_partitions,
                description=f"The accepted payload validates as {kind_name}.",
            ),
            AssetCheckSpec(
                "source_refs_in_document",
                asset=key,
                partitions_def=sessions_partitions,
                additional_deps=["source_document"],
                description="Every source reference names this session and an ordered "
                "range of units that exist in its source document.",
            ),
            AssetCheckSpec(
                "rejection_rate",
                asset=key,
                partitions_def=sessions_partitions,
                blocking=blocking,
                description=rate_description,
            ),
        ]


def lane_check_results(
    key: AssetKey,
    result: LaneResult,
    document: SourceDocument,
    kind: ArtifactKind,
    threshold: float,
    policy: PublishConfig | None = None,
) -> list[AssetCheckResult]:
    """The results of `lane_check_specs`, for the lane value the step has just produced."""
    rate = (
        policy_result(key, result, policy)
        if policy is not None and policy.blocking_checks
        else rejection_result(key, result, threshold)
    )
    return [schema_result(key, result, kind), refs_result(key, result, document, kind), rate]


def bundle_check_specs() -> list[AssetCheckSpec]:
    """The bundle's own check, declared on `session_bundle` and evaluated by its step."""
    with _partitioned_checks():
        return [
            AssetCheckSpec(
                "files_match_index",
                asset=BUNDLE_ASSET,
                partitions_def=sessions_partitions,
                description="Every file index.json lists exists and parses (the "
                "bundle's own documents validate against their "
                "schemas), every lane file is listed, and no stray "
                "file is published.",
            )
        ]


def bundle_check_result(bundles: Path, session_id: str) -> AssetCheckResult:
    """`files_match_index` on what is published for `session_id` under `bundles`."""
    check = check_published_bundle(bundles / session_id)
    return AssetCheckResult(
        asset_key=BUNDLE_ASSET,
        check_name="files_match_index",
        passed=check.passed,
        description=None
        if check.passed
        else f"{len(check.problems)} problem(s) in the published bundle of {session_id}",
        metadata={
            "listed_files": check.listed_files,
            **_problems_metadata(list(check.problems)),
        },
    )


@contextmanager
def _partitioned_checks() -> Iterator[None]:
    """Partitioned checks are a preview feature in Dagster 1.13 (see the module docstring):
    its warning is silenced for the specs built here, not for the process."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PreviewWarning)
        yield
