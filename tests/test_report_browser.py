"""The session report in a real browser (Debian's Chromium through Playwright, as
tests/test_e2e_browser.py drives it): the page of a real bundle renders from `file://`, a
record's citation link scrolls its transcript line into view and highlights it, nothing is
fetched, nothing logs an error, and hostile transcript text stays text.

Screenshots are kept as test artifacts in $NOTARIUS_TEST_ARTIFACTS (default
var/test-artifacts/); the pictures in docs/report.md are copies of `session-report-top.png`,
`session-report-citation.png` (1,200 px wide) and `session-report-375px.png`."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from notarius_dagster.modules import registry
from notarius_dagster.report import load_bundle, render_report, write_report
from notarius_dagster.report.render import TARGET_BACKGROUND
from tests.browser import artifacts
from tests.test_report import (
    HOSTILE_NAME,
    HOSTILE_UNIT,
    SampleBundle,
    build_sample_bundle,
    hostile_bundle,
)

LANES = registry()

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

SECTIONS = ("scenes", "npcs", "combat", "spells", "items", "interactions", "issues", "transcript")


class Watched:
    """A page with everything it requested, logged as an error, or tried to pop up."""

    def __init__(self, browser: Browser) -> None:
        self.context = browser.new_context(viewport={"width": 1200, "height": 900})
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.context.on("request", lambda request: self.requests.append(request.url))
        self.page: Page = self.context.new_page()
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda exc: self.errors.append(f"page error: {exc}"))
        self.page.on("dialog", self._dialog)

    def _console(self, message: Any) -> None:
        if message.type in ("error", "warning"):
            self.errors.append(f"console {message.type}: {message.text}")

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def only_fetched(self, uri: str) -> list[str]:
        """Requests other than the report itself (fragments are not requests)."""
        return [url for url in self.requests if url.split("#")[0] != uri]


@pytest.fixture
def watched(browser: Browser) -> Iterator[Watched]:
    watched = Watched(browser)
    try:
        yield watched
    finally:
        watched.context.close()


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> SampleBundle:
    return build_sample_bundle(tmp_path_factory.mktemp("report-browser"))


def _background(page: Page, selector: str) -> str:
    return str(page.eval_on_selector(selector, "el => getComputedStyle(el).backgroundColor"))


@pytest.mark.slow
def test_a_citation_link_scrolls_to_its_transcript_line_and_highlights_it(
    sample: SampleBundle, watched: Watched
) -> None:
    from playwright.sync_api import expect

    page, uri = watched.page, sample.report.resolve().as_uri()
    page.goto(uri)
    expect(page).to_have_title("Session sample \u2014 Notarius report")
    expect(page.get_by_role("heading", name="Session sample", level=1)).to_be_visible()
    for section in SECTIONS:
        expect(page.locator(f"section#{section} > h2")).to_be_visible()
    # The double names Gustav, Ornna and Yasha as NPCs; the sample's roster drops Yasha, a
    # player character, so two NPC cards remain.
    expect(page.locator("article.npc")).to_have_count(2)
    # One row per published combat turn (the support check drops the double's turns whose
    # actor the cited lines do not name).
    turns = json.loads((sample.bundle / "lanes" / "combat-turns.json").read_text())
    assert turns["combat_turns"]
    expect(page.locator("#combat tr.record")).to_have_count(len(turns["combat_turns"]))
    # Every unit of the evidence context is listed with its text, besides any cited unit
    # outside it (listed by id).
    evidence = json.loads((sample.bundle / "evidence-context.json").read_text())
    shown = {u["unit_id"] for c in evidence["contexts"] for u in c["units"]}
    expect(page.locator("#transcript li.unit")).to_have_count(sample.metadata["units_listed"])
    expect(page.locator("#transcript li.unit:has(.text)")).to_have_count(len(shown))
    assert sample.metadata["units_with_text"] == len(shown) > 0
    page.screenshot(path=str(artifacts() / "session-report-top.png"))

    card = page.locator("article.npc", has=page.get_by_role("heading", name="Gustav"))
    citation = card.locator("a.cite").first
    href = citation.get_attribute("href")
    assert href is not None and re.fullmatch(r"#u-\d+", href)
    line = page.locator(href)
    expect(line).not_to_be_in_viewport()
    before = _background(page, href)
    citation.click()

    expect(page).to_have_url(re.compile(re.escape(href) + "$"))
    expect(line).to_be_in_viewport()
    assert line.evaluate("el => el.matches(':target')")
    assert _background(page, href) == TARGET_BACKGROUND != before
    expect(line).to_have_class(re.compile(r"\bcited\b"))
    expect(line.locator(".mark")).to_have_text("cited")
    page.screenshot(path=str(artifacts() / "session-report-citation.png"))

    # ... and the line links back to the card, which is highlighted in turn.
    card_id = card.get_attribute("id")
    line.locator(".cited-by").get_by_role("link", name="Gustav").click()
    expect(card).to_be_in_viewport()
    assert _background(page, f"#{card_id}") == TARGET_BACKGROUND

    assert watched.errors == [] and watched.dialogs == []
    assert watched.only_fetched(uri) == []
    for shot in ("session-report-top.png", "session-report-citation.png"):
        assert (artifacts() / shot).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_hostile_transcript_text_stays_text_in_the_browser(
    tmp_path: Path, watched: Watched
) -> None:
    from playwright.sync_api import expect

    bundle = hostile_bundle(tmp_path / "bundle")
    path = write_report(tmp_path / "bundles", "s1", render_report(load_bundle(bundle, LANES)))
    page, uri = watched.page, path.resolve().as_uri()
    page.goto(uri)
    expect(page.locator("#u-1 .text")).to_have_text(HOSTILE_UNIT)
    expect(page.locator("article.npc h3")).to_have_text(HOSTILE_NAME)
    assert page.locator("script, img, iframe, object, embed, link, base, form").count() == 0
    expect(page.locator("body")).to_be_visible()  # the injected </style> did not hide it
    assert watched.dialogs == [] and watched.errors == []
    assert watched.only_fetched(uri) == []


# A word split across lines inside a table cell (what `overflow-wrap: anywhere` did at 375 px,
# letter by letter): every word of up to 24 characters must sit on one line (a Range over its
# characters has one line top; a line may still break after a hyphen, a dash or a slash, as
# browsers do). Longer tokens (a 71-character digest) may break: no phone fits them. The page
# itself must not scroll sideways (a wide table scrolls inside itself).
_LAYOUT_AT_PHONE_WIDTH = """() => {
  const broken = [];
  for (const cell of document.querySelectorAll('td, th, dd')) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const match of node.textContent.matchAll(/[^\\s\\/\u2013\u2014-]+/g)) {
        if (match[0].length > 24) continue;
        const range = document.createRange();
        range.setStart(node, match.index);
        range.setEnd(node, match.index + match[0].length);
        const tops = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
        if (tops.size > 1) broken.push(match[0]);
      }
    }
  }
  return {broken, pageWidth: document.documentElement.scrollWidth,
          viewport: window.innerWidth};
}"""


@pytest.mark.slow
def test_the_report_and_the_codex_are_readable_on_a_phone(
    sample: SampleBundle, browser: Browser, tmp_path: Path
) -> None:
    from notarius_dagster.campaign.store import load_roster, publish_codex
    from notarius_dagster.modules import registry
    from tests.campaign_sessions import ROSTER, SLICES, publish_session, session_lanes

    bundles = tmp_path / "bundles"
    for session in SLICES:
        publish_session(bundles, session, session_lanes(session))
    codex = publish_codex(bundles, load_roster(ROSTER), registry())
    codex_page = bundles / ".campaigns" / codex.codex.campaign / "codex.html"
    context = browser.new_context(viewport={"width": 375, "height": 812}, is_mobile=True)
    try:
        page = context.new_page()
        for name, path in (("session-report", sample.report), ("campaign-codex", codex_page)):
            page.goto(path.as_uri())
            layout = page.evaluate(_LAYOUT_AT_PHONE_WIDTH)
            page.screenshot(path=str(artifacts() / f"{name}-375px.png"), full_page=False)
            assert layout["viewport"] == 375, f"{name}: no viewport meta (laid out at 980 px)"
            assert layout["broken"] == [], f"{name}: words split inside table cells"
            assert layout["pageWidth"] <= 375, f"{name}: the page scrolls sideways"
    finally:
        context.close()
