"""Shared pieces of D&D records: the record base, source references and the id rule."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict, Field

from notarius_dagster.engine.contracts import ModuleOutput
from notarius_dagster.engine.lanes import LaneRule, LaneSpec
from notarius_dagster.engine.models import Chunk, SourceDocument, SourceRef
from notarius_dagster.engine.validators import ValidationContext


class Record(BaseModel):
    """Base of every D&D record: strict, and every record cites its source."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    source_refs: list[SourceRef] = Field(min_length=1)


def refs_from_unit_ids(unit_ids: Iterable[int], chunk: Chunk) -> list[SourceRef]:
    """Turn cited unit ids into ranges. Ids in the chunk are grouped into runs that are
    contiguous by chunk position; ids outside the chunk are kept as single-unit references so
    the `refs_in_chunk` validator can reject them (never dropped silently)."""
    positions = {u: i for i, u in enumerate(chunk.unit_ids)}
    inside = sorted({u for u in unit_ids if u in positions}, key=positions.__getitem__)
    outside = sorted({u for u in unit_ids if u not in positions})
    refs: list[SourceRef] = []
    run: list[int] = []
    for unit in inside:
        if run and positions[unit] != positions[run[-1]] + 1:
            refs.append(
                SourceRef(source_id=chunk.source_id, start_unit_id=run[0], end_unit_id=run[-1])
            )
            run = []
        run.append(unit)
    if run:
        refs.append(SourceRef(source_id=chunk.source_id, start_unit_id=run[0], end_unit_id=run[-1]))
    refs.extend(
        SourceRef(source_id=chunk.source_id, start_unit_id=u, end_unit_id=u) for u in outside
    )
    return refs


def sort_refs(refs: Iterable[SourceRef], document: SourceDocument) -> list[SourceRef]:
    """Deduplicate and order references by document position."""
    positions = document.position_index()
    unique = {(r.source_id, r.start_unit_id, r.end_unit_id): r for r in refs}
    return sorted(
        unique.values(),
        key=lambda r: (positions.get(r.start_unit_id, -1), positions.get(r.end_unit_id, -1)),
    )


def first_position(refs: Sequence[SourceRef], document: SourceDocument) -> int:
    positions = document.position_index()
    return min(
        (positions.get(r.start_unit_id, len(positions)) for r in refs), default=len(positions)
    )


def ids_rule(not_unique: str | None = None) -> LaneRule:
    """Normalize rule `<prefix>.ids`: every record has an id and ids are unique. `not_unique`
    is the message for repeated ids (default `<items>: ids are not unique`)."""

    def check(lane: LaneSpec, ctx: ValidationContext, output: ModuleOutput) -> list[str]:
        records = (output.payload or {}).get(lane.items_field, [])
        ids = [r.get(lane.id_field) for r in records]
        problems = [f"{lane.items_field}[{i}]: missing id" for i, v in enumerate(ids) if not v]
        if len(set(ids)) != len(ids):
            problems.append(not_unique or f"{lane.items_field}: ids are not unique")
        return problems

    return LaneRule(stage="normalize", name="ids", check=check)
