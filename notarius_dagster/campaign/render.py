"""The campaign page: `codex.html` beside `codex.json`, rendered from the codex only, with the
session report's escaping rules (`report/markup.py`: every value escaped by `text`, every id
from `token`; inline CSS, no script, a Content-Security-Policy that loads nothing).

Every appearance, item event and scene links to the cited line of its session's report,
`../../.reports/<session>.html#u-<unit>` (the reports live at `<bundles>/.reports/`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from notarius_dagster.campaign.model import Codex
from notarius_dagster.engine.models import SourceRef
from notarius_dagster.report.markup import text, token, unit_anchor
from notarius_dagster.report.render import CSP, CSS

REPORTS_FROM_PAGE = "../../.reports"


def report_href(session: str, unit_id: int) -> str:
    """The link to a unit of a session's report, relative to the campaign page."""
    return f"{REPORTS_FROM_PAGE}/{token(session)}.html#{unit_anchor(unit_id)}"


def _refs(session: str, refs: Sequence[SourceRef]) -> str:
    links = []
    for r in refs:
        label = (
            f"{r.start_unit_id}"
            if r.start_unit_id == r.end_unit_id
            else (f"{r.start_unit_id}–{r.end_unit_id}")
        )
        links.append(f'<a href="{report_href(session, r.start_unit_id)}">{text(label)}</a>')
    return ", ".join(links) or '<span class="none">—</span>'


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    if not body:
        return '<p class="empty">none</p>'
    head = "".join(f"<th>{text(h)}</th>" for h in headers)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _texts(*values: object) -> list[str]:
    """A row of plain values, each escaped as text (most codex tables hold nothing else)."""
    return [text(v) for v in values]


def _session_link(session: str) -> str:
    return f'<a href="{REPORTS_FROM_PAGE}/{token(session)}.html">{text(session)}</a>'


def render_codex_page(codex: Codex) -> str:
    """The page's HTML (the same codex always gives the same bytes)."""
    title = codex.title or codex.campaign
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        f"<title>{text(title)} — campaign codex</title><style>{CSS}</style></head><body>",
        f"<h1>{text(title)}</h1>",
        f'<p class="meta">Campaign <code>{text(codex.campaign)}</code>: '
        f"{sum(s.published for s in codex.sessions)} of {len(codex.sessions)} session(s) "
        f"published, {len(codex.npcs)} NPC(s), {len(codex.item_events)} item event(s), "
        f"{sum(s.count for s in codex.spells)} spell(s) cast.</p>",
        '<nav><ul><li><a href="#sessions">Sessions</a></li><li><a href="#npcs">NPCs</a></li>'
        '<li><a href="#possibly-same">Possibly the same</a></li>'
        '<li><a href="#items">Items</a></li><li><a href="#spells">Spells</a></li>'
        '<li><a href="#scenes">Scenes</a></li></ul></nav>',
        '<h2 id="sessions">Sessions</h2>',
        _table(
            ["#", "session", "number", "date", "title", "published"],
            (
                [
                    text(s.position),
                    _session_link(s.id) if s.published else text(s.id),
                    text(s.number),
                    text(s.date),
                    text(s.title),
                    text("yes" if s.published else "no"),
                ]
                for s in codex.sessions
            ),
        ),
        '<h2 id="npcs">NPCs</h2>',
    ]
    for npc in codex.npcs:
        rows = [
            [
                _session_link(a.session),
                text(a.name),
                text(", ".join(a.aliases)),
                _refs(a.session, a.source_refs),
            ]
            for a in npc.appearances
        ]
        merges = "".join(
            f"<li>{text(m.session)} {text(m.npc_id)} → {text(m.to_session)} {text(m.to_npc_id)}: "
            f"{text(m.reason)} (<code>{text(m.key)}</code>)</li>"
            for m in npc.merges
        )
        parts.append(
            f'<h3 id="{token(npc.id)}">{text(npc.name)}'
            + (' <span class="badge">known</span>' if npc.known else "")
            + "</h3>"
            + f'<p class="meta">aliases: {text(", ".join(npc.aliases)) or "—"}; first seen '
            f"{text(npc.first_session)}, last seen {text(npc.last_session)}</p>"
            + _table(["session", "name", "aliases", "cited lines"], rows)
            + (f'<ul class="note">{merges}</ul>' if merges else "")
        )
    parts.append('<h2 id="possibly-same">Possibly the same (not merged)</h2>')
    parts.append(
        _table(
            ["NPC", "NPC", "signal", "name"],
            (
                [
                    f'<a href="#{token(p.a)}">{text(p.a)}</a>',
                    f'<a href="#{token(p.b)}">{text(p.b)}</a>',
                    text(p.reason),
                    text(p.key),
                ]
                for p in codex.possibly_same
            ),
        )
    )
    parts.append('<h2 id="items">Items</h2><h3>Who has what</h3>')
    parts.append(
        _table(
            ["item", "status", "holder", "since", "events"],
            (
                _texts(h.item, h.status, h.holder, f"{h.session} {h.event_id}", h.events)
                for h in codex.item_holders
            ),
        )
    )
    parts.append("<h3>Ledger</h3>")
    parts.append(
        _table(
            ["#", "session", "item", "event", "from", "to", "quantity", "cited lines"],
            (
                [
                    text(e.position),
                    text(e.session),
                    text(e.item),
                    text(e.event),
                    text(e.from_),
                    text(e.to),
                    text(e.quantity),
                    _refs(e.session, e.source_refs),
                ]
                for e in codex.item_events
            ),
        )
    )
    parts.append('<h2 id="spells">Spells</h2><h3>By caster</h3>')
    parts.append(
        _table(
            ["caster", "spell", "count", "sessions"],
            (
                _texts(s.caster, s.spell, s.count, ", ".join(s.sessions))
                for s in codex.spells_by_caster
            ),
        )
    )
    parts.append("<h3>By spell</h3>")
    parts.append(
        _table(
            ["spell", "count", "casters", "sessions"],
            (
                _texts(s.spell, s.count, ", ".join(s.casters), ", ".join(s.sessions))
                for s in codex.spells
            ),
        )
    )
    parts.append('<h2 id="scenes">Scenes</h2>')
    parts.append(
        _table(
            ["session", "scene", "kind", "title", "lines"],
            (
                [
                    text(s.session),
                    text(s.scene_id),
                    text(s.kind),
                    text(s.title),
                    _refs(
                        s.session,
                        [
                            SourceRef(
                                source_id=s.session,
                                start_unit_id=s.start_unit_id,
                                end_unit_id=s.end_unit_id,
                            )
                        ],
                    ),
                ]
                for s in codex.scenes
            ),
        )
    )
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
