"""Assembles the logical files of a bundle from the run's values (DESIGN.md §4)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from notarius_dagster.engine.artifact_kinds import get_kind
from notarius_dagster.engine.bundle import JSON_MEDIA_TYPE, LogicalFile, lane_file, lane_files
from notarius_dagster.engine.chunk_stage import ChunkResult
from notarius_dagster.engine.lane_runner import LaneResult

BUNDLE_VERSION = "1"
CHUNK_MAP_DESCRIPTOR = {
    "file": "chunk-map.json",
    "kind": "source/chunk-map",
    "media_type": JSON_MEDIA_TYPE,
    "schema_id": "notarius.source.chunk_map",
    "schema_name": "notarius_source_chunk_map_v1",
    "schema_version": "v1",
}
EVIDENCE_DESCRIPTOR = {
    "file": "evidence-context.json",
    "kind": "source/evidence-context",
    "media_type": JSON_MEDIA_TYPE,
    "schema_id": "notarius.source.evidence_context",
    "schema_name": "notarius_source_evidence_context_v1",
    "schema_version": "v1",
}


def assemble_bundle(
    *,
    manifest: dict[str, Any],
    chunk_result: ChunkResult,
    lane_results: Sequence[LaneResult],
    evidence_context: dict[str, Any] | None,
) -> list[LogicalFile]:
    accepted = [lr for lr in lane_results if lr.payload is not None]
    lanes = lane_files([(lr.lane_id, lr.payload) for lr in accepted])
    index: dict[str, Any] = {
        "bundle_version": BUNDLE_VERSION,
        "session_id": manifest["session_id"],
        "run_id": manifest["run_id"],
        "pipeline": manifest["pipeline"],
        "source_digest": manifest["source"]["digest"],
        "validation_status": manifest["validation_status"],
        "files": {
            "manifest": "manifest.json",
            "warnings": "warnings.json",
            "rejected": "rejected.json",
        },
        "lanes": [
            {
                "lane_id": lr.lane_id,
                "file": lane_file(lr.lane_id),
                "kind": lr.kind,
                "media_type": JSON_MEDIA_TYPE,
                "schema_id": get_kind(lr.kind).schema_id,
                "schema_name": get_kind(lr.kind).schema_name,
                "schema_version": get_kind(lr.kind).schema_version,
                "records": lr.stats.records,
            }
            for lr in accepted
        ],
    }
    files = [
        LogicalFile("manifest.json", JSON_MEDIA_TYPE, manifest),
        LogicalFile(
            "warnings.json",
            JSON_MEDIA_TYPE,
            [w.model_dump(mode="json") for w in chunk_result.warnings]
            + [w.model_dump(mode="json") for lr in lane_results for w in lr.warnings],
        ),
        LogicalFile("rejected.json", JSON_MEDIA_TYPE, manifest["rejected"]),
    ]
    if chunk_result.chunk_map is not None:
        index["chunk_map"] = CHUNK_MAP_DESCRIPTOR
        files.append(
            LogicalFile("chunk-map.json", JSON_MEDIA_TYPE, chunk_result.chunk_map.public_view())
        )
    if evidence_context is not None:
        index["evidence_context"] = EVIDENCE_DESCRIPTOR
        files.append(LogicalFile("evidence-context.json", JSON_MEDIA_TYPE, evidence_context))
    files.extend(lanes)
    files.insert(0, LogicalFile("index.json", JSON_MEDIA_TYPE, index))
    return files
