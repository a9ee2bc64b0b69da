"""Extract, merge and normalize modules of the `combat-turns` lane. The extractor is the
shared LLM extractor behind the scene gate: only an exact combat scene reaches the model."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from notarius_dagster.dnd.combat_turns.gate import GATE_POLICY, decide
from notarius_dagster.dnd.combat_turns.model import ITEMS, KIND, CombatAnswer
from notarius_dagster.dnd.grounding import ground_names
from notarius_dagster.dnd.llm_extract import LLMListExtractor, envelope
from notarius_dagster.dnd.records import refs_from_unit_ids
from notarius_dagster.engine.contracts import ExtractRequest, ModuleOutput
from notarius_dagster.engine.errors import LaneError
from notarius_dagster.engine.models import RunWarning

PROMPT_PATH = Path(__file__).with_name("prompt.md")
SCENES_SLOT = "scene_descriptions"
SCENE_KIND = "dnd/scene-description-list"
GROUNDED = (("actor", "actor_npc_id"),)


def _text(value: Any) -> str | None:
    text = str(value).strip() if value is not None else ""
    return text or None


def answer_to_payload(answer: dict[str, Any], request: ExtractRequest
                      ) -> tuple[dict[str, Any], list[RunWarning]]:
    records = []
    for item in answer[ITEMS]:
        refs = refs_from_unit_ids(item["unit_ids"], request.chunk)
        outcome = item["outcome"]
        records.append({"round": item["round"], "actor": item["actor"].strip(),
                        "actor_npc_id": None, "action": item["action"].strip(),
                        "targets": [t.strip() for t in item["targets"] if t.strip()],
                        "outcome": {"hit": outcome["hit"], "damage": _text(outcome["damage"]),
                                    "effect": _text(outcome["effect"])},
                        "source_refs": [r.model_dump() for r in refs]})
    warnings = ground_names(records, GROUNDED, request)
    return envelope(KIND, request.chunk.source_id, ITEMS, records), warnings


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
        runner mixes every reference digest into the checkpoint fingerprint already."""
        return {**self.inner.fingerprint_material(), "gate": GATE_POLICY}

    def manifest_metadata(self) -> dict[str, Any]:
        metadata: dict[str, Any] = {**self.inner.manifest_metadata(), "gate": GATE_POLICY}
        with self._lock:
            if self._scene_records is not None:
                metadata["approved_scene_records"] = self._scene_records
        return metadata

    def extract(self, request: ExtractRequest) -> ModuleOutput:
        scenes = self._scenes(request)
        decision = decide(scenes, request.chunk)
        if decision.verdict == "combat":
            return self.inner.extract(request)
        warnings = ((decision.warning(request.chunk, request.context.lane_id),)
                    if decision.verdict == "uncovered" else ())
        return ModuleOutput(payload=envelope(KIND, request.chunk.source_id, ITEMS, []),
                            warnings=warnings, skipped=True)

    def _scenes(self, request: ExtractRequest) -> list[dict[str, Any]]:
        """The approved scene records. A missing or unvalidated artifact is an error, never
        an unbound slot (resolution guarantees the slot is bound)."""
        ref = request.context.references.get(SCENES_SLOT)
        if ref is None:
            raise LaneError(f"required reference {SCENES_SLOT!r} was not prepared")
        if ref.artifact is None or ref.kind != SCENE_KIND:
            raise LaneError(f"reference {SCENES_SLOT!r} holds no validated {SCENE_KIND} artifact")
        scenes = list(ref.artifact.get("scene_descriptions", []))
        with self._lock:
            self._scene_records = len(scenes)
        return scenes


def build_extractor(options: dict[str, Any]) -> SceneGatedCombatExtractor:
    return SceneGatedCombatExtractor(LLMListExtractor(
        options, lane_kind=KIND, prompt_path=PROMPT_PATH, answer_model=CombatAnswer,
        to_payload=answer_to_payload))
