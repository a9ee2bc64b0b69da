"""Provider families: the strongest structured output each kind of provider offers, through
litellm.

litellm already translates an OpenAI-style `response_format` into each provider's native
mode (Anthropic's `output_format`, Gemini's `response_json_schema`, Ollama's `format`), so a
family adapter only decides what litellm cannot: which rung a profile starts on, the form of
the schema the provider accepts, the request parameters the provider needs (Ollama's context
size, Anthropic's prompt-cache marker) and how a strict answer is read back. docs/providers.md
describes each family for users; the conformance suite (`tests/test_provider_conformance.py`)
holds each one to its provider's documented rules.

Why not `instructor` on top of litellm: its re-ask feeds pydantic's error texts (which quote
the answer's values) back to the model, it retries through its own `tenacity` loop, and it
would still need these same per-provider schema forms; litellm's translation plus one re-ask
that names only paths and rules (`structured.reask_message`) keeps one retry mechanism and
never echoes untrusted text."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pydantic import JsonValue

from notarius_dagster.llm.profiles import LLMProfile
from notarius_dagster.llm.schema_forms import (
    gemini_form,
    openai_strict_form,
    plain_form,
    strip_added_nulls,
)

if TYPE_CHECKING:
    from notarius_dagster.llm._litellm import ModelInfo

FamilyName = Literal["openai", "anthropic", "gemini", "ollama", "llama-cpp", "other"]
FirstRung = Literal["json_schema", "json_object"]

OPENAI_WIRE = frozenset(
    {"openai", "azure", "azure_ai", "hosted_vllm", "lm_studio", "llamafile", "custom_openai"}
)
"""litellm providers that speak OpenAI chat completions and take `json_schema` with `strict`:
OpenAI, Azure OpenAI, vLLM, LM Studio, llama.cpp's server (as `openai/<name>` at its URL)."""
GEMINI = frozenset({"gemini", "vertex_ai", "vertex_ai_beta"})
OLLAMA = frozenset({"ollama", "ollama_chat"})

OLLAMA_MIN_CONTEXT = 4096
"""Ollama's documented default context window (https://docs.ollama.com/faq, "How can I specify
the context window size?"): far below a chunk, the lane's instructions and the answer."""
CHARS_PER_TOKEN = 3.0
"""A conservative characters-per-token estimate for sizing a context window (English text
averages about four characters a token; transcripts with names and markers fewer)."""
ANTHROPIC_MIN_CACHE_TOKENS = 1024
"""Anthropic caches a prefix of at least 1,024 tokens (2,048 on Haiku models):
https://docs.claude.com/en/docs/build-with-claude/prompt-caching ("Cache limitations")."""


@dataclass(frozen=True)
class ProviderFamily:
    """How one family of providers is asked for structured output."""

    name: FamilyName
    provider: str
    """litellm's provider name for the model (`openai`, `anthropic`, `ollama_chat`, ...)."""
    schema_form: Callable[[dict[str, JsonValue]], dict[str, JsonValue]]
    """The schema as sent on the `json_schema` rung (the full one is still validated)."""
    strict: bool = False
    """Whether `json_schema` is sent with `strict: true` (the OpenAI wire)."""

    @property
    def grammar_on_json_object(self) -> bool:
        """Whether the `json_object` rung enforces the schema sent inside `response_format`
        (the bundled llama.cpp server compiles it into a grammar): the prompt then need not
        spell the schema out."""
        return self.name == "llama-cpp"

    def auto_rung(self, profile: LLMProfile) -> FirstRung:
        """The rung `structured_output: auto` starts on."""
        if self.name == "llama-cpp":
            # llama-cpp-python's server answers `json_schema` with HTTP 500 but constrains
            # decoding with a schema given inside `json_object` (a grammar).
            return "json_object"
        if self.name in ("anthropic", "gemini", "ollama"):
            return "json_schema"
        known = _model_info(profile.model)
        if self.name == "openai":
            # A model litellm knows and marks as unable (gpt-3.5) starts lower; a name it does
            # not know (a local server's model) is tried on the strongest rung, which the
            # ladder steps down from if the server refuses it.
            if known is not None and known.get("supports_response_schema") is False:
                return "json_object"
            return "json_schema"
        from notarius_dagster.llm._litellm import litellm

        if litellm.supports_response_schema(model=profile.model, custom_llm_provider=None):
            return "json_schema"
        return "json_object"

    def response_format(
        self, rung: FirstRung, schema_name: str, schema: dict[str, JsonValue]
    ) -> dict[str, JsonValue]:
        """The `response_format` parameter for a rung (the re-ask reuses it unchanged)."""
        if rung == "json_schema":
            return {
                "type": "json_schema",
                "json_schema": {
                    "name": schema_name,
                    "schema": self.schema_form(schema),
                    "strict": self.strict,
                },
            }
        if self.name == "llama-cpp":
            return {"type": "json_object", "schema": schema}
        return {"type": "json_object"}

    def read_back(
        self, rung: FirstRung, value: JsonValue, schema: dict[str, JsonValue]
    ) -> JsonValue:
        """An answer as the full schema reads it (see `schema_forms.strip_added_nulls`)."""
        if rung == "json_schema" and self.strict:
            return strip_added_nulls(value, schema)
        return value

    def request_params(self, profile: LLMProfile, prompt_chars: int) -> dict[str, JsonValue]:
        """Parameters this family needs on every request, under the profile's own `params`."""
        if self.name == "ollama" and "num_ctx" not in profile.params:
            return {"num_ctx": ollama_context(prompt_chars, profile.max_tokens)}
        return {}

    def caches_prefix(self, prefix_chars: int) -> bool:
        """Whether to mark the shared prefix for the provider's prompt cache (Anthropic only;
        OpenAI and Gemini cache a repeated prefix by themselves)."""
        return self.name == "anthropic" and prefix_chars / 4 >= ANTHROPIC_MIN_CACHE_TOKENS


def ollama_context(prompt_chars: int, max_tokens: int) -> int:
    """The `num_ctx` for a request: room for the prompt and the answer, rounded up to a power
    of two (Ollama reloads a model whenever `num_ctx` changes, so a few sizes are better than a
    size per request), never below Ollama's own default."""
    needed = math.ceil(prompt_chars / CHARS_PER_TOKEN) + max_tokens
    size = OLLAMA_MIN_CONTEXT
    while size < needed:
        size *= 2
    return size


def family_of(profile: LLMProfile) -> ProviderFamily:
    """The family of a profile's model, from litellm's own provider resolution."""
    provider = provider_of(profile.model)
    if profile.server == "llama-cpp":
        return ProviderFamily("llama-cpp", provider, _as_is)
    if provider in OPENAI_WIRE:
        return ProviderFamily("openai", provider, openai_strict_form, strict=True)
    if provider == "anthropic":
        # litellm filters the schema to Anthropic's supported subset itself
        # (`AnthropicConfig.filter_anthropic_output_schema`) and adds
        # `additionalProperties: false`.
        return ProviderFamily("anthropic", provider, plain_form)
    if provider in GEMINI:
        return ProviderFamily("gemini", provider, gemini_form)
    if provider in OLLAMA:
        return ProviderFamily("ollama", provider, plain_form)
    return ProviderFamily("other", provider, plain_form)


KNOWN_PREFIXES = OPENAI_WIRE | GEMINI | OLLAMA | {"anthropic"}


def provider_of(model: str) -> str:
    """litellm's provider for a model string (`anthropic/claude-...` -> `anthropic`); an
    unknown one is the prefix before the first slash, or `other`. A prefix of the families
    above is read as written (litellm, seconds of CPU to import, is asked only otherwise)."""
    prefix = model.split("/", 1)[0] if "/" in model else ""
    if prefix in KNOWN_PREFIXES:
        return prefix
    from notarius_dagster.llm._litellm import litellm

    try:
        return str(litellm.get_llm_provider(model=model)[1])
    except Exception:  # litellm raises BadRequestError for a model it cannot route
        return model.split("/", 1)[0] if "/" in model else "other"


def _model_info(model: str) -> ModelInfo | None:
    from notarius_dagster.llm._litellm import litellm

    try:
        return litellm.get_model_info(model=model)
    except Exception:  # not in litellm's model map
        return None


def _as_is(schema: dict[str, JsonValue]) -> dict[str, JsonValue]:
    return schema
