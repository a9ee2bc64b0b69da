"""The Checks tab of a session's assets, in a browser on the real webserver (tests/e2e_servers.py):
no control there starts a check run that fails.

The issue (21): "Execute all" on `session_bundle`'s Checks tab launched a run of the checks
alone, without a partition, and every check read `context.partition_key`, so the run failed with
a raw `DagsterInvariantViolationError`. The checks are now evaluated by the step that
materializes their asset (`check_specs`, assets/checks.py), and for such checks Dagster 1.13's
UI disables "Execute" ("This check cannot execute without materializing the asset": its
`ExecuteChecksButton` launches only checks whose `canExecuteIndividually` is `CAN_EXECUTE`). A
check's figures are refreshed by materializing its asset, which the test also does for the
bundle (from the stored lanes, no model call).

Should a Dagster upgrade enable the button again, the test clicks it and requires the run it
launches to succeed: either way a user who clicks gets no failing run. The `up_to_date` check
(assets/up_to_date.py) is the one check that runs alone (it reads every session, no partition),
so "Execute all" now launches it, and the test requires that run to succeed. On the base commit
(58174a5) "Execute all" on `session_bundle` was enabled and its run failed, so this test failed
there."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from dagster import DagsterInstance

from notarius_dagster.engine.transcripts import register_transcript
from tests.browser import artifacts

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

    from tests.e2e_servers import DagsterServers

pytest_plugins = ["tests.e2e_servers"]

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "samples" / "crd3-c2e001-slice.jsonl"
SESSION = "e2e-checks"
RUN_TIMEOUT_S = 240.0
LOCATION = "notarius"
REPOSITORY = "__repository__"  # the repository Dagster names a `Definitions` object
SESSION_JOB = "materialize_session"
CANNOT_EXECUTE = "This check cannot execute without materializing the asset."

_LAUNCH = """
mutation Launch($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on InvalidSubsetError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}
"""

_ALL_RUNS = """
{ runsOrError { __typename ... on Runs { results { runId status tags { key value } } } } }
"""

_CHECKS = """
{
  assetNodes {
    assetKey { path }
    assetChecksOrError {
      __typename
      ... on AssetChecks { checks { name canExecuteIndividually } }
    }
  }
}
"""

_CHECK_EXECUTIONS = """
query Executions($key: AssetKeyInput!, $name: String!, $partition: String) {
  assetCheckExecutions(assetKey: $key, checkName: $name, limit: 5, partition: $partition) {
    runId
    status
    evaluation { success partition }
  }
}
"""


def launch(servers: DagsterServers, session: str, assets: list[str] | None = None) -> str:
    """Launch the session job for `session` (or only `assets` of it), as the UI's launch does."""
    selector: dict[str, Any] = {
        "repositoryLocationName": LOCATION,
        "repositoryName": REPOSITORY,
        "jobName": SESSION_JOB,
    }
    if assets is not None:
        selector["assetSelection"] = [{"path": [name]} for name in assets]
    params = {
        "selector": selector,
        "mode": "default",
        "runConfigData": "{}",
        "executionMetadata": {"tags": [{"key": "dagster/partition", "value": session}]},
    }
    answer = servers.graphql(_LAUNCH, {"params": params})["launchRun"]
    assert answer["__typename"] == "LaunchRunSuccess", answer
    return str(answer["run"]["runId"])


def all_runs(servers: DagsterServers) -> list[dict[str, Any]]:
    runs = servers.graphql(_ALL_RUNS)["runsOrError"]
    assert runs["__typename"] == "Runs", runs
    return list(runs["results"])


def finished(servers: DagsterServers, run_id: str) -> str:
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while time.monotonic() < deadline:
        servers.assert_running()
        status = {r["runId"]: r["status"] for r in all_runs(servers)}.get(run_id)
        if status in {"SUCCESS", "FAILURE", "CANCELED"}:
            return str(status)
        time.sleep(1.0)
    raise AssertionError(
        f"run {run_id} did not finish in {RUN_TIMEOUT_S:.0f}s\n{servers.log_tail()}"
    )


def check_executions(servers: DagsterServers, asset: str, name: str) -> list[dict[str, Any]]:
    data = servers.graphql(
        _CHECK_EXECUTIONS, {"key": {"path": [asset]}, "name": name, "partition": SESSION}
    )
    return list(data["assetCheckExecutions"])


@pytest.fixture
def materialized_session(dagster_servers: DagsterServers, tmp_path: Path) -> str:
    """A session registered and materialized once (the whole session job, its partition)."""
    source = tmp_path / f"{SESSION}.jsonl"
    source.write_text("".join(line + "\n" for line in SAMPLE.read_text().splitlines()[:40]))
    register_transcript(dagster_servers.transcripts, SESSION, source)
    with DagsterInstance.from_config(str(dagster_servers.home)) as instance:
        instance.add_dynamic_partitions("sessions", [SESSION])
    run_id = launch(dagster_servers, SESSION)
    status = finished(dagster_servers, run_id)
    assert status == "SUCCESS", f"the session run ended {status}\n{dagster_servers.log_tail()}"
    return SESSION


def no_check_run_that_fails(page: Page, servers: DagsterServers, button: Locator) -> None:
    """`button` either offers nothing (disabled, saying why) or, clicked, starts a check run
    that succeeds."""
    from playwright.sync_api import expect

    expect(button).to_be_visible()
    if button.is_disabled():
        button.hover(force=True)  # a disabled button shows its reason as a tooltip
        expect(page.get_by_text(CANNOT_EXECUTE).first).to_be_visible()
        page.mouse.move(0, 0)
        return
    before = {r["runId"] for r in all_runs(servers)}
    button.click()
    deadline = time.monotonic() + 60
    fresh: list[str] = []
    while not fresh and time.monotonic() < deadline:
        fresh = [r["runId"] for r in all_runs(servers) if r["runId"] not in before]
        time.sleep(0.5)
    assert fresh, "the button was enabled but launched no run"
    for run_id in fresh:
        status = finished(servers, run_id)
        assert status == "SUCCESS", (
            f"the check run {run_id} the button launched ended {status}\n{servers.log_tail()}"
        )


@pytest.mark.slow
def test_the_checks_tab_offers_no_check_run_that_fails(
    dagster_servers: DagsterServers, materialized_session: str, page: Page
) -> None:
    from playwright.sync_api import expect

    # The session run evaluated every check for its partition, in the assets' own steps.
    for asset, check in (
        ("npcs", "schema_valid"),
        ("npcs", "source_refs_in_document"),
        ("npcs", "rejection_rate"),
        ("session_bundle", "files_match_index"),
        ("session_bundle", "quality_vs_gold"),
    ):
        [latest, *_] = check_executions(dagster_servers, asset, check)
        assert latest["status"] == "SUCCEEDED", (asset, check, latest)
        assert latest["evaluation"]["partition"] == materialized_session

    for asset, checks in (
        ("session_bundle", ("files_match_index", "quality_vs_gold", "up_to_date")),
        ("npcs", ("schema_valid", "source_refs_in_document", "rejection_rate", "up_to_date")),
    ):
        page.goto(f"{dagster_servers.url}/assets/{asset}?view=checks")
        for name in checks:
            expect(page.get_by_text(name, exact=True).first).to_be_visible()
        no_check_run_that_fails(
            page, dagster_servers, page.get_by_role("button", name="Execute all")
        )
        if asset == "session_bundle":
            page.screenshot(path=str(artifacts() / "checks-tab.png"), full_page=True)
        # The selected check's own "Execute" button ("execute Execute": the icon's name first).
        no_check_run_that_fails(
            page,
            dagster_servers,
            page.get_by_role("button", name=re.compile(r"(^| )Execute$")).first,
        )

    # Nowhere else either (the asset sidebar, the graph): the only checks of the code location
    # that can be launched without their asset are the `up_to_date` ones (assets/up_to_date.py),
    # which read every session and need no partition: the clicks above launched them.
    nodes = dagster_servers.graphql(_CHECKS)["assetNodes"]
    launchable = {
        check["name"]
        for node in nodes
        if node["assetChecksOrError"]["__typename"] == "AssetChecks"
        for check in node["assetChecksOrError"]["checks"]
        if check["canExecuteIndividually"] != "REQUIRES_MATERIALIZATION"
    }
    assert launchable == {"up_to_date"}

    # What refreshes a check instead: materializing its asset; for the bundle, from the
    # stored lanes, without a model call.
    before = {
        e["runId"] for e in check_executions(dagster_servers, "session_bundle", "quality_vs_gold")
    }
    run_id = launch(dagster_servers, materialized_session, ["session_bundle"])
    assert finished(dagster_servers, run_id) == "SUCCESS", dagster_servers.log_tail()
    [latest, *_] = check_executions(dagster_servers, "session_bundle", "quality_vs_gold")
    assert latest["runId"] == run_id and latest["runId"] not in before
    assert latest["status"] == "SUCCEEDED"
