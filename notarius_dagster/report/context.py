"""What every section of the page shares, computed once before any section renders: record
anchors (so a combat turn can link to the NPC card of its actor before the cards are written),
the citation index, where each scene lies in the document, and which records name each NPC."""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel

from notarius_dagster.engine.lanes import ReportColumn
from notarius_dagster.report.citations import CitationIndex, Citer, DocumentOrder
from notarius_dagster.report.inputs import LaneOutput, ReportInputs
from notarius_dagster.report.markup import Anchors, text
from notarius_dagster.report.speakers import Speakers


def field_value(record: BaseModel, path: str) -> object:
    """The value at `path` of a record: a field by name or alias (`from`), `a.b` a field of
    a nested model (None where a step is None)."""
    value: object = record
    for part in path.split("."):
        if not isinstance(value, BaseModel):
            return None
        fields = type(value).model_fields
        name = next((n for n, info in fields.items() if part in (n, info.alias)), part)
        value = getattr(value, name, None)
    return value


def linked_id(record: BaseModel, column: ReportColumn) -> str | None:
    """The id of the record a `link` column's value names, if it names one."""
    value = field_value(record, column.link) if column.link else None
    return value if isinstance(value, str) and value else None


@dataclass(frozen=True)
class PlacedScene:
    """A record of a `scenes` lane where it lies in the document (positions of its first and
    last unit)."""

    scene_id: str
    title: object
    anchor: str
    first: int
    last: int


@dataclass
class PageContext:
    inputs: ReportInputs
    citations: CitationIndex
    record_anchors: dict[tuple[str, int], str] = field(default_factory=dict)
    card_anchors: dict[str, str] = field(default_factory=dict)
    """Record id -> anchor of the records shown as cards (the records `link` columns name)."""
    scene_anchors: dict[str, str] = field(default_factory=dict)
    scenes: list[PlacedScene] = field(default_factory=list)
    grounded: dict[str, list[Citer]] = field(default_factory=dict)
    """Card record id -> the records that name it, as citers."""
    speakers: Speakers = field(default_factory=Speakers)

    def anchor(self, lane: LaneOutput, position: int) -> str:
        return self.record_anchors[(lane.lane_id, position)]

    def citer(self, lane: LaneOutput, position: int, label: str) -> Citer:
        return Citer(self.anchor(lane, position), text(label))

    def scene_at(self, unit_id: int | None) -> PlacedScene | None:
        """The scene whose range holds `unit_id` by document position (None: none does)."""
        pos = None if unit_id is None else self.citations.order.position.get(unit_id)
        if pos is None:
            return None
        return next((s for s in self.scenes if s.first <= pos <= s.last), None)

    def named(self, name: object, record_id: str | None) -> str:
        """A name, linked to the card of the record it names (a grounded NPC) if shown."""
        if name is None:
            return '<span class="none">&#8212;</span>'
        anchor = self.card_anchors.get(record_id or "")
        return f'<a href="#{anchor}">{text(name)}</a>' if anchor else text(name)


def _ground(ctx: PageContext, record_id: str | None, citer: Citer) -> None:
    if record_id:
        named_by = ctx.grounded.setdefault(record_id, [])
        if citer not in named_by:
            named_by.append(citer)


def build_context(inputs: ReportInputs, speakers: Speakers | None = None) -> PageContext:
    evidence_units = (
        [u.unit_id for c in inputs.evidence.contexts for u in c.units] if (inputs.evidence) else []
    )
    ctx = PageContext(
        inputs,
        CitationIndex(DocumentOrder(inputs.unit_order, evidence_units)),
        speakers=speakers or Speakers(),
    )
    anchors = Anchors()
    for lane in inputs.outputs:
        for position in range(len(lane.items or ())):
            ctx.record_anchors[(lane.lane_id, position)] = anchors.claim(
                lane.lane_id, lane.record_id(position)
            )
    position_of = ctx.citations.order.position
    for lane in inputs.outputs:
        if lane.spec is None or lane.items is None:
            continue
        table = lane.spec.report_table
        columns = table.column_specs()
        for i, record in enumerate(lane.items):
            record_id = lane.record_id(i)
            if table.layout == "cards":
                ctx.card_anchors.setdefault(record_id, ctx.anchor(lane, i))
            elif table.layout == "scenes":
                anchor = ctx.anchor(lane, i)
                ctx.scene_anchors.setdefault(record_id, anchor)
                ref = lane.refs(i)[0]
                first = position_of.get(ref.start_unit_id)
                last = position_of.get(ref.end_unit_id)
                if first is not None and last is not None and first <= last:
                    title = field_value(record, columns[1].field) if len(columns) > 1 else None
                    ctx.scenes.append(PlacedScene(record_id, title, anchor, first, last))
            for column in columns:
                _ground(ctx, linked_id(record, column), ctx.citer(lane, i, record_id))
    ctx.scenes.sort(key=lambda s: (s.first, s.last))
    return ctx
