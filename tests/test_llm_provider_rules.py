"""The LLM client against the rules real providers enforce, one rule at a time, through the
real `litellm.completion` into the in-process test double (the wire-level conformance suite
with loopback servers per provider is `tests/test_provider_conformance.py`).

Rules and where they come from:
- OpenAI strict structured outputs: every object `additionalProperties: false`, every property
  `required` (optional ones nullable), only the supported keywords; a schema outside them is
  refused with HTTP 400 "Invalid schema for response_format"
  (https://platform.openai.com/docs/guides/structured-outputs, "Supported schemas").
- Gemini `response_json_schema`: a subset of JSON Schema; other keywords are ignored
  (https://ai.google.dev/gemini-api/docs/structured-output, "JSON Schema support").
- Rate limits: `Retry-After` in seconds or as an HTTP date (RFC 9110 section 10.2.3; OpenAI and
  Anthropic send it on 429: https://docs.claude.com/en/api/rate-limits), Gemini's
  `google.rpc.RetryInfo.retryDelay` in the error details
  (https://ai.google.dev/gemini-api/docs/troubleshooting, 429 RESOURCE_EXHAUSTED)."""

from __future__ import annotations

import json
import time
from email.utils import formatdate
from typing import Any

import httpx
import litellm
import pytest
from jsonschema import Draft202012Validator

from notarius_dagster.dnd.npcs.lane import LANE as NPCS
from notarius_dagster.engine.errors import LLMError, TransientLLMError
from notarius_dagster.engine.llm_contract import StructuredRequest
from notarius_dagster.engine.redaction import redact_secrets
from notarius_dagster.llm.client import LiteLLMClient
from notarius_dagster.llm.errors import failure_kind, retry_after_s
from notarius_dagster.llm.schema_forms import (
    OPENAI_STRICT_KEYWORDS,
    gemini_form,
    openai_strict_form,
    strip_added_nulls,
)
from tests.llm_double import double_profile, provider_error_of, scripted_llm

NPC_SCHEMA: dict[str, Any] = NPCS.answer_model.model_json_schema()
REFUSAL = (
    "Invalid schema for response_format 'NpcAnswer': In context=('properties', 'name'), "
    "'minLength' is not permitted."
)


def objects(schema: Any) -> list[dict[str, Any]]:
    """Every object schema in `schema`, at any depth."""
    found: list[dict[str, Any]] = []
    if isinstance(schema, dict):
        if schema.get("type") == "object" or "properties" in schema:
            found.append(schema)
        for value in schema.values():
            found.extend(objects(value))
    elif isinstance(schema, list):
        for value in schema:
            found.extend(objects(value))
    return found


def keywords(schema: Any) -> set[str]:
    """Every keyword used in `schema` (property names excluded)."""
    used: set[str] = set()
    if isinstance(schema, dict):
        for key, value in schema.items():
            used.add(key)
            if key in ("properties", "$defs"):
                for sub in value.values():
                    used |= keywords(sub)
            else:
                used |= keywords(value)
    elif isinstance(schema, list):
        for value in schema:
            used |= keywords(value)
    return used


# --- schema forms ---------------------------------------------------------------------------


def test_the_openai_strict_form_of_a_lane_schema_obeys_every_strict_rule() -> None:
    assert {"minLength", "maxLength", "default"} & keywords(NPC_SCHEMA)  # today's schema
    strict = openai_strict_form(NPC_SCHEMA)
    Draft202012Validator.check_schema(strict)
    assert keywords(strict) <= OPENAI_STRICT_KEYWORDS
    for node in objects(strict):
        assert node["additionalProperties"] is False
        assert sorted(node["required"]) == sorted(node["properties"])
    assert NPCS.answer_model.model_json_schema() == NPC_SCHEMA  # the original is untouched


def test_the_strict_form_keeps_the_citation_enum() -> None:
    cited = {"type": "array", "items": {"type": "integer", "enum": [7, 8, 9]}, "minItems": 1}
    schema = {"type": "object", "properties": {"unit_ids": cited}, "required": ["unit_ids"]}
    strict = openai_strict_form(schema)
    assert strict["properties"]["unit_ids"]["items"] == {"type": "integer", "enum": [7, 8, 9]}


def test_an_optional_field_becomes_nullable_and_its_null_is_read_back_as_absent() -> None:
    full_item = NPC_SCHEMA["$defs"]["NpcAnswerItem"]
    assert set(full_item["properties"]) - set(full_item["required"]) == {"aliases", "description"}
    strict = openai_strict_form(NPC_SCHEMA)
    answer = {"npcs": [{"name": "Mira", "aliases": None, "description": None, "unit_ids": [1]}]}
    Draft202012Validator(strict).validate(answer)  # the provider may send nulls
    assert not Draft202012Validator(NPC_SCHEMA).is_valid(answer)
    back = strip_added_nulls(answer, NPC_SCHEMA)
    assert back == {"npcs": [{"name": "Mira", "unit_ids": [1]}]}  # read as left out
    Draft202012Validator(NPC_SCHEMA).validate(back)


def test_a_null_the_full_schema_allows_is_kept() -> None:
    schema = {
        "type": "object",
        "properties": {"place": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
    }
    assert strip_added_nulls({"place": None}, schema) == {"place": None}


def test_the_gemini_form_drops_what_gemini_would_ignore() -> None:
    form = gemini_form(NPC_SCHEMA)
    assert not {"minLength", "maxLength", "default"} & keywords(form)
    assert form["properties"].keys() == NPC_SCHEMA["properties"].keys()


# --- what a failure means -------------------------------------------------------------------


def rate_limited(headers: dict[str, str], body: str = "slow down") -> Exception:
    response = httpx.Response(
        429, headers=headers, request=httpx.Request("POST", "http://127.0.0.1/v1")
    )
    return litellm.RateLimitError(
        message=body, llm_provider="openai", model="gpt-4o-mini", response=response
    )


def test_retry_after_is_read_in_seconds_as_a_date_in_millis_and_from_gemini() -> None:
    assert retry_after_s(rate_limited({"retry-after": "7"})) == 7
    now = time.time()
    later = formatdate(now + 30, usegmt=True)
    assert 28 <= (retry_after_s(rate_limited({"retry-after": later}), now=now) or 0) <= 31
    assert retry_after_s(rate_limited({"retry-after-ms": "1500"})) == 1.5
    gemini = (
        '{"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "details": [{"@type": '
        '"type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "12s"}]}}'
    )
    assert retry_after_s(rate_limited({}, gemini)) == 12
    assert retry_after_s(rate_limited({})) is None


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (provider_error_of("bad_request", REFUSAL), "refusal"),
        (provider_error_of("bad_request", "context length exceeded"), "permanent"),
        (provider_error_of("authentication", "Incorrect API key provided"), "permanent"),
        (provider_error_of("not_found", "The model does not exist"), "permanent"),
        (provider_error_of("rate_limit", "Rate limit reached"), "transient"),
        (provider_error_of("timeout", "Request timed out"), "transient"),
        (provider_error_of("connection", "Connection reset"), "transient"),
        # Raised before any request leaves: retrying cannot help.
        (provider_error_of("connection", "OpenAIException - Missing credentials"), "permanent"),
        (provider_error_of("connection", "Google Cloud SDK not found"), "permanent"),
    ],
)
def test_each_failure_is_classified(error: Exception, kind: str) -> None:
    assert failure_kind(error) == kind


def test_model_names_are_not_secrets_but_keys_still_are() -> None:
    key = "sk-ant-api03-AbCdEf0123456789XyZ"
    text = f"LLM call to anthropic/claude-haiku-4-5 failed with key {key}"
    redacted = redact_secrets(text, (key,))
    assert "anthropic/claude-haiku-4-5" in redacted
    assert "openai/gpt-4o-mini-2024-07-18" in redact_secrets("model openai/gpt-4o-mini-2024-07-18")
    assert key not in redacted
    assert "AbC9dEf8GhI7jKl6MnO5pQr4sT" not in redact_secrets("token AbC9dEf8GhI7jKl6MnO5pQr4sT")


# --- the ladder and the retries, through litellm ----------------------------------------------

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"names": {"type": "array", "items": {"type": "string", "minLength": 1}}},
    "required": ["names"],
}
VALID = json.dumps({"names": ["Mira"]})


def request(lane: str = "npcs") -> StructuredRequest:
    return StructuredRequest(
        system="Preamble.",
        user="[1] DM: Mira waves.",
        instructions="List the names.",
        schema=SCHEMA,
        schema_name="Names",
        lane=lane,
    )


def test_a_refused_schema_steps_the_lane_down_once_with_the_providers_reason() -> None:
    def provider(messages: list[dict[str, Any]], response_format: Any) -> str:
        if response_format["type"] == "json_schema":
            raise provider_error_of("bad_request", REFUSAL)
        return VALID

    client = LiteLLMClient(double_profile(structured_output="json_schema"), retry_backoff_s=0)
    with scripted_llm(provider) as double:
        first = client.complete_structured(request())
        second = client.complete_structured(request())
        other_lane = client.complete_structured(request("spells"))
    assert first.valid and first.rung == "json_object"
    assert first.stepped_down_from == "json_schema"
    assert first.stepdown_reason is not None and "'minLength' is not permitted" in (
        first.stepdown_reason
    )
    assert first.usage.calls == 1  # the refused request is not an answer
    # The lane stays down: its next request is not refused again.
    assert second.rung == "json_object" and second.stepped_down_from is None
    # Another lane climbs its own ladder.
    assert other_lane.stepped_down_from == "json_schema"
    formats = [call.response_format["type"] for call in double.calls]
    assert formats == ["json_schema", "json_object", "json_object", "json_schema", "json_object"]


def test_a_refusal_on_the_lowest_rung_fails_and_names_the_reason() -> None:
    def provider(messages: list[dict[str, Any]], response_format: Any) -> str:
        raise provider_error_of(
            "bad_request", "'response_format.type' must be 'json_schema' or 'text'"
        )

    with scripted_llm(provider) as double, pytest.raises(LLMError) as caught:
        LiteLLMClient(double_profile(), retry_backoff_s=0).complete_structured(request())
    assert not isinstance(caught.value, TransientLLMError)
    assert len(double.calls) == 1
    assert "HTTP 400" in str(caught.value)


def test_retry_after_is_honoured() -> None:
    pauses: list[float] = []
    answers: list[Any] = [rate_limited({"retry-after": "7"}), VALID]

    def provider(messages: list[dict[str, Any]], response_format: Any) -> str:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return str(answer)

    client = LiteLLMClient(double_profile(retries=2), retry_backoff_s=1.0, sleep=pauses.append)
    with scripted_llm(provider):
        response = client.complete_structured(request())
    assert response.valid and pauses == [7.0]


def test_a_wait_longer_than_the_profile_allows_fails_at_once_and_says_why() -> None:
    pauses: list[float] = []

    def provider(messages: list[dict[str, Any]], response_format: Any) -> str:
        raise rate_limited({"retry-after": "3600"})

    client = LiteLLMClient(
        double_profile(retries=5, timeout_s=60), retry_backoff_s=1.0, sleep=pauses.append
    )
    with scripted_llm(provider) as double, pytest.raises(TransientLLMError) as caught:
        client.complete_structured(request())
    assert pauses == [] and len(double.calls) == 1
    assert "3600 s (Retry-After)" in str(caught.value)


def test_a_permanent_error_fails_at_once_naming_the_profile_and_the_model() -> None:
    pauses: list[float] = []

    def provider(messages: list[dict[str, Any]], response_format: Any) -> str:
        raise provider_error_of("authentication", "Incorrect API key provided")

    client = LiteLLMClient(double_profile(retries=5), retry_backoff_s=1.0, sleep=pauses.append)
    started = time.monotonic()
    with scripted_llm(provider) as double, pytest.raises(LLMError) as caught:
        client.complete_structured(request())
    assert time.monotonic() - started < 2
    assert not isinstance(caught.value, TransientLLMError)
    assert pauses == [] and len(double.calls) == 1
    message = str(caught.value)
    assert "notarius-double/scripted" in message and "'test-double'" in message
    assert "API key" in message  # what to do
