"""One section per registered lane, as its `LaneSpec` declares (`report_table`): its title,
what its records are called, its columns and its layout (a table; a table split into rounds;
cards; scenes). The D&D lanes declare theirs in their `lane.py`, a lane from anywhere else the
same way, so a new lane gets its section without a line here. Every value goes through
`markup.text`; ids and hrefs come from the page context's anchors; class names from the fixed
tables here."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from pydantic import BaseModel

from notarius_dagster.engine.lanes import LaneSpec, ReportColumn, ReportLayout, ReportTable
from notarius_dagster.report.context import PageContext, PlacedScene, field_value, linked_id
from notarius_dagster.report.inputs import LaneOutput
from notarius_dagster.report.markup import link, text

SCENE_KINDS = frozenset({"combat", "narrative", "recap", "meta"})
NONE = '<span class="none">&#8212;</span>'


def _or_none(value: object) -> str:
    return NONE if value is None or value == "" else text(value)


def _names(names: Sequence[object]) -> str:
    return ", ".join(text(n) for n in names) if names else NONE


def _table_spec(lane: LaneOutput) -> ReportTable:
    assert lane.spec is not None
    return lane.spec.report_table


def cell(ctx: PageContext, record: BaseModel, column: ReportColumn) -> str:
    """A record's value in `column` (see `ReportColumn`)."""
    value = field_value(record, column.field)
    if column.link is not None:
        return ctx.named(value, linked_id(record, column))
    if isinstance(value, list | tuple):
        return _names(value)
    for known, label in column.labels:
        if value == known and type(value) is type(known):  # 0 is no False
            return text(label)
    if value is None or value == "":
        return NONE
    return text(column.template.format(value))


def _cites(ctx: PageContext, lane: LaneOutput, i: int, label: str) -> str:
    return ctx.citations.cite(lane.refs(i), ctx.citer(lane, i, label))


def _table(head: Sequence[str], rows: Sequence[str]) -> str:
    cells = "".join(f"<th>{h}</th>" for h in head)
    return (
        f'<table class="records"><thead><tr>{cells}</tr></thead><tbody>'
        + "".join(rows)
        + "</tbody></table>"
    )


def _row(anchor: str, cells: Sequence[str]) -> str:
    return f'<tr class="record" id="{anchor}">' + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"


def _records_table(ctx: PageContext, lane: LaneOutput, positions: Iterable[int]) -> str:
    """A table of the records at `positions`: the record's id first (under the lane's
    `id_header`, default its noun), its citations last, the lane's columns between them;
    every row is the record's anchor, so citations and names link to it."""
    assert lane.items is not None
    table = _table_spec(lane)
    columns = table.column_specs()
    rows = []
    for i in positions:
        record_id = lane.record_id(i)
        cells = [cell(ctx, lane.items[i], c) for c in columns]
        rows.append(
            _row(ctx.anchor(lane, i), [text(record_id), *cells, _cites(ctx, lane, i, record_id)])
        )
    head = [text(table.id_header or table.noun.capitalize()), *(text(c.header) for c in columns)]
    return _table([*head, "Cites"], rows)


def table_body(ctx: PageContext, lane: LaneOutput) -> str:
    assert lane.items is not None
    return _records_table(ctx, lane, range(len(lane.items)))


# --- rounds: the table by scene, then by runs of one `group` value ---------------------------


def _runs(
    lane: LaneOutput, group: ReportColumn, positions: list[int]
) -> list[tuple[object, list[int]]]:
    """Consecutive records of the same group value, in order (a fight that restarts at round 1
    is a new run, not merged with an earlier round 1)."""
    assert lane.items is not None
    runs: list[tuple[object, list[int]]] = []
    for i in positions:
        value = field_value(lane.items[i], group.field)
        if runs and runs[-1][0] == value:
            runs[-1][1].append(i)
        else:
            runs.append((value, [i]))
    return runs


def rounds_body(ctx: PageContext, lane: LaneOutput) -> str:
    assert lane.items is not None
    group = _table_spec(lane).group
    fights: list[tuple[PlacedScene | None, list[int]]] = []
    for i in range(len(lane.items)):
        scene = ctx.scene_at(ctx.citations.first_unit(lane.refs(i)))
        if fights and fights[-1][0] == scene:
            fights[-1][1].append(i)
        else:
            fights.append((scene, [i]))
    parts = []
    for scene, members in fights:
        where = (
            f"In {link(scene.anchor, text(scene.scene_id))}: {text(scene.title)}"
            if scene
            else "Outside any scene"
        )
        parts.append(f'<div class="fight"><h3>{where}</h3>')
        runs = _runs(lane, group, members) if group is not None else [(None, members)]
        for value, run in runs:
            if group is not None:
                title = text(
                    f"{group.header} {value}" if value is not None else f"{group.header} not stated"
                )
                parts.append(f"<h4>{title}</h4>")
            parts.append(_records_table(ctx, lane, run))
        parts.append("</div>")
    return "".join(parts)


# --- cards: the records other lanes name ---------------------------------------------------


def cards_body(ctx: PageContext, lane: LaneOutput) -> str:
    """A card per record: the first column as its heading, its id, the other columns (a list
    as `Header: items` when it has any, a value as a line), its appearances, the scenes they
    are in and the records that name it (`link` columns)."""
    assert lane.items is not None
    columns = _table_spec(lane).column_specs()
    cards = []
    for i, record in enumerate(lane.items):
        anchor = ctx.anchor(lane, i)
        record_id = lane.record_id(i)
        name = field_value(record, columns[0].field) if columns else record_id
        refs = lane.refs(i)
        scenes: list[PlacedScene] = []
        for ref in refs:
            scene = ctx.scene_at(ref.start_unit_id)
            if scene is not None and scene not in scenes:
                scenes.append(scene)
        named_by = (
            ctx.grounded.get(record_id, []) if ctx.card_anchors.get(record_id) == anchor else []
        )
        parts = [
            f'<article class="record npc" id="{anchor}"><h3>{text(name)}</h3>',
            f'<p class="id">{text(record_id)}</p>',
        ]
        for column in columns[1:]:
            value = field_value(record, column.field)
            if isinstance(value, list | tuple):
                if value:
                    parts.append(f'<p class="aliases">{text(column.header)}: {_names(value)}</p>')
            else:
                parts.append(f'<p class="desc">{cell(ctx, record, column)}</p>')
        cites = ctx.citations.cite(refs, ctx.citer(lane, i, str(name)))
        parts.append(f"<p>Appearances ({len(refs)}): {cites}</p>")
        if scenes:
            parts.append(
                "<p>Scenes: " + ", ".join(link(s.anchor, text(s.scene_id)) for s in scenes) + "</p>"
            )
        if named_by:
            parts.append(
                "<p>Named in: " + ", ".join(link(c.anchor, c.label_html) for c in named_by) + "</p>"
            )
        cards.append("".join(parts) + "</article>")
    return '<div class="cards">' + "".join(cards) + "</div>"


# --- scenes: ranges the other sections' records lie in -------------------------------------


def _contents_by_scene(ctx: PageContext) -> dict[str, dict[str, int]]:
    """Per scene anchor: how many records of each other section start inside it."""
    counts: dict[str, dict[str, int]] = {}
    for lane in ctx.inputs.outputs:
        if lane.spec is None or lane.items is None or _table_spec(lane).layout == "scenes":
            continue
        noun = _table_spec(lane).noun
        for i in range(len(lane.items)):
            scene = ctx.scene_at(ctx.citations.first_unit(lane.refs(i)))
            if scene is not None:
                per = counts.setdefault(scene.anchor, {})
                per[noun] = per.get(noun, 0) + 1
    return counts


def scenes_body(ctx: PageContext, lane: LaneOutput) -> str:
    """A list of the scenes: the columns are the badge (a kind), the heading and the summary."""
    assert lane.items is not None
    kind_col, title_col, summary_col = _table_spec(lane).column_specs()[:3]
    contents = _contents_by_scene(ctx)
    nouns = [spec.report_table.noun for spec in ordered(ctx.inputs.registered)]
    items = []
    for i, scene in enumerate(lane.items):
        anchor = ctx.anchor(lane, i)
        kind_value = field_value(scene, kind_col.field)
        kind = f"kind-{kind_value}" if kind_value in SCENE_KINDS else "kind-other"
        inside = contents.get(anchor, {})
        summary = ", ".join(f"{text(noun)}: {inside[noun]}" for noun in nouns if noun in inside)
        items.append(
            f'<li class="record scene {kind}" id="{anchor}">'
            f'<h3><span class="badge {kind}">{text(kind_value)}</span> '
            f"{text(field_value(scene, title_col.field))}</h3>"
            f'<p class="summary">{_or_none(field_value(scene, summary_col.field))}</p>'
            f'<p class="meta">{text(lane.record_id(i))} &#183; units '
            f"{ctx.citations.cite_whole(lane.refs(i)[0])}"
            + (f" &#183; {summary}" if summary else "")
            + "</p></li>"
        )
    return '<ol class="scenes">' + "".join(items) + "</ol>"


LAYOUTS: dict[ReportLayout, Callable[[PageContext, LaneOutput], str]] = {
    "table": table_body,
    "rounds": rounds_body,
    "cards": cards_body,
    "scenes": scenes_body,
}


def ordered(specs: Iterable[LaneSpec]) -> list[LaneSpec]:
    """Lanes in page order: their report table's `order`, then lane id."""
    return sorted(specs, key=lambda s: (s.report_table.order, s.lane_id))


def render_sections(ctx: PageContext) -> list[tuple[str, str, str]]:
    """(section id, title, html) for every registered lane, in page order, present or not."""
    out = []
    for spec in ordered(ctx.inputs.registered):
        table = spec.report_table
        lanes = [lane for lane in ctx.inputs.outputs if lane.spec is spec]
        parts = []
        for lane in lanes:
            count = len(lane.items or ())
            parts.append(f'<p class="lane">lane {text(lane.lane_id)} &#183; {count} record(s)</p>')
            body = LAYOUTS[table.layout](ctx, lane) if count else '<p class="empty">No records.</p>'
            parts.append(body)
        if not lanes:
            parts.append(f'<p class="empty">{_absent(ctx, spec.kind)}</p>')
        out.append((table.section_id, text(table.title), "".join(parts)))
    return out


def _absent(ctx: PageContext, kind: str) -> str:
    """Why a lane has no section content: it was rejected, or is not in the pipeline."""
    configured = [lane for lane in ctx.inputs.lanes if lane.kind == kind]
    if not configured:
        return "No lane of this kind is part of this pipeline."
    names = ", ".join(text(lane.lane_id) for lane in configured)
    return (
        f"Lane {names} published no output ({text(configured[0].status)}): see "
        '<a href="#issues">rejections and warnings</a>.'
    )
