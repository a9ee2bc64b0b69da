"""Extract, merge and normalize modules of the `item-events` lane."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from notarius_dagster.dnd.grounding import ground_names
from notarius_dagster.dnd.item_events.model import ITEMS, KIND, ItemEventAnswer
from notarius_dagster.dnd.llm_extract import LLMListExtractor, envelope
from notarius_dagster.dnd.records import refs_from_unit_ids
from notarius_dagster.engine.contracts import ExtractRequest
from notarius_dagster.engine.models import RunWarning

PROMPT_PATH = Path(__file__).with_name("prompt.md")
GROUNDED = (("from", "from_npc_id"), ("to", "to_npc_id"))


def _name(value: str | None) -> str | None:
    return (value or "").strip() or None


def answer_to_payload(answer: dict[str, Any], request: ExtractRequest
                      ) -> tuple[dict[str, Any], list[RunWarning]]:
    """Records keyed as the schema says (`from`, not `from_`)."""
    records = []
    for item in answer[ITEMS]:
        refs = refs_from_unit_ids(item["unit_ids"], request.chunk)
        records.append({"item": item["item"].strip(), "event": item["event"],
                        "from": _name(item["from"]), "to": _name(item["to"]),
                        "from_npc_id": None, "to_npc_id": None, "quantity": item["quantity"],
                        "source_refs": [r.model_dump() for r in refs]})
    warnings = ground_names(records, GROUNDED, request)
    return envelope(KIND, request.chunk.source_id, ITEMS, records), warnings


def build_extractor(options: dict[str, Any]) -> LLMListExtractor:
    return LLMListExtractor(options, lane_kind=KIND, prompt_path=PROMPT_PATH,
                            answer_model=ItemEventAnswer, to_payload=answer_to_payload)
