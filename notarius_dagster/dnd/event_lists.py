"""What the event lanes (combat turns, spells, item events, NPC interactions) share:
`event_modules(...)`, their extraction with NPC grounding, merge, normalize and rules. Records
are events in time, so the merge keeps chunk order and only folds a record into an earlier one
when it is the same event seen twice (overlapping chunks), and the normalizer orders by source
position and numbers the events (`<id prefix>-0001`, ...)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from notarius_dagster.dnd.grounding import Grounded, grounded_payload, grounding_rule
from notarius_dagster.dnd.llm_extract import (
    Converters,
    LLMListExtractor,
    PromptContext,
    llm_extractor,
)
from notarius_dagster.dnd.records import first_position, ids_rule, sort_refs
from notarius_dagster.engine.contracts import MergeRequest, ModuleOutput, NormalizeRequest
from notarius_dagster.engine.digest import digest_of
from notarius_dagster.engine.lanes import LaneModules, NoOptionsModule
from notarius_dagster.engine.models import SourceDocument, SourceRef


def event_modules(
    grounded: Grounded,
    *,
    convert: Converters | None = None,
    context: PromptContext | None = None,
    gate: Callable[[LLMListExtractor], Any] | None = None,
    name_lists: Sequence[str] = (),
    npc_side: str | None = None,
) -> LaneModules:
    """An event lane's modules: LLM extraction whose `grounded` (name field, id field) pairs
    are filled by NPC grounding (`convert` and `context` as in `llm_extractor`, `gate` in
    front of the model; `name_lists` and `npc_side` as in `grounded_payload`), the event
    merge and normalize, and the rules `<prefix>.npc_grounding` (extract) and `<prefix>.ids`
    (normalize)."""
    to_payload = grounded_payload(grounded, convert, name_lists=name_lists, npc_side=npc_side)
    return LaneModules(
        extract=llm_extractor(to_payload, context=context, wrap=gate),
        merge=EventMerger,
        normalize=EventNormalizer,
        rules=(grounding_rule(grounded), ids_rule()),
    )


def _refs(record: dict[str, Any]) -> list[SourceRef]:
    return [SourceRef(**r) for r in record["source_refs"]]


def _spans(refs: Sequence[SourceRef], positions: Mapping[int, int]) -> list[tuple[int, int]]:
    return [(positions.get(r.start_unit_id, -1), positions.get(r.end_unit_id, -1)) for r in refs]


def _overlap(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> bool:
    return any(s1 <= e2 and s2 <= e1 for s1, e1 in a for s2, e2 in b)


class EventMerger(NoOptionsModule):
    """Appends records in chunk order. A record equal to an earlier one in every field but
    its citations, whose citations overlap the earlier one's by document position, is the
    same event extracted from two overlapping chunks: its citations are unioned into the
    earlier record instead of repeating it. Everything else is kept."""

    def merge(self, request: MergeRequest) -> ModuleOutput:
        doc = request.document
        positions = doc.position_index()
        merged: list[dict[str, Any]] = []
        by_key: dict[str, list[dict[str, Any]]] = {}
        for extract in request.extracts:
            assert extract.payload is not None
            for record in extract.payload[self.lane.items_field]:
                key = digest_of({k: v for k, v in record.items() if k not in ("source_refs", "id")})
                spans = _spans(_refs(record), positions)
                same = next(
                    (
                        r
                        for r in by_key.get(key, [])
                        if _overlap(_spans(_refs(r), positions), spans)
                    ),
                    None,
                )
                if same is not None:
                    same["source_refs"] = [
                        r.model_dump() for r in sort_refs([*_refs(same), *_refs(record)], doc)
                    ]
                    continue
                copy = dict(record)
                merged.append(copy)
                by_key.setdefault(key, []).append(copy)
        return ModuleOutput(payload=self.lane.envelope(doc.source_id, merged))


class EventNormalizer(NoOptionsModule):
    """Orders records by their first citation's document position (ties keep merge order)
    and assigns `<prefix>-0001`, ... in that order: the same merged input always gets the
    same ids."""

    def normalize(self, request: NormalizeRequest) -> ModuleOutput:
        assert request.merged.payload is not None
        doc = request.document
        lane = self.lane
        records = ordered(request.merged.payload[lane.items_field], doc)
        out = []
        for number, record in enumerate(records, start=1):
            body = {k: v for k, v in record.items() if k != "id"}
            body["source_refs"] = [r.model_dump() for r in sort_refs(_refs(record), doc)]
            out.append({"id": f"{lane.id_prefix}-{number:04d}", **body})
        return ModuleOutput(payload=lane.envelope(doc.source_id, out))


def ordered(records: Sequence[dict[str, Any]], document: SourceDocument) -> list[dict[str, Any]]:
    """Records in source order (stable: ties keep their given order)."""
    return sorted(records, key=lambda r: first_position(_refs(r), document))
