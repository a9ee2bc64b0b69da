"""Named LLM profiles: which model answers, through which endpoint, with which limits.

A profile is configuration, not a connection. It never holds a secret: an API key is named by
the environment variable that carries it, so a profile can be digested into checkpoint
fingerprints and printed in manifests without leaking credentials.

The built-in profiles are defined here and nowhere else. The engine never imports this module:
`profile_catalog()` gives it an `LLMProfileCatalog` value, which the lane registry carries to
resolution."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import Field, JsonValue, field_validator, model_validator

from notarius_dagster.engine.digest import digest_of
from notarius_dagster.engine.errors import LLMUnavailableError
from notarius_dagster.engine.llm_profiles import LLMProfileCatalog
from notarius_dagster.engine.models import Frozen

ServerKind = Literal["none", "llama-cpp"]
StructuredOutput = Literal["auto", "json_schema", "json_object"]

RESERVED_PARAMS = frozenset(
    {
        "model",
        "messages",
        "response_format",
        "api_key",
        "api_base",
        "base_url",
        "metadata",
        "num_retries",
        "max_retries",
        "timeout",
        "stream",
        "tools",
        "tool_choice",
        "functions",
        "n",
        "input_cost_per_token",
        "output_cost_per_token",
    }
)
"""litellm arguments the client sets itself: a profile's `params` may not override them (the
prices have their own profile fields)."""

# The bundled offline server does not check keys, but OpenAI-compatible clients insist on one.
OFFLINE_DUMMY_KEY = "sk-no-key-required"


class LLMProfile(Frozen):
    """One model tier. `model` is any litellm model string (`openai/smollm2`,
    `anthropic/claude-...`); `server="llama-cpp"` means the project starts the bundled offline
    llama.cpp server and points `api_base` at it."""

    name: str = Field(min_length=1)
    model: str = Field(min_length=1)
    api_base: str | None = None
    api_key_env: str | None = Field(
        default=None, description="name of the environment variable holding the API key"
    )
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    max_tokens: int = Field(default=512, gt=0)
    timeout_s: float = Field(default=120.0, gt=0)
    retries: int = Field(default=2, ge=0, description="retries of transient provider errors")
    max_concurrency: int = Field(default=1, ge=1)
    lane_deadline_s: float = Field(
        default=900.0,
        gt=0,
        description="a lane's total time, over its step retries: no chunk starts after it",
    )
    server: ServerKind = "none"
    context_tokens: int = Field(default=4096, gt=0)
    structured_output: StructuredOutput = Field(
        default="auto",
        description="the rung the structured-output ladder starts on; auto: by provider family",
    )
    params: dict[str, JsonValue] = Field(
        default_factory=dict,
        description="passed to litellm.completion as given (Ollama num_ctx, Vertex "
        "vertex_project/vertex_location, drop_params, ...)",
    )
    input_cost_per_token: float | None = Field(
        default=None, ge=0, description="own price per prompt token (USD), over litellm's"
    )
    output_cost_per_token: float | None = Field(
        default=None, ge=0, description="own price per completion token (USD), over litellm's"
    )
    reasoning_tokens: int = Field(
        default=4096,
        ge=0,
        description="added to max_tokens for a reasoning model, whose hidden reasoning "
        "counts against max_completion_tokens",
    )

    @field_validator("params")
    @classmethod
    def _params_not_reserved(cls, params: dict[str, JsonValue]) -> dict[str, JsonValue]:
        taken = sorted(set(params) & RESERVED_PARAMS)
        if taken:
            raise ValueError(
                f"params may not set {', '.join(taken)}: the client sets "
                f"{'it' if len(taken) == 1 else 'them'} itself"
            )
        return params

    @model_validator(mode="after")
    def _prices_together(self) -> LLMProfile:
        if (self.input_cost_per_token is None) != (self.output_cost_per_token is None):
            raise ValueError(
                "input_cost_per_token and output_cost_per_token are set together or not at all"
            )
        return self

    @property
    def priced(self) -> bool:
        """Whether the profile sets its own prices (else litellm's price map is asked)."""
        return self.input_cost_per_token is not None

    def fingerprint(self) -> str:
        """A stable digest of what about the model changes an extraction (model, temperature,
        token limits), for checkpoint keys. Concurrency, timeouts, retries and the profile's
        name are left out: tuning them must not invalidate stored extractions. No field is a
        secret (a key lives only in the environment and is read per call)."""
        material = self.model_dump(
            mode="json", include={"model", "temperature", "max_tokens", "context_tokens"}
        )
        # Added only when set, so digests (and stored checkpoints) of profiles that do not use
        # them stay what they were.
        if self.structured_output != "auto":
            material["structured_output"] = self.structured_output
        if self.params:
            material["params"] = self.params
        return digest_of(material)

    def resolve_api_key(self, value: str | None) -> str | None:
        """The key to send, given `value`: what the variable `api_key_env` holds, read by the
        caller from the environment (`notarius_dagster/settings.py: api_key`) when the client
        is built.

        A named variable that is missing or empty is an error: the chosen tier cannot be used,
        and silently falling back to another model would make results unreproducible."""
        if self.api_key_env is not None:
            value = (value or "").strip()
            if not value:
                raise LLMUnavailableError(
                    f"LLM profile {self.name!r} needs the environment variable "
                    f"{self.api_key_env} (API key for {self.model}), and it is not set"
                )
            return value
        if self.server == "llama-cpp":
            return OFFLINE_DUMMY_KEY
        return None


OFFLINE = LLMProfile(
    name="offline",
    model="openai/smollm2-135m-instruct",
    server="llama-cpp",
    temperature=0.0,
    max_tokens=384,
    timeout_s=300,
    retries=1,
    max_concurrency=1,
    lane_deadline_s=3600,  # a small model on a shared CPU: slow calls, not hanging ones
    input_cost_per_token=0.0,  # a local model: free, and priced as such (never "unpriced")
    output_cost_per_token=0.0,
)
"""The bundled offline model (SmolLM2-135M-Instruct via llama.cpp): proves the real path works
offline, extracts poorly. Every value is published in the manifests of its runs, and its model,
temperature and token limits are in every checkpoint key (see `LLMProfile.fingerprint`)."""

BUILTIN_PROFILES: Mapping[str, LLMProfile] = {p.name: p for p in (OFFLINE,)}
"""Every pipeline profile may name these; its own `llm_profiles` entry of the same name wins."""


def offline_profile(name: str = "offline", *, context_tokens: int = 4096) -> LLMProfile:
    """The built-in offline profile (the one production resolves), optionally renamed or with
    another context size."""
    return builtin_profile("offline", name=name, context_tokens=context_tokens)


def builtin_profile(builtin: str, **overrides: JsonValue) -> LLMProfile:
    """A built-in profile, validated again with `overrides` (which may rename it) applied."""
    return LLMProfile.model_validate({**BUILTIN_PROFILES[builtin].model_dump(), **overrides})


def canonical_profile(name: str, cfg: Mapping[str, object]) -> dict[str, JsonValue]:
    """The engine's `LLMProfileValidator`: profile `name`'s JSON form, every field filled in
    (raises `pydantic.ValidationError`)."""
    return LLMProfile.model_validate({"name": name, **cfg}).model_dump(mode="json")


def profile_catalog() -> LLMProfileCatalog:
    """What the engine knows of LLM profiles: the built-in ones and the way to check any named
    one (the lane registry carries it, `notarius_dagster.modules.registry()`)."""
    builtins = {name: _config_of(profile) for name, profile in BUILTIN_PROFILES.items()}
    return LLMProfileCatalog(builtins=builtins, validator=canonical_profile)


def _config_of(profile: LLMProfile) -> dict[str, JsonValue]:
    return profile.model_dump(mode="json", exclude={"name"})
