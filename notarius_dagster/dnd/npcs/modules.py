"""The `npcs` lane's own merge and normalize: NPCs are people, not events, so the merge
deduplicates by name and alias and the normalizer gives ids made from the name. With a
roster bound, the extractor drops player characters (`party_filtered_payload`)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from notarius_dagster.dnd.llm_extract import PayloadWithWarnings, canonical_name, list_payload
from notarius_dagster.dnd.records import first_position, sort_refs
from notarius_dagster.dnd.roster import drop_dm_labels, drop_party, roster_index
from notarius_dagster.engine.contracts import (
    ExtractRequest,
    MergeRequest,
    ModuleOutput,
    NormalizeRequest,
)
from notarius_dagster.engine.lanes import LaneSpec
from notarius_dagster.engine.models import SourceRef


def party_filtered_payload(
    lane: LaneSpec, answer: dict[str, Any], request: ExtractRequest
) -> PayloadWithWarnings:
    """The npcs answer as records, minus player characters when a roster is bound: a record
    whose name or alias is a party member's (character, alias, player or speaker label) is
    dropped, deterministically and before any merge, with one count-only warning; so is one
    named by the DM's label (an alias that is one is removed). Without a roster this is
    `list_payload`."""
    payload, warnings = list_payload(lane, answer, request)
    roster = roster_index(request.context.references, request.context.session_id)
    if roster is None:
        return payload, warnings
    lane_id, chunk_id = request.context.lane_id, request.chunk.chunk_id
    kept, dropped = drop_party(payload[lane.items_field], roster, lane=lane_id, chunk_id=chunk_id)
    kept, dm = drop_dm_labels(
        kept, roster, required=("name",), lists=("aliases",), lane=lane_id, chunk_id=chunk_id
    )
    return lane.envelope(request.chunk.source_id, kept), [*warnings, *dropped, *dm]


def shared_group_names(extracts: Iterable[ModuleOutput]) -> set[str]:
    """Canonical names that two differently named NPCs of one chunk's answer both carry (a
    group's name, as "the Knot Sisters" for Mona and Yuli): the answer said they are two
    people, so such a name identifies neither and never merges anyone."""
    shared: set[str] = set()
    for extract in extracts:
        owner: dict[str, str] = {}
        for npc in (extract.payload or {}).get("npcs", []):
            name = canonical_name(npc["name"])
            for key in {canonical_name(n) for n in [npc["name"], *npc["aliases"]]} - {""}:
                if owner.setdefault(key, name) != name:
                    shared.add(key)
    return shared


class NpcMerger:
    """Deduplicates NPCs by normalized name or alias: the first mention gives the name and
    description, aliases and references are unioned. A name two differently named NPCs of one
    chunk share (`shared_group_names`) merges nothing."""

    def __init__(self, lane: LaneSpec, options: Mapping[str, object]) -> None:
        self.lane = lane
        self.options = options

    def merge(self, request: MergeRequest) -> ModuleOutput:
        merged: list[dict[str, Any]] = []
        by_key: dict[str, dict[str, Any]] = {}
        shared = shared_group_names(request.extracts)
        for extract in request.extracts:
            assert extract.payload is not None
            for npc in extract.payload["npcs"]:
                keys = {canonical_name(n) for n in [npc["name"], *npc["aliases"]]} - {"", *shared}
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
                for key in names - shared:
                    by_key.setdefault(key, target)
        for npc in merged:
            refs = sort_refs((SourceRef(**r) for r in npc["source_refs"]), request.document)
            npc["source_refs"] = [r.model_dump() for r in refs]
        return ModuleOutput(payload=self.lane.envelope(request.document.source_id, merged))


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", canonical_name(name)).strip("-")[:50] or "unnamed"


class NpcNormalizer:
    """Orders NPCs by first citation and assigns stable ids `<prefix>-<name-slug>` (`npc-...`;
    a numeric suffix only when two names share a slug)."""

    def __init__(self, lane: LaneSpec, options: Mapping[str, object]) -> None:
        self.lane = lane
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
            base = f"{self.lane.id_prefix}-{slug(npc['name'])}"
            candidate, n = base, 2
            while candidate in used:
                candidate, n = f"{base}-{n}", n + 1
            used.add(candidate)
            npc["id"] = candidate
            npc["aliases"] = sorted(set(npc["aliases"]), key=str.casefold)
        records = [{"id": n.pop("id"), **n} for n in npcs]
        return ModuleOutput(payload=self.lane.envelope(doc.source_id, records))
