"""Scene gating (docs/lanes.md, `combat-turns`, "Scene gating"). A scene record authorizes
the combat LLM for a chunk only when it is the one record whose id, source id and inclusive
unit range all equal the chunk's, and its kind is combat. Array position, overlap, adjacency,
titles and summaries are never consulted, and no second classification policy is added: the
scene lane's mixed-scene precedence already decided."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from notarius_dagster.dnd.scene_descriptions.model import SceneDescription
from notarius_dagster.engine.models import Chunk, RunWarning

GATE_POLICY = "exact-scene-match-v1"
Verdict = Literal["combat", "not_combat", "uncovered"]

# Reason categories of an uncovered chunk: fixed phrases, so a warning can never carry prose.
NO_RECORD = "no scene record has this chunk id"
DUPLICATE = "several scene records have this chunk id"
SOURCE_MISMATCH = "the scene record's source id differs from the chunk's"
RANGE_MISMATCH = "the scene record's unit range differs from the chunk's"
_MAX_ID_CHARS = 80


@dataclass(frozen=True)
class GateDecision:
    verdict: Verdict
    reason: str | None = None

    def warning(self, chunk: Chunk, lane_id: str | None) -> RunWarning:
        """The bounded, content-safe warning for an uncovered chunk: its id and the reason
        category only."""
        assert self.verdict == "uncovered" and self.reason is not None
        missing = self.reason == NO_RECORD
        chunk_id = chunk.chunk_id[:_MAX_ID_CHARS]
        return RunWarning(
            stage="extract",
            lane=lane_id,
            chunk_id=chunk_id,
            code="scene_coverage_missing" if missing else "scene_coverage_mismatch",
            message=f"chunk {chunk_id!r}: no exact scene classification ({self.reason}); "
            "combat extraction skipped with an empty result",
        )


def decide(scenes: Sequence[SceneDescription], chunk: Chunk) -> GateDecision:
    """The gate for one chunk, from the approved scene records."""
    same_id = [s for s in scenes if s.scene_id == chunk.chunk_id]
    if not same_id:
        return GateDecision("uncovered", NO_RECORD)
    if len(same_id) > 1:
        return GateDecision("uncovered", DUPLICATE)
    scene = same_id[0]
    if scene.source_id != chunk.source_id:
        return GateDecision("uncovered", SOURCE_MISMATCH)
    if (scene.start_unit_id, scene.end_unit_id) != (
        chunk.start_unit_id,
        chunk.end_unit_id,
    ):
        return GateDecision("uncovered", RANGE_MISMATCH)
    return GateDecision("combat" if scene.kind == "combat" else "not_combat")
