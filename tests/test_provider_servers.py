"""The loopback provider servers (tests/provider_servers.py) checked on their own, through
litellm's real call path: that each enforces the rules its provider documents, refuses what
the provider refuses in the provider's words, answers in the provider's shapes, and that its
double slips outside a chunk exactly where the provider would not stop it. Without these, a
passing conformance test could mean a lenient server rather than a conforming client."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from notarius_dagster.dnd.llm_extract import constrain_citations
from notarius_dagster.llm._litellm import litellm
from notarius_dagster.modules import registry
from tests.provider_servers import (
    AnthropicServer,
    Fault,
    GeminiServer,
    OllamaServer,
    OpenAIServer,
    PromptCache,
    ProviderServer,
    citations_in,
    openai_strict_problems,
)

CHUNK = [1050, 1051, 1052]
MESSAGES = [
    {"role": "system", "content": "You extract NPCs. Answer with one JSON object."},
    {
        "role": "user",
        "content": "[1050] MATT: The ringmaster, Gustav, bows low.\n"
        "[1051] LAURA: Jester waves at him.\n[1052] MATT: Ornna watches from the wagon.",
    },
]


def answer_schema(kind: str = "dnd/npc-list") -> dict[str, Any]:
    """The answer schema a lane sends today for a chunk of CHUNK (lane model + citation enum)."""
    spec = registry().lane_of_kind(kind)
    assert spec is not None
    model = spec.answer_model
    return constrain_citations(model.model_json_schema(), CHUNK)


STRICT = {
    "type": "object",
    "properties": {
        "npcs": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "description": {"type": ["string", "null"]},
                    "unit_ids": {
                        "type": "array",
                        "items": {"type": "integer", "enum": CHUNK},
                        "minItems": 1,
                    },
                },
                "required": ["name", "description", "unit_ids"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["npcs"],
    "additionalProperties": False,
}
"""The answer schema in the form OpenAI's strict mode documents: every property required,
optional ones nullable, `additionalProperties: false`, no keyword outside the subset."""


def json_schema(schema: dict[str, Any], strict: bool) -> dict[str, Any]:
    return {
        "type": "json_schema",
        "json_schema": {"name": "NpcAnswer", "schema": schema, "strict": strict},
    }


@pytest.fixture
def openai() -> Iterator[ProviderServer]:
    with OpenAIServer() as server:
        yield server


def complete(server: ProviderServer, model: str, **kwargs: Any) -> Any:
    return litellm.completion(
        model=model,
        messages=MESSAGES,
        api_base=server.api_base,
        api_key="sk-servers-test-000111",
        max_tokens=400,
        timeout=10,
        num_retries=0,
        **kwargs,
    )


def test_openai_strict_mode_refuses_the_answer_schemas_lanes_send_today() -> None:
    """Every lane's answer schema breaks the strict subset the way issue 18 says: not every
    property required, no `additionalProperties: false`, `minLength`/`maxLength`/`default`."""
    for kind in (lane.kind for lane in registry().lanes):
        problems = " ".join(openai_strict_problems(answer_schema(kind)))
        assert "'additionalProperties' is required to be supplied and to be false" in problems
        assert "'maxLength' is not permitted" in problems, kind
    npc = " ".join(openai_strict_problems(answer_schema()))
    assert "Missing 'aliases'" in npc and "'default' is not permitted" in npc
    assert openai_strict_problems(STRICT) == []


def test_openai_answers_a_refused_schema_with_its_400(openai: ProviderServer) -> None:
    with pytest.raises(litellm.BadRequestError) as caught:
        complete(openai, "openai/gpt-4o-mini", response_format=json_schema(answer_schema(), True))
    assert "Invalid schema for response_format 'NpcAnswer': In context=(" in str(caught.value)
    assert openai.requests[0].status == 400 and openai.requests[0].problems


@pytest.mark.parametrize("strict", [False, True])
def test_the_double_slips_outside_its_chunk_only_where_nothing_enforces_the_enum(
    openai: ProviderServer, strict: bool
) -> None:
    openai.tempt = True
    response = complete(openai, "openai/gpt-4o-mini", response_format=json_schema(STRICT, strict))
    cited = set(citations_in(json.loads(response.choices[0].message.content)))
    assert openai.requests[0].enforced is strict
    assert (cited <= set(CHUNK)) is strict, cited
    assert cited & set(CHUNK)


@pytest.mark.parametrize(
    ("server", "model"),
    [
        (AnthropicServer, "anthropic/claude-haiku-4-5"),
        (GeminiServer, "gemini/gemini-2.5-flash"),
        (OllamaServer, "ollama_chat/llama3.1"),
        (lambda: OpenAIServer("vllm"), "hosted_vllm/Qwen2.5-7B-Instruct"),
        (lambda: OpenAIServer("lmstudio"), "openai/qwen2.5-7b-instruct"),
    ],
    ids=["anthropic", "gemini", "ollama", "vllm", "lmstudio"],
)
def test_each_provider_enforces_the_schema_in_its_own_slot(server: Any, model: str) -> None:
    """Sent as litellm sends `json_schema` for the model (Anthropic `output_format`, Gemini
    `response_json_schema`, Ollama `format`, vLLM and LM Studio `json_schema`): accepted,
    enforced, and the tempted double stays inside the chunk."""
    with server() as provider:
        provider.tempt = True
        response = complete(provider, model, response_format=json_schema(STRICT, True))
        exchange = provider.requests[0]
    assert exchange.status == 200 and exchange.enforced, (exchange.form, exchange.problems)
    answer = json.loads(response.choices[0].message.content)
    assert set(citations_in(answer)) <= set(CHUNK)
    assert answer["npcs"][0]["name"] == "Gustav"  # a name read from the cited line


def test_anthropic_refuses_constraints_its_grammar_cannot_enforce() -> None:
    """litellm strips `minLength`/`maxLength` before sending; an `output_format` that still
    carries one gets Anthropic's 400 in its error shape."""
    schema = {**STRICT, "properties": {"npcs": {"type": "string", "maxLength": 5}}}
    body = {
        "model": "claude-haiku-4-5",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "hi"}],
        "output_format": {"type": "json_schema", "schema": schema},
    }
    with AnthropicServer() as server:
        status, _, payload = post(
            f"{server.root}/v1/messages",
            body,
            {"anthropic-beta": "structured-outputs-2025-11-13", "x-api-key": "k"},
        )
    assert status == 400 and payload["type"] == "error"
    assert payload["error"]["type"] == "invalid_request_error"
    assert payload["error"]["message"] == (
        "output_format.schema: For 'string' type, property 'maxLength' is not supported"
    )


def test_azure_before_api_version_2024_08_01_gets_an_unenforced_tool_call() -> None:
    """litellm turns `json_schema` into a forced, non-strict function call on an Azure API
    version without structured outputs: answered as `tool_calls`, and not enforced."""
    with OpenAIServer("azure") as server:
        server.tempt = True
        response = complete(
            server,
            "azure/gpt-4o-mini",
            api_version="2024-06-01",
            response_format=json_schema(STRICT, True),
        )
        exchange = server.requests[0]
    assert (exchange.form, exchange.enforced) == ("tool_call", False)
    answer = json.loads(response.choices[0].message.content)
    assert not set(citations_in(answer)) <= set(CHUNK)  # nothing stopped the slip


def test_lm_studio_refuses_json_object_in_its_own_words() -> None:
    with OpenAIServer("lmstudio") as server, pytest.raises(litellm.BadRequestError) as caught:
        complete(server, "openai/qwen2.5-7b-instruct", response_format={"type": "json_object"})
    assert server.requests[0].problems == (
        "'response_format.type' must be 'json_schema' or 'text'",
    )
    assert "Error code: 400" in str(caught.value)  # what litellm makes of LM Studio's body


def test_gemini_enforces_its_subset_and_records_what_it_ignores() -> None:
    with GeminiServer() as server:
        complete(
            server, "gemini/gemini-2.5-flash", response_format=json_schema(answer_schema(), False)
        )
        exchange = server.requests[0]
    assert exchange.form == "response_json_schema" and exchange.enforced
    assert {"minLength", "maxLength", "default"} <= set(exchange.ignored_keywords)


def post(url: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any, Any]:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"content-type": "application/json", **headers}
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as reply:
            return reply.status, reply.headers, json.loads(reply.read())
    except urllib.error.HTTPError as error:
        return error.code, error.headers, json.loads(error.read() or b"null")


def test_rate_limits_say_when_to_retry_where_each_provider_says_it() -> None:
    """`Retry-After` on the 429 of OpenAI, Anthropic and Ollama; Gemini's only in the body,
    as `RetryInfo.retryDelay`."""
    body = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
    with OpenAIServer() as server:
        server.script(Fault("rate_limit", 7))
        status, headers, payload = post(f"{server.api_base}/chat/completions", body, {})
    assert (status, headers["retry-after"], payload["error"]["code"]) == (
        429,
        "7",
        "rate_limit_exceeded",
    )
    with AnthropicServer() as server:
        server.script(Fault("rate_limit", 7), "overloaded")
        status, headers, payload = post(f"{server.root}/v1/messages", body, {})
        assert (status, headers["retry-after"], payload["error"]["type"]) == (
            429,
            "7",
            "rate_limit_error",
        )
        status, _, payload = post(f"{server.root}/v1/messages", body, {})
        assert (status, payload["error"]["type"]) == (529, "overloaded_error")
    with GeminiServer() as server:
        server.script(Fault("rate_limit", 7))
        status, headers, payload = post(
            f"{server.api_base}/models/gemini-2.5-flash:generateContent", {"contents": []}, {}
        )
    assert status == 429 and "retry-after" not in headers
    assert payload["error"]["status"] == "RESOURCE_EXHAUSTED"
    retry = [d for d in payload["error"]["details"] if d["@type"].endswith("RetryInfo")]
    assert retry == [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"}]


def test_the_openai_cache_rule_counts_shared_prefixes_of_1024_tokens_in_128_steps() -> None:
    cache = PromptCache(minimum=1024, step=128)
    shared = "x" * 4 * 1300  # 1,300 tokens
    assert cache.hit(shared + "first") == 0
    assert cache.hit(shared + "second") == 1024 + 256  # 1,300 shared: 1,024 + 2 x 128
    assert cache.hit("y" * 4 * 1300) == 0
    assert PromptCache(minimum=1024).hit("z" * 100) == 0
