"""The session report: one static, self-contained HTML page per session, rendered from the
published bundle (and its evidence context when there is one) with no LLM, no network and no
clock, so the same bundle always gives the same bytes.

It knows no lane by name: every lane of the registry it is given has a section as its
`LaneSpec.report` declares, its records read with the lane's own models. `load_bundle` reads a
bundle folder into typed inputs, `render_report` turns them into the page, `write_report`
publishes the page atomically beside the bundles (docs/report.md)."""

from notarius_dagster.report.errors import ReportError
from notarius_dagster.report.inputs import ReportInputs
from notarius_dagster.report.loader import load_bundle
from notarius_dagster.report.publish import (
    REPORTS_DIR,
    remove_report,
    report_path,
    report_run_id,
    report_url,
    write_report,
)
from notarius_dagster.report.render import RENDERER_VERSION, render_report

__all__ = [
    "RENDERER_VERSION",
    "REPORTS_DIR",
    "ReportError",
    "ReportInputs",
    "load_bundle",
    "remove_report",
    "render_report",
    "report_path",
    "report_run_id",
    "report_url",
    "write_report",
]
