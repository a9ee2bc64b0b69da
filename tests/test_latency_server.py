"""The benchmark's latency server: an OpenAI-compatible stub whose answers must validate against
the schema each request carries (or the pipeline would re-ask and the benchmark would count
calls that a real provider never causes), and whose counters the benchmark reads."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any, Literal

import pytest
from jsonschema import Draft202012Validator
from pydantic import BaseModel, Field

from benchmarks.latency_server import StubServer, answer_for, lane_of, serve


class Item(BaseModel):
    name: str = Field(min_length=1)
    unit_ids: list[int] = Field(min_length=1)
    note: str | None = None


class ItemList(BaseModel):
    """A list lane's answer, shaped like the D&D answer models ($defs, $ref, limits)."""

    spell_casts: list[Item] = Field(max_length=40)


class SceneAnswer(BaseModel):
    """An object lane's answer: an enum and required strings with a minimum length."""

    kind: Literal["combat", "narrative"]
    title: str = Field(min_length=1, max_length=120)
    summary: str = ""


def _request(schema: dict[str, Any], user: str, *, in_prompt: bool = False) -> dict[str, Any]:
    """A chat-completions body as the product's client sends it on the `json_object` rung
    (or with the schema only in the system prompt)."""
    system = "Cite lines like [42].\n\n"
    if in_prompt:
        system += "It must satisfy this JSON Schema:\n" + json.dumps(schema, indent=2)
    body: dict[str, Any] = {
        "model": "stub",
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
    }
    if not in_prompt:
        body["response_format"] = {"type": "json_object", "schema": schema}
    return body


def _post(server: StubServer, path: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(
        server.url + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def _get(server: StubServer, path: str) -> Any:
    with urllib.request.urlopen(server.url + path, timeout=10) as response:
        return json.loads(response.read())


@pytest.fixture
def stub() -> Iterator[StubServer]:
    server = serve(
        script={"npcs": [{"name": "Scripted", "aliases": [], "description": "d"}]},
        unit_block=1000,
    )
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("model", [ItemList, SceneAnswer])
@pytest.mark.parametrize("in_prompt", [False, True])
def test_the_answer_validates_against_the_requests_schema(
    stub: StubServer, model: type[BaseModel], in_prompt: bool
) -> None:
    schema = model.model_json_schema()
    reply = _post(stub, "/v1/chat/completions", _request(schema, "[3] A: hi", in_prompt=in_prompt))

    answer = json.loads(reply["choices"][0]["message"]["content"])
    assert list(Draft202012Validator(schema).iter_errors(answer)) == []
    model.model_validate(answer)
    assert reply["choices"][0]["finish_reason"] == "stop"
    assert reply["usage"]["prompt_tokens"] > 0 and reply["usage"]["completion_tokens"] > 0


def test_list_lanes_answer_empty_and_are_named_by_their_items_field() -> None:
    schema = ItemList.model_json_schema()
    lane, answer = answer_for(_request(schema, "[1] A: x"), {})
    assert (lane, answer) == ("spell-casts", {"spell_casts": []})
    assert lane_of(SceneAnswer.model_json_schema()) == "scene-descriptions"


def test_scripted_records_cite_the_first_unit_of_the_user_prompt() -> None:
    schema = {
        "type": "object",
        "required": ["npcs"],
        "properties": {"npcs": {"type": "array", "items": {"type": "object"}}},
    }
    script = {"npcs": [{"name": "N", "description": "one"}, {"name": "M", "unit_ids": [9]}]}
    lane, answer = answer_for(_request(schema, "excerpt:\n[17] A: x\n[18] B: y"), script)
    assert lane == "npcs"
    # [42] in the system prompt is an example, not a unit of the chunk.
    assert answer == {
        "npcs": [
            {"name": "N", "description": "one", "unit_ids": [17]},
            {"name": "M", "unit_ids": [9]},
        ]
    }


def test_a_record_citing_a_mention_cites_the_unit_naming_it_or_is_left_out() -> None:
    schema = {
        "type": "object",
        "required": ["npcs"],
        "properties": {"npcs": {"type": "array", "items": {"type": "object"}}},
    }
    script = {"npcs": [{"name": "Lorenzo", "unit_ids": "mentioning"}]}
    prompt = "excerpt:\n[17] A: x\n[18] B: then LORENZO laughs"
    _, answer = answer_for(_request(schema, prompt), script)
    assert answer == {"npcs": [{"name": "Lorenzo", "unit_ids": [18]}]}
    _, answer = answer_for(_request(schema, "excerpt:\n[17] A: x"), script)
    assert answer == {"npcs": []}


def test_stats_count_requests_per_lane_and_unit_block(stub: StubServer) -> None:
    assert _get(stub, "/stats")["requests"] == 0
    items = ItemList.model_json_schema()
    _post(stub, "/v1/chat/completions", _request(items, "[1005] A: x"))
    _post(stub, "/v1/chat/completions", _request(items, "[2001] A: x"))
    _post(stub, "/v1/chat/completions", _request(SceneAnswer.model_json_schema(), "[2002] A: x"))

    stats = _get(stub, "/stats")
    assert stats["requests"] == 3
    assert stats["lanes"] == {"scene-descriptions": 1, "spell-casts": 2}
    assert stats["unit_blocks"] == {
        "1": {"spell-casts": 1},
        "2": {"scene-descriptions": 1, "spell-casts": 1},
    }
    assert stats["first_request_at"] <= stats["last_request_at"]
    assert stats["in_flight"] == 0 and stats["max_in_flight"] >= 1

    _post(stub, "/reset", {})
    assert _get(stub, "/stats")["requests"] == 0
    assert _get(stub, "/stats")["first_request_at"] is None
