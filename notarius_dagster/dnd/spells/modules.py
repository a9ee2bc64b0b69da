"""Extract, merge and normalize modules of the `spells` lane."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from notarius_dagster.dnd.grounding import ground_names
from notarius_dagster.dnd.llm_extract import LLMListExtractor, envelope
from notarius_dagster.dnd.records import refs_from_unit_ids
from notarius_dagster.dnd.spells.model import ITEMS, KIND, SpellAnswer
from notarius_dagster.engine.contracts import ExtractRequest
from notarius_dagster.engine.models import RunWarning

PROMPT_PATH = Path(__file__).with_name("prompt.md")
GROUNDED = (("caster", "caster_npc_id"),)


def answer_to_payload(answer: dict[str, Any], request: ExtractRequest
                      ) -> tuple[dict[str, Any], list[RunWarning]]:
    records = []
    for item in answer[ITEMS]:
        refs = refs_from_unit_ids(item["unit_ids"], request.chunk)
        outcome = (item["outcome"] or "").strip()
        records.append({"caster": item["caster"].strip(), "caster_npc_id": None,
                        "spell": item["spell"].strip(), "level": item["level"],
                        "targets": [t.strip() for t in item["targets"] if t.strip()],
                        "outcome": outcome or None,
                        "source_refs": [r.model_dump() for r in refs]})
    warnings = ground_names(records, GROUNDED, request)
    return envelope(KIND, request.chunk.source_id, ITEMS, records), warnings


def build_extractor(options: dict[str, Any]) -> LLMListExtractor:
    return LLMListExtractor(options, lane_kind=KIND, prompt_path=PROMPT_PATH,
                            answer_model=SpellAnswer, to_payload=answer_to_payload)
