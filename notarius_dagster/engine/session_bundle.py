"""Publishing one session's bundle from the run's values, in one call (the `session_bundle`
asset's whole body): build the manifest, assemble the logical files, encode them, check the
encoded bundle against its index and models, and publish it atomically. A bundle with a lane
below the publish policy (engine/publish_policy.py), or that does not pass the check, is
refused before anything is written; the previous bundle stays."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from notarius_dagster.engine.artifact_kinds import ArtifactKind
from notarius_dagster.engine.bundle import encode_bundle, publish_bundle
from notarius_dagster.engine.bundle_assembly import assemble_bundle
from notarius_dagster.engine.bundle_check import MAX_LOCATIONS, check_encoded_bundle
from notarius_dagster.engine.bundle_documents import Manifest
from notarius_dagster.engine.chunk_stage import ChunkResult
from notarius_dagster.engine.errors import OutputError
from notarius_dagster.engine.evidence import EvidenceContext
from notarius_dagster.engine.lane_runner import LaneResult
from notarius_dagster.engine.manifest import build_manifest
from notarius_dagster.engine.models import SourceDocument
from notarius_dagster.engine.publish_policy import check_publish_policy
from notarius_dagster.engine.resolution import ResolvedPipeline


@dataclass(frozen=True)
class PublishedBundle:
    """What was published: where readers find it (`<store_root>/<session-id>`), how many files
    it has, and its manifest (the asset's metadata reads the counts from it)."""

    path: Path
    files: int
    manifest: Manifest


def publish_session_bundle(
    *,
    store_root: Path,
    session_id: str,
    run_id: str,
    pipeline: ResolvedPipeline,
    document: SourceDocument,
    chunk_result: ChunkResult,
    lane_results: Sequence[LaneResult],
    evidence: EvidenceContext | None,
    started_at: float,
    completed_at: float,
    kinds: Mapping[str, ArtifactKind],
) -> PublishedBundle:
    """Publish the bundle of `session_id` under `store_root` (the bundles folder). The run's
    start and end are POSIX timestamps; the manifest records them in UTC with the wall time
    between them. Raises `OutputError` (nothing written) when a lane is below the publish
    policy (`PublishPolicyError`), or the encoder or the check refuses the bundle."""
    check_publish_policy(pipeline.publish, lane_results, session_id)
    manifest = build_manifest(
        run_id=run_id,
        session_id=session_id,
        pipeline=pipeline,
        document=document,
        chunk_result=chunk_result,
        lane_results=lane_results,
        started_at=datetime.fromtimestamp(started_at, UTC).isoformat(),
        completed_at=datetime.fromtimestamp(completed_at, UTC).isoformat(),
        wall_time_s=completed_at - started_at,
        evidence_enabled=evidence is not None,
        kinds=kinds,
    )
    files = assemble_bundle(
        manifest=manifest,
        chunk_result=chunk_result,
        lane_results=lane_results,
        evidence_context=evidence,
        kinds=kinds,
    )
    encoded = encode_bundle(files)
    check = check_encoded_bundle(encoded)
    if not check.passed:
        shown = "; ".join(check.problems[:MAX_LOCATIONS])
        raise OutputError(
            f"the bundle of session {session_id!r} does not match its index "
            f"({len(check.problems)} problem(s): {shown}); nothing was written"
        )
    path = publish_bundle(store_root, session_id, encoded)
    return PublishedBundle(path=path, files=len(encoded), manifest=manifest)
