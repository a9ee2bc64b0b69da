"""Extract, merge and normalize modules of the `npc-interactions` lane."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from notarius_dagster.dnd.grounding import NPCS_SLOT, ground_names
from notarius_dagster.dnd.llm_extract import LLMListExtractor, envelope
from notarius_dagster.dnd.npc_interactions.model import ITEMS, KIND, InteractionAnswer
from notarius_dagster.dnd.records import refs_from_unit_ids
from notarius_dagster.engine.contracts import ExtractRequest
from notarius_dagster.engine.models import RunWarning

PROMPT_PATH = Path(__file__).with_name("prompt.md")
GROUNDED = (("npc", "npc_id"),)
MAX_CONTEXT_NPCS = 40


def known_npcs(request: ExtractRequest) -> str:
    """The names of the bound `npcs` artifact (at most 40, in its order), so the model can
    use the same names that grounding will match: names only, no descriptions."""
    ref = request.context.references.get(NPCS_SLOT)
    names = [npc["name"] for npc in ((ref.artifact if ref else None) or {}).get("npcs", [])]
    shown = names[:MAX_CONTEXT_NPCS]
    return "; ".join(shown) if shown else "(none known)"


def answer_to_payload(answer: dict[str, Any], request: ExtractRequest
                      ) -> tuple[dict[str, Any], list[RunWarning]]:
    records = []
    for item in answer[ITEMS]:
        refs = refs_from_unit_ids(item["unit_ids"], request.chunk)
        records.append({"npc": item["npc"].strip(), "npc_id": None,
                        "participants": [p.strip() for p in item["participants"] if p.strip()],
                        "kind": item["kind"], "summary": item["summary"].strip(),
                        "source_refs": [r.model_dump() for r in refs]})
    warnings = ground_names(records, GROUNDED, request)
    return envelope(KIND, request.chunk.source_id, ITEMS, records), warnings


def build_extractor(options: dict[str, Any]) -> LLMListExtractor:
    return LLMListExtractor(options, lane_kind=KIND, prompt_path=PROMPT_PATH,
                            answer_model=InteractionAnswer, to_payload=answer_to_payload,
                            context=known_npcs)
