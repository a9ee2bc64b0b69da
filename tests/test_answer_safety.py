"""A model's answer is untrusted input (issue 23), at the client (`llm/answers.py`): the exact
secrets the request carried are taken out of the answer before anything validates, stores,
re-asks with or publishes it; an HTTP 200 without any choice is a provider error, not an
IndexError retried as a framework failure. Against a fake OpenAI-compatible provider on
loopback (tests/fake_provider.py), through litellm's real call path.

The chat completion object's `choices` is "a list of chat completion choices"; nothing in it
promises one (https://platform.openai.com/docs/api-reference/chat/object)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from notarius_dagster.engine.errors import LLMError
from notarius_dagster.engine.llm_contract import StructuredRequest
from notarius_dagster.engine.redaction import REDACTED
from notarius_dagster.llm.client import LiteLLMClient
from notarius_dagster.llm.profiles import LLMProfile
from notarius_dagster.settings import api_key
from tests.fake_provider import FakeProvider

KEY = "sk-proj-Answer5afety0nly4Notarius"
USER, PASSWORD = "operator", "Pa55-in-the-url-77"
QUERY_KEY = "q-key-4471-zz"
SCHEMA = {
    "type": "object",
    "properties": {"note": {"type": "string"}},
    "required": ["note"],
}


def request() -> StructuredRequest:
    return StructuredRequest(
        system="Say what you received.",
        user="[1] DM: hello",
        schema=SCHEMA,
        schema_name="Note",
        session_id="s1",
        lane="npcs",
        chunk_id="c1",
    )


def client(api_base: str) -> LiteLLMClient:
    """A client of `profile(api_base)` with its key read as a run reads it."""
    return LiteLLMClient(profile(api_base), api_key=api_key("NOTARIUS_FAKE_KEY"), retry_backoff_s=0)


def profile(api_base: str) -> LLMProfile:
    return LLMProfile(
        name="fake",
        model="openai/fake",
        api_base=api_base,
        api_key_env="NOTARIUS_FAKE_KEY",
        timeout_s=5,
        retries=0,
    )


def telling(request_body: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
    """A provider that tells in its answer what it received: the Authorization header, the
    request line's query, the decoded Basic credentials; the key again, upper-cased and
    JSON-escaped inside a string the model built."""
    authorization = headers.get("authorization", "")
    said = [authorization, KEY.upper(), json.dumps({"k": KEY})]
    if authorization.startswith("Basic "):
        said.append(base64.b64decode(authorization[6:]).decode())
    return {"note": " | ".join(said) + f" | {PASSWORD} | {QUERY_KEY}"}


def test_the_key_that_was_sent_is_taken_out_of_the_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NOTARIUS_FAKE_KEY", KEY)
    with FakeProvider("script", responder=telling) as fake:
        response = client(fake.api_base).complete_structured(request())
    assert response.valid and response.data is not None
    note = response.data["note"]
    assert KEY not in note and KEY.upper() not in note
    assert note.startswith(f"Bearer {REDACTED} | {REDACTED} | ")


def test_the_endpoints_credentials_are_taken_out_of_the_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NOTARIUS_FAKE_KEY", KEY)
    with FakeProvider("script", responder=telling) as fake:
        endpoint = fake.api_base.replace("http://", f"http://{USER}:{PASSWORD}@")
        llm = client(f"{endpoint}?api_key={QUERY_KEY}")
        response = llm.complete_structured(request())
    assert response.data is not None
    note = response.data["note"]
    basic = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    for secret in (PASSWORD, basic, QUERY_KEY, KEY):
        assert secret not in note
    assert note.count(REDACTED) >= 4


def test_an_answer_without_any_choice_is_a_provider_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NOTARIUS_FAKE_KEY", KEY)
    with FakeProvider("empty-choices") as fake, pytest.raises(LLMError) as caught:
        client(fake.api_base).complete_structured(request())
    assert str(caught.value) == (
        "LLM call to openai/fake failed: the provider answered without any choice (an empty "
        "`choices` list), so there is no answer to use"
    )
    assert len(fake.requests) == 1


@pytest.mark.parametrize(
    ("api_key", "api_base", "secrets"),
    [
        ("sk-abc123", None, {"sk-abc123"}),
        (
            None,
            "http://me:p%40ss@host/v1?api_key=k1&x=longer2",
            {"p%40ss", "p@ss", "me:p%40ss", "me:p@ss", "longer2"},
        ),
    ],
)
def test_the_secrets_a_request_carries(
    api_key: str | None, api_base: str | None, secrets: set[str]
) -> None:
    from notarius_dagster.engine.redaction import sent_secrets

    found = set(sent_secrets(api_key, api_base))
    assert secrets <= found
    assert not {"me", "host", "k1"} & found  # the user alone, the host; `k1` is too short


def test_only_the_exact_secrets_are_redacted_from_an_answer() -> None:
    """In any letter case and JSON-escaped; a long id from a transcript is no secret."""
    from notarius_dagster.engine.redaction import redact_sent

    secret = 'sk-a/b"c123'
    answer = json.dumps({"d": f"Key {secret} / {secret.upper()}; id 9f3a7c2e1b4d6f8a0c2e4b6d"})
    redacted = redact_sent(answer, (secret,))
    assert redacted is not None
    assert json.loads(redacted) == {"d": "Key [redacted] / [redacted]; id 9f3a7c2e1b4d6f8a0c2e4b6d"}
    escaped_slash = answer.replace("/", "\\/")  # JSON may write `/` as `\/`
    assert secret not in json.loads(redact_sent(escaped_slash, (secret,)) or "")["d"]
