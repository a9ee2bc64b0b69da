"""The run manifest: what ran, on what, with which outcome, and what it cost. Never payloads,
transcript text, prompts, responses, credentials or filesystem paths."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from notarius_dagster.engine.artifact_kinds import get_kind
from notarius_dagster.engine.chunk_stage import ChunkResult
from notarius_dagster.engine.contracts import LLMUsage
from notarius_dagster.engine.lane_runner import LaneResult
from notarius_dagster.engine.models import Rejection, SourceDocument
from notarius_dagster.engine.resolution import ResolvedPipeline

MANIFEST_VERSION = "1"
_LLM_PUBLIC_KEYS = (
    "name",
    "model",
    "api_base",
    "temperature",
    "max_tokens",
    "timeout_s",
    "retries",
    "max_concurrency",
    "server",
)


def lane_summary(lane_result: LaneResult, pipeline: ResolvedPipeline) -> dict[str, Any]:
    lane = pipeline.lane(lane_result.lane_id)
    kind = get_kind(lane.kind)
    stats = lane_result.stats
    return {
        "lane_id": lane.id,
        "kind": lane.kind,
        "schema_id": kind.schema_id,
        "schema_version": kind.schema_version,
        "status": lane_result.status,
        "modules": {s.stage: {"key": s.module, "version": s.version} for s in lane.stages()},
        "validators": {
            s.stage: {"chain": list(s.validators), "source": s.validators_source}
            for s in lane.stages()
        },
        "depends_on": list(lane.depends_on),
        "records": stats.records,
        "chunks": {
            "total": stats.chunks,
            "called_model": stats.called_model,
            "reused": stats.reused,
            "skipped": stats.skipped,
            "rejected": stats.rejected,
        },
        "llm": {
            "calls": stats.usage.calls,
            "prompt_tokens": stats.usage.prompt_tokens,
            "completion_tokens": stats.usage.completion_tokens,
            "cost_usd": stats.usage.cost_usd,
            "structured_output_rungs": stats.usage.rungs,
        },
        "warnings": len(lane_result.warnings),
        "rejections": len(lane_result.rejections),
        "metadata": lane_result.metadata,
        "references": list(lane_result.references),
    }


def rejection_summary(rejection: Rejection) -> dict[str, Any]:
    return rejection.model_dump(mode="json")


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
) -> dict[str, Any]:
    rejections = [r for lr in lane_results for r in lr.rejections]
    if chunk_result.rejection is not None:
        rejections.insert(0, chunk_result.rejection)
    total = LLMUsage()
    for lr in lane_results:
        total = total + lr.stats.usage
    llm = {k: pipeline.llm_profile.get(k) for k in _LLM_PUBLIC_KEYS if k in pipeline.llm_profile}
    return {
        "manifest_version": MANIFEST_VERSION,
        "run_id": run_id,
        "session_id": session_id,
        "status": "succeeded",
        "validation_status": "rejected" if rejections else "approved",
        "pipeline": {
            "id": pipeline.pipeline_id,
            "profile": pipeline.profile_name,
            "digest": pipeline.digest,
        },
        "modules": {
            "input": pipeline.input_format or document.media_type,
            "chunker": {
                "key": pipeline.chunk.module,
                "version": pipeline.chunk.version,
                "validators": list(pipeline.chunk.validators),
                "validators_source": pipeline.chunk.validators_source,
                "attempts": chunk_result.attempts,
            },
            "output": pipeline.output_module,
        },
        "source": {
            "source_id": document.source_id,
            "digest": document.digest,
            "media_type": document.media_type,
            "units": len(document.units),
        },
        "chunks": len(chunk_result.chunk_map.chunks) if chunk_result.chunk_map else 0,
        "llm_profile": llm,
        "references": {"chunk": list(chunk_result.references)},
        "artifact_lanes": [lane_summary(lr, pipeline) for lr in lane_results],
        "outputs": [
            {
                "lane_id": lr.lane_id,
                "normalizer": pipeline.lane(lr.lane_id).normalize.module,
                "media_type": "application/json",
                "source_id": document.source_id,
                "schema_id": get_kind(lr.kind).schema_id,
                "file": f"lanes/{lr.lane_id}.json",
            }
            for lr in lane_results
            if lr.payload is not None
        ],
        "rejected": [rejection_summary(r) for r in rejections],
        "warnings": len(chunk_result.warnings) + sum(len(lr.warnings) for lr in lane_results),
        "evidence_context": evidence_enabled,
        "totals": {
            "llm_calls": total.calls,
            "prompt_tokens": total.prompt_tokens,
            "completion_tokens": total.completion_tokens,
            "cost_usd": total.cost_usd,
            "structured_output_rungs": total.rungs,
        },
        "timing": {
            "started_at": started_at,
            "completed_at": completed_at,
            "wall_time_s": round(wall_time_s, 3),
        },
    }
