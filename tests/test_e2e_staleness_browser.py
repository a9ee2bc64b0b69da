"""A prompt edit on a fresh instance, in a browser: the lineage shows the edited lane stale, then
the automation re-runs exactly that lane and what depends on it, once, in one run.

The real `dg dev` (webserver, daemon, code server; tests/e2e_servers.py) serves the complete
profile on a fresh instance, with the automation sensor on as shipped (a 5 s interval instead
of 30) and the `spells` lane reading a copy of its prompt (`prompt_override_environ`; the
repository's files are never edited). The model is the lane double on loopback.

1. `notarius sessions add` registers a session; the automation materializes it.
2. The copy of the `spells` prompt is edited and the code location reloaded (what *Reload*
   does). The lineage's `spells` node then shows a failed check, and its *Checks* tab says
   `up_to_date` failed: "stale in 1 of 1 materialized session(s): SESSION (code version
   changed)" (assets/up_to_date.py).
3. The automation's re-run materializes `spells`, `evidence_context`, `session_bundle` and
   `session_report` of that session, in one run, and nothing else; afterwards `up_to_date`
   passes again.

Why step 2 cannot race the re-run: the edited prompt's model calls (the only calls whose
prompt carries the edit) wait at the loopback server until the test has seen the stale state in
the browser; until then the automation's run cannot materialize `spells`, and the
`up_to_date` result stays the staleness sensor's "failed". No sleep decides the order."""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from notarius_dagster.dnd.spells.lane import LANE as SPELLS
from tests.browser import artifacts
from tests.e2e_servers import (
    REPO,
    VENV_BIN,
    DagsterServers,
    automated_servers,
)
from tests.lane_doubles import complete_responder
from tests.llm_double import Messages

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

pytest_plugins = ["tests.e2e_servers"]

SESSION = "e2e-stale"
SAMPLE = REPO / "samples" / "crd3-c2e001-slice.jsonl"
COMPLETE = REPO / "configs" / "dnd-complete.yaml"
EDIT = "\nName each spell exactly as it is cast.\n"
INTERVAL_S = 5
WAIT_S = 480.0
GATE_S = 300.0
RERUN = {
    # the edited lane with its level-mates (one step; they reuse every chunk) and what follows
    *("spells", "combat_turns", "item_events", "npc_interactions"),
    *("evidence_context", "session_bundle", "session_report"),
}


class Gate:
    """Holds the model calls of the edited prompt until the test opens it."""

    def __init__(self) -> None:
        self.opened = threading.Event()
        self.held = threading.Event()

    def responder(self, messages: Messages, response_format: Any) -> str:
        if any(EDIT.strip() in str(m.get("content", "")) for m in messages):
            self.held.set()
            self.opened.wait(GATE_S)
        return complete_responder(messages, response_format)


@pytest.fixture(scope="module")
def gate() -> Gate:
    return Gate()


@pytest.fixture(scope="module")
def prompt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    copy = tmp_path_factory.mktemp("spells-prompt") / "prompt.md"
    copy.write_text(SPELLS.prompt.read_text())
    return copy


@pytest.fixture(scope="module")
def dagster_servers(
    tmp_path_factory: pytest.TempPathFactory, gate: Gate, prompt: Path
) -> Iterator[DagsterServers]:
    """This module's own servers (the `page` fixture opens them): the complete profile, the
    automation on, `spells` reading `prompt`."""
    root = tmp_path_factory.mktemp("dagster-stale")
    with automated_servers(
        root,
        gate.responder,
        profile=COMPLETE,
        interval_s=INTERVAL_S,
        kind=SPELLS.kind,
        prompt=prompt,
    ) as servers:
        try:
            yield servers
        finally:
            gate.opened.set()  # before the servers stop: no held call outlives them


def wait_until(servers: DagsterServers, what: str, done: Callable[[], bool]) -> None:
    servers.wait_until(SESSION, what, done, timeout_s=WAIT_S)


def materializations(servers: DagsterServers) -> dict[str, list[str]]:
    """Asset name -> the run ids of its materializations of SESSION, oldest first."""
    return servers.materializations(SESSION)


def all_runs_finished(servers: DagsterServers) -> bool:
    return servers.all_runs_succeeded(SESSION)


PASSED = re.compile(r"(\d+) / (\d+) Passed")
WARNED = re.compile("warning_outline")
"""The checks row's link when a check failed with severity WARN (its icon's name first)."""


def checks_row(node: Locator) -> tuple[int, int]:
    """The node's *Asset checks* row: checks passed, of all (Dagster's "3 / 4 Passed")."""
    from playwright.sync_api import expect

    expect(node).to_contain_text(PASSED)
    found = PASSED.search(node.text_content() or "")
    assert found is not None
    return int(found.group(1)), int(found.group(2))


def up_to_date_says(page: Page, url: str, asset: str, text: str, timeout_s: float = 120) -> None:
    """The asset's *Checks* tab (Catalog -> the asset -> Checks), `up_to_date` selected, shows
    `text` in its latest execution (opened again until it does, as a person reloads)."""
    deadline = time.monotonic() + timeout_s
    while True:
        page.goto(f"{url}/assets/{asset}?view=checks")
        page.get_by_text("up_to_date", exact=True).first.click()
        shown = page.get_by_text(text).first
        try:
            shown.wait_for(state="visible", timeout=10_000)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise


def lane_node(page: Page, url: str, name: str) -> Locator:
    """The lineage node of asset `name` in the `lanes` group's graph (its text: the name, the
    latest event, "Asset checks 4 / 4 Passed", the partitions, ...)."""
    # The node's own path selects it and centres the graph on it (the graph draws only the
    # nodes in view).
    page.goto(f"{url}/locations/notarius/asset-groups/lanes/lineage/{name}")
    node = page.locator("svg foreignObject").filter(has_text=name).filter(has_text="Asset checks")
    return node.first


@pytest.mark.slow
def test_a_prompt_edit_shows_stale_in_the_lineage_then_re_runs_only_its_lane(
    dagster_servers: DagsterServers, page: Page, gate: Gate, prompt: Path
) -> None:
    from playwright.sync_api import expect

    servers = dagster_servers
    started = time.monotonic()
    transcript = servers.home.parent / f"{SESSION}.jsonl"
    transcript.write_text("\n".join(SAMPLE.read_text().splitlines()[:40]) + "\n")
    added = subprocess.run(
        [str(VENV_BIN / "notarius"), "sessions", "add", str(transcript)],
        env={
            **os.environ,
            "DAGSTER_HOME": str(servers.home),
            "NOTARIUS_DATA": str(servers.data),
            "PYTHONPATH": str(REPO),
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert added.returncode == 0, added.stderr
    wait_until(
        servers,
        "the automation's first materialization of the session",
        lambda: "session_report" in materializations(servers) and all_runs_finished(servers),
    )
    first = materializations(servers)
    first_runs = {r["runId"] for r in servers.runs_of(SESSION)}
    assert not gate.held.is_set()

    # Before the edit: every check of `spells` passes, `up_to_date` among them. Its result is
    # waited for first: on a loaded machine the last report may still be the one made while
    # the first run was in progress ("being re-run"), until the next look of the sensor.
    up_to_date_says(page, servers.url, "spells", "up to date in all 1 materialized session(s)")
    node = lane_node(page, servers.url, "spells")
    before = checks_row(node)
    assert before[0] == before[1], node.text_content()
    expect(node.get_by_role("link", name=WARNED)).to_have_count(0)
    before_text = node.text_content() or ""

    prompt.write_text(prompt.read_text() + EDIT)
    servers.reload_location()
    edited_at = time.monotonic()

    # (a) Stale at a glance, before the re-run can have materialized `spells` (the gate).
    stale = f"stale in 1 of 1 materialized session(s): {SESSION} (code version changed"
    up_to_date_says(page, servers.url, "spells", stale)
    page.screenshot(path=str(artifacts() / "checks-up-to-date-stale.png"), full_page=True)
    # The node's checks row: a warning sign and fewer passed ("3 / 4" before the re-run is
    # launched; "0 / 4" once it is, its partitioned checks then being in progress).
    node = lane_node(page, servers.url, "spells")
    expect(node.get_by_role("link", name=WARNED)).to_be_visible()
    passed, total = checks_row(node)
    assert passed < total == before[1], (passed, total)
    stale_text = node.text_content() or ""
    page.screenshot(path=str(artifacts() / "lineage-stale.png"), full_page=False)
    assert materializations(servers)["spells"] == first["spells"], "re-run before it was seen"
    # The lanes the edit does not touch stay green.
    npcs = lane_node(page, servers.url, "npcs")
    npcs_row = checks_row(npcs)
    assert npcs_row[0] == npcs_row[1], npcs.text_content() or ""
    npcs_text = npcs.text_content() or ""
    seen_stale_s = time.monotonic() - edited_at

    gate.opened.set()  # now let the automation's re-run call the model
    wait_until(
        servers,
        "the re-run after the prompt edit",
        lambda: (
            len(materializations(servers).get("session_report", [])) == 2
            and all_runs_finished(servers)
        ),
    )
    time.sleep(3 * INTERVAL_S)  # a few more automation ticks: nothing else may be launched
    assert all_runs_finished(servers)

    # (b) Only the edited lane's level and what depends on it, once, in one run of the session.
    after = materializations(servers)
    new_runs = {r["runId"] for r in servers.runs_of(SESSION)} - first_runs
    assert len(new_runs) == 1, new_runs
    [rerun] = new_runs
    assert {name for name, runs in after.items() if rerun in runs} == RERUN
    for name, runs in after.items():
        expected = first.get(name, []) + ([rerun] if name in RERUN else [])
        assert runs == expected, (name, runs)

    # And the lineage says so: `up_to_date` passes again.
    up_to_date_says(page, servers.url, "spells", "up to date in all 1 materialized session(s)")
    node = lane_node(page, servers.url, "spells")
    expect(node).to_contain_text(f"{before[0]} / {before[1]} Passed")
    expect(node.get_by_role("link", name=WARNED)).to_have_count(0)
    print(
        f"\nbefore: {before_text!r}\nstale: {stale_text!r}\nnpcs while stale: {npcs_text!r}"
        f"\nstale seen {seen_stale_s:.1f}s after the reload; runs after the edit: "
        f"{len(new_runs)}; test {time.monotonic() - started:.0f}s"
    )
