"""Assembles the page: header, contents, a section per registered lane, lane files of unknown
kinds, rejections and warnings, and the cited transcript.

The page is one self-contained file: inline CSS, no script, no image, no font or stylesheet
from anywhere, no link but in-page fragments, and a Content-Security-Policy that forbids
loading anything at all (so even markup that slipped through could not fetch or run).
Nothing here reads a clock, the environment or the network: the bytes depend on the inputs
only, and on RENDERER_VERSION's code."""

from __future__ import annotations

from dataclasses import dataclass

from notarius_dagster.engine.outcome import session_outcome
from notarius_dagster.report.context import PageContext, build_context
from notarius_dagster.report.inputs import ReportInputs
from notarius_dagster.report.issues import render_issues
from notarius_dagster.report.markup import text, token
from notarius_dagster.report.sections import render_sections
from notarius_dagster.report.speakers import Speakers
from notarius_dagster.report.transcript import render_transcript

RENDERER_VERSION = "2"
"""Bump when the page changes for the same bundle: it is the report asset's code version."""

CSP = "default-src 'none'; style-src 'unsafe-inline'"
TARGET_BACKGROUND = "rgb(255, 229, 143)"
"""What a targeted unit or record looks like (CSS `:target`); the browser test checks it."""


CSS = """
:root { color-scheme: light; --ink: #1f2328; --muted: #59636e; --line: #d1d9e0;
  --cited: #0969da; --target: #ffe58f; }
* { box-sizing: border-box; }
html { scroll-behavior: auto; }
body { margin: 0 auto; max-width: 72rem; padding: 1rem 1.5rem 4rem; color: var(--ink);
  font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; }
h1 { font-size: 1.6rem; margin: 0.5rem 0; }
h2 { border-bottom: 1px solid var(--line); padding-bottom: 0.2rem; margin-top: 2.2rem; }
h3 { font-size: 1.05rem; margin: 0.9rem 0 0.3rem; }
h4 { font-size: 0.95rem; margin: 0.6rem 0 0.2rem; color: var(--muted); }
code { font-family: ui-monospace, monospace; font-size: 0.9em; }
a { color: var(--cited); }
.facts { display: grid; grid-template-columns: max-content 1fr; gap: 0.1rem 1rem; margin: 0; }
.facts dt { color: var(--muted); }
.facts dd { margin: 0; overflow-wrap: break-word; min-width: 0; }
.status { display: inline-block; padding: 0.1rem 0.6rem; border-radius: 1rem; font-weight: 600; }
.status.ok { background: #dafbe1; color: #1a7f37; }
.status.bad { background: #ffebe9; color: #cf222e; }
.status.warn { background: #fff8c5; color: #7d4e00; }
.status.other { background: #eaeef2; }
nav ul { display: flex; flex-wrap: wrap; gap: 0.4rem 1rem; list-style: none; padding: 0; }
table { border-collapse: collapse; width: 100%; margin: 0.3rem 0 0.8rem; font-size: 0.92rem; }
th, td { border: 1px solid var(--line); padding: 0.25rem 0.45rem; text-align: left;
  vertical-align: top; overflow-wrap: break-word; }
th { background: #f6f8fa; }
.none, .empty, .lane, .note, .id, .meta, .gap, .missing { color: var(--muted); }
.lane { font-size: 0.85rem; margin: 0.2rem 0; }
.scenes { padding-left: 1.5rem; }
.scene { margin-bottom: 0.6rem; }
.badge { font-size: 0.75rem; padding: 0.05rem 0.45rem; border-radius: 0.6rem;
  background: #eaeef2; vertical-align: middle; }
.badge.kind-combat { background: #ffebe9; color: #a40e26; }
.badge.kind-narrative { background: #ddf4ff; color: #0550ae; }
.badge.kind-recap { background: #fbefff; color: #6e40c9; }
.badge.kind-meta { background: #fff8c5; color: #7d4e00; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(17rem, 1fr)); gap: 0.8rem; }
.npc { border: 1px solid var(--line); border-radius: 0.5rem; padding: 0.2rem 0.8rem; }
.npc p { margin: 0.3rem 0; }
.fight { margin-bottom: 1rem; }
.cites a { white-space: nowrap; margin-right: 0.3rem; }
.transcript { list-style: none; padding: 0; margin: 0; }
.transcript li { padding: 0.2rem 0.5rem; border-left: 4px solid transparent; }
.unit .uid { font-family: ui-monospace, monospace; font-size: 0.85rem; margin-right: 0.5rem; }
.unit .speaker { font-weight: 600; margin-right: 0.4rem; }
.unit .speaker .label { font-weight: 400; font-size: 0.8em; color: #555; }
.unit .clock { color: var(--muted); font-size: 0.85rem; margin-right: 0.4rem; }
.unit .text { white-space: pre-wrap; }
/* A phone (375 px): a table keeps its words whole and scrolls sideways inside itself; the page
   itself never scrolls sideways. */
@media (max-width: 40rem) {
  body { padding: 0.6rem 0.7rem 3rem; }
  table { display: block; overflow-x: auto; }
  .facts { grid-template-columns: 1fr; }
  .facts dt { margin-top: 0.3rem; }
}
.unit.cited { border-left-color: var(--cited); background: #f6faff; }
.unit.context { color: #3d444d; }
.unit .mark { font-size: 0.7rem; text-transform: uppercase; letter-spacing: 0.05em;
  color: #fff; background: var(--cited); border-radius: 0.3rem; padding: 0 0.3rem;
  margin-right: 0.4rem; }
.cited-by { display: block; font-size: 0.82rem; color: var(--muted); margin-left: 3.2rem; }
.divider { margin-top: 0.8rem; font-weight: 600; border-top: 1px dashed var(--line); }
.gap { font-style: italic; font-size: 0.85rem; }
.unit, .record { scroll-margin-top: 2rem; }
.unit:target, .record:target { background: var(--target); border-left-color: #d4a72c;
  outline: 2px solid #d4a72c; }
"""


@dataclass(frozen=True)
class RenderedReport:
    """The page and what the asset's metadata counts about it."""

    html: str
    records: int
    units_listed: int
    units_with_text: int


@dataclass(frozen=True)
class CampaignLink:
    """The campaign a session belongs to (its roster lists it): the header links to the
    campaign page, `../.campaigns/<campaign>/codex.html` from the reports folder."""

    campaign: str
    title: str | None = None

    def href(self) -> str:
        return f"../.campaigns/{token(self.campaign)}/codex.html"


def _header(inputs: ReportInputs, campaign: CampaignLink | None = None) -> str:
    records = sum(lane.records for lane in inputs.outputs)
    evidence = "on" if inputs.evidence is not None else "off"
    facts = [
        ("Pipeline", f"{text(inputs.pipeline_id)} ({text(inputs.profile)})"),
        ("Pipeline digest", f"<code>{text(inputs.pipeline_digest)}</code>"),
        ("Run", f"<code>{text(inputs.run_id)}</code> &#183; {text(inputs.status)}"),
        ("Source", f"{text(inputs.source_units)} unit(s) in {text(inputs.chunks)} chunk(s)"),
        ("Lanes", f"{len(inputs.outputs)} published of {len(inputs.lanes)} configured"),
        ("Records", str(records)),
        ("Rejections", str(len(inputs.rejections))),
        ("Warnings", str(len(inputs.warnings))),
        (
            "LLM calls",
            f"{text(inputs.llm_calls)} ({text(inputs.prompt_tokens)} prompt + "
            f"{text(inputs.completion_tokens)} completion tokens)",
        ),
        ("Evidence context", evidence),
    ]
    if campaign is not None:
        facts.append(
            (
                "Campaign",
                f'<a href="{campaign.href()}">'
                f"{text(campaign.title or campaign.campaign)}</a> (codex)",
            )
        )
    outcome = session_outcome([lane.status for lane in inputs.lanes], len(inputs.rejections))
    lanes = "".join(
        f"<tr><td>{text(lane.lane_id)}</td><td>{text(lane.kind)}</td><td>{text(lane.status)}"
        f"</td><td>{text(lane.records)}</td><td>{text(lane.warnings)}</td>"
        f"<td>{text(lane.rejections)}</td></tr>"
        for lane in inputs.lanes
    )
    return (
        f"<header><h1>Session {text(inputs.session_id)}</h1>"
        f'<p><span class="status {outcome.level}">{text(outcome.words)}</span> '
        f'<span class="meta">validation_status: {text(inputs.validation_status)}</span></p>'
        '<dl class="facts">' + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts) + "</dl>"
        '<table class="lanes"><thead><tr><th>Lane</th><th>Kind</th><th>Status</th>'
        "<th>Records</th><th>Warnings</th><th>Rejections</th></tr></thead>"
        f"<tbody>{lanes}</tbody></table></header>"
    )


def _other_lanes(inputs: ReportInputs) -> str:
    """Lane files the report does not render: an unknown kind or schema version."""
    rows = "".join(
        f"<tr><td>{text(lane.lane_id)}</td><td>{text(lane.kind)}</td>"
        f"<td>{text(lane.schema_version)}</td><td>{text(lane.records)}</td></tr>"
        for lane in inputs.outputs
        if lane.items is None
    )
    if not rows:
        return ""
    known = ", ".join(
        f"{text(spec.kind)} {text(spec.schema_version)}" for spec in inputs.registered
    )
    return (
        '<p class="note">This report renders the registered lanes\' kinds (' + known + ") at "
        "their schema versions; these lane files are in the bundle but not shown here.</p>"
        '<table class="records"><thead><tr><th>Lane</th><th>Kind</th><th>Schema version'
        f"</th><th>Records</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def render_page(
    inputs: ReportInputs,
    campaign: CampaignLink | None = None,
    speakers: Speakers | None = None,
) -> RenderedReport:
    """The page; `campaign` adds the link to the session's campaign page (the only link that
    leaves the page, to a sibling file of the store); `speakers` shows speaker labels as the
    roster's characters (`report/speakers.py`)."""
    ctx: PageContext = build_context(inputs, speakers)
    sections = render_sections(ctx)  # registers the citations the transcript lists
    other = _other_lanes(inputs)
    if other:
        sections.append(("other", "Other lanes", other))
    sections.append(("issues", "Rejections and warnings", render_issues(ctx)))
    transcript, listed, with_text = render_transcript(ctx)
    sections.append(("transcript", "Transcript (cited units)", transcript))
    nav = "".join(f'<li><a href="#{sid}">{title}</a></li>' for sid, title, _ in sections)
    body = "".join(
        f'<section id="{sid}"><h2>{title}</h2>{html}</section>' for sid, title, html in sections
    )
    page = (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="referrer" content="no-referrer">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="notarius-run-id" content="{token(inputs.run_id)}">'
        f'<meta name="notarius-report-version" content="{RENDERER_VERSION}">'
        f"<title>Session {text(inputs.session_id)} &#8212; Notarius report</title>"
        f"<style>{CSS}</style></head><body>"
        + _header(inputs, campaign)
        + f'<nav aria-label="Sections"><ul>{nav}</ul></nav>'
        + body
        + "</body></html>\n"
    )
    records = sum(lane.records for lane in inputs.outputs if lane.items is not None)
    return RenderedReport(page, records, listed, with_text)


def render_report(inputs: ReportInputs) -> str:
    """The session report page for `inputs` (same inputs, same string)."""
    return render_page(inputs).html
