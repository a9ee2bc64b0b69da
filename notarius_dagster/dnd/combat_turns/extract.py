"""The `combat-turns` extractor: the shared LLM extractor behind the scene gate (only an exact
combat scene reaches the model), and the one answer field it converts itself (the outcome)."""

from __future__ import annotations

import threading
from typing import Any

from notarius_dagster.dnd.combat_turns.gate import GATE_POLICY, decide
from notarius_dagster.dnd.llm_extract import LLMListExtractor
from notarius_dagster.dnd.reference_fingerprints import scene_record_fingerprint
from notarius_dagster.dnd.scene_descriptions.model import SceneDescription
from notarius_dagster.engine.contracts import ExtractRequest, ModuleOutput, PreparedReference
from notarius_dagster.engine.errors import LaneError
from notarius_dagster.engine.models import Chunk

SCENES_SLOT = "scene_descriptions"
SCENE_KIND = "dnd/scene-description-list"


def _text(value: object) -> str | None:
    text = str(value).strip() if value is not None else ""
    return text or None


def outcome_record(outcome: dict[str, Any]) -> dict[str, Any]:
    """The answer's outcome as the record keeps it: damage as text (`12` -> `"12"`), blank
    damage or effect as null."""
    return {
        "hit": outcome["hit"],
        "damage": _text(outcome["damage"]),
        "effect": _text(outcome["effect"]),
    }


class SceneGatedCombatExtractor:
    """Runs the combat LLM only for a chunk whose exact scene record says combat. Any other
    chunk gets a typed empty `dnd/combat-turn-list` marked `skipped` (no LLM call, never
    retried); an uncovered chunk also gets one content-safe warning. The scene artifact is
    control context only: it never reaches the prompt, the records, warnings or metadata."""

    def __init__(self, inner: LLMListExtractor) -> None:
        self.inner = inner
        self._lock = threading.Lock()
        self._scene_records: int | None = None

    def fingerprint_material(self) -> dict[str, str]:
        """Prompt and schema hashes plus the gate policy. The scene artifact is not here: the
        runner mixes what `reference_fingerprint` says of it into each chunk's fingerprint."""
        return {**self.inner.fingerprint_material(), "gate": GATE_POLICY}

    def reference_fingerprint(self, slot: str, reference: PreparedReference, chunk: Chunk) -> str:
        """The gate reads only the chunk's own scene record (id, source id, range, kind), so
        only that goes into the chunk's fingerprint; the `npcs` artifact as grounding uses it
        (the inner extractor's answer)."""
        if slot == SCENES_SLOT:
            return scene_record_fingerprint(reference, chunk)
        return self.inner.reference_fingerprint(slot, reference, chunk)

    def manifest_metadata(self) -> dict[str, object]:
        metadata: dict[str, object] = {**self.inner.manifest_metadata(), "gate": GATE_POLICY}
        with self._lock:
            if self._scene_records is not None:
                metadata["approved_scene_records"] = self._scene_records
        return metadata

    def extract(self, request: ExtractRequest) -> ModuleOutput:
        scenes = self._scenes(request)
        decision = decide(scenes, request.chunk)
        if decision.verdict == "combat":
            return self.inner.extract(request)
        warnings = (
            (decision.warning(request.chunk, request.context.lane_id),)
            if decision.verdict == "uncovered"
            else ()
        )
        empty = self.inner.lane.envelope(request.chunk.source_id, [])
        return ModuleOutput(payload=empty, warnings=warnings, skipped=True)

    def _scenes(self, request: ExtractRequest) -> list[SceneDescription]:
        """The approved scene records. A missing or unvalidated artifact is an error, never
        an unbound slot (resolution guarantees the slot is bound)."""
        ref = request.context.references.get(SCENES_SLOT)
        if ref is None:
            raise LaneError(f"required reference {SCENES_SLOT!r} was not prepared")
        if ref.artifact is None or ref.kind != SCENE_KIND:
            raise LaneError(f"reference {SCENES_SLOT!r} holds no validated {SCENE_KIND} artifact")
        scenes = [s for s in ref.records if isinstance(s, SceneDescription)]
        with self._lock:
            self._scene_records = len(scenes)
        return scenes
