"""The run manifest: what ran, on what, with which outcome, and what it cost, built from the
run's values as the `Manifest` model (`bundle_documents.py`). Never payloads, transcript text,
prompts, responses, credentials or filesystem paths."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypedDict

from notarius_dagster.engine.artifact_kinds import ArtifactKind
from notarius_dagster.engine.bundle import JSON_MEDIA_TYPE, lane_file
from notarius_dagster.engine.bundle_documents import (
    MANIFEST_VERSION,
    ChunkAccounting,
    ChunkerSummary,
    LaneUsage,
    LLMProfileSummary,
    Manifest,
    ManifestLane,
    ManifestModules,
    ManifestOutput,
    ManifestReferences,
    PipelineIdentity,
    SourceSummary,
    StageModule,
    Timing,
    Totals,
    ValidatorChain,
)
from notarius_dagster.engine.chunk_stage import ChunkResult
from notarius_dagster.engine.lane_runner import LaneResult
from notarius_dagster.engine.llm_contract import LLMUsage
from notarius_dagster.engine.models import SourceDocument
from notarius_dagster.engine.redaction import public_endpoint
from notarius_dagster.engine.resolution import ResolvedPipeline


def lane_summary(
    lane_result: LaneResult, pipeline: ResolvedPipeline, kinds: Mapping[str, ArtifactKind]
) -> ManifestLane:
    lane = pipeline.lane(lane_result.lane_id)
    kind = kinds[lane.kind]
    stats = lane_result.stats
    return ManifestLane(
        lane_id=lane.id,
        kind=lane.kind,
        schema_id=kind.schema_id,
        schema_version=kind.schema_version,
        status=lane_result.status,
        modules={s.stage: StageModule(key=s.module, version=s.version) for s in lane.stages()},
        validators={
            s.stage: ValidatorChain(chain=s.validators, source=s.validators_source)
            for s in lane.stages()
        },
        depends_on=lane.depends_on,
        records=stats.records,
        records_rejected=stats.records_rejected,
        chunks=ChunkAccounting(
            total=stats.chunks,
            called_model=stats.called_model,
            reused=stats.reused,
            skipped=stats.skipped,
            rejected=stats.rejected,
        ),
        llm=LaneUsage(calls=stats.usage.calls, **_spending(stats.usage)),
        warnings=len(lane_result.warnings),
        rejections=len(lane_result.rejections),
        metadata=lane_result.metadata,
        references=lane_result.references,
    )


class _Spending(TypedDict):
    prompt_tokens: int
    completion_tokens: int
    cached_prompt_tokens: int
    cost_usd: float | None
    unpriced_calls: int
    structured_output_rungs: dict[str, int]
    structured_output_stepdowns: dict[str, int]


def _spending(usage: LLMUsage) -> _Spending:
    """What a lane's `llm` and the run's `totals` both publish of their usage, besides the
    call count (`calls` in a lane, `llm_calls` in the totals): tokens, cost, rungs."""
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "cached_prompt_tokens": usage.cached_prompt_tokens,
        "cost_usd": usage.priced_cost_usd,
        "unpriced_calls": usage.unpriced_calls,
        "structured_output_rungs": usage.rungs,
        "structured_output_stepdowns": usage.stepdowns,
    }


def build_manifest(
    *,
    run_id: str,
    session_id: str,
    pipeline: ResolvedPipeline,
    document: SourceDocument,
    chunk_result: ChunkResult,
    lane_results: Sequence[LaneResult],
    started_at: str,
    completed_at: str,
    wall_time_s: float,
    evidence_enabled: bool,
    kinds: Mapping[str, ArtifactKind],
) -> Manifest:
    rejections = [r for lr in lane_results for r in lr.rejections]
    if chunk_result.rejection is not None:
        rejections.insert(0, chunk_result.rejection)
    total = LLMUsage()
    for lr in lane_results:
        total = total + lr.stats.usage
    return Manifest(
        manifest_version=MANIFEST_VERSION,
        run_id=run_id,
        session_id=session_id,
        status="succeeded",
        validation_status="rejected" if rejections else "approved",
        pipeline=PipelineIdentity(
            id=pipeline.pipeline_id, profile=pipeline.profile_name, digest=pipeline.digest
        ),
        modules=ManifestModules(
            input=pipeline.input_format or document.media_type,
            chunker=ChunkerSummary(
                key=pipeline.chunk.module,
                version=pipeline.chunk.version,
                validators=pipeline.chunk.validators,
                validators_source=pipeline.chunk.validators_source,
                attempts=chunk_result.attempts,
            ),
            output=pipeline.output_module,
        ),
        source=SourceSummary(
            source_id=document.source_id,
            digest=document.digest,
            media_type=document.media_type,
            units=len(document.units),
        ),
        chunks=len(chunk_result.chunk_map.chunks) if chunk_result.chunk_map else 0,
        llm_profile=llm_profile_summary(pipeline.llm_profile),
        references=ManifestReferences(chunk=chunk_result.references),
        artifact_lanes=tuple(lane_summary(lr, pipeline, kinds) for lr in lane_results),
        outputs=tuple(
            ManifestOutput(
                lane_id=lr.lane_id,
                normalizer=pipeline.lane(lr.lane_id).normalize.module,
                media_type=JSON_MEDIA_TYPE,
                source_id=document.source_id,
                schema_id=kinds[lr.kind].schema_id,
                file=lane_file(lr.lane_id),
            )
            for lr in lane_results
            if lr.payload is not None
        ),
        rejected=tuple(rejections),
        warnings=len(chunk_result.warnings) + sum(len(lr.warnings) for lr in lane_results),
        evidence_context=evidence_enabled,
        totals=Totals(llm_calls=total.calls, **_spending(total)),
        timing=Timing(
            started_at=started_at, completed_at=completed_at, wall_time_s=round(wall_time_s, 3)
        ),
    )


def llm_profile_summary(profile: dict[str, object]) -> LLMProfileSummary:
    """The public part of a resolved LLM profile: its endpoint without user, password, query
    or fragment (`http://user:pw@host/v1?key=x` is published as `http://host/v1`)."""
    public = {k: v for k, v in profile.items() if k in LLMProfileSummary.model_fields}
    api_base = public.get("api_base")
    public["api_base"] = public_endpoint(api_base if isinstance(api_base, str) else None)
    return LLMProfileSummary.model_validate(public)
