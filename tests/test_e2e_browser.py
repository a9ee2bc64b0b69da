"""End to end in a browser, as a person uses the UI: open Dagster's UI (the real webserver and
daemon, see tests/e2e_servers.py), find the session asset graph, materialize one session
partition by clicking, watch the run succeed, and read the result on the `session_bundle`
asset's page (its path, summary and this run's totals; a screenshot is kept in
var/test-artifacts/, NOTARIUS_TEST_ARTIFACTS; docs/img/bundle-metadata.png is a copy).

Chromium is Debian's (`apt-get install chromium`); Playwright's own browser download cannot
work here. Selectors are roles and visible text, as a person finds things; when one stops
matching after a Dagster upgrade, the screenshot saved on failure shows what the page held."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from dagster import DagsterInstance

from notarius_dagster.engine.transcripts import register_transcript
from tests.browser import artifacts

if TYPE_CHECKING:
    from playwright.sync_api import Page

    from tests.e2e_servers import DagsterServers

pytest_plugins = ["tests.e2e_servers"]

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "samples" / "crd3-c2e001-slice.jsonl"
SESSION = "e2e-browser"
RUN_TIMEOUT_MS = 240_000


@pytest.fixture
def registered_session(dagster_servers: DagsterServers, tmp_path: Path) -> str:
    """A session whose transcript is in the store and whose partition exists, as the inbox
    or `notarius run` would leave it, before anyone opens the browser."""
    source = tmp_path / f"{SESSION}.jsonl"
    source.write_text("".join(line + "\n" for line in SAMPLE.read_text().splitlines()[:40]))
    register_transcript(dagster_servers.transcripts, SESSION, source)
    with DagsterInstance.from_config(str(dagster_servers.home)) as instance:
        instance.add_dynamic_partitions("sessions", [SESSION])
    return SESSION


def wait_for_launched_run(servers: DagsterServers, session: str, timeout_s: float = 60) -> str:
    """The id of the run the click launched for `session` (the webserver knows it at once)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        runs = servers.runs_of(session)
        if runs:
            return str(runs[0]["runId"])
        time.sleep(0.5)
    raise AssertionError(f"no run of {session!r} was launched\n{servers.log_tail()}")


def wait_for_run_status(page: Page, timeout_ms: int = RUN_TIMEOUT_MS) -> str:
    """The run page's status once the run has finished, as the page shows it."""
    deadline = time.monotonic() + timeout_ms / 1000
    while time.monotonic() < deadline:
        for status in ("Success", "Failure", "Canceled"):
            if page.get_by_text(status, exact=True).first.is_visible():
                return status
        page.wait_for_timeout(2000)
    raise AssertionError(f"the run page showed no final status within {timeout_ms / 1000:.0f}s")


@pytest.mark.slow
def test_a_session_partition_is_materialized_by_clicking_in_the_ui(
    dagster_servers: DagsterServers, registered_session: str, page: Page
) -> None:
    from playwright.sync_api import expect

    # `make ui`'s own command, started as a person starts it: not one warning on the way
    # (no `dagster dev` supersession, no dagster.yaml outside DAGSTER_HOME, no venv mismatch).
    assert dagster_servers.warnings() == []
    page.goto(dagster_servers.url)
    page.get_by_role("navigation").get_by_role("link", name="Lineage").click()
    expect(page.get_by_text("Global asset lineage")).to_be_visible()
    graph = page.locator("svg foreignObject")  # the asset graph's nodes
    # The global graph opens with its groups collapsed, in flow order; each group's own page
    # shows its assets.
    for group in ("ingest", "lanes", "publish"):
        expect(graph.get_by_text(group, exact=True).first).to_be_visible()
    groups = {
        "ingest": ("source_document", "chunk_map"),
        "lanes": ("npcs",),
        "publish": ("session_bundle", "session_report"),
    }
    for group, assets in groups.items():
        page.goto(f"{dagster_servers.url}/locations/notarius/asset-groups/{group}/lineage")
        for asset in assets:
            expect(graph.get_by_text(asset, exact=True)).to_be_visible()
    page.goto(f"{dagster_servers.url}/asset-groups")  # back to the global lineage
    expect(page.get_by_text("Global asset lineage")).to_be_visible()

    page.get_by_role("button", name="Materialize all").click()
    dialog = page.get_by_role("dialog")
    expect(dialog.get_by_text("Partition selection")).to_be_visible()
    dialog.get_by_text("Select a partition or create one").click()
    page.keyboard.type(registered_session)
    page.get_by_role("menuitem", name=registered_session).click()
    page.keyboard.press("Escape")  # close the partition list, keep the dialog
    dialog.get_by_role("button", name="Launch 1 run").click()

    # The "Launched run ..." toast does not stay long on a busy machine: go by the Runs page.
    run_id = wait_for_launched_run(dagster_servers, registered_session)
    # Accessible names carry the icon's name ("runs Runs"): match a part, within the nav.
    page.get_by_role("navigation").get_by_role("link", name="Runs").click()
    page.get_by_role("link", name=run_id[:8]).first.click()
    expect(page.get_by_text(f"partition: {registered_session}")).to_be_visible()
    status = wait_for_run_status(page)
    assert status == "Success", f"the run ended {status}\n{dagster_servers.log_tail()}"

    [run] = dagster_servers.runs_of(registered_session)
    assert run["status"] == "SUCCESS" and run["runId"] == run_id and run_id in page.url
    # A run launched by a click carries the session, profile digest and model tags too.
    assert run["tags"]["notarius/session"] == registered_session
    assert run["tags"]["notarius/profile_digest"].startswith("sha256:")
    assert run["tags"]["notarius/model"]
    bundle = dagster_servers.bundles / registered_session
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["run_id"] == run["runId"]
    assert manifest["validation_status"] == "approved"
    assert (bundle / "lanes" / "npcs.json").is_file()

    # The result, as the bundle asset's page shows it.
    page.goto(f"{dagster_servers.url}/assets/session_bundle?partition={registered_session}")
    expect(page.get_by_text("Rejections by validator").first).to_be_visible()
    expect(page.get_by_text("report_path").first).to_be_visible()
    expect(page.get_by_text(str(bundle)).first).to_be_visible()
    page.screenshot(path=str(artifacts() / "bundle-metadata.png"), full_page=True)
