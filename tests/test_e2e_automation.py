"""End to end with the real daemon: declarative automation as a person relies on it.

`dagster dev` serves the complete profile with the automation sensor switched on
(NOTARIUS_AUTOMATION=running, a 5 s interval) and the `npcs` lane reading a copy of its prompt
(a `sitecustomize` hook on the servers' PYTHONPATH points the lane the registry loads at the
copy, as tests/lane_doubles.py's `use_prompt` does in process). Then:

1. `notarius sessions add` registers a session; nothing is launched by hand, and the automation
   sensor materializes the whole session.
2. The copied prompt is edited and the code location reloaded (GraphQL
   `reloadRepositoryLocation`, what the UI's *Reload* does): only `npcs`, its level-mate
   `scene_descriptions` (one step, assets/factory.py) and what depends on `npcs`
   re-materialize; `source_document` and `chunk_map` do not, and every lane but `npcs` makes no
   model call (its chunks come from checkpoints).
3. Every run carries the session, profile digest and model tags."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from notarius_dagster.dnd.npcs.lane import LANE as NPCS
from tests.e2e_servers import (
    REPO,
    VENV_BIN,
    DagsterServers,
    automated_servers,
)
from tests.lane_doubles import complete_responder

SESSION = "e2e-auto"
SAMPLE = REPO / "samples" / "crd3-c2e001-slice.jsonl"
COMPLETE = REPO / "configs" / "dnd-complete.yaml"
INTERVAL_S = 5
WAIT_S = 420.0
NPC_DEPENDANTS = ("combat_turns", "spells", "item_events", "npc_interactions")
UNCHANGED = ("source_document", "chunk_map")


_SENSOR_TICKS = """
query Ticks($name: String!) {
  sensorOrError(sensorSelector: {repositoryLocationName: "notarius",
                                 repositoryName: "__repository__", sensorName: $name}) {
    __typename
    ... on Sensor { sensorState { status ticks(limit: 5) { status } } }
  }
}
"""


@pytest.fixture(scope="module")
def automated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DagsterServers, Path]]:
    root = tmp_path_factory.mktemp("dagster-automation")
    prompt = root / "npcs-prompt.md"
    prompt.write_text(NPCS.prompt.read_text())
    with automated_servers(
        root,
        complete_responder,
        profile=COMPLETE,
        interval_s=INTERVAL_S,
        kind=NPCS.kind,
        prompt=prompt,
    ) as servers:
        yield servers, prompt


def wait_until(servers: DagsterServers, what: str, done: Callable[[], bool]) -> None:
    servers.wait_until(SESSION, what, done, timeout_s=WAIT_S)


def materializations(servers: DagsterServers) -> dict[str, list[str]]:
    """Asset name -> the run ids of its materializations of SESSION, oldest first."""
    return servers.materializations(SESSION)


def all_runs_finished(servers: DagsterServers) -> bool:
    return servers.all_runs_succeeded(SESSION)


def sensor_has_ticked(servers: DagsterServers) -> bool:
    sensor = servers.graphql(_SENSOR_TICKS, {"name": "notarius_automation_sensor"})
    state = sensor["sensorOrError"].get("sensorState") or {}
    return state.get("status") == "RUNNING" and bool(state.get("ticks"))


def manifest_lanes(servers: DagsterServers) -> dict[str, Any]:
    manifest = json.loads((servers.bundles / SESSION / "manifest.json").read_text())
    return {lane["lane_id"]: lane for lane in manifest["artifact_lanes"]}


@pytest.mark.slow
def test_a_prompt_edit_re_materializes_only_that_lane_and_its_dependants(
    automated: tuple[DagsterServers, Path],
) -> None:
    servers, prompt = automated
    entries = servers.graphql(
        "{ workspaceOrError { ... on Workspace { locationEntries { name } } } }"
    )["workspaceOrError"]["locationEntries"]
    assert [e["name"] for e in entries] == ["notarius"]
    wait_until(servers, "the automation sensor's first tick", lambda: sensor_has_ticked(servers))

    transcript = servers.home.parent / "e2e-auto.jsonl"
    transcript.write_text("\n".join(SAMPLE.read_text().splitlines()[:40]) + "\n")
    env = {
        **os.environ,
        "DAGSTER_HOME": str(servers.home),
        "NOTARIUS_DATA": str(servers.data),
        "PYTHONPATH": str(REPO),
    }
    added = subprocess.run(
        [str(VENV_BIN / "notarius"), "sessions", "add", str(transcript)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert added.returncode == 0, added.stderr
    assert "Nothing ran" in added.stdout

    wait_until(
        servers,
        "the session's first materialization",
        lambda: "session_report" in materializations(servers) and all_runs_finished(servers),
    )
    first = materializations(servers)
    assert all(len(runs) == 1 for name, runs in first.items() if name != "transcript"), first
    first_runs = {r["runId"] for r in servers.runs_of(SESSION)}
    before = manifest_lanes(servers)
    assert before["npcs"]["llm"]["calls"] > 0

    prompt.write_text(prompt.read_text() + "\nPrefer full names.\n")
    servers.reload_location()
    wait_until(
        servers,
        "the re-run after the prompt edit",
        lambda: (
            len(materializations(servers).get("session_report", [])) == 2
            and all_runs_finished(servers)
        ),
    )
    time.sleep(3 * INTERVAL_S)  # a few more ticks: nothing else may be launched
    assert all_runs_finished(servers)

    after = materializations(servers)
    for name in UNCHANGED:
        assert after[name] == first[name], f"{name} re-materialized"
    changed = ["npcs", "scene_descriptions", *NPC_DEPENDANTS, "session_bundle", "session_report"]
    if "evidence_context" in after:
        changed.append("evidence_context")
    for name in changed:
        assert len(after[name]) == 2, f"{name}: {after[name]}"
    # Usually one run does all of it; a tick that lands while the location reloads can split
    # it over two. What a user depends on is which (asset, session) pairs re-ran, that runs
    # launched after the edit did it, and what it cost (below), not how many runs it took.
    reruns = {after[name][1] for name in changed}
    assert not reruns & first_runs, "runs launched after the edit re-materialized them"
    assert set(after) - set(changed) - set(UNCHANGED) <= {"transcript"}

    lanes = manifest_lanes(servers)
    assert lanes["npcs"]["chunks"]["reused"] == 0
    assert lanes["npcs"]["llm"]["calls"] == before["npcs"]["llm"]["calls"]
    for other in (
        "combat-turns",
        "spells",
        "item-events",
        "npc-interactions",
        "scene-descriptions",
    ):
        chunks = lanes[other]["chunks"]
        assert lanes[other]["llm"]["calls"] == 0 and chunks["reused"] == chunks["total"]
    assert lanes["scene-descriptions"]["records"] == before["scene-descriptions"]["records"]

    runs = servers.runs_of(SESSION)
    assert {r["runId"] for r in runs} - first_runs == reruns
    for run in runs:
        tags = run["tags"]
        assert tags["notarius/session"] == SESSION
        assert tags["notarius/profile_digest"].startswith("sha256:")
        assert tags["notarius/model"] and tags["notarius/profile"]
