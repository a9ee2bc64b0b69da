"""The only two ways a value from the bundle reaches the page: as escaped text (`text`) or as
a sanitized anchor id (`token`, `unit_anchor`, `Anchors`). Attributes are never built from raw
text: `id` and `href` values come from the anchor helpers, class names from fixed tables.

`text` escapes more than HTML needs: after `html.escape` (which handles `< > & " '`), `=` and
`:` are written as character references too, so no attribute-shaped (`src=`) or URL-shaped
(`https://`, `javascript:`) sequence from the transcript survives in the page's bytes. The
browser shows the same characters; a byte-level audit of a report can then rely on finding none
of them."""

from __future__ import annotations

import html
import re

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_UNSAFE_TOKEN = re.compile(r"[^A-Za-z0-9_-]+")
_TOKEN_MAX = 80


def text(value: object) -> str:
    """`value` as inert HTML text (None is empty); control characters become U+FFFD."""
    if value is None:
        return ""
    escaped = html.escape(_CONTROL.sub("\ufffd", str(value)), quote=True)
    return escaped.replace("=", "&#61;").replace(":", "&#58;")


def token(value: object) -> str:
    """A safe fragment of an id: letters, digits, `_` and `-` only (never empty)."""
    cleaned = _UNSAFE_TOKEN.sub("-", str(value)).strip("-")[:_TOKEN_MAX]
    return cleaned or "x"


def unit_anchor(unit_id: int) -> str:
    """The anchor of a transcript unit: `u-<unit_id>` (unit ids are integers; a negative id
    keeps its sign as `u--5`, which cannot collide with `u-5`)."""
    return f"u-{int(unit_id)}"


class Anchors:
    """Record anchors `r-<lane>-<record id>`, sanitized and made unique in claim order, so
    the same bundle always yields the same ids and two records never share one."""

    def __init__(self) -> None:
        self._used: set[str] = set()

    def claim(self, lane_id: str, record_id: str) -> str:
        base = f"r-{token(lane_id)}-{token(record_id)}"
        anchor, n = base, 2
        while anchor in self._used:
            anchor, n = f"{base}-{n}", n + 1
        self._used.add(anchor)
        return anchor


def link(anchor: str, label_html: str, css: str = "") -> str:
    """An in-page link; `anchor` must come from the anchor helpers, `label_html` be escaped."""
    cls = f' class="{css}"' if css else ""
    return f'<a{cls} href="#{anchor}">{label_html}</a>'
