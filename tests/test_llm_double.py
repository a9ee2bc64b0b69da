"""The LLM test double's two routes (tests/llm_double.py), and that the product holds neither:
in process, the `notarius-double` litellm provider answers only inside a `scripted_llm` block;
across processes, a loopback OpenAI-compatible server answers with the same responders through
litellm's real OpenAI route, named by an ordinary `openai/...` LLM profile with `api_base`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from notarius_dagster.engine.resolution import resolve_profile_file
from notarius_dagster.llm._litellm import litellm
from notarius_dagster.llm.preflight import readiness_problems
from notarius_dagster.llm.profiles import LLMProfile, profile_catalog
from notarius_dagster.modules import registry
from tests.doubles import lane_responder
from tests.llm_double import (
    DOUBLE_PROVIDER,
    LOOPBACK_KEY,
    LOOPBACK_KEY_ENV,
    loopback_profile_file,
    replay,
    responder_server,
    scripted_llm,
)

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "notarius_dagster"

NPC_PROMPT = [
    {"role": "system", "content": "You read a transcript."},
    {"role": "user", "content": "[7] MATT: Gustav waves.\n\nList the non-player characters."},
]


def test_the_installed_package_holds_no_test_double() -> None:
    """No module, provider, built-in profile or responder variable of the double in the
    package a user installs: the double is test scaffolding (issue 20)."""
    marks = ("notarius-double", "test_double", "scripted_llm", "NOTARIUS_TEST_DOUBLE")
    found = [
        f"{path.relative_to(REPO)}: {mark}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for mark in marks
        if mark in path.read_text(encoding="utf-8")
    ]
    assert found == []
    assert set(profile_catalog().builtins) == {"offline"}


def test_the_test_process_registry_knows_the_test_double_profile() -> None:
    """conftest's `pytest_configure` adds it beside the product's built-in profiles."""
    builtins = registry().llm_profiles.builtins
    assert builtins["test-double"]["model"] == f"{DOUBLE_PROVIDER}/scripted"
    assert builtins["offline"] == profile_catalog().builtins["offline"]


def answer_in_process(messages: list[dict[str, str]]) -> str:
    response = litellm.completion(model=f"{DOUBLE_PROVIDER}/scripted", messages=messages)
    return str(response.choices[0].message.content)


def test_outside_a_block_the_in_process_double_fails_loudly_and_inside_the_innermost_answers() -> (
    None
):
    with scripted_llm(lane_responder) as outer:
        assert json.loads(answer_in_process(NPC_PROMPT))["npcs"][0]["name"] == "Gustav"
        with scripted_llm(replay('{"npcs": []}')) as inner:
            assert answer_in_process(NPC_PROMPT) == '{"npcs": []}'
    assert len(outer.calls) == 1 and len(inner.calls) == 1
    with pytest.raises(Exception, match="no test double is active"):
        answer_in_process(NPC_PROMPT)


def test_the_loopback_server_answers_with_the_responder_through_litellms_openai_route(
    tmp_path: Path,
) -> None:
    with responder_server(lane_responder) as server:
        config = loopback_profile_file(REPO / "configs" / "offline.yaml", tmp_path, server)
        pipeline = resolve_profile_file(config, registry=registry())
        profile = LLMProfile.model_validate(pipeline.llm_profile)
        assert profile.name == "loopback" and profile.model == "openai/notarius-double"
        assert profile.api_base == server.api_base and profile.api_key_env == LOOPBACK_KEY_ENV
        assert readiness_problems(profile, LOOPBACK_KEY) == []
        assert LOOPBACK_KEY_ENV in " ".join(readiness_problems(profile, None))

        response = litellm.completion(
            model=profile.model,
            api_base=profile.api_base,
            api_key=LOOPBACK_KEY,
            messages=NPC_PROMPT,
            num_retries=0,
        )
    assert json.loads(response.choices[0].message.content)["npcs"][0]["name"] == "Gustav"
    assert response.usage.prompt_tokens > 0  # OpenAI's usage shape, read by litellm
    (request,) = server.requests
    assert request.path == "/v1/chat/completions" and request.status == 200
    assert request.headers["authorization"] == f"Bearer {LOOPBACK_KEY}"
    assert request.body["model"] == "notarius-double"
    assert request.body["messages"] == NPC_PROMPT


def test_a_responder_that_fails_is_openais_500_and_a_wrong_key_its_401() -> None:
    with responder_server(replay()) as server:
        with pytest.raises(litellm.InternalServerError):
            litellm.completion(
                model="openai/notarius-double",
                api_base=server.api_base,
                api_key=LOOPBACK_KEY,
                messages=NPC_PROMPT,
                num_retries=0,
            )
        with pytest.raises(litellm.AuthenticationError):
            litellm.completion(
                model="openai/notarius-double",
                api_base=server.api_base,
                api_key="sk-another",
                messages=NPC_PROMPT,
                num_retries=0,
            )
    assert server.errors == ["AssertionError: the test double was scripted for 0 calls"]


def test_a_loopback_copy_of_a_profile_reads_the_reference_files_the_original_does(
    tmp_path: Path,
) -> None:
    """configs/dnd-complete-sample.yaml binds its roster by a path relative to configs/: the
    copy elsewhere still resolves, to the same file."""
    original = REPO / "configs" / "dnd-complete-sample.yaml"
    with responder_server(lane_responder) as server:
        copy = loopback_profile_file(original, tmp_path / "elsewhere", server)
    assert copy.parent != original.parent
    ours = resolve_profile_file(copy, registry=registry())
    theirs = resolve_profile_file(original, llm_profile="test-double", registry=registry())
    assert ours.lanes == theirs.lanes
    assert ours.chunk == theirs.chunk
