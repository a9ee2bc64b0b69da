"""The litellm client as a specification: the structured-output ladder, token and call
accounting, request metadata, retries and content-safe errors. Every call goes through the
real `litellm.completion` into the in-process test double; nothing touches the network."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from notarius_dagster.engine.errors import LLMError, LLMUnavailableError
from notarius_dagster.engine.llm_contract import StructuredRequest, StructuredResponse
from notarius_dagster.llm.client import LiteLLMClient, TransientLLMError
from notarius_dagster.llm.profiles import LLMProfile, offline_profile
from notarius_dagster.llm.structured import choose_rung, response_format_for, system_prompt_for
from notarius_dagster.llm.test_double import (
    double_profile,
    provider_error_of,
    replay,
    scripted_llm,
)

# Stands for transcript text: it must never surface in an error or a re-ask.
SECRET = "the vault code is swordfish"
BAD_VALUE = "UNMISTAKABLE-BAD-VALUE"

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "npcs": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "level": {"type": "integer"}},
                "required": ["name", "level"],
            },
        }
    },
    "required": ["npcs"],
    "additionalProperties": False,
}
VALID = json.dumps({"npcs": [{"name": "Mira", "level": 3}]})
INVALID = json.dumps({"npcs": [{"name": "Mira", "level": BAD_VALUE}]})


def request(**overrides: Any) -> StructuredRequest:
    fields: dict[str, Any] = {
        "system": "Extract the non-player characters.",
        "user": f"[1] DM: {SECRET}",
        "schema": SCHEMA,
        "schema_name": "npcs",
        "session_id": "session-042",
        "lane": "npcs",
        "chunk_id": "chunk-0003",
    }
    return StructuredRequest(**(fields | overrides))


def client(**profile_overrides: Any) -> LiteLLMClient:
    return LiteLLMClient(double_profile(**profile_overrides), retry_backoff_s=0.0)


def ask(answers: list[str], **profile_overrides: Any) -> tuple[StructuredResponse, Any]:
    with scripted_llm(replay(*answers)) as double:
        response = client(**profile_overrides).complete_structured(request())
    return response, double


def test_the_double_starts_on_the_json_object_rung() -> None:
    assert choose_rung(double_profile()) == "json_object"


def test_json_object_rung_sends_the_schema_in_the_prompt_and_the_response_format() -> None:
    _, double = ask([VALID])
    (call,) = double.calls
    assert call.response_format == {"type": "json_object", "schema": SCHEMA}
    system = call.messages[0]
    assert system["role"] == "system"
    assert system["content"].startswith("Extract the non-player characters.")
    assert json.dumps(SCHEMA, indent=2, sort_keys=True) in system["content"]
    assert call.messages[1] == {"role": "user", "content": f"[1] DM: {SECRET}"}


def test_a_valid_first_answer_is_returned_with_its_tokens_in_one_call() -> None:
    response, _ = ask([VALID])
    assert response.valid
    assert response.rung == "json_object"
    assert response.data == {"npcs": [{"name": "Mira", "level": 3}]}
    assert response.errors == ()
    assert response.calls == 1
    assert response.prompt_tokens > 0
    assert response.completion_tokens == len(VALID) // 4
    assert response.cost_usd == 0.0
    assert response.model == "notarius-double/scripted"


def test_an_invalid_first_answer_is_reasked_once_with_paths_but_not_values() -> None:
    response, double = ask([INVALID, VALID])
    assert response.valid
    assert response.rung == "reask"
    assert response.calls == 2
    assert response.data == {"npcs": [{"name": "Mira", "level": 3}]}
    first, second = double.calls
    assert second.response_format == first.response_format
    assert second.messages[:2] == first.messages
    assert second.messages[2] == {"role": "assistant", "content": INVALID}
    reask = second.messages[3]
    assert reask["role"] == "user"
    assert "$.npcs[0].level: type (expected integer)" in reask["content"]
    assert BAD_VALUE not in reask["content"]


def test_tokens_are_summed_over_the_reask() -> None:
    single, _ = ask([VALID])
    twice, _ = ask([INVALID, VALID])
    assert twice.prompt_tokens > 2 * single.prompt_tokens - 1
    assert twice.completion_tokens == len(INVALID) // 4 + len(VALID) // 4


def test_an_answer_that_is_not_json_is_reasked() -> None:
    response, double = ask(["Sure! Here are the NPCs:", VALID])
    assert response.valid and response.rung == "reask"
    assert "$: not valid JSON (line 1, column 1)" in double.calls[1].messages[3]["content"]


def test_an_answer_invalid_twice_is_reported_invalid_and_never_repaired() -> None:
    missing_level = json.dumps({"npcs": [{"name": "Mira"}]})
    response, _ = ask([INVALID, missing_level])
    assert not response.valid
    assert response.data is None
    assert response.rung == "reask"
    assert response.calls == 2
    assert response.errors == ("$.npcs[0]: required (level)",)


def test_the_session_lane_and_chunk_travel_with_each_request_as_metadata() -> None:
    _, double = ask([INVALID, VALID])
    for call in double.calls:
        assert call.session_id == "session-042"
        assert call.metadata["lane"] == "npcs"
        assert call.metadata["chunk_id"] == "chunk-0003"


def test_profile_limits_reach_the_provider_and_litellm_does_not_retry_on_its_own() -> None:
    _, double = ask([VALID], temperature=0.3, max_tokens=77)
    params = double.calls[0].params
    assert params["temperature"] == 0.3
    assert params["max_tokens"] == 77
    assert params["max_retries"] == 0


@pytest.mark.parametrize("value", [None, "", "   "])
def test_a_missing_api_key_variable_makes_the_tier_unavailable(
    monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    if value is None:
        monkeypatch.delenv("NOTARIUS_TEST_KEY", raising=False)
    else:
        monkeypatch.setenv("NOTARIUS_TEST_KEY", value)
    profile = double_profile(api_key_env="NOTARIUS_TEST_KEY")
    with pytest.raises(LLMUnavailableError, match="NOTARIUS_TEST_KEY"):
        LiteLLMClient(profile)


def test_a_set_api_key_variable_is_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOTARIUS_TEST_KEY", "sk-test")
    response, _ = ask([VALID], api_key_env="NOTARIUS_TEST_KEY")
    assert response.valid


def test_a_provider_error_carries_the_providers_words_but_not_the_prompt() -> None:
    def echoing_provider(messages: list[dict[str, Any]], response_format: Any) -> str:
        prompt = messages[-1]["content"]
        raise provider_error_of("bad_request", f"context too long for: {prompt}")

    with scripted_llm(echoing_provider) as double, pytest.raises(LLMError) as caught:
        client().complete_structured(request())
    message = str(caught.value)
    assert not isinstance(caught.value, TransientLLMError)
    assert "BadRequestError" in message
    assert "notarius-double/scripted" in message
    assert "context too long for" in message
    assert SECRET not in message
    assert len(double.calls) == 1


def test_an_authentication_error_is_not_retried() -> None:
    def bad_key(messages: list[dict[str, Any]], response_format: Any) -> str:
        raise provider_error_of("authentication", "invalid api key")

    with scripted_llm(bad_key) as double, pytest.raises(LLMError, match="invalid api key"):
        client(retries=3).complete_structured(request())
    assert len(double.calls) == 1


def test_a_rate_limit_is_retried_and_the_retry_can_succeed() -> None:
    answers: list[str | Exception] = [provider_error_of("rate_limit", "slow down"), VALID]

    def flaky(messages: list[dict[str, Any]], response_format: Any) -> str:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    with scripted_llm(flaky) as double:
        response = client(retries=2).complete_structured(request())
    assert response.valid
    assert response.calls == 1
    assert len(double.calls) == 2


@pytest.mark.parametrize("kind", ["rate_limit", "timeout", "connection"])
def test_a_transient_error_that_outlasts_the_retries_is_flagged_transient(kind: Any) -> None:
    def down(messages: list[dict[str, Any]], response_format: Any) -> str:
        raise provider_error_of(kind, "provider is having a moment")

    with scripted_llm(down) as double, pytest.raises(TransientLLMError) as caught:
        client(retries=1).complete_structured(request())
    assert caught.value.transient is True
    assert "after 2 attempts" in str(caught.value)
    assert "provider is having a moment" in str(caught.value)
    assert len(double.calls) == 2


def test_calls_from_worker_threads_are_answered_and_recorded() -> None:
    shared = client(max_concurrency=4)
    sessions = [f"session-{n:03d}" for n in range(8)]
    with (
        scripted_llm(lambda messages, response_format: VALID) as double,
        ThreadPoolExecutor(max_workers=4) as pool,
    ):
        responses = list(
            pool.map(lambda s: shared.complete_structured(request(session_id=s)), sessions)
        )
    assert all(r.valid and r.calls == 1 for r in responses)
    assert sorted(call.session_id or "" for call in double.calls) == sessions


def test_models_with_response_schema_support_start_on_the_json_schema_rung() -> None:
    profile = LLMProfile(name="hosted", model="openai/gpt-4o", api_key_env="OPENAI_API_KEY")
    assert choose_rung(profile) == "json_schema"
    assert response_format_for("json_schema", "npcs", SCHEMA) == {
        "type": "json_schema",
        "json_schema": {"name": "npcs", "schema": SCHEMA, "strict": False},
    }
    assert system_prompt_for("json_schema", "Extract.", SCHEMA) == "Extract."


def test_the_offline_server_profile_stays_on_json_object() -> None:
    # llama.cpp's server rejects response_format type json_schema; it constrains json_object.
    assert choose_rung(offline_profile()) == "json_object"


def test_the_profile_fingerprint_is_stable_and_follows_the_model() -> None:
    a = double_profile()
    assert a.fingerprint() == double_profile().fingerprint()
    assert a.fingerprint().startswith("sha256:")
    assert a.fingerprint() != double_profile(temperature=0.5).fingerprint()


def test_profiles_are_frozen_and_strict() -> None:
    with pytest.raises(ValueError):
        LLMProfile(name="x", model="openai/x", surprise=True)  # type: ignore[call-arg]
    with pytest.raises(ValueError):
        LLMProfile(name="x", model="openai/x", server="ollama")  # type: ignore[arg-type]


def test_short_prompts_do_not_shred_the_providers_message() -> None:
    def missing(messages: list[dict[str, Any]], response_format: Any) -> str:
        raise provider_error_of("not_found", "model does not exist")

    short = request(system="s", user="u")
    with scripted_llm(missing), pytest.raises(LLMError, match="model does not exist"):
        client().complete_structured(short)


def test_fingerprint_ignores_settings_that_do_not_change_an_extraction() -> None:
    base = double_profile()
    assert base.fingerprint() == double_profile(name="other", max_concurrency=4, retries=0,
                                                timeout_s=5).fingerprint()
    assert base.fingerprint() != double_profile(max_tokens=64).fingerprint()
