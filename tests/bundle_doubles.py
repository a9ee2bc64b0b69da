"""A small real session bundle for the bundle tests: the maintained offline profile (one `npcs`
lane), a ten-unit document in one chunk, and an accepted NPC list, published through the same
`publish_session_bundle` call the bundle asset makes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from notarius_dagster.engine.chunk_stage import ChunkResult
from notarius_dagster.engine.chunking import make_chunk
from notarius_dagster.engine.lane_runner import LaneResult, LaneStats
from notarius_dagster.engine.models import ChunkMap, Rejection, RunWarning, SourceDocument
from notarius_dagster.engine.resolution import ResolvedPipeline, resolve_profile_file
from notarius_dagster.engine.session_bundle import PublishedBundle, publish_session_bundle
from notarius_dagster.modules import registry
from tests.conftest import make_document

REPO = Path(__file__).resolve().parent.parent
OFFLINE_PROFILE = REPO / "configs" / "offline.yaml"
STARTED, COMPLETED = 1_000_000_000.0, 1_000_000_012.3456


def npc_payload(units: list[int], source_id: str = "s1") -> dict[str, Any]:
    return {
        "kind": "dnd/npc-list",
        "schema_version": "v1",
        "source_id": source_id,
        "npcs": [
            {
                "id": f"npc-{i}",
                "name": f"Npc {i}",
                "aliases": [],
                "description": "",
                "source_refs": [{"source_id": source_id, "start_unit_id": u, "end_unit_id": u}],
            }
            for i, u in enumerate(units)
        ],
    }


def pipeline() -> ResolvedPipeline:
    return resolve_profile_file(OFFLINE_PROFILE, llm_profile="test-double", registry=registry())


def chunk_result(document: SourceDocument, **update: Any) -> ChunkResult:
    chunk_map = ChunkMap(
        source_id=document.source_id,
        source_digest=document.digest,
        chunker="generic",
        chunks=(make_chunk(document, 0, document.units),),
    )
    return ChunkResult(chunk_map=chunk_map).model_copy(update=update)


def npcs_result(units: tuple[int, ...] = (1, 4), **update: Any) -> LaneResult:
    """An accepted `npcs` lane citing `units`; `update` replaces fields (`payload=None`...)."""
    payload = npc_payload(list(units))
    result = LaneResult(
        lane_id="npcs",
        kind="dnd/npc-list",
        status="accepted",
        payload=payload,
        stats=LaneStats(chunks=1, called_model=1, records=len(payload["npcs"])),
    )
    return result.model_copy(update=update)


def warning(code: str = "w1") -> RunWarning:
    return RunWarning(stage="extract", code=code, message="a bounded warning", lane="npcs")


def rejection() -> Rejection:
    return Rejection(
        stage="extract",
        lane="npcs",
        module="dnd.npcs.extract",
        chunk_id="chunk-0000",
        validator="schema",
        message="$.npcs[0]: required (name)",
        attempts=2,
    )


def publish(
    root: Path,
    *,
    session_id: str = "s1",
    run_id: str = "run-1",
    document: SourceDocument | None = None,
    chunks: ChunkResult | None = None,
    lanes: list[LaneResult] | None = None,
    min_accepted_chunk_share: float | None = None,
) -> PublishedBundle:
    """Publish through the real call; `min_accepted_chunk_share` overrides the publish policy."""
    document = document if document is not None else make_document()
    resolved = pipeline()
    if min_accepted_chunk_share is not None:
        resolved = resolved.model_copy(
            update={
                "publish": resolved.publish.model_copy(
                    update={"min_accepted_chunk_share": min_accepted_chunk_share}
                )
            }
        )
    return publish_session_bundle(
        store_root=root,
        session_id=session_id,
        run_id=run_id,
        pipeline=resolved,
        document=document,
        chunk_result=chunks if chunks is not None else chunk_result(document),
        lane_results=lanes if lanes is not None else [npcs_result()],
        evidence=None,
        started_at=STARTED,
        completed_at=COMPLETED,
        kinds=registry().kinds(),
    )
