"""Asset checks on each lane and on the published bundle, per session partition.

Per lane (one `@multi_asset_check` step, so the lane value and the source document are loaded
once):
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

The checks are partitioned by session (`partitions_def` on each `AssetCheckSpec`, a preview
feature in Dagster 1.13): a run of partition `session-042` evaluates them for `session-042`, and
the UI shows results per partition. Lane checks receive the partition's values through the IO
manager, exactly as downstream assets do; the bundle check reads the published files, because
the bundle asset's value is the folder itself. Check results carry counts and problem paths,
never payload values or transcript text."""

import warnings
from collections.abc import Iterator
from typing import Any

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetIn,
    AssetKey,
    PreviewWarning,
    multi_asset_check,
)

from assets.factory import asset_name
from assets.partitions import sessions_partitions
from notarius_dagster.engine.artifact_kinds import ArtifactKind
from notarius_dagster.engine.bundle_check import check_published_bundle
from notarius_dagster.engine.config import PublishConfig
from notarius_dagster.engine.errors import NotariusError
from notarius_dagster.engine.lane_runner import LaneResult
from notarius_dagster.engine.models import SourceDocument
from notarius_dagster.engine.publish_policy import POLICY_KEY, below_policy
from notarius_dagster.engine.registry import LaneRegistry
from notarius_dagster.engine.resolution import ResolvedLane, ResolvedPipeline
from notarius_dagster.engine.validators import ref_problems, schema_problems
from notarius_dagster.settings import MAX_REJECTION_RATE_ENV, load_settings
from resources.bundle_store import BundleStore

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


def build_lane_checks(
    lane: ResolvedLane,
    threshold: float,
    kind: ArtifactKind,
    policy: PublishConfig | None = None,
) -> AssetChecksDefinition:
    """The lane's checks; with a blocking `policy` (`policy.blocking_checks`) the rejection
    check is the publish policy and blocks downstream assets."""
    key = AssetKey(asset_name(lane.id))
    blocking = policy is not None and policy.blocking_checks
    rate_description = (
        f"At least {policy.min_accepted_chunk_share:.0%} of the lane's chunk extractions are "
        f"accepted ({POLICY_KEY}; blocking)"
        if policy is not None and blocking
        else f"At most {threshold:.0%} of the lane's chunk extractions are rejected "
        f"({MAX_REJECTION_RATE_ENV}; WARN)."
    )
    specs = [
        AssetCheckSpec(
            "schema_valid",
            asset=key,
            partitions_def=sessions_partitions,
            description=f"The accepted payload validates as {lane.kind}.",
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

    @multi_asset_check(
        name=f"{asset_name(lane.id)}_checks",
        specs=specs,
        ins={"lane_result": AssetIn(key), "source_document": AssetIn("source_document")},
        description=f"Checks of the `{lane.id}` lane.",
    )
    def lane_checks(
        context: AssetCheckExecutionContext,
        lane_result: LaneResult,
        source_document: SourceDocument,
    ) -> Iterator[AssetCheckResult]:
        yield schema_result(key, lane_result, kind)
        yield refs_result(key, lane_result, source_document, kind)
        if policy is not None and blocking:
            yield policy_result(key, lane_result, policy)
        else:
            yield rejection_result(key, lane_result, threshold)

    return lane_checks


def build_bundle_check() -> AssetChecksDefinition:
    spec = AssetCheckSpec(
        "files_match_index",
        asset=BUNDLE_ASSET,
        partitions_def=sessions_partitions,
        description="Every file index.json lists exists and parses (the "
        "bundle's own documents validate against their "
        "schemas), every lane file is listed, and no stray "
        "file is published.",
    )

    @multi_asset_check(
        name="session_bundle_checks", specs=[spec], description="Checks of the published bundle."
    )
    def bundle_checks(
        context: AssetCheckExecutionContext, store: BundleStore
    ) -> Iterator[AssetCheckResult]:
        session_id = context.partition_key
        check = check_published_bundle(store.bundles / session_id)
        yield AssetCheckResult(
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

    return bundle_checks


def build_asset_checks(
    pipeline: ResolvedPipeline, registry: LaneRegistry
) -> list[AssetChecksDefinition]:
    threshold = max_rejection_rate()
    with warnings.catch_warnings():
        # Partitioned checks are a preview feature in Dagster 1.13 (see the module docstring).
        warnings.simplefilter("ignore", PreviewWarning)
        checks = [
            build_lane_checks(lane, threshold, registry.kind(lane.kind), pipeline.publish)
            for lane in pipeline.lanes
        ]
        checks.append(build_bundle_check())
    return checks
