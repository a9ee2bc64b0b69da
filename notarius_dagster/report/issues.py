"""Rejections and warnings, summarized: counts by lane and validator (rejections) or lane and
code (warnings), then each entry with its content-safe message (bundle.md: messages name a
validator, a JSON path, a reference index or a unit id, never transcript text; they are escaped
all the same). A chunk id links to its scene when a scene record carries that id."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from notarius_dagster.report.context import PageContext
from notarius_dagster.report.markup import link, text

_NONE = '<span class="none">&#8212;</span>'


def _chunk(ctx: PageContext, chunk_id: str | None) -> str:
    if chunk_id is None:
        return _NONE
    anchor = ctx.scene_anchors.get(chunk_id)
    return link(anchor, text(chunk_id)) if anchor else text(chunk_id)


def _table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    cells = "".join(f"<th>{h}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="issues"><thead><tr>{cells}</tr></thead><tbody>{body}</tbody></table>'


def _counts(keys: Sequence[tuple[str, ...]]) -> list[list[str]]:
    return [[text(k) for k in key] + [str(n)] for key, n in sorted(Counter(keys).items())]


def render_issues(ctx: PageContext) -> str:
    rejections, warnings = ctx.inputs.rejections, ctx.inputs.warnings
    parts = [f"<h3>Rejections ({len(rejections)})</h3>"]
    if rejections:
        parts.append(
            _table(
                ["Lane", "Stage", "Validator", "Count"],
                _counts([(r.lane or "-", r.stage, r.validator) for r in rejections]),
            )
        )
        parts.append(
            _table(
                ["Lane", "Stage", "Chunk", "Validator", "Attempts", "Message"],
                [
                    [
                        text(r.lane or "-"),
                        text(r.stage),
                        _chunk(ctx, r.chunk_id),
                        text(r.validator),
                        text(r.attempts if r.attempts is not None else "-"),
                        text(r.message),
                    ]
                    for r in rejections
                ],
            )
        )
    else:
        parts.append('<p class="empty">No output was rejected.</p>')
    parts.append(f"<h3>Warnings ({len(warnings)})</h3>")
    if warnings:
        parts.append(
            _table(["Lane", "Code", "Count"], _counts([(w.lane or "-", w.code) for w in warnings]))
        )
        parts.append(
            _table(
                ["Lane", "Stage", "Chunk", "Code", "Message"],
                [
                    [
                        text(w.lane or "-"),
                        text(w.stage),
                        _chunk(ctx, w.chunk_id),
                        text(w.code),
                        text(w.message),
                    ]
                    for w in warnings
                ],
            )
        )
    else:
        parts.append('<p class="empty">No warnings.</p>')
    return "".join(parts)
