"""The `scene-descriptions` lane's own modules: a scene is a chunk, so the extract conversion
takes identity and range from the chunk, the merge concatenates and the normalizer only orders."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from notarius_dagster.dnd.llm_extract import PayloadWithWarnings
from notarius_dagster.engine.contracts import (
    ExtractRequest,
    MergeRequest,
    ModuleOutput,
    NormalizeRequest,
)
from notarius_dagster.engine.lanes import LaneSpec, NoOptionsModule


def scene_payload(
    lane: LaneSpec, answer: dict[str, Any], request: ExtractRequest
) -> PayloadWithWarnings:
    """One record for the chunk: identity and range from the chunk, prose from the model."""
    chunk = request.chunk
    record = {
        "scene_id": chunk.chunk_id,
        "source_id": chunk.source_id,
        "start_unit_id": chunk.start_unit_id,
        "end_unit_id": chunk.end_unit_id,
        "kind": answer["kind"],
        "title": answer["title"].strip() or chunk.chunk_id,
        "summary": answer["summary"].strip(),
        "source_ref": chunk.source_ref().model_dump(),
    }
    return lane.envelope(chunk.source_id, [record]), []


def _position(record: dict[str, Any], positions: Mapping[int, int]) -> tuple[int, int]:
    return (positions.get(record["start_unit_id"], -1), positions.get(record["end_unit_id"], -1))


class SceneMerger(NoOptionsModule):
    """Concatenates the one record of each accepted chunk, in chunk order. Scenes are never
    deduplicated: two chunks are two scenes, and a repeated scene id is for the validator to
    reject, not for the merge to hide."""

    def merge(self, request: MergeRequest) -> ModuleOutput:
        records: list[dict[str, Any]] = []
        for extract in request.extracts:
            assert extract.payload is not None
            records.extend(extract.payload[self.lane.items_field])
        return ModuleOutput(payload=self.lane.envelope(request.document.source_id, records))


class SceneNormalizer(NoOptionsModule):
    """Orders scenes by source position (start, then end; ties keep chunk order). The ids
    stay the chunk ids: combat gating matches scenes to chunks by exactly that id."""

    def normalize(self, request: NormalizeRequest) -> ModuleOutput:
        assert request.merged.payload is not None
        positions = request.document.position_index()
        merged = request.merged.payload[self.lane.items_field]
        records = sorted(merged, key=lambda r: _position(r, positions))
        return ModuleOutput(payload=self.lane.envelope(request.document.source_id, records))
