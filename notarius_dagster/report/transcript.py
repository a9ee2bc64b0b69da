"""The transcript section: the cited units in document order, each with its anchor
`u-<unit_id>` (what every citation link targets), its text when the bundle published an
evidence context, and links back to the records that cite it. Rendered after the record
sections, which register their citations in the page context."""

from __future__ import annotations

from notarius_dagster.report.context import PageContext, field_value
from notarius_dagster.report.inputs import EvidenceUnit
from notarius_dagster.report.markup import link, text, unit_anchor


def _clock(value: object) -> str | None:
    """A timestamp in seconds as h:mm:ss (None: not a number)."""
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value < 1e9:
        return None
    seconds = int(value)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def _note(ctx: PageContext, with_text: int) -> str:
    evidence = ctx.inputs.evidence
    if evidence is None:
        return (
            '<p class="note">The evidence context is off for this bundle: cited units are '
            "listed by id only, without their text. Enable <code>evidence_context</code> "
            "on the profile&#8217;s json output to publish the text of cited units "
            "(docs/bundle.md).</p>"
        )
    lanes = ", ".join(text(lane) for lane in evidence.lanes)
    return (
        f'<p class="note">Text from the evidence context: {with_text} unit(s) in '
        f"{len(evidence.contexts)} context(s), window {text(evidence.window_units)}, "
        f"lanes {lanes}. Units cited only by other lanes are listed by id.</p>"
    )


def _gap(skipped: int) -> str:
    return f'<li class="gap">&#8230; {skipped} unit(s) not shown &#8230;</li>'


def _trailing_gap(items: list[str], total: int, last_known: int) -> bool:
    if total - last_known > 1 and last_known >= 0:
        items.append(_gap(total - last_known - 1))
    return True


def _scene_dividers(ctx: PageContext) -> dict[int, list[str]]:
    """A divider before the first unit of each scene (a record of a `scenes` lane): its id,
    kind and title (the lane's first two report columns)."""
    dividers: dict[int, list[str]] = {}
    for lane in ctx.inputs.outputs:
        if lane.spec is None or lane.items is None:
            continue
        table = lane.spec.report_table
        if table.layout != "scenes":
            continue
        kind, title = table.column_specs()[:2]
        for i, scene in enumerate(lane.items):
            dividers.setdefault(lane.refs(i)[0].start_unit_id, []).append(
                f'<li class="divider">Scene {link(ctx.anchor(lane, i), text(lane.record_id(i)))}'
                f" &#183; {text(field_value(scene, kind.field))} &#183; "
                f"{text(field_value(scene, title.field))}</li>"
            )
    return dividers


def _unit(ctx: PageContext, unit_id: int, unit: EvidenceUnit | None) -> str:
    anchor = unit_anchor(unit_id)
    cited_by = ctx.citations.marks.get(unit_id, [])
    state = "cited" if cited_by else ("context" if unit is not None else "listed")
    parts = [f'<li class="unit {state}" id="{anchor}">', link(anchor, text(unit_id), "uid")]
    if cited_by:
        parts.append('<span class="mark">cited</span>')
    if unit is not None:
        speaker = unit.metadata.get("speaker")
        clock = _clock(unit.metadata.get("start"))
        if clock:
            parts.append(f'<span class="clock">{text(clock)}</span>')
        if speaker is not None:
            parts.append(f'<span class="speaker">{ctx.speakers.html(str(speaker))}</span>')
        parts.append(f'<span class="text">{text(unit.text)}</span>')
    else:
        missing = (
            "text not published"
            if ctx.inputs.evidence is None
            else "text not in the evidence context"
        )
        parts.append(f'<span class="missing">{missing}</span>')
    if cited_by:
        parts.append(
            '<span class="cited-by">cited by '
            + ", ".join(link(c.anchor, c.label_html) for c in cited_by)
            + "</span>"
        )
    return "".join(parts) + "</li>"


def render_transcript(ctx: PageContext) -> tuple[str, int, int]:
    """(html, units listed, units shown with text)."""
    order = ctx.citations.order
    units: dict[int, EvidenceUnit] = {}
    if ctx.inputs.evidence is not None:
        for context in ctx.inputs.evidence.contexts:
            for unit in context.units:
                units.setdefault(unit.unit_id, unit)
    listed = sorted(ctx.citations.listed | set(units), key=order.sort_key)
    dividers = _scene_dividers(ctx)
    items: list[str] = []
    last_known, closed = -1, False  # position of the last known unit; trailing gap written
    for unit_id in listed:
        pos = order.position.get(unit_id)
        if pos is not None:
            if pos - last_known > 1:
                items.append(_gap(pos - last_known - 1))
            last_known = pos
        elif not closed:  # unknown units come last: close the known part first
            closed = _trailing_gap(items, len(order.order), last_known)
        items.extend(dividers.get(unit_id, []))
        items.append(_unit(ctx, unit_id, units.get(unit_id)))
    if listed and not closed:
        _trailing_gap(items, len(order.order), last_known)
    shown = sum(1 for unit_id in listed if unit_id in units)
    body = _note(ctx, shown) + (
        '<ol class="transcript">' + "".join(items) + "</ol>"
        if listed
        else '<p class="empty">No unit is cited.</p>'
    )
    return body, len(listed), shown
