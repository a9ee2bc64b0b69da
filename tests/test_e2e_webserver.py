"""End to end, as a person uses it: the real webserver and daemon (`dagster dev`), a transcript
dropped into the inbox, the sensor's run, the published bundle; then an edited copy and a
second run of the same session. The model is the test double, answering the daemon's runs from
a loopback OpenAI-compatible server of this process (tests/e2e_servers.py; the route's contract
is pinned down by the fast tests of tests/test_llm_double.py)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tests.e2e_servers import DagsterServers

pytest_plugins = ["tests.e2e_servers"]

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "samples" / "crd3-c2e001-slice.jsonl"
SESSION = "e2e-inbox"


def sample_slice(units: int = 40) -> list[dict[str, Any]]:
    return [json.loads(line) for line in SAMPLE.read_text().splitlines()[:units]]


def drop_atomically(inbox: Path, name: str, units: list[dict[str, Any]]) -> str:
    """Write the transcript next to its final name under a dot-name the sensor ignores, then
    rename it into place (what a careful copy tool does); returns the content's sha256."""
    content = "".join(json.dumps(unit) + "\n" for unit in units).encode()
    staging = inbox / f".{name}.partial"
    staging.write_bytes(content)
    os.replace(staging, inbox / name)
    return hashlib.sha256(content).hexdigest()


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


@pytest.mark.slow
def test_a_dropped_transcript_is_published_and_an_edited_copy_runs_again(
    dagster_servers: DagsterServers,
) -> None:
    servers = dagster_servers
    units = sample_slice()
    first_hash = drop_atomically(servers.inbox, f"{SESSION}.jsonl", units)

    first = servers.wait_for_run(SESSION)
    assert first["tags"]["dagster/sensor_name"] == "inbox_sensor"
    assert first["tags"]["dagster/run_key"] == f"{SESSION}:{first_hash}"
    bundle = servers.bundles / SESSION
    index = read_json(bundle / "index.json")
    manifest = read_json(bundle / "manifest.json")
    assert [lane["lane_id"] for lane in index["lanes"]] == ["npcs"]
    assert index["run_id"] == manifest["run_id"] == first["runId"]
    assert manifest["validation_status"] == "approved"
    assert manifest["source"]["units"] == len(units)
    npcs = read_json(bundle / "lanes" / "npcs.json")
    assert "Gustav" not in {npc["name"] for npc in npcs["npcs"]}

    units[4] = {**units[4], "text": "Gustav steps out from behind the wagon."}
    second_hash = drop_atomically(servers.inbox, f"{SESSION}.jsonl", units)

    second = servers.wait_for_run(SESSION, besides={first["runId"]})
    assert second["tags"]["dagster/run_key"] == f"{SESSION}:{second_hash}"
    edited = read_json(bundle / "manifest.json")
    assert edited["run_id"] == second["runId"]
    assert edited["validation_status"] == "approved"
    assert edited["source"]["digest"] != manifest["source"]["digest"]
    assert "Gustav" in {npc["name"] for npc in read_json(bundle / "lanes" / "npcs.json")["npcs"]}
    assert len(servers.runs_of(SESSION)) == 2  # the unchanged file asked for nothing more
