"""End to end, as a person uses it: the real webserver and daemon (`dagster dev`), a transcript
dropped into the inbox, the sensor's run, the published bundle; then an edited copy and a
second run of the same session. The model is the test double, answering from another process
through NOTARIUS_TEST_DOUBLE_RESPONDER (whose contract the two fast tests below pin down)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from notarius_dagster.llm import test_double
from notarius_dagster.llm._litellm import litellm
from tests.llm_double import replay, scripted_llm

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


# The contract the end-to-end test relies on: the test double's opt-in default responder.

NPC_PROMPT = [
    {"role": "system", "content": "You read a transcript."},
    {"role": "user", "content": "[7] MATT: Gustav waves.\n\nList the non-player characters."},
]


def answer(messages: list[dict[str, str]]) -> str:
    response = litellm.completion(
        model=f"{test_double.DOUBLE_PROVIDER}/scripted", messages=messages
    )
    return str(response.choices[0].message.content)


@pytest.fixture
def responder_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """Sets NOTARIUS_TEST_DOUBLE_RESPONDER as the servers' environment does; afterwards the
    variable is gone and the default responder with it."""
    yield monkeypatch
    monkeypatch.delenv(test_double.RESPONDER_ENV, raising=False)
    test_double.register_double()
    assert test_double.default_double() is None


def test_the_default_responder_answers_calls_made_outside_any_block(
    responder_env: pytest.MonkeyPatch,
) -> None:
    responder_env.setenv(test_double.RESPONDER_ENV, "tests.doubles:lane_responder")
    test_double.register_double()
    assert json.loads(answer(NPC_PROMPT))["npcs"][0]["name"] == "Gustav"
    with scripted_llm(replay('{"npcs": []}')) as block:  # an open block still answers first
        assert answer(NPC_PROMPT) == '{"npcs": []}'
    default = test_double.default_double()
    assert default is not None and len(default.calls) == 1 and len(block.calls) == 1


def test_without_the_variable_a_call_outside_a_block_fails_loudly(
    responder_env: pytest.MonkeyPatch,
) -> None:
    responder_env.delenv(test_double.RESPONDER_ENV, raising=False)
    test_double.register_double()
    with pytest.raises(Exception, match="no test double is active"):
        answer(NPC_PROMPT)


def test_a_malformed_responder_variable_fails_loudly(responder_env: pytest.MonkeyPatch) -> None:
    responder_env.setenv(test_double.RESPONDER_ENV, "tests.doubles.lane_responder")
    with pytest.raises(ValueError, match="module:function"):
        test_double.register_double()
    responder_env.setenv(test_double.RESPONDER_ENV, "tests.doubles:no_such_responder")
    with pytest.raises(AttributeError):
        test_double.register_double()
