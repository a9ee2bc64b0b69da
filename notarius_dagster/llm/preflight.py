"""Before any work: can this profile's model be called at all?

A run that cannot reach its model must not register a partition, copy a transcript or
materialize the cheap assets first and fail at the lanes: `notarius validate` and the start of
every `notarius run` ask `readiness_problems`, and `notarius validate --ping` makes one tiny
real call. What is checked, and how:

- the API key: the profile's `api_key_env` must be set; with none named, litellm's own
  `validate_environment(model)` says which variables the provider needs (`OPENAI_API_KEY`,
  `ANTHROPIC_API_KEY`, `GEMINI_API_KEY`, ...). A profile with an `api_base` (a local server)
  needs no key unless it names one.
- the provider's Python package: providers litellm reaches through an optional package
  (Vertex AI: google-auth; Bedrock: boto3) must import.

Nothing here sends a request except `ping`."""

from __future__ import annotations

import importlib.util
import time
from dataclasses import dataclass

from notarius_dagster.engine.errors import LLMUnavailableError
from notarius_dagster.engine.llm_contract import StructuredRequest
from notarius_dagster.llm.profiles import LLMProfile

PROVIDER_PACKAGES: dict[str, tuple[str, str]] = {
    "vertex_ai": ("google.auth", "google-auth"),
    "vertex_ai_beta": ("google.auth", "google-auth"),
    "bedrock": ("boto3", "boto3"),
    "sagemaker": ("boto3", "boto3"),
}
"""Provider -> (module litellm imports, the PyPI package that provides it)."""

_NEEDS_NO_KEY = frozenset({"ollama", "ollama_chat", "hosted_vllm", "lm_studio", "llamafile"})
"""Local servers: they take no key (a profile may still name one)."""


def readiness_problems(profile: LLMProfile, api_key: str | None) -> list[str]:
    """What stops this profile's model from being called, one sentence each (empty: ready).
    `api_key` is the value of the profile's `api_key_env` variable (settings.py: api_key)."""
    problems: list[str] = []
    try:
        profile.resolve_api_key(api_key)
    except LLMUnavailableError as exc:
        problems.append(str(exc))
    provider = _prefix(profile.model)
    package = PROVIDER_PACKAGES.get(provider)
    if package is not None and importlib.util.find_spec(package[0].split(".")[0]) is None:
        problems.append(
            f"LLM profile {profile.name!r} ({profile.model}) needs the Python package "
            f"{package[1]}, which is not installed (pip install {package[1]})"
        )
    if profile.api_key_env is None and profile.server == "none" and _checks_keys(profile):
        missing = _missing_keys(profile.model)
        if missing:
            problems.append(
                f"LLM profile {profile.name!r} needs the environment variable "
                f"{' or '.join(missing)} (API key for {profile.model}), and it is not set; "
                "or name the variable with api_key_env"
            )
    return problems


def check_ready(profile: LLMProfile, api_key: str | None) -> None:
    """Raise `LLMUnavailableError` naming every problem `readiness_problems` finds."""
    problems = readiness_problems(profile, api_key)
    if problems:
        raise LLMUnavailableError("; ".join(problems))


def _checks_keys(profile: LLMProfile) -> bool:
    """Whether litellm's environment check applies: not for a local server's own provider
    prefix. `openai/<name>` at a local server is checked: litellm's
    OpenAI route refuses to call without a key (any value does for a server that ignores it)."""
    provider = _prefix(profile.model)
    return provider not in _NEEDS_NO_KEY


def _prefix(model: str) -> str:
    """The provider prefix of a model string, read without importing litellm (seconds of
    CPU at the start of every run): litellm is asked only when a key must be looked up."""
    return model.split("/", 1)[0] if "/" in model else ""


def _missing_keys(model: str) -> list[str]:
    from notarius_dagster.llm._litellm import litellm

    try:
        report = litellm.validate_environment(model=model)
    except Exception:  # a model string litellm cannot route: the call itself will say so
        return []
    if report.get("keys_in_environment"):
        return []
    return [str(k) for k in report.get("missing_keys", ())]


@dataclass(frozen=True)
class PingResult:
    """What one tiny real call gave."""

    model: str
    rung: str
    seconds: float
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None


PING_SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
    "additionalProperties": False,
}


def ping(
    profile: LLMProfile, *, api_key: str | None, api_base_override: str | None = None
) -> PingResult:
    """One tiny structured call through the real client path (the rung the profile would
    use). Raises the client's `LLMError` (content-safe, naming the profile and model) when the
    model cannot be reached."""
    from notarius_dagster.llm.client import LiteLLMClient

    check_ready(profile, api_key)
    client = LiteLLMClient(
        profile.model_copy(update={"max_tokens": 16}),
        api_key=api_key,
        api_base_override=api_base_override,
    )
    started = time.monotonic()
    response = client.complete_structured(
        StructuredRequest(
            system="You answer with JSON only.",
            user='Answer {"ok": true}.',
            schema=PING_SCHEMA,
            schema_name="Ping",
            lane="ping",
        )
    )
    return PingResult(
        model=profile.model,
        rung=response.rung,
        seconds=round(time.monotonic() - started, 3),
        prompt_tokens=response.usage.prompt_tokens,
        completion_tokens=response.usage.completion_tokens,
        cost_usd=response.usage.priced_cost_usd,
    )
