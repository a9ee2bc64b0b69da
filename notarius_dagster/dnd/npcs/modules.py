"""Extract, merge and normalize modules of the `npcs` lane."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from notarius_dagster.dnd.llm_extract import LLMListExtractor, canonical_name, envelope
from notarius_dagster.dnd.npcs.model import KIND, NpcAnswer
from notarius_dagster.dnd.records import first_position, refs_from_unit_ids, sort_refs
from notarius_dagster.engine.contracts import (
    ExtractRequest,
    MergeRequest,
    ModuleOutput,
    NormalizeRequest,
)
from notarius_dagster.engine.models import RunWarning, SourceRef

PROMPT_PATH = Path(__file__).with_name("prompt.md")


def answer_to_payload(
    answer: dict[str, Any], request: ExtractRequest
) -> tuple[dict[str, Any], list[RunWarning]]:
    records = []
    for item in answer["npcs"]:
        refs = refs_from_unit_ids(item["unit_ids"], request.chunk)
        records.append(
            {
                "name": item["name"].strip(),
                "aliases": [a.strip() for a in item["aliases"] if a.strip()],
                "description": item["description"].strip(),
                "source_refs": [r.model_dump() for r in refs],
            }
        )
    return envelope(KIND, request.chunk.source_id, "npcs", records), []


def build_extractor(options: dict[str, Any]) -> LLMListExtractor:
    return LLMListExtractor(
        options,
        lane_kind=KIND,
        prompt_path=PROMPT_PATH,
        answer_model=NpcAnswer,
        to_payload=answer_to_payload,
    )


class NpcMerger:
    """Deduplicates NPCs by normalized name or alias: the first mention gives the name and
    description, aliases and references are unioned."""

    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options

    def merge(self, request: MergeRequest) -> ModuleOutput:
        merged: list[dict[str, Any]] = []
        by_key: dict[str, dict[str, Any]] = {}
        for extract in request.extracts:
            assert extract.payload is not None
            for npc in extract.payload["npcs"]:
                keys = {canonical_name(n) for n in [npc["name"], *npc["aliases"]]} - {""}
                target = next((by_key[k] for k in keys if k in by_key), None)
                if target is None:
                    target = {
                        "name": npc["name"],
                        "aliases": [],
                        "description": npc["description"],
                        "source_refs": [],
                    }
                    merged.append(target)
                names = {canonical_name(target["name"]), *map(canonical_name, target["aliases"])}
                for alias in [npc["name"], *npc["aliases"]]:
                    if canonical_name(alias) not in names:
                        target["aliases"].append(alias)
                        names.add(canonical_name(alias))
                if not target["description"]:
                    target["description"] = npc["description"]
                target["source_refs"].extend(npc["source_refs"])
                for key in names:
                    by_key.setdefault(key, target)
        for npc in merged:
            refs = sort_refs((SourceRef(**r) for r in npc["source_refs"]), request.document)
            npc["source_refs"] = [r.model_dump() for r in refs]
        return ModuleOutput(payload=envelope(KIND, request.document.source_id, "npcs", merged))


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", canonical_name(name)).strip("-")[:50] or "unnamed"


class NpcNormalizer:
    """Orders NPCs by first citation and assigns stable ids `npc-<name-slug>` (a numeric
    suffix only when two names share a slug)."""

    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options

    def normalize(self, request: NormalizeRequest) -> ModuleOutput:
        assert request.merged.payload is not None
        doc = request.document
        npcs = [dict(n) for n in request.merged.payload["npcs"]]
        npcs.sort(
            key=lambda n: (
                first_position([SourceRef(**r) for r in n["source_refs"]], doc),
                canonical_name(n["name"]),
            )
        )
        used: set[str] = set()
        for npc in npcs:
            base = f"npc-{slug(npc['name'])}"
            candidate, n = base, 2
            while candidate in used:
                candidate, n = f"{base}-{n}", n + 1
            used.add(candidate)
            npc["id"] = candidate
            npc["aliases"] = sorted(set(npc["aliases"]), key=str.casefold)
        return ModuleOutput(
            payload=envelope(KIND, doc.source_id, "npcs", [{"id": n.pop("id"), **n} for n in npcs])
        )
