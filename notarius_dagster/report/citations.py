"""Citations between records and transcript units, resolved by document position.

A reference is an inclusive range of unit ids *in document order* (bundle.md): the units it
covers are found by position in the chunk map's order, never by id arithmetic. The index
remembers which records cite which units, so the transcript can list exactly the cited units,
mark them, and link each back to its records; and every citation link it hands out points at a
unit the transcript section will list (the anchor exists)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from notarius_dagster.engine.models import SourceRef
from notarius_dagster.report.markup import link, text, unit_anchor


class DocumentOrder:
    """Unit positions: the chunk map's order, then any other known unit (evidence units)."""

    def __init__(self, unit_order: Sequence[int], extra: Iterable[int] = ()) -> None:
        self.order: tuple[int, ...] = tuple(dict.fromkeys([*unit_order, *extra]))
        self.position = {unit_id: pos for pos, unit_id in enumerate(self.order)}

    def covered(self, ref: SourceRef) -> tuple[int, ...]:
        """The units `ref` covers; only its endpoints when they cannot be placed in order."""
        start = self.position.get(ref.start_unit_id)
        end = self.position.get(ref.end_unit_id)
        if start is None or end is None or start > end:
            return tuple(dict.fromkeys((ref.start_unit_id, ref.end_unit_id)))
        return self.order[start : end + 1]

    def sort_key(self, unit_id: int) -> tuple[int, int]:
        """Known units by position; unknown ones after them, by id (deterministic)."""
        pos = self.position.get(unit_id)
        return (0, pos) if pos is not None else (1, unit_id)


@dataclass(frozen=True)
class Citer:
    """A record that cites units: its anchor and its (escaped) label."""

    anchor: str
    label_html: str


@dataclass
class CitationIndex:
    """Which records cite which units (`marks`), and which units must be listed (`listed`)."""

    order: DocumentOrder
    marks: dict[int, list[Citer]] = field(default_factory=dict)
    listed: set[int] = field(default_factory=set)

    def cite(self, refs: Sequence[SourceRef], citer: Citer) -> str:
        """Register `citer`'s references and return their links (one per reference)."""
        links = []
        for ref in refs:
            units = self.order.covered(ref)
            for unit_id in units:
                cited_by = self.marks.setdefault(unit_id, [])
                if citer not in cited_by:
                    cited_by.append(citer)
            self.listed.update(units)
            links.append(self.ref_link(ref))
        return '<span class="cites">' + " ".join(links) + "</span>"

    def cite_whole(self, ref: SourceRef) -> str:
        """A whole-range citation (a scene): listed at its first unit, its units not marked."""
        self.listed.add(ref.start_unit_id)
        return self.ref_link(ref)

    @staticmethod
    def ref_link(ref: SourceRef) -> str:
        if ref.start_unit_id == ref.end_unit_id:
            label = text(ref.start_unit_id)
        else:
            label = f"{text(ref.start_unit_id)}&#8211;{text(ref.end_unit_id)}"
        return link(unit_anchor(ref.start_unit_id), label, "cite")

    def first_unit(self, refs: Sequence[SourceRef]) -> int | None:
        """The cited unit that comes first in the document (None: no reference)."""
        starts = [ref.start_unit_id for ref in refs]
        return min(starts, key=self.order.sort_key) if starts else None
