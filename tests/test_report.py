"""The session report (docs/report.md): a deterministic, self-contained HTML page per session
whose untrusted text is inert, whose every citation lands on a transcript line that exists, and
which the `session_report` asset writes beside the bundles and `notarius report` finds.

Hand-made bundles exercise the renderer's edges (hostile text, position-ordered ranges, rounds,
no evidence context); one real bundle, made by the asset job on the bundled sample with the
complete profile and the lane test double, checks the whole path. `build_sample_bundle` is
shared with the browser test (tests/test_report_browser.py)."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from dagster import AssetKey, DagsterInstance

from assets.report import campaign_link
from notarius_dagster.campaign.store import load_roster
from notarius_dagster.cli.main import main
from notarius_dagster.modules import registry
from notarius_dagster.report import (
    REPORTS_DIR,
    ReportError,
    load_bundle,
    remove_report,
    render_report,
    report_path,
    report_run_id,
    write_report,
)
from notarius_dagster.report.markup import Anchors
from notarius_dagster.report.markup import text as escaped
from notarius_dagster.report.render import render_page
from notarius_dagster.report.speakers import Speakers

LANES = registry()

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "samples" / "crd3-c2e001-slice.jsonl"
SESSION = "sample"
BASE_URL = "https://reports.example.test/notarius"

HOSTILE_UNIT = '<script>alert(1)</script> and then "><img src=x onerror=alert(2)>'
HOSTILE_STYLE = "</style><style>body{display:none}</style>"
HOSTILE_SPEAKER = "<b>MATT</b>"
HOSTILE_NAME = '"><img src=x onerror=alert(3)>Gus'
HOSTILE_URL = "see https://evil.example/x.png or javascript:alert(4)"
HOSTILE_ID = 'npc-"><a href=x>'


# --- hand-made bundles ----------------------------------------------------------------------

KINDS = {
    "scene-descriptions": ("dnd/scene-description-list", "scene_descriptions"),
    "npcs": ("dnd/npc-list", "npcs"),
    "combat-turns": ("dnd/combat-turn-list", "combat_turns"),
    "spells": ("dnd/spell-list", "spells"),
    "item-events": ("dnd/item-event-list", "item_events"),
    "npc-interactions": ("dnd/npc-interaction-list", "npc_interactions"),
}


def ref(start: int, end: int | None = None) -> dict[str, Any]:
    return {"source_id": "s1", "start_unit_id": start, "end_unit_id": start if end is None else end}


def write_bundle(
    folder: Path,
    *,
    order: list[int],
    lanes: dict[str, list[dict[str, Any]]],
    units: dict[int, tuple[str, str]] | None = None,
    warnings: Sequence[dict[str, Any]] = (),
    rejected: Sequence[dict[str, Any]] = (),
    configured: dict[str, str] | None = None,
    extra_lanes: Sequence[dict[str, Any]] = (),
    run_id: str = "run-1",
) -> Path:
    """A bundle folder in the published layout: `lanes` maps a D&D lane id to its records,
    `units` (unit id -> (speaker, text)) becomes one evidence context over those units, in
    `order`; `configured` adds manifest lanes that published nothing (lane id -> status)."""
    folder.mkdir(parents=True)
    descriptors, summaries = [], []
    for lane_id, records in sorted(lanes.items()):
        kind, items = KINDS[lane_id]
        (folder / "lanes").mkdir(exist_ok=True)
        (folder / "lanes" / f"{lane_id}.json").write_text(
            json.dumps({"kind": kind, "schema_version": "v1", "source_id": "s1", items: records})
        )
        descriptors.append(
            {
                "lane_id": lane_id,
                "file": f"lanes/{lane_id}.json",
                "kind": kind,
                "media_type": "application/json",
                "schema_version": "v1",
                "records": len(records),
            }
        )
        summaries.append(
            {
                "lane_id": lane_id,
                "kind": kind,
                "status": "accepted",
                "records": len(records),
                "warnings": 0,
                "rejections": 0,
            }
        )
    for lane_id, status in (configured or {}).items():
        summaries.append(
            {
                "lane_id": lane_id,
                "kind": KINDS[lane_id][0],
                "status": status,
                "records": 0,
                "warnings": 0,
                "rejections": 1,
            }
        )
    for descriptor in extra_lanes:
        (folder / descriptor["file"]).write_text(json.dumps({"opaque": True}))
    index: dict[str, Any] = {
        "bundle_version": "1",
        "session_id": "s1",
        "run_id": run_id,
        "pipeline": {"id": "p", "profile": "p.yaml", "digest": "sha256:00"},
        "source_digest": "sha256:00",
        "validation_status": "rejected" if rejected else "approved",
        "files": {
            "manifest": "manifest.json",
            "warnings": "warnings.json",
            "rejected": "rejected.json",
        },
        "lanes": descriptors + list(extra_lanes),
        "chunk_map": {"file": "chunk-map.json", "kind": "source/chunk-map", "schema_version": "v1"},
    }
    chunk_map = {
        "source_id": "s1",
        "source_digest": "sha256:00",
        "chunker": "generic",
        "chunks": [
            {
                "chunk_id": "scene-0000",
                "index": 0,
                "start_unit_id": order[0],
                "end_unit_id": order[-1],
                "unit_ids": order,
                "digest": "d",
            }
        ],
    }
    if units is not None:
        index["evidence_context"] = {
            "file": "evidence-context.json",
            "kind": "source/evidence-context",
            "schema_version": "v1",
        }
        ids = [u for u in order if u in units]
        (folder / "evidence-context.json").write_text(
            json.dumps(
                {
                    "kind": "source/evidence-context",
                    "schema_version": "v1",
                    "source_id": "s1",
                    "source_digest": "sha256:00",
                    "window_units": 0,
                    "lanes": sorted(lanes),
                    "contexts": [
                        {
                            "start_unit_id": ids[0],
                            "end_unit_id": ids[-1],
                            "references": [],
                            "units": [
                                {
                                    "unit_id": u,
                                    "kind": "utterance",
                                    "text": units[u][1],
                                    "source_ref": ref(u),
                                    "metadata": {"speaker": units[u][0]},
                                }
                                for u in ids
                            ],
                        }
                    ]
                    if ids
                    else [],
                }
            )
        )
    manifest = {
        "run_id": run_id,
        "session_id": "s1",
        "status": "succeeded",
        "validation_status": index["validation_status"],
        "pipeline": index["pipeline"],
        "source": {"units": len(order)},
        "chunks": 1,
        "artifact_lanes": summaries,
        "rejected": list(rejected),
        "warnings": len(warnings),
        "totals": {"llm_calls": 3},
    }
    for name, document in (
        ("index.json", index),
        ("manifest.json", manifest),
        ("warnings.json", list(warnings)),
        ("rejected.json", list(rejected)),
        ("chunk-map.json", chunk_map),
    ):
        (folder / name).write_text(json.dumps(document))
    return folder


def hostile_bundle(folder: Path) -> Path:
    return write_bundle(
        folder,
        order=[1, 2, 3, 4, 5],
        units={
            1: ("MATT", HOSTILE_UNIT),
            2: (HOSTILE_SPEAKER, HOSTILE_STYLE),
            3: ("LAURA", HOSTILE_URL),
            4: ("SAM", "plain"),
            5: ("MATT", "the end"),
        },
        lanes={
            "scene-descriptions": [
                {
                    "scene_id": "scene-0000",
                    "source_id": "s1",
                    "start_unit_id": 1,
                    "end_unit_id": 5,
                    "kind": "combat",
                    "title": HOSTILE_UNIT,
                    "summary": HOSTILE_STYLE,
                    "source_ref": ref(1, 5),
                }
            ],
            "npcs": [
                {
                    "id": "npc-gus",
                    "name": HOSTILE_NAME,
                    "aliases": [HOSTILE_SPEAKER, "<i>Gus</i>"],
                    "description": HOSTILE_STYLE,
                    "source_refs": [ref(1), ref(3)],
                }
            ],
            "item-events": [
                {
                    "id": "item-event-0001",
                    "item": HOSTILE_URL,
                    "event": "given",
                    "from": HOSTILE_NAME,
                    "to": HOSTILE_SPEAKER,
                    "from_npc_id": "npc-gus",
                    "to_npc_id": None,
                    "quantity": 2,
                    "source_refs": [ref(2, 3)],
                }
            ],
        },
        warnings=[
            {
                "stage": "extract",
                "code": "npc_unmatched",
                "message": HOSTILE_UNIT,
                "lane": "item-events",
                "chunk_id": "scene-0000",
            }
        ],
        rejected=[
            {
                "stage": "extract",
                "lane": "npcs",
                "module": "m",
                "chunk_id": "scene-0000",
                "validator": "schema",
                "message": HOSTILE_NAME,
                "attempts": 2,
            }
        ],
    )


# --- reading the page the way a browser does ------------------------------------------------


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]


class Page(HTMLParser):
    """Every element with its attributes, and the text the browser would show."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[Element] = []
        self.data: list[str] = []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append(Element(tag, {k: v or "" for k, v in attrs}))

    def handle_data(self, data: str) -> None:
        self.data.append(data)

    @property
    def ids(self) -> list[str]:
        return [e.attrs["id"] for e in self.elements if "id" in e.attrs]

    @property
    def hrefs(self) -> list[str]:
        return [e.attrs["href"] for e in self.elements if "href" in e.attrs]

    def by_class(self, css: str) -> list[Element]:
        return [e for e in self.elements if css in e.attrs.get("class", "").split()]


SAFE_TAGS = {
    "html",
    "head",
    "meta",
    "title",
    "style",
    "body",
    "header",
    "nav",
    "section",
    "h1",
    "h2",
    "h3",
    "h4",
    "p",
    "span",
    "a",
    "ul",
    "ol",
    "li",
    "dl",
    "dt",
    "dd",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "article",
    "div",
    "code",
}
SAFE_ATTRS = {
    "class",
    "id",
    "href",
    "lang",
    "charset",
    "http-equiv",
    "content",
    "name",
    "aria-label",
}


def assert_links_resolve(page: Page) -> None:
    ids = page.ids
    assert len(ids) == len(set(ids)), "two elements share an id"
    assert all(re.fullmatch(r"[A-Za-z0-9_-]+", i) for i in ids)
    missing = [h for h in page.hrefs if h[1:] not in set(ids)]
    assert all(h.startswith("#") for h in page.hrefs) and not missing, missing


@pytest.fixture
def hostile(tmp_path: Path) -> str:
    return render_report(load_bundle(hostile_bundle(tmp_path / "bundle"), LANES))


# --- the page -------------------------------------------------------------------------------


def test_the_same_bundle_renders_the_same_bytes_wherever_it_lies(tmp_path: Path) -> None:
    first = hostile_bundle(tmp_path / "a")
    shutil.copytree(first, tmp_path / "elsewhere" / "b")
    pages = [render_report(load_bundle(first, LANES)) for _ in range(2)]
    pages.append(render_report(load_bundle(tmp_path / "elsewhere" / "b", LANES)))
    assert pages[0] == pages[1] == pages[2]
    written = [write_report(tmp_path / "bundles", "s1", p).read_bytes() for p in pages]
    assert written[0] == written[1] == pages[0].encode()
    assert str(tmp_path) not in pages[0]  # no filesystem path on the page


def test_hostile_text_is_shown_as_text_and_never_becomes_markup(hostile: str) -> None:
    for raw in (HOSTILE_UNIT, HOSTILE_STYLE, HOSTILE_SPEAKER, HOSTILE_NAME, HOSTILE_URL):
        assert raw not in hostile
        assert escaped(raw) in hostile
    page = Page(hostile)
    shown = "".join(page.data)
    for raw in (HOSTILE_UNIT, HOSTILE_SPEAKER, HOSTILE_NAME, HOSTILE_URL):
        assert raw in shown  # the browser shows exactly what was said
    assert {e.tag for e in page.elements} <= SAFE_TAGS
    assert {a for e in page.elements for a in e.attrs} <= SAFE_ATTRS
    assert [e.tag for e in page.elements].count("style") == 1
    # The speaker's <b> and the alias's <i> stayed text.
    assert "b" not in {e.tag for e in page.elements} and "i" not in {e.tag for e in page.elements}


def test_a_lane_file_the_lane_model_refuses_is_refused_by_path_never_by_value(
    tmp_path: Path,
) -> None:
    """Lane files are read with the lane's own record model (the registry's), so an id
    outside the lane's pattern never reaches the page: the error names the file, the key
    path and the rule, never the value. An id that did reach an anchor is sanitized."""
    bundle = write_bundle(
        tmp_path / "b",
        order=[1],
        lanes={"npcs": [{"id": HOSTILE_ID, "name": "Gus", "source_refs": [ref(1)]}]},
    )
    with pytest.raises(ReportError) as refused:
        load_bundle(bundle, LANES)
    assert str(refused.value) == (
        "lanes/npcs.json: npcs.0.id: string_pattern_mismatch (1 problem(s))"
    )
    assert Anchors().claim("npcs", HOSTILE_ID) == "r-npcs-npc--a-href-x"


def test_the_page_has_no_script_no_url_and_loads_nothing(hostile: str) -> None:
    lowered = hostile.lower()
    for forbidden in (
        "<script",
        "http://",
        "https://",
        "src=",
        "javascript:",
        "url(",
        "@import",
        "<img",
        "<link",
        "<iframe",
    ):
        assert forbidden not in lowered, forbidden
    assert (
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'\">"
    ) in hostile
    assert hostile.index("Content-Security-Policy") < hostile.index("<style>")


def test_every_record_links_to_a_transcript_line_that_exists(hostile: str) -> None:
    page = Page(hostile)
    assert_links_resolve(page)
    units = {e.attrs["id"] for e in page.by_class("unit")}
    assert units == {"u-1", "u-2", "u-3", "u-4", "u-5"}
    for anchor in (e.attrs["href"] for e in page.by_class("cite")):
        assert anchor[1:] in units
    cited = {e.attrs["id"] for e in page.by_class("cited")}
    assert cited == {"u-1", "u-2", "u-3"}  # the scene's whole range is not a citation
    assert len(page.by_class("record")) == 3


def test_a_range_covers_units_by_document_position_not_by_id(tmp_path: Path) -> None:
    bundle = write_bundle(
        tmp_path / "b",
        order=[10, 3, 7, 1, 8],
        lanes={
            "npcs": [
                {
                    "id": "npc-a",
                    "name": "A",
                    "aliases": [],
                    "description": "",
                    "source_refs": [ref(3, 1)],
                }
            ]
        },
    )
    page = Page(render_report(load_bundle(bundle, LANES)))
    assert [e.attrs["id"] for e in page.by_class("unit")] == ["u-3", "u-7", "u-1"]
    assert {e.attrs["id"] for e in page.by_class("cited")} == {"u-3", "u-7", "u-1"}
    assert [e.attrs["href"] for e in page.by_class("cite")] == ["#u-3"]
    assert_links_resolve(page)


def test_without_an_evidence_context_units_are_listed_by_id_and_the_page_says_so(
    tmp_path: Path,
) -> None:
    bundle = write_bundle(
        tmp_path / "b",
        order=[1, 2, 3, 4],
        lanes={
            "spells": [
                {
                    "id": "spell-0001",
                    "caster": "LAURA",
                    "caster_npc_id": None,
                    "spell": "Guiding Bolt",
                    "level": 0,
                    "targets": [],
                    "outcome": None,
                    "source_refs": [ref(2), ref(4)],
                }
            ]
        },
    )
    html = render_report(load_bundle(bundle, LANES))
    page = Page(html)
    assert "The evidence context is off for this bundle" in html
    assert [e.attrs["id"] for e in page.by_class("unit")] == ["u-2", "u-4"]
    assert len(page.by_class("missing")) == 2 and "cantrip" in html
    assert_links_resolve(page)


def test_a_unit_cited_outside_the_evidence_allowlist_still_has_its_anchor(tmp_path: Path) -> None:
    bundle = write_bundle(
        tmp_path / "b",
        order=[1, 2, 3, 4, 5],
        units={1: ("MATT", "hello")},
        lanes={
            "npcs": [
                {
                    "id": "npc-a",
                    "name": "A",
                    "aliases": [],
                    "description": "",
                    "source_refs": [ref(4)],
                }
            ]
        },
    )
    page = Page(render_report(load_bundle(bundle, LANES)))
    assert [e.attrs["id"] for e in page.by_class("unit")] == ["u-1", "u-4"]
    assert [e.attrs["id"] for e in page.by_class("context")] == ["u-1"]
    assert len(page.by_class("missing")) == 1 and len(page.by_class("gap")) == 2
    assert_links_resolve(page)


def turn(n: int, round_: int | None, at: int, actor_id: str | None = None) -> dict[str, Any]:
    return {
        "id": f"turn-{n:04d}",
        "round": round_,
        "actor": "Gustav" if actor_id else "MATT",
        "actor_npc_id": actor_id,
        "action": "attack",
        "targets": ["goblin"],
        "outcome": {"hit": True, "damage": "4", "effect": None},
        "source_refs": [ref(at)],
    }


def test_combat_turns_are_grouped_by_consecutive_rounds_and_names_link_to_npc_cards(
    tmp_path: Path,
) -> None:
    bundle = write_bundle(
        tmp_path / "b",
        order=list(range(1, 7)),
        lanes={
            "npcs": [
                {
                    "id": "npc-gustav",
                    "name": "Gustav",
                    "aliases": [],
                    "description": "d",
                    "source_refs": [ref(1)],
                }
            ],
            "combat-turns": [
                turn(1, 1, 1, "npc-gustav"),
                turn(2, 1, 2),
                turn(3, 2, 3),
                turn(4, None, 4),
                turn(5, 1, 5),
            ],
        },
    )
    html = render_report(load_bundle(bundle, LANES))
    rounds = re.findall(r"<h4>(Round [^<]*)</h4>", html)
    assert rounds == ["Round 1", "Round 2", "Round not stated", "Round 1"]
    card = "r-npcs-npc-gustav"
    row = re.search(r'<tr class="record" id="r-combat-turns-turn-0001">.*?</tr>', html)
    assert row and f'href="#{card}"' in row.group(0)
    assert 'href="#r-combat-turns-turn-0001">turn-0001</a>' in html  # the card's "named in"
    assert_links_resolve(Page(html))


def test_rejections_and_warnings_are_counted_by_validator_and_code(tmp_path: Path) -> None:
    rejected = [
        {
            "stage": "extract",
            "lane": "npcs",
            "module": "m",
            "chunk_id": f"c{i}",
            "validator": v,
            "message": "$.npcs[0].name: too long",
            "attempts": 2,
        }
        for i, v in enumerate(["schema", "schema", "refs_in_chunk"])
    ]
    warnings = [
        {
            "stage": "extract",
            "code": c,
            "message": "2 name(s) matched no NPC",
            "lane": "spells",
            "chunk_id": None,
        }
        for c in ["npc_unmatched", "npc_unmatched", "scene_coverage_missing"]
    ]
    bundle = write_bundle(
        tmp_path / "b",
        order=[1],
        lanes={},
        rejected=rejected,
        warnings=warnings,
        configured={"npcs": "rejected"},
    )
    html = render_report(load_bundle(bundle, LANES))
    rows = [re.findall(r"<td>(.*?)</td>", r) for r in re.findall(r"<tr>(.*?)</tr>", html)]
    assert ["npcs", "extract", "refs_in_chunk", "1"] in rows
    assert ["npcs", "extract", "schema", "2"] in rows
    assert ["spells", "npc_unmatched", "2"] in rows
    assert ["spells", "scene_coverage_missing", "1"] in rows
    assert "<h3>Rejections (3)</h3>" in html and "<h3>Warnings (3)</h3>" in html
    assert html.count(escaped("$.npcs[0].name: too long")) == 3
    assert "published no output (rejected)" in html  # the NPC section says why it is empty


def test_the_badge_says_what_happened_not_the_contracts_rejected(tmp_path: Path) -> None:
    """`validation_status` is `rejected` as soon as one chunk is (docs/bundle.md); the badge
    a person reads says every lane was accepted and how many chunks were rejected."""
    rejection = {
        "stage": "extract",
        "lane": "npcs",
        "module": "m",
        "chunk_id": "c1",
        "validator": "schema",
        "message": "m",
        "attempts": 2,
    }
    npc = {
        "id": "npc-y",
        "name": "Yussa",
        "aliases": [],
        "description": "",
        "source_refs": [ref(1, 1)],
    }
    one_bad_chunk = write_bundle(
        tmp_path / "a", order=[1], lanes={"npcs": [npc]}, rejected=[rejection]
    )
    html = render_report(load_bundle(one_bad_chunk, LANES))
    assert '<span class="status warn">all 1 lane(s) accepted, 1 chunk rejection(s)</span>' in html
    assert "validation_status: rejected" in html  # the contract value is still shown, muted
    clean = render_report(
        load_bundle(write_bundle(tmp_path / "b", order=[1], lanes={"npcs": [npc]}), LANES)
    )
    assert '<span class="status ok">all 1 lane(s) accepted</span>' in clean
    lane_rejected = write_bundle(
        tmp_path / "c",
        order=[1],
        lanes={"npcs": [npc]},
        rejected=[rejection],
        configured={"spells": "rejected"},
    )
    html = render_report(load_bundle(lane_rejected, LANES))
    assert '<span class="status bad">1 of 2 lane(s) rejected</span>' in html


def test_an_unknown_kind_or_schema_version_is_listed_not_rendered(tmp_path: Path) -> None:
    extra = [
        {
            "lane_id": "loot",
            "file": "loot.json",
            "kind": "acme/loot",
            "schema_version": "v1",
            "records": 4,
        },
        {
            "lane_id": "npcs2",
            "file": "npcs2.json",
            "kind": "dnd/npc-list",
            "schema_version": "v9",
            "records": 1,
        },
    ]
    bundle = write_bundle(tmp_path / "b", order=[1], lanes={}, extra_lanes=extra)
    html = render_report(load_bundle(bundle, LANES))
    assert '<section id="other"><h2>Other lanes</h2>' in html
    assert "<td>acme/loot</td><td>v1</td><td>4</td>" in html and "<td>v9</td>" in html


def test_an_unreadable_bundle_fails_with_a_content_safe_message(tmp_path: Path) -> None:
    secret = "the secret words of the session"
    bundle = write_bundle(
        tmp_path / "b",
        order=[1],
        lanes={
            "npcs": [
                {
                    "id": "npc-a",
                    "name": 42,
                    "aliases": [secret],
                    "description": secret,
                    "source_refs": [ref(1)],
                }
            ]
        },
    )
    with pytest.raises(ReportError) as failed:
        load_bundle(bundle, LANES)
    assert "lanes/npcs.json: npcs.0.name: string_type" in str(failed.value)
    assert secret not in str(failed.value)
    mixed = write_bundle(tmp_path / "m", order=[1], lanes={})
    manifest = json.loads((mixed / "manifest.json").read_text())
    (mixed / "manifest.json").write_text(json.dumps({**manifest, "run_id": "run-2"}))
    with pytest.raises(ReportError, match="different runs"):
        load_bundle(mixed, LANES)
    with pytest.raises(ReportError, match="no published bundle"):
        load_bundle(tmp_path / "nothing", LANES)


def test_the_report_is_written_atomically_beside_the_bundles_and_can_be_removed(
    tmp_path: Path,
) -> None:
    bundles = tmp_path / "bundles"
    path = write_report(bundles, "s1", "<p>one</p>")
    assert path == bundles / REPORTS_DIR / "s1.html" == report_path(bundles, "s1")
    write_report(bundles, "s1", "<p>two</p>")
    assert path.read_text() == "<p>two</p>"
    assert sorted(p.name for p in path.parent.iterdir()) == ["s1.html"]  # no temp file left
    assert remove_report(bundles, "s1") and not path.exists()
    assert not remove_report(bundles, "s1")


# --- a real bundle through the asset job ----------------------------------------------------


@dataclass(frozen=True)
class SampleBundle:
    bundles: Path
    bundle: Path
    report: Path
    metadata: dict[str, Any]


def build_sample_bundle(root: Path) -> SampleBundle:
    """Run the asset job on the sample with the complete profile and the sample's party roster
    (so speaker labels name characters and the support check accepts the lines they speak),
    as `configs/dnd-complete-sample.yaml` ships it (its evidence context on), and the lane test
    double; the job's `session_report` writes the report."""
    import yaml

    from notarius_dagster.engine.transcripts import register_transcript
    from notarius_dagster.run.runner import run_session
    from tests.lane_doubles import complete_responder
    from tests.llm_double import scripted_llm

    data = yaml.safe_load((REPO / "configs" / "dnd-complete-sample.yaml").read_text())
    roster = REPO / "configs" / "rosters" / "sample.yaml"
    data["pipeline"]["references"]["roster"] = {"path": str(roster)}  # absolute: profile in tmp
    # The evidence context as the profile ships it: the report shows the cited lines' text.
    assert data["pipeline"]["output"]["options"]["evidence_context"]["enabled"] is True
    profile = root / "complete-evidence.yaml"
    profile.write_text(yaml.safe_dump(data))
    register_transcript(root / "data" / "transcripts", SESSION, SAMPLE)
    with (
        pytest.MonkeyPatch.context() as env,
        DagsterInstance.ephemeral() as instance,
        scripted_llm(complete_responder),
    ):
        env.setenv("NOTARIUS_REPORT_BASE_URL", BASE_URL + "/")
        outcome = run_session(
            session_id=SESSION,
            profile=profile,
            data_root=root / "data",
            llm_profile="test-double",
            instance=instance,
            quiet=True,
        )
        assert outcome.success, outcome.error
        [record] = instance.fetch_materializations(AssetKey("session_report"), limit=1).records
        materialization = record.asset_materialization
        assert materialization is not None and materialization.partition == SESSION
        metadata = {k: getattr(v, "value", v) for k, v in materialization.metadata.items()}
    bundles = root / "data" / "bundles"
    return SampleBundle(bundles, bundles / SESSION, report_path(bundles, SESSION), metadata)


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SampleBundle]:
    yield build_sample_bundle(tmp_path_factory.mktemp("report-sample"))


def test_the_asset_writes_the_report_of_the_published_bundle_beside_it(
    sample: SampleBundle,
) -> None:
    assert sample.report.is_file()
    roster = load_roster(REPO / "configs" / "rosters" / "sample.yaml")
    expected = render_page(
        load_bundle(sample.bundle, LANES),
        campaign_link(roster, SESSION),
        Speakers.of(roster, SESSION),
    )
    assert sample.report.read_bytes() == expected.html.encode()
    index = json.loads((sample.bundle / "index.json").read_text())
    assert report_run_id(sample.report) == index["run_id"]
    # Not inside the bundle: the version folder holds exactly what its index lists.
    assert not any(p.suffix == ".html" for p in sample.bundle.resolve().rglob("*"))
    assert sample.report.parent == sample.bundles / ".reports"
    assert sample.metadata["path"] == str(sample.report)
    assert sample.metadata["url"] == f"{BASE_URL}/{SESSION}.html"
    assert sample.metadata["evidence_context"] is True
    assert sample.metadata["records"] == sum(lane["records"] for lane in index["lanes"])
    assert sample.metadata["bundle_run_id"] == index["run_id"]


def test_the_real_report_shows_every_record_and_every_citation_resolves(
    sample: SampleBundle,
) -> None:
    html = sample.report.read_text()
    page = Page(html)
    assert_links_resolve(page)
    index = json.loads((sample.bundle / "index.json").read_text())
    assert len(page.by_class("record")) == sum(lane["records"] for lane in index["lanes"])
    npcs = json.loads((sample.bundle / "lanes" / "npcs.json").read_text())["npcs"]
    assert [e.attrs["id"] for e in page.by_class("npc")] == [f"r-npcs-{n['id']}" for n in npcs]
    for npc in npcs:  # each appearance is a link to its line, which links back to the card
        for cite in npc["source_refs"]:
            assert f'<a class="cite" href="#u-{cite["start_unit_id"]}">' in html
    evidence = json.loads((sample.bundle / "evidence-context.json").read_text())
    texts = [u["text"] for c in evidence["contexts"] for u in c["units"]]
    assert all(escaped(t) in html for t in texts)
    assert "<script" not in html.lower() and "src=" not in html


def test_the_real_report_shows_speaker_labels_as_the_rosters_characters(
    sample: SampleBundle,
) -> None:
    """With the sample's roster bound, a cited line of LAURA's reads as Jester's (the label
    kept beside it) and MATT's as the DM's; every label the roster maps is shown so."""
    html = sample.report.read_text()
    spans = re.findall(
        r'<span class="speaker">((?:[^<]|<span class="label">[^<]*</span>)*)</span>', html
    )
    shown = {unescape(re.sub(r"<[^>]+>", "", span)) for span in spans}
    evidence = json.loads((sample.bundle / "evidence-context.json").read_text())
    labels = {u["metadata"]["speaker"] for c in evidence["contexts"] for u in c["units"]}
    assert {"LAURA", "MATT"} <= labels  # the sample's cited lines include both
    roster = load_roster(REPO / "configs" / "rosters" / "sample.yaml")
    characters = {label: m.character for m in roster.party for label in m.labels()}
    for label in labels:
        if label in characters:
            assert f"{characters[label]} {label}" in shown
        elif label in roster.dm:
            assert f"{label} DM" in shown
        else:
            assert label in shown
    assert "Jester LAURA" in shown and "MATT DM" in shown


def test_notarius_report_prints_the_path_and_opens_it(
    sample: SampleBundle, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    opened: list[str] = []
    monkeypatch.setattr("webbrowser.open", lambda url: opened.append(url) or True)
    assert main(["report", SESSION, "--bundles", str(sample.bundles)]) == 0
    assert capsys.readouterr().out.strip() == str(sample.report) and not opened
    assert main(["report", SESSION, "--bundles", str(sample.bundles), "--open"]) == 0
    assert opened == [sample.report.resolve().as_uri()]
    monkeypatch.setenv("NOTARIUS_BUNDLES", str(sample.bundles))
    assert main(["report", SESSION]) == 0
    assert capsys.readouterr().out.strip().endswith(str(sample.report))


def test_notarius_report_says_how_to_build_a_missing_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from notarius_dagster.engine.transcripts import register_transcript

    store = ["--data", str(tmp_path / "data"), "--bundles", str(tmp_path / "bundles")]
    # a session the store does not know is said as such, not "materialize it"
    assert main(["report", "never-run", *store]) == 1
    err = capsys.readouterr().err
    assert "no session 'never-run' in this store" in err and "sessions list" in err
    # a registered session without a report: how to build it
    register_transcript(tmp_path / "data" / "transcripts", "never-run", SAMPLE)
    assert main(["report", "never-run", *store]) == 1
    err = capsys.readouterr().err
    assert "has no report yet" in err and "session_report" in err and "notarius run" in err
    assert main(["report", "Not A Session", *store]) == 2


def test_notarius_report_warns_when_the_bundle_is_newer_than_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundles = tmp_path / "bundles"
    bundle = write_bundle(bundles / "s1", order=[1], lanes={}, run_id="run-1")
    write_report(bundles, "s1", render_report(load_bundle(bundle, LANES)))
    assert main(["report", "s1", "--bundles", str(bundles)]) == 0
    assert "warning" not in capsys.readouterr().err
    for name in ("index.json", "manifest.json"):
        document = json.loads((bundle / name).read_text())
        (bundle / name).write_text(json.dumps({**document, "run_id": "run-2"}))
    assert main(["report", "s1", "--bundles", str(bundles)]) == 0
    assert "materialize `session_report`" in capsys.readouterr().err
