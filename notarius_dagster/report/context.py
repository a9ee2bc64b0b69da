"""What every section of the page shares, computed once before any section renders: record
anchors (so a combat turn can link to the NPC card of its actor before the cards are written),
the citation index, where each scene lies in the document, and which records name each NPC."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from notarius_dagster.report.citations import CitationIndex, Citer, DocumentOrder
from notarius_dagster.report.inputs import (
    CombatTurnList,
    InteractionList,
    ItemEventList,
    LaneOutput,
    NpcList,
    ReportInputs,
    Scene,
    SceneList,
    SpellList,
)
from notarius_dagster.report.markup import Anchors, text
from notarius_dagster.report.speakers import Speakers


@dataclass(frozen=True)
class PlacedScene:
    scene: Scene
    anchor: str
    first: int  # document positions of its first and last unit
    last: int


@dataclass
class PageContext:
    inputs: ReportInputs
    citations: CitationIndex
    record_anchors: dict[tuple[str, int], str] = field(default_factory=dict)
    npc_anchors: dict[str, str] = field(default_factory=dict)
    npc_names: dict[str, str] = field(default_factory=dict)
    scene_anchors: dict[str, str] = field(default_factory=dict)
    scenes: list[PlacedScene] = field(default_factory=list)
    grounded: dict[str, list[Citer]] = field(default_factory=dict)
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

    def named(self, name: str | None, npc_id: str | None) -> str:
        """A character name, linked to its NPC card when grounding gave it an NPC id."""
        if name is None:
            return '<span class="none">&#8212;</span>'
        anchor = self.npc_anchors.get(npc_id or "")
        return f'<a href="#{anchor}">{text(name)}</a>' if anchor else text(name)


def _record_ids(lane: LaneOutput) -> Sequence[str]:
    """The ids of a lane's records in file order (none when the report cannot read it)."""
    return [record.id for record in lane.document.records] if lane.document else []


def _ground(ctx: PageContext, npc_id: str | None, citer: Citer) -> None:
    if npc_id:
        named_by = ctx.grounded.setdefault(npc_id, [])
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
        for position, record_id in enumerate(_record_ids(lane)):
            ctx.record_anchors[(lane.lane_id, position)] = anchors.claim(lane.lane_id, record_id)
    position_of = ctx.citations.order.position
    for lane in inputs.outputs:
        doc = lane.document
        if isinstance(doc, NpcList):
            for i, npc in enumerate(doc.records):
                ctx.npc_anchors.setdefault(npc.id, ctx.anchor(lane, i))
                ctx.npc_names.setdefault(npc.id, npc.name)
        elif isinstance(doc, SceneList):
            for i, scene in enumerate(doc.records):
                anchor = ctx.anchor(lane, i)
                ctx.scene_anchors.setdefault(scene.id, anchor)
                first = position_of.get(scene.source_ref.start_unit_id)
                last = position_of.get(scene.source_ref.end_unit_id)
                if first is not None and last is not None and first <= last:
                    ctx.scenes.append(PlacedScene(scene, anchor, first, last))
        elif isinstance(doc, CombatTurnList):
            for i, turn in enumerate(doc.records):
                _ground(ctx, turn.actor_npc_id, ctx.citer(lane, i, turn.id))
        elif isinstance(doc, SpellList):
            for i, spell in enumerate(doc.records):
                _ground(ctx, spell.caster_npc_id, ctx.citer(lane, i, spell.id))
        elif isinstance(doc, ItemEventList):
            for i, event in enumerate(doc.records):
                _ground(ctx, event.from_npc_id, ctx.citer(lane, i, event.id))
                _ground(ctx, event.to_npc_id, ctx.citer(lane, i, event.id))
        elif isinstance(doc, InteractionList):
            for i, interaction in enumerate(doc.records):
                _ground(ctx, interaction.npc_id, ctx.citer(lane, i, interaction.id))
    ctx.scenes.sort(key=lambda s: (s.first, s.last))
    return ctx
