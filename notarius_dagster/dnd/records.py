"""Shared pieces of D&D records: the record base, one-line names, source references and the
id rule."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from notarius_dagster.engine.contracts import ModuleOutput
from notarius_dagster.engine.lanes import LaneRule, LaneSpec
from notarius_dagster.engine.models import Chunk, SourceDocument, SourceRef
from notarius_dagster.engine.validators import ValidationContext

_BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)


def _is_control(ch: str) -> bool:
    """A character that breaks or reorders a line: C0/C1 controls (newline and tab included),
    the Unicode line and paragraph separators, and the bidirectional controls."""
    return unicodedata.category(ch) in ("Cc", "Zl", "Zp") or ch in _BIDI_CONTROLS


def _single_line(value: str) -> str:
    # The message names the rule, never the value (it is the model's text).
    if any(_is_control(ch) for ch in value):
        raise ValueError("must be one line of text without control characters")
    return value


OneLine = Annotated[str, AfterValidator(_single_line)]
"""A name or a title: one line, no control characters. Names come from the model, which read
them in the transcript; they are pasted back into later prompts (a line break followed by
`[3] MATT: ...` would forge a unit marker there), printed on terminals and shown in pages, so a
record whose name breaks a line is refused, not repaired."""


def one_line(text: str) -> str:
    """`text` on one line, for a prompt or a terminal: every control character and run of
    white space becomes one space (for names stored before `OneLine` existed, or read from a
    file someone wrote)."""
    return " ".join("".join(" " if _is_control(ch) else ch for ch in text).split())


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
