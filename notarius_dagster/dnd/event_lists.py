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
from notarius_dagster.engine.contracts import (
    Extractor,
    MergeRequest,
    ModuleOutput,
    NormalizeRequest,
)
from notarius_dagster.engine.digest import digest_of
from notarius_dagster.engine.lanes import LaneModules, NoOptionsModule
from notarius_dagster.engine.models import SourceDocument, SourceRef
from notarius_dagster.engine.support import CITATION_WINDOW


def event_modules(
    grounded: Grounded,
    *,
    convert: Converters | None = None,
    context: PromptContext | None = None,
    gate: Callable[[LLMListExtractor], Extractor] | None = None,
    name_lists: Sequence[str] = (),
    npc_side: str | None = None,
    merge: type[EventMerger] | None = None,
) -> LaneModules:
    """An event lane's modules: LLM extraction whose `grounded` (name field, id field) pairs
    are filled by NPC grounding (`convert` and `context` as in `llm_extractor`, `gate` in
    front of the model; `name_lists` and `npc_side` as in `grounded_payload`), the event
    merge (`merge`: a lane's subclass of `EventMerger`) and normalize, and the rules
    `<prefix>.npc_grounding` (extract) and `<prefix>.ids` (normalize)."""
    to_payload = grounded_payload(grounded, convert, name_lists=name_lists, npc_side=npc_side)
    return LaneModules(
        extract=llm_extractor(to_payload, context=context, wrap=gate),
        merge=merge or EventMerger,
        normalize=EventNormalizer,
        rules=(grounding_rule(grounded), ids_rule()),
    )


def _refs(record: dict[str, Any]) -> list[SourceRef]:
    return [SourceRef(**r) for r in record["source_refs"]]


def _spans(refs: Sequence[SourceRef], positions: Mapping[int, int]) -> list[tuple[int, int]]:
    return [(positions.get(r.start_unit_id, -1), positions.get(r.end_unit_id, -1)) for r in refs]


def _overlap(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> bool:
    return any(s1 <= e2 and s2 <= e1 for s1, e1 in a for s2, e2 in b)


def _chunk_span(extract: ModuleOutput, positions: Mapping[int, int]) -> tuple[int, int] | None:
    """The document positions of an extract's chunk (first, last), from the runner's
    provenance; None when it does not say."""
    span = extract.provenance.get("unit_span")
    if not isinstance(span, list) or len(span) != 2:
        return None
    first, last = positions.get(span[0]), positions.get(span[1])
    return (first, last) if first is not None and last is not None else None


def _straddling(
    earlier: list[tuple[int, int]],
    earlier_chunk: tuple[int, int] | None,
    later: list[tuple[int, int]],
    later_chunk: tuple[int, int] | None,
) -> bool:
    """Two pieces of one event cut by a chunk border: each piece cites only what the other's
    chunk does not hold (the earlier all before the later chunk, the later all after the
    earlier chunk), and the later citations start just after the earlier ones end, at most
    `CITATION_WINDOW` uncited units between them (the context a citation may carry)."""
    if not earlier or not later or earlier_chunk is None or later_chunk is None:
        return False
    end, start = max(e for _, e in earlier), min(s for s, _ in later)
    apart = end < later_chunk[0] and start > earlier_chunk[1]
    return apart and 0 < start - end <= CITATION_WINDOW + 1


class EventMerger(NoOptionsModule):
    """Appends records in chunk order. A record equal to an earlier one in every field but
    its citations is the same event seen twice, and its citations are unioned into the
    earlier record instead of repeating it, when its citations overlap the earlier one's by
    document position (two overlapping chunks), or when it comes from a later chunk and the
    two are the pieces of an event whose lines straddle the border between their chunks
    (`_straddling`, which reads each chunk's span from the runner's provenance). Everything
    else is kept."""

    def merge(self, request: MergeRequest) -> ModuleOutput:
        doc = request.document
        positions = doc.position_index()
        merged: list[dict[str, Any]] = []
        by_key: dict[str, list[tuple[int, dict[str, Any]]]] = {}
        chunks = [_chunk_span(extract, positions) for extract in request.extracts]
        for number, extract in enumerate(request.extracts):
            assert extract.payload is not None
            for record in extract.payload[self.lane.items_field]:
                key = digest_of(self.identity(record))
                spans = _spans(_refs(record), positions)
                same = next(
                    (
                        r
                        for seen_in, r in by_key.get(key, [])
                        if _overlap(_spans(_refs(r), positions), spans)
                        or (
                            seen_in < number
                            and _straddling(
                                _spans(_refs(r), positions), chunks[seen_in], spans, chunks[number]
                            )
                        )
                        or (seen_in < number and self.one_event(record))
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
                by_key.setdefault(key, []).append((number, copy))
        return ModuleOutput(payload=self.lane.envelope(doc.source_id, merged))

    def identity(self, record: dict[str, Any]) -> dict[str, Any]:
        """What must be equal for two records to be one event: every field but citations and
        id (a lane may say otherwise)."""
        return {k: v for k, v in record.items() if k not in ("source_refs", "id")}

    def one_event(self, record: dict[str, Any]) -> bool:
        """Whether a record equal in every field but citations to one of an earlier chunk is
        that event wherever each cites (a lane's own rule; none here)."""
        return False


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
