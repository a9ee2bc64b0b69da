"""Assembles the logical files of a session bundle from the run's values: the `Index` and the
other typed documents of `bundle_documents.py`, the chunk map, the evidence context and the
accepted lane payloads. Nothing is encoded or written here (`bundle.py` does that)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel

from notarius_dagster.engine.artifact_kinds import ArtifactKind
from notarius_dagster.engine.bundle import JSON_MEDIA_TYPE, LogicalFile, lane_file, lane_files
from notarius_dagster.engine.bundle_documents import (
    BUNDLE_VERSION,
    CHUNK_MAP_DESCRIPTOR,
    CHUNK_MAP_FILE,
    EVIDENCE_DESCRIPTOR,
    EVIDENCE_FILE,
    INDEX_FILE,
    MANIFEST_FILE,
    REJECTED_FILE,
    WARNINGS_FILE,
    BundleFiles,
    Index,
    LaneDescriptor,
    Manifest,
    RejectionList,
    WarningList,
)
from notarius_dagster.engine.chunk_stage import ChunkResult
from notarius_dagster.engine.evidence import EvidenceContext
from notarius_dagster.engine.lane_runner import LaneResult


def build_index(
    manifest: Manifest,
    *,
    accepted: Sequence[LaneResult],
    chunk_map: bool,
    evidence_context: bool,
    kinds: Mapping[str, ArtifactKind],
) -> Index:
    """The index of a bundle whose manifest is `manifest` and whose lane files are the
    payloads of `accepted`."""
    return Index(
        bundle_version=BUNDLE_VERSION,
        session_id=manifest.session_id,
        run_id=manifest.run_id,
        pipeline=manifest.pipeline,
        source_digest=manifest.source.digest,
        validation_status=manifest.validation_status,
        files=BundleFiles(manifest=MANIFEST_FILE, warnings=WARNINGS_FILE, rejected=REJECTED_FILE),
        lanes=tuple(_lane_descriptor(lr, kinds[lr.kind]) for lr in accepted),
        chunk_map=CHUNK_MAP_DESCRIPTOR if chunk_map else None,
        evidence_context=EVIDENCE_DESCRIPTOR if evidence_context else None,
    )


def _lane_descriptor(result: LaneResult, kind: ArtifactKind) -> LaneDescriptor:
    return LaneDescriptor(
        lane_id=result.lane_id,
        file=lane_file(result.lane_id),
        kind=result.kind,
        media_type=JSON_MEDIA_TYPE,
        schema_id=kind.schema_id,
        schema_name=kind.schema_name,
        schema_version=kind.schema_version,
        records=result.stats.records,
    )


def _document(path: str, document: BaseModel) -> LogicalFile:
    # Python mode: a value that is not JSON (NaN in module metadata) reaches the encoder,
    # which refuses it, instead of being turned into null.
    return LogicalFile(path, JSON_MEDIA_TYPE, document.model_dump(mode="python"))


def assemble_bundle(
    *,
    manifest: Manifest,
    chunk_result: ChunkResult,
    lane_results: Sequence[LaneResult],
    evidence_context: EvidenceContext | None,
    kinds: Mapping[str, ArtifactKind],
) -> list[LogicalFile]:
    """Every logical file of the bundle, `index.json` first, then the manifest, warnings,
    rejections, chunk map, evidence context and lane files."""
    accepted = [lr for lr in lane_results if lr.payload is not None]
    lanes = lane_files([(lr.lane_id, lr.payload) for lr in accepted])
    chunk_map = chunk_result.chunk_map
    index = build_index(
        manifest,
        accepted=accepted,
        chunk_map=chunk_map is not None,
        evidence_context=evidence_context is not None,
        kinds=kinds,
    )
    warnings = WarningList(
        (*chunk_result.warnings, *(w for lr in lane_results for w in lr.warnings))
    )
    files = [
        _document(INDEX_FILE, index),
        _document(MANIFEST_FILE, manifest),
        _document(WARNINGS_FILE, warnings),
        _document(REJECTED_FILE, RejectionList(manifest.rejected)),
    ]
    if chunk_map is not None:
        files.append(_document(CHUNK_MAP_FILE, chunk_map.public_view()))
    if evidence_context is not None:
        # JSON mode, as the evidence asset's value has always been published.
        files.append(
            LogicalFile(EVIDENCE_FILE, JSON_MEDIA_TYPE, evidence_context.model_dump(mode="json"))
        )
    files.extend(lanes)
    return files
