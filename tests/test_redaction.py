"""Redaction rules (`engine/redaction.py`) and where they are applied before anything is
published: the manifest's endpoint has no user, password, query or fragment, credentials are
redacted from any text, and a provider summary keeps none of what was sent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from notarius_dagster.engine.redaction import (
    REDACTED,
    public_endpoint,
    redact_secrets,
    safe_summary,
)
from notarius_dagster.engine.session_bundle import publish_session_bundle
from notarius_dagster.modules import registry
from tests.bundle_doubles import COMPLETED, STARTED, chunk_result, npcs_result, pipeline
from tests.conftest import make_document


@pytest.mark.parametrize(
    ("written", "published"),
    [
        ("http://user:password@host/v1?key=x#y", "http://host/v1"),
        ("https://sk-abc@api.example.com:8443/openai/v1", "https://api.example.com:8443/openai/v1"),
        ("http://[::1]:8080/v1?api_key=secret", "http://[::1]:8080/v1"),
        ("http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1"),
        (None, None),
    ],
)
def test_the_public_endpoint_has_no_credentials_query_or_fragment(
    written: str | None, published: str | None
) -> None:
    assert public_endpoint(written) == published


def test_the_manifest_publishes_the_endpoint_without_its_credentials(tmp_path: Path) -> None:
    document = make_document()
    resolved = pipeline()
    with_secret = resolved.model_copy(
        update={
            "llm_profile": {
                **resolved.llm_profile,
                "api_base": "http://user:password@host/v1?key=x#y",
            }
        }
    )
    published = publish_session_bundle(
        store_root=tmp_path,
        session_id="s1",
        run_id="run-1",
        pipeline=with_secret,
        document=document,
        chunk_result=chunk_result(document),
        lane_results=[npcs_result()],
        evidence=None,
        started_at=STARTED,
        completed_at=COMPLETED,
        kinds=registry().kinds(),
    )
    text = (published.path / "manifest.json").read_text()
    assert json.loads(text)["llm_profile"]["api_base"] == "http://host/v1"
    assert "password" not in text and "key=x" not in text and "user" not in text


def test_the_key_that_was_sent_is_redacted_also_json_escaped() -> None:
    key = 'k3y"with\\quote'
    text = f"bad key {key} / {json.dumps(key)[1:-1]}"
    assert redact_secrets(text, [key]) == f"bad key {REDACTED} / {REDACTED}"


@pytest.mark.parametrize(
    "text",
    [
        "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.x",
        "Invalid API key provided: sk-proj-abcdef123456",
        "url http://bob:hunter2@example.com/x",
        "?api_key=abcdef&x=1",
        '{"password": "correct horse"}',
    ],
)
def test_credential_shaped_strings_are_redacted(text: str) -> None:
    out = redact_secrets(text)
    assert REDACTED in out
    for secret in ("eyJhbGciOiJIUzI1NiJ9", "abcdef123456", "hunter2", "abcdef", "horse"):
        assert secret not in out


def test_a_json_escaped_assignment_is_redacted() -> None:
    out = redact_secrets(json.dumps(json.dumps({"api_key": "s3cr3t value"})))
    assert "s3cr3t" not in out and REDACTED in out


def test_ordinary_words_are_left_alone() -> None:
    text = "maximum context length is 4096 tokens; the key provided is not valid"
    assert redact_secrets(text) == text


def test_a_summary_never_shares_sixteen_characters_with_what_was_sent() -> None:
    sent = ["the quick brown fox jumps over the lazy dog"]
    assert safe_summary("quick brown fox jumps over", sent) == ""
    assert safe_summary("Request rejected: quick brown fox", sent) == "Request rejected"
    assert safe_summary('model not found: "the lazy dog"', sent) == "model not found"


def test_a_run_id_stays_readable_but_a_key_of_the_same_length_does_not() -> None:
    """A refusal names the run to wait for; a UUID is Dagster's run id, not a secret."""
    run_id = "6b74d4ca-569e-44f8-a5f3-c1abd5ac0c70"
    assert run_id in redact_secrets(f"session 's1' has a run in progress: {run_id} (STARTED)")
    assert "Ab3dE6gH9jK2mN5pQ8sT1vW4" not in redact_secrets("token Ab3dE6gH9jK2mN5pQ8sT1vW4")
