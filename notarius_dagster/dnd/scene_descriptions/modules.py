"""Extract, merge and normalize modules of the `scene-descriptions` lane."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from notarius_dagster.dnd.llm_extract import LLMListExtractor, envelope
from notarius_dagster.dnd.scene_descriptions.model import ITEMS, KIND, SceneAnswer
from notarius_dagster.engine.contracts import (
    ExtractRequest,
    MergeRequest,
    ModuleOutput,
    NormalizeRequest,
)
from notarius_dagster.engine.models import RunWarning

PROMPT_PATH = Path(__file__).with_name("prompt.md")


def answer_to_payload(answer: dict[str, Any], request: ExtractRequest
                      ) -> tuple[dict[str, Any], list[RunWarning]]:
    """One record for the chunk: identity and range from the chunk, prose from the model."""
    chunk = request.chunk
    record = {"scene_id": chunk.chunk_id, "source_id": chunk.source_id,
              "start_unit_id": chunk.start_unit_id, "end_unit_id": chunk.end_unit_id,
              "kind": answer["kind"], "title": answer["title"].strip() or chunk.chunk_id,
              "summary": answer["summary"].strip(),
              "source_ref": chunk.source_ref().model_dump()}
    return envelope(KIND, chunk.source_id, ITEMS, [record]), []


def build_extractor(options: dict[str, Any]) -> LLMListExtractor:
    return LLMListExtractor(options, lane_kind=KIND, prompt_path=PROMPT_PATH,
                            answer_model=SceneAnswer, to_payload=answer_to_payload)


def _position(record: dict[str, Any], positions: Mapping[int, int]) -> tuple[int, int]:
    return (positions.get(record["start_unit_id"], -1), positions.get(record["end_unit_id"], -1))


class SceneMerger:
    """Concatenates the one record of each accepted chunk, in chunk order. Scenes are never
    deduplicated: two chunks are two scenes, and a repeated scene id is for the validator to
    reject, not for the merge to hide."""

    def __init__(self, options: dict[str, Any]) -> None:
        if options:
            raise ValueError(f"unknown option(s): {sorted(options)}")

    def merge(self, request: MergeRequest) -> ModuleOutput:
        records: list[dict[str, Any]] = []
        for extract in request.extracts:
            assert extract.payload is not None
            records.extend(extract.payload[ITEMS])
        return ModuleOutput(payload=envelope(KIND, request.document.source_id, ITEMS, records))


class SceneNormalizer:
    """Orders scenes by source position (start, then end; ties keep chunk order). The ids
    stay the chunk ids: combat gating matches scenes to chunks by exactly that id."""

    def __init__(self, options: dict[str, Any]) -> None:
        if options:
            raise ValueError(f"unknown option(s): {sorted(options)}")

    def normalize(self, request: NormalizeRequest) -> ModuleOutput:
        assert request.merged.payload is not None
        positions = request.document.position_index()
        records = sorted(request.merged.payload[ITEMS], key=lambda r: _position(r, positions))
        return ModuleOutput(payload=envelope(KIND, request.document.source_id, ITEMS, records))
