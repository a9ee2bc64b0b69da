"""One section per D&D lane kind: scenes in order, NPC cards, combat rounds, spells cast,
items changing hands, NPC interactions. Every value goes through `markup.text`; ids and hrefs
come from the page context's anchors; class names from the fixed tables here."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from notarius_dagster.report.context import PageContext, PlacedScene
from notarius_dagster.report.inputs import (
    CombatTurn,
    CombatTurnList,
    InteractionList,
    ItemEventList,
    LaneOutput,
    NpcList,
    Ref,
    SceneList,
    SpellList,
    TableList,
)
from notarius_dagster.report.markup import link, text

SCENE_KINDS = frozenset({"combat", "narrative", "recap", "meta"})
NONE = '<span class="none">&#8212;</span>'


@dataclass(frozen=True)
class SectionSpec:
    """A kind's section: its fixed id, its title, what its records are called, its body."""

    section_id: str
    title: str
    noun: str
    body: Callable[[PageContext, LaneOutput], str]


def _or_none(value: object) -> str:
    return NONE if value is None or value == "" else text(value)


def _names(names: Sequence[str]) -> str:
    return ", ".join(text(n) for n in names) if names else NONE


def _cites(ctx: PageContext, lane: LaneOutput, i: int, label: str, refs: Sequence[Ref]) -> str:
    return ctx.citations.cite(refs, ctx.citer(lane, i, label))


def _table(head: Sequence[str], rows: Sequence[str]) -> str:
    cells = "".join(f"<th>{h}</th>" for h in head)
    return (
        f'<table class="records"><thead><tr>{cells}</tr></thead><tbody>'
        + "".join(rows)
        + "</tbody></table>"
    )


def _row(anchor: str, cells: Sequence[str]) -> str:
    return f'<tr class="record" id="{anchor}">' + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"


class _Cited(Protocol):
    """A record shown as a table row: every such kind has an id and citations."""

    @property
    def id(self) -> str: ...

    @property
    def source_refs(self) -> tuple[Ref, ...]: ...


Tabled = TypeVar("Tabled", bound=_Cited)


def _records_table(
    ctx: PageContext,
    lane: LaneOutput,
    numbered: Iterable[tuple[int, Tabled]],
    head: Sequence[str],
    cells: Callable[[Tabled], Sequence[str]],
) -> str:
    """A table of records (each with its position in the lane file): the record's id first,
    its citations last, and between them the kind's own `cells` under `head`; every row is
    the record's anchor, so citations and names link to it."""
    rows = [
        _row(
            ctx.anchor(lane, i),
            [text(r.id), *cells(r), _cites(ctx, lane, i, r.id, r.source_refs)],
        )
        for i, r in numbered
    ]
    return _table([*head, "Cites"], rows)


# --- scenes --------------------------------------------------------------------------------


def _contents_by_scene(ctx: PageContext) -> dict[str, dict[str, int]]:
    """Per scene anchor: how many records of each other section start inside it."""
    counts: dict[str, dict[str, int]] = {}
    for lane in ctx.inputs.outputs:
        spec = SECTIONS.get(lane.kind)
        if spec is None or lane.document is None or isinstance(lane.document, SceneList):
            continue
        for refs in _refs_of(lane):
            scene = ctx.scene_at(ctx.citations.first_unit(refs))
            if scene is not None:
                per = counts.setdefault(scene.anchor, {})
                per[spec.noun] = per.get(spec.noun, 0) + 1
    return counts


def _refs_of(lane: LaneOutput) -> list[Sequence[Ref]]:
    """Each record's citations, in file order; none for scenes (a scene is a range itself,
    `source_ref`, and other records are counted inside it) or an unreadable lane."""
    doc = lane.document
    if doc is None or isinstance(doc, SceneList):
        return []
    return [record.source_refs for record in doc.records]


def scenes_body(ctx: PageContext, lane: LaneOutput) -> str:
    assert isinstance(lane.document, SceneList)
    contents = _contents_by_scene(ctx)
    items = []
    for i, scene in enumerate(lane.document.records):
        anchor = ctx.anchor(lane, i)
        kind = f"kind-{scene.kind}" if scene.kind in SCENE_KINDS else "kind-other"
        inside = contents.get(anchor, {})
        summary = ", ".join(
            f"{text(spec.noun)}: {inside[spec.noun]}"
            for spec in SECTIONS.values()
            if spec.noun in inside
        )
        items.append(
            f'<li class="record scene {kind}" id="{anchor}">'
            f'<h3><span class="badge {kind}">{text(scene.kind)}</span> {text(scene.title)}</h3>'
            f'<p class="summary">{_or_none(scene.summary)}</p>'
            f'<p class="meta">{text(scene.id)} &#183; units '
            f"{ctx.citations.cite_whole(scene.source_ref)}"
            + (f" &#183; {summary}" if summary else "")
            + "</p></li>"
        )
    return '<ol class="scenes">' + "".join(items) + "</ol>"


# --- NPCs ----------------------------------------------------------------------------------


def npcs_body(ctx: PageContext, lane: LaneOutput) -> str:
    assert isinstance(lane.document, NpcList)
    cards = []
    for i, npc in enumerate(lane.document.records):
        anchor = ctx.anchor(lane, i)
        scenes: list[PlacedScene] = []
        for ref in npc.source_refs:
            scene = ctx.scene_at(ref.start_unit_id)
            if scene is not None and scene not in scenes:
                scenes.append(scene)
        named_by = ctx.grounded.get(npc.id, []) if ctx.npc_anchors.get(npc.id) == anchor else []
        parts = [
            f'<article class="record npc" id="{anchor}"><h3>{text(npc.name)}</h3>',
            f'<p class="id">{text(npc.id)}</p>',
        ]
        if npc.aliases:
            parts.append(f'<p class="aliases">Also called: {_names(npc.aliases)}</p>')
        parts.append(f'<p class="desc">{_or_none(npc.description)}</p>')
        parts.append(
            f"<p>Appearances ({len(npc.source_refs)}): "
            f"{_cites(ctx, lane, i, npc.name, npc.source_refs)}</p>"
        )
        if scenes:
            parts.append(
                "<p>Scenes: " + ", ".join(link(s.anchor, text(s.scene.id)) for s in scenes) + "</p>"
            )
        if named_by:
            parts.append(
                "<p>Named in: " + ", ".join(link(c.anchor, c.label_html) for c in named_by) + "</p>"
            )
        cards.append("".join(parts) + "</article>")
    return '<div class="cards">' + "".join(cards) + "</div>"


# --- combat --------------------------------------------------------------------------------


def _hit(value: bool | None) -> str:
    return NONE if value is None else ("hit" if value else "miss")


Numbered = list[tuple[int, CombatTurn]]  # turns with their position in the lane file


def _runs(turns: Numbered) -> list[tuple[int | None, Numbered]]:
    """Consecutive turns of the same round, in order (a fight that restarts at round 1 is a
    new run, not merged with an earlier round 1)."""
    runs: list[tuple[int | None, Numbered]] = []
    for i, turn in turns:
        if runs and runs[-1][0] == turn.round:
            runs[-1][1].append((i, turn))
        else:
            runs.append((turn.round, [(i, turn)]))
    return runs


def combat_body(ctx: PageContext, lane: LaneOutput) -> str:
    assert isinstance(lane.document, CombatTurnList)
    fights: list[tuple[PlacedScene | None, Numbered]] = []
    for i, turn in enumerate(lane.document.records):
        scene = ctx.scene_at(ctx.citations.first_unit(turn.source_refs))
        if fights and fights[-1][0] == scene:
            fights[-1][1].append((i, turn))
        else:
            fights.append((scene, [(i, turn)]))
    head = ["Turn", "Actor", "Action", "Targets", "Hit", "Damage", "Effect"]
    parts = []
    for scene, turns in fights:
        where = (
            f"In {link(scene.anchor, text(scene.scene.id))}: {text(scene.scene.title)}"
            if scene
            else "Outside any scene"
        )
        parts.append(f'<div class="fight"><h3>{where}</h3>')
        for round_, members in _runs(turns):
            title = f"Round {text(round_)}" if round_ is not None else "Round not stated"
            table = _records_table(
                ctx,
                lane,
                members,
                head,
                lambda t: [
                    ctx.named(t.actor, t.actor_npc_id),
                    text(t.action),
                    _names(t.targets),
                    _hit(t.outcome.hit),
                    _or_none(t.outcome.damage),
                    _or_none(t.outcome.effect),
                ],
            )
            parts.append(f"<h4>{title}</h4>{table}")
        parts.append("</div>")
    return "".join(parts)


# --- spells, items, interactions -----------------------------------------------------------


def _level(level: int | None) -> str:
    if level is None:
        return NONE
    return "cantrip" if level == 0 else f"level {text(level)}"


def spells_body(ctx: PageContext, lane: LaneOutput) -> str:
    assert isinstance(lane.document, SpellList)
    return _records_table(
        ctx,
        lane,
        enumerate(lane.document.records),
        ["Cast", "Spell", "Level", "Caster", "Targets", "Outcome"],
        lambda s: [
            text(s.spell),
            _level(s.level),
            ctx.named(s.caster, s.caster_npc_id),
            _names(s.targets),
            _or_none(s.outcome),
        ],
    )


def items_body(ctx: PageContext, lane: LaneOutput) -> str:
    assert isinstance(lane.document, ItemEventList)
    return _records_table(
        ctx,
        lane,
        enumerate(lane.document.records),
        ["Event", "Item", "What", "Quantity", "From", "To"],
        lambda e: [
            text(e.item),
            text(e.event),
            _or_none(e.quantity),
            ctx.named(e.from_, e.from_npc_id),
            ctx.named(e.to, e.to_npc_id),
        ],
    )


def interactions_body(ctx: PageContext, lane: LaneOutput) -> str:
    assert isinstance(lane.document, InteractionList)
    return _records_table(
        ctx,
        lane,
        enumerate(lane.document.records),
        ["Interaction", "NPC", "Kind", "Participants", "Summary"],
        lambda x: [
            ctx.named(x.npc, x.npc_id),
            text(x.kind),
            _names(x.participants),
            _or_none(x.summary),
        ],
    )


# In page order. The scenes section renders first so a scene's contents can be counted from
# the context alone (it does not depend on other sections having rendered).
SECTIONS: dict[str, SectionSpec] = {
    "dnd/scene-description-list": SectionSpec("scenes", "Scenes", "scenes", scenes_body),
    "dnd/npc-list": SectionSpec("npcs", "NPCs", "NPCs", npcs_body),
    "dnd/combat-turn-list": SectionSpec("combat", "Combat", "combat turns", combat_body),
    "dnd/spell-list": SectionSpec("spells", "Spells cast", "spells", spells_body),
    "dnd/item-event-list": SectionSpec("items", "Items changing hands", "item events", items_body),
    "dnd/npc-interaction-list": SectionSpec(
        "interactions", "NPC interactions", "NPC interactions", interactions_body
    ),
}


def table_body(ctx: PageContext, lane: LaneOutput) -> str:
    """Any other lane: the table its `LaneSpec` declares (`report_table`, read by the loader)."""
    assert isinstance(lane.document, TableList)
    return _records_table(
        ctx,
        lane,
        enumerate(lane.document.records),
        [text(lane.document.noun.capitalize()), *(text(h) for h in lane.document.headers)],
        lambda r: [_or_none(c) for c in r.cells],
    )


def render_sections(ctx: PageContext) -> list[tuple[str, str, str]]:
    """(section id, title, html) for every D&D kind, in page order, present or not; then one
    section per other lane the report read with its `LaneSpec` (`lane-<lane id>`)."""
    out = []
    for kind, spec in SECTIONS.items():
        lanes = [lane for lane in ctx.inputs.outputs if lane.kind == kind and lane.document]
        parts = []
        for lane in lanes:
            count = _record_count(lane)
            parts.append(f'<p class="lane">lane {text(lane.lane_id)} &#183; {count} record(s)</p>')
            parts.append(spec.body(ctx, lane) if count else '<p class="empty">No records.</p>')
        if not lanes:
            parts.append(f'<p class="empty">{_absent(ctx, kind)}</p>')
        out.append((spec.section_id, spec.title, "".join(parts)))
    for lane in ctx.inputs.outputs:
        if isinstance(lane.document, TableList):
            count = _record_count(lane)
            body = table_body(ctx, lane) if count else '<p class="empty">No records.</p>'
            intro = f'<p class="lane">lane {text(lane.lane_id)} &#183; {count} record(s)</p>'
            # a lane id is [a-z0-9-]: safe as an id
            out.append((f"lane-{lane.lane_id}", text(lane.document.title), intro + body))
    return out


def _record_count(lane: LaneOutput) -> int:
    return len(lane.document.records) if lane.document else 0


def _absent(ctx: PageContext, kind: str) -> str:
    """Why a kind has no section content: its lane was rejected, or is not in the pipeline."""
    configured = [lane for lane in ctx.inputs.lanes if lane.kind == kind]
    if not configured:
        return "No lane of this kind is part of this pipeline."
    names = ", ".join(text(lane.lane_id) for lane in configured)
    return (
        f"Lane {names} published no output ({text(configured[0].status)}): see "
        '<a href="#issues">rejections and warnings</a>.'
    )
