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
from notarius_dagster.llm.families import family_of
from notarius_dagster.llm.profiles import LLMProfile, offline_profile
from notarius_dagster.llm.structured import choose_rung, prompt_schema
from notarius_dagster.settings import api_key
from tests.llm_double import (
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
    profile = double_profile(**profile_overrides)
    return LiteLLMClient(profile, api_key=api_key(profile.api_key_env), retry_backoff_s=0.0)


def ask(answers: list[str], **profile_overrides: Any) -> tuple[StructuredResponse, Any]:
    with scripted_llm(replay(*answers)) as double:
        response = client(**profile_overrides).complete_structured(request())
    return response, double


def test_the_double_starts_on_the_json_object_rung() -> None:
    assert choose_rung(double_profile(), family_of(double_profile())) == "json_object"


def test_json_object_rung_sends_the_schema_after_the_shared_prompt() -> None:
    with scripted_llm(replay(VALID)) as double:
        client().complete_structured(request(instructions="List every NPC."))
    (call,) = double.calls
    # Not the llama.cpp server: the schema is not sent as a grammar, only spelled out.
    assert call.response_format == {"type": "json_object"}
    assert call.messages[0] == {"role": "system", "content": "Extract the non-player characters."}
    user = call.messages[1]
    assert user["role"] == "user"
    # The shared part (the chunk) first, the lane's instructions and the compact schema after,
    # so that calls of several lanes on one chunk share a prefix a provider can cache.
    assert user["content"].startswith(f"[1] DM: {SECRET}\n\nList every NPC.\n\n")
    assert user["content"].endswith(prompt_schema(SCHEMA))
    assert "\n  " not in prompt_schema(SCHEMA)  # compact, not pretty-printed


def test_the_prompt_schema_leaves_out_the_citation_enum() -> None:
    cited = {"type": "array", "items": {"type": "integer", "enum": [101, 102, 103]}}
    schema = {"type": "object", "properties": {"unit_ids": cited}, "required": ["unit_ids"]}
    spelled = json.loads(prompt_schema(schema))
    assert spelled["properties"]["unit_ids"]["items"] == {"type": "integer"}
    assert schema["properties"]["unit_ids"]["items"]["enum"] == [101, 102, 103]  # not mutated


def test_a_valid_first_answer_is_returned_with_its_tokens_in_one_call() -> None:
    response, _ = ask([VALID])
    assert response.valid
    assert response.rung == "json_object"
    assert response.data == {"npcs": [{"name": "Mira", "level": 3}]}
    assert response.errors == ()
    assert response.usage.calls == 1
    assert response.usage.prompt_tokens > 0
    assert response.usage.completion_tokens == len(VALID) // 4
    assert response.usage.priced_cost_usd == 0.0
    assert response.model == "notarius-double/scripted"


def test_an_invalid_first_answer_is_reasked_once_with_paths_but_not_values() -> None:
    response, double = ask([INVALID, VALID])
    assert response.valid
    assert response.rung == "reask"
    assert response.usage.calls == 2
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
    assert twice.usage.prompt_tokens > 2 * single.usage.prompt_tokens - 1
    assert twice.usage.completion_tokens == len(INVALID) // 4 + len(VALID) // 4


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
    assert response.usage.calls == 2
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
        LiteLLMClient(profile, api_key=api_key(profile.api_key_env))


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
    assert response.usage.calls == 1
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
    assert all(r.valid and r.usage.calls == 1 for r in responses)
    assert sorted(call.session_id or "" for call in double.calls) == sessions


def test_openai_models_start_on_the_strict_json_schema_rung() -> None:
    profile = LLMProfile(name="hosted", model="openai/gpt-4o", api_key_env="OPENAI_API_KEY")
    family = family_of(profile)
    assert choose_rung(profile, family) == "json_schema"
    sent = family.response_format("json_schema", "npcs", SCHEMA)
    assert sent["json_schema"]["strict"] is True
    item = sent["json_schema"]["schema"]["properties"]["npcs"]["items"]
    assert item["additionalProperties"] is False
    assert item["required"] == ["name", "level"]


def test_a_profile_picks_its_rung() -> None:
    profile = LLMProfile(name="hosted", model="openai/gpt-4o", structured_output="json_object")
    assert choose_rung(profile, family_of(profile)) == "json_object"


def test_the_offline_server_profile_stays_on_json_object() -> None:
    # llama.cpp's server rejects response_format type json_schema; it constrains json_object.
    assert choose_rung(offline_profile(), family_of(offline_profile())) == "json_object"


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
    assert (
        base.fingerprint()
        == double_profile(name="other", max_concurrency=4, retries=0, timeout_s=5).fingerprint()
    )
    assert base.fingerprint() != double_profile(max_tokens=64).fingerprint()


# --- provider errors are untrusted text (issue 10: secrets and text) ---------------------------
# Through the real network path: litellm -> OpenAI SDK -> httpx -> a fake provider on loopback.

UNIT = 'Mira said: "the vault code is swordfish," and left — café ñ\tnow'
PROMPT_LINE = "Extract every non-player character who speaks or is spoken to."
KEY = "sk-proj-Q7f3kZ9x2LmN8pR4tV6wY1aB"


def echo_request() -> StructuredRequest:
    return request(system=f"{PROMPT_LINE}\nList each one once.", user=f"[1] DM: {UNIT}\n[2] DM: ok")


def leaked(message: str) -> list[str]:
    """Every form of the key, the prompt line and the unit text found in `message`."""
    forms = {
        KEY,
        PROMPT_LINE,
        UNIT,
        json.dumps(UNIT)[1:-1],
        json.dumps(UNIT, ensure_ascii=False)[1:-1],
        json.dumps(PROMPT_LINE)[1:-1],
        "swordfish",
        "vault code",
    }
    return sorted(f for f in forms if f in message)


def fake_profile(fake: Any, **overrides: Any) -> LLMProfile:
    fields: dict[str, Any] = {
        "name": "fake",
        "model": "openai/fake",
        "api_base": fake.api_base,
        "api_key_env": "NOTARIUS_FAKE_KEY",
        "timeout_s": 2,
        "retries": 0,
    }
    return LLMProfile(**(fields | overrides))


def fail_against(
    mode: str, monkeypatch: pytest.MonkeyPatch, *, status: int = 500, **overrides: Any
) -> LLMError:
    from tests.fake_provider import FakeProvider

    monkeypatch.setenv("NOTARIUS_FAKE_KEY", KEY)
    with FakeProvider(mode, status=status) as fake, pytest.raises(LLMError) as caught:
        profile = fake_profile(fake, **overrides)
        LiteLLMClient(
            profile, api_key=api_key(profile.api_key_env), retry_backoff_s=0.0
        ).complete_structured(echo_request())
    return caught.value


@pytest.mark.parametrize("status", [400, 401])
def test_an_echo_of_the_whole_request_and_the_key_reaches_nobody(
    status: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    error = fail_against("echo", monkeypatch, status=status)
    message = str(error)
    assert leaked(message) == []
    assert f"HTTP {status}" in message
    assert ("AuthenticationError" if status == 401 else "BadRequestError") in message
    assert "Incorrect API key provided" in message


def test_a_persistent_500_says_its_status(monkeypatch: pytest.MonkeyPatch) -> None:
    error = fail_against("status", monkeypatch, status=500, retries=1)
    assert isinstance(error, TransientLLMError)
    assert "after 2 attempts: HTTP 500, InternalServerError" in str(error)


def test_a_hanging_provider_says_it_timed_out_after_the_profiles_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    error = fail_against("hang", monkeypatch, timeout_s=1)
    assert isinstance(error, TransientLLMError)
    assert "Timeout, no answer within 1 s" in str(error)


def test_a_reset_connection_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    error = fail_against("reset", monkeypatch)
    assert isinstance(error, TransientLLMError)
    assert "connection reset by the provider" in str(error)
    assert "HTTP 500" not in str(error)  # litellm's stand-in status, not the provider's


def _echo_via_double(echo: str) -> str:
    def provider(messages: list[dict[str, Any]], response_format: Any) -> str:
        raise provider_error_of(
            "bad_request",
            echo.replace("{KEY}", KEY).format(
                request=json.dumps({"messages": messages}),
                system=messages[0]["content"],
                user=messages[-1]["content"],
            ),
        )

    with scripted_llm(provider), pytest.raises(LLMError) as caught:
        client().complete_structured(echo_request())
    return str(caught.value)


@pytest.mark.parametrize(
    "echo",
    [
        # JSON-escaped: the request quoted inside the error, with \n, \" and \u escapes
        "Invalid request: {request}",
        "Bad value at messages: {request}",
        # truncated: the echo cut mid-line (the key first, like real providers)
        "Incorrect API key provided: Bearer {KEY}; could not parse {request:.140}",
        # re-wrapped: the prompt re-flowed across lines
        "Could not process prompt\n{user}",
    ],
)
def test_an_echo_escaped_cut_or_reflowed_carries_no_prompt_nor_unit_text(
    echo: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    message = _echo_via_double(echo)
    assert leaked(message) == [], message
    assert "BadRequestError" in message and "HTTP 400" in message


def test_a_reflowed_prompt_is_not_kept_either() -> None:
    import textwrap

    def provider(messages: list[dict[str, Any]], response_format: Any) -> str:
        flowed = textwrap.fill(messages[0]["content"] + " " + messages[-1]["content"], 23)
        raise provider_error_of("bad_request", f"unparseable input near\n{flowed}")

    with scripted_llm(provider), pytest.raises(LLMError) as caught:
        client().complete_structured(echo_request())
    message = str(caught.value)
    assert leaked(message) == [] and "every non" not in message.lower()
    assert "unparseable input near" in message


@pytest.mark.parametrize(
    "shape",
    [
        "Bearer abc.DEF-123_456",
        "sk-live-4f9a8b7c6d5e",
        "api_key=hunter2hunter2",
        "key: 'q1w2e3r4t5'",
        "token=0123456789abcdef0123456789abcdef",
        "d41d8cd98f00b204e9800998ecf8427e1234",
    ],
)
def test_anything_shaped_like_a_key_is_redacted_from_a_provider_error(shape: str) -> None:
    def provider(messages: list[dict[str, Any]], response_format: Any) -> str:
        raise provider_error_of("authentication", f"rejected credentials {shape} sorry")

    with scripted_llm(provider), pytest.raises(LLMError) as caught:
        client().complete_structured(request())
    secret = shape.split("=")[-1].split(" ")[-1].strip("'")
    assert secret not in str(caught.value)
    assert "rejected credentials" in str(caught.value)


def test_a_priced_model_reports_litellms_own_price_for_the_call() -> None:
    """litellm prices each completion itself; the client reports that price (it does not
    price the call a second time), from the tokens the call used."""
    import litellm

    model = "notarius-double/scripted"
    before = litellm.model_cost.get(model)
    litellm.register_model(
        {
            model: {
                "input_cost_per_token": 1e-6,
                "output_cost_per_token": 2e-6,
                "litellm_provider": "notarius-double",
                "mode": "chat",
            }
        }
    )
    try:
        response, _ = ask([VALID], input_cost_per_token=None, output_cost_per_token=None)
    finally:
        if before is None:
            litellm.model_cost.pop(model, None)
        else:
            litellm.model_cost[model] = before
    expected = response.usage.prompt_tokens * 1e-6 + response.usage.completion_tokens * 2e-6
    assert response.usage.priced_cost_usd == pytest.approx(expected)


def test_a_call_litellm_cannot_price_is_unpriced_never_free() -> None:
    """The double is in no price map: without prices of its own a call has no price, and the
    response says so (None), rather than $0, which would read as a free local model."""
    response, _ = ask(
        [VALID],
        model="notarius-double/never-priced",
        input_cost_per_token=None,
        output_cost_per_token=None,
    )
    usage = response.usage
    assert usage.unpriced_calls == 1 and usage.priced_cost_usd is None
    assert (usage + usage).unpriced_calls == 2


def test_a_profile_sets_its_own_prices() -> None:
    response, _ = ask([VALID], input_cost_per_token=3e-6, output_cost_per_token=5e-6)
    expected = response.usage.prompt_tokens * 3e-6 + response.usage.completion_tokens * 5e-6
    assert response.usage.priced_cost_usd == pytest.approx(expected)


def test_prices_are_set_together() -> None:
    with pytest.raises(ValueError, match="set together"):
        double_profile(input_cost_per_token=1e-6, output_cost_per_token=None)


def test_the_offline_server_gets_the_schema_as_a_grammar_not_in_the_prompt() -> None:
    """llama.cpp's server turns the schema inside `json_object` into a grammar (citation enum
    included): spelling it out in the prompt as well would only cost tokens."""
    offline = LiteLLMClient(offline_profile(), api_base_override="http://127.0.0.1:9/v1")
    req = request(instructions="List every NPC.")
    assert offline.first_rung() == "json_object"
    sent = offline.family.response_format("json_object", "npcs", SCHEMA)
    assert sent == {"type": "json_object", "schema": SCHEMA}
    user = offline.messages("json_object", req)[1]["content"]
    assert user == f"[1] DM: {SECRET}\n\nList every NPC."
