"""docs/providers.md as a specification: every profile it shows validates, starts on the rung
the page says, and is ready when its key is set (and not when it is missing)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from notarius_dagster.llm.families import family_of
from notarius_dagster.llm.preflight import readiness_problems
from notarius_dagster.llm.profiles import LLMProfile
from notarius_dagster.llm.structured import choose_rung
from notarius_dagster.settings import api_key

DOC = Path(__file__).resolve().parents[1] / "docs" / "providers.md"
SECTIONS = (
    "OpenAI",
    "Azure OpenAI",
    "Anthropic",
    "Gemini",
    "Vertex AI",
    "Ollama",
    "vLLM",
    "LM Studio",
    "llama.cpp's server",
)


def documented_profiles() -> dict[str, tuple[str, dict[str, Any]]]:
    """Every profile of every ```yaml block, by name, with the section it is shown in."""
    found: dict[str, tuple[str, dict[str, Any]]] = {}
    section = ""
    for block in re.split(r"^## ", DOC.read_text(encoding="utf-8"), flags=re.MULTILINE):
        section = block.splitlines()[0].strip() if block.strip() else section
        for text in re.findall(r"```yaml\n(.*?)```", block, flags=re.DOTALL):
            for name, cfg in yaml.safe_load(text)["llm_profiles"].items():
                found[name] = (section, cfg)
    return found


def test_every_provider_has_a_section_with_a_profile() -> None:
    sections = {section for section, _ in documented_profiles().values()}
    assert set(SECTIONS) <= sections


@pytest.mark.parametrize("name", sorted(documented_profiles()))
def test_each_documented_profile_validates_and_starts_where_the_page_says(name: str) -> None:
    section, cfg = documented_profiles()[name]
    profile = LLMProfile.model_validate({"name": name, **cfg})
    family = family_of(profile)
    # The page's table: every listed provider starts on json_schema under `auto`.
    assert choose_rung(profile, family) == "json_schema", section
    expected_family = {
        "Anthropic": "anthropic",
        "Gemini": "gemini",
        "Vertex AI": "gemini",
        "Ollama": "ollama",
    }.get(section, "openai")
    assert family.name == expected_family
    if family.name == "openai":
        sent = family.response_format("json_schema", "Answer", {"type": "object"})
        assert sent["json_schema"]["strict"] is True


@pytest.mark.parametrize("name", ["gpt", "claude", "gemini", "azure"])
def test_a_documented_profile_names_its_missing_key_and_is_ready_with_it(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, cfg = documented_profiles()[name]
    profile = LLMProfile.model_validate({"name": name, **cfg})
    assert profile.api_key_env is not None
    monkeypatch.delenv(profile.api_key_env, raising=False)
    [problem] = readiness_problems(profile, api_key(profile.api_key_env))
    assert profile.api_key_env in problem and profile.model in problem
    monkeypatch.setenv(profile.api_key_env, "sk-test-0000")
    assert readiness_problems(profile, api_key(profile.api_key_env)) == []


def test_vertex_without_google_auth_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "google" else real(n, *a)
    )
    _, cfg = documented_profiles()["vertex"]
    problems = readiness_problems(LLMProfile.model_validate({"name": "vertex", **cfg}), None)
    assert any("google-auth" in p for p in problems)


def test_a_profile_without_a_key_variable_is_checked_with_litellms_own_list(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    profile = LLMProfile(name="bare", model="openai/gpt-4o-mini")
    [problem] = readiness_problems(profile, None)
    assert "OPENAI_API_KEY" in problem
    # litellm's OpenAI route refuses to call without a key, also for a local server.
    local = LLMProfile(name="local", model="openai/local", api_base="http://127.0.0.1:8080/v1")
    [problem] = readiness_problems(local, None)
    assert "OPENAI_API_KEY" in problem
    vllm = LLMProfile(name="vllm", model="hosted_vllm/q", api_base="http://127.0.0.1:8000/v1")
    assert readiness_problems(vllm, None) == []
