"""The production `StructuredClient`: one structured request in, one validated object (or an
honest "invalid") out, through `litellm.completion`.

Why the retries live here rather than in litellm's `num_retries`: in litellm 1.110.2 that
option needs `tenacity` (not a declared dependency; without it every provider error becomes a
bare `Exception("tenacity import failed ...")`), retries non-transient errors such as a bad key
too, and on the synchronous path retries without any pause. So litellm is called with
`num_retries=0` (which also sets the OpenAI SDK's own `max_retries` to 0, leaving exactly one
retry mechanism) and transient errors are retried here, after what the provider asks
(`Retry-After`, Gemini's `retryDelay`) or an exponential backoff (`errors.py`).

The client holds configuration and one piece of state: the rungs a provider refused for a
lane, so that one refusal steps the lane down for the rest of the run rather than being met
again on every chunk. It is thread-safe; one instance may serve many threads at once."""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator
from pydantic import JsonValue

from notarius_dagster.engine.errors import LLMError, NotariusError
from notarius_dagster.engine.errors import TransientLLMError as TransientLLMError  # re-export
from notarius_dagster.engine.llm_contract import (
    LLMUsage,
    StructuredRequest,
    StructuredResponse,
    StructuredRung,
)
from notarius_dagster.llm._litellm import Choices, ModelResponse, litellm
from notarius_dagster.llm.answers import require_choices, without_sent_secrets
from notarius_dagster.llm.errors import (
    FailureKind,
    failure_kind,
    provider_error,
    refusal_reason,
    retry_after_s,
)
from notarius_dagster.llm.families import FirstRung, ProviderFamily, family_of
from notarius_dagster.llm.preflight import check_ready
from notarius_dagster.llm.profiles import LLMProfile
from notarius_dagster.llm.structured import (
    LOWER_RUNG,
    AnswerValidator,
    check_answer,
    choose_rung,
    enums_reachable,
    lane_tail,
    prompt_schema,
    reask_message,
)

MAX_BACKOFF_S = 30.0


@dataclass(frozen=True)
class _Answer:
    """What one successful completion call gave: the answer and its usage."""

    content: str | None
    truncated: bool
    usage: LLMUsage


@dataclass
class _StepDown:
    """A rung the provider refused for this request, and why."""

    rung: FirstRung
    reason: str


class _Refused(Exception):
    """The provider refused the request's schema or response format (HTTP 400)."""

    def __init__(self, reason: str, error: LLMError) -> None:
        super().__init__(reason)
        self.reason = reason
        self.error = error


@dataclass
class _Refusals:
    """Rungs refused per lane (thread-safe)."""

    by_lane: dict[str, set[str]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def refused(self, lane: str | None) -> set[str]:
        with self.lock:
            return set(self.by_lane.get(lane or "", ()))

    def add(self, lane: str | None, rung: str) -> None:
        with self.lock:
            self.by_lane.setdefault(lane or "", set()).add(rung)


class LiteLLMClient:
    """Answers `StructuredRequest`s with the model of one `LLMProfile`.

    `api_base_override` points the client at an endpoint known only at run time (the port of
    the offline server this run started). `api_key` is the value of the profile's `api_key_env`
    variable, read by the caller when it builds the client (`settings.py: api_key`); a profile
    that names a variable must find it set: a missing key is reported, never replaced by
    another model.
    `retry_backoff_s` is the first pause between transient retries (tests pass 0); `sleep` is
    how the client waits (tests pass a recorder)."""

    def __init__(
        self,
        profile: LLMProfile,
        *,
        api_key: str | None = None,
        api_base_override: str | None = None,
        retry_backoff_s: float = 1.0,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        check_ready(profile, api_key)  # fail fast, before any request is built: key, package
        self._api_key = profile.resolve_api_key(api_key)
        self._profile = profile
        self._family = family_of(profile)
        self._api_base = api_base_override or profile.api_base
        self._retry_backoff_s = retry_backoff_s
        self._sleep = sleep or time.sleep
        self._refusals = _Refusals()
        self._reasoning = self._family.name == "openai" and _supports_reasoning(profile.model)

    @property
    def profile(self) -> LLMProfile:
        return self._profile

    @property
    def family(self) -> ProviderFamily:
        return self._family

    @property
    def api_base(self) -> str | None:
        return self._api_base

    def first_rung(self, lane: str | None = None) -> FirstRung:
        """The rung the next request of `lane` starts on (below any rung refused for it)."""
        rung: FirstRung | None = choose_rung(self._profile, self._family)
        refused = self._refusals.refused(lane)
        while rung is not None and rung in refused:
            rung = LOWER_RUNG[rung]
        return rung or "json_object"

    def complete_structured(self, request: StructuredRequest) -> StructuredResponse:
        """Climb the ladder for one request: first rung (stepping down if the provider refuses
        it), then at most one re-ask.

        `calls` counts completions that came back (1, or 2 after a re-ask); transient failures
        retried before an answer arrived and refused requests are not calls. A schema that is
        not valid JSON Schema raises `jsonschema.SchemaError` before anything is sent: that is
        a lane bug."""
        schema = request.schema_
        validator = compiled_validator(schema)
        rung = self.first_rung(request.lane)
        step_down: _StepDown | None = None
        while True:
            messages = self.messages(rung, request)
            try:
                answer = self._complete(messages, rung, request)
                break
            except _Refused as refusal:
                lower = LOWER_RUNG[rung]
                if lower is None:
                    raise refusal.error from None
                self._refusals.add(request.lane, rung)
                step_down = step_down or _StepDown(rung, refusal.reason)
                rung = lower
        usage = answer.usage
        data, errors = self._check(answer, rung, validator, schema)
        if not errors:
            return self._response(data, rung, errors, usage, step_down)

        messages = [
            *messages,
            {"role": "assistant", "content": answer.content or ""},
            {"role": "user", "content": reask_message(errors)},
        ]
        try:
            answer = self._complete(messages, rung, request)
        except _Refused as refusal:  # refused on the re-ask only: not a schema problem
            raise refusal.error from None
        usage = usage + answer.usage
        data, errors = self._check(answer, rung, validator, schema)
        return self._response(data, "reask", errors, usage, step_down)

    def _check(
        self,
        answer: _Answer,
        rung: FirstRung,
        validator: AnswerValidator,
        schema: dict[str, JsonValue],
    ) -> tuple[dict[str, JsonValue] | None, tuple[str, ...]]:
        content = answer.content
        if content and rung == "json_schema" and self._family.strict:
            try:
                value = json.loads(content)
            except json.JSONDecodeError:
                pass  # check_answer reports it
            else:
                content = json.dumps(self._family.read_back(rung, value, schema))
        return check_answer(content, validator, truncated=answer.truncated)

    def messages(self, rung: FirstRung, request: StructuredRequest) -> list[dict[str, JsonValue]]:
        """System preamble, then one user message: the shared part (the chunk) first, the
        lane's tail after, so calls of several lanes on one chunk share a cacheable prefix."""
        tail = lane_tail(
            rung,
            request.instructions,
            request.schema_,
            spell_schema=not self._family.grammar_on_json_object,
        )
        user: JsonValue = f"{request.user.rstrip()}\n\n{tail}" if tail else request.user
        prefix_chars = len(request.system) + len(request.user)
        if tail and self._family.caches_prefix(prefix_chars):
            user = [
                {
                    "type": "text",
                    "text": request.user.rstrip(),
                    "cache_control": {"type": "ephemeral"},
                },
                {"type": "text", "text": tail},
            ]
        return [
            {"role": "system", "content": request.system},
            {"role": "user", "content": user},
        ]

    def _response(
        self,
        data: dict[str, JsonValue] | None,
        rung: StructuredRung,
        errors: tuple[str, ...],
        usage: LLMUsage,
        step_down: _StepDown | None,
    ) -> StructuredResponse:
        return StructuredResponse(
            data=data if not errors else None,
            rung=rung,
            valid=not errors,
            errors=errors,
            usage=usage.answered(rung, step_down.rung if step_down else None),
            model=self._profile.model,
            stepped_down_from=step_down.rung if step_down else None,
            stepdown_reason=step_down.reason if step_down else None,
        )

    def completion_kwargs(
        self, messages: list[dict[str, JsonValue]], rung: FirstRung, request: StructuredRequest
    ) -> dict[str, Any]:
        """The arguments of one `litellm.completion` call (public for `notarius validate
        --ping` and the benchmarks): values of as many types as its keyword parameters."""
        profile = self._profile
        kwargs: dict[str, Any] = {
            "model": profile.model,
            "messages": messages,
            "response_format": self._family.response_format(
                rung, request.schema_name, request.schema_
            ),
            "timeout": profile.timeout_s,
            "num_retries": 0,
            "metadata": {
                "session_id": request.session_id,
                "lane": request.lane,
                "chunk_id": request.chunk_id,
            },
        }
        if self._reasoning:
            # OpenAI's reasoning models (o-series, gpt-5) take only their default temperature
            # (litellm refuses any other before sending), and their hidden reasoning counts
            # against the completion budget (litellm sends max_completion_tokens).
            kwargs["max_tokens"] = profile.max_tokens + profile.reasoning_tokens
        else:
            kwargs["temperature"] = profile.temperature
            kwargs["max_tokens"] = profile.max_tokens
        if profile.priced:
            kwargs["input_cost_per_token"] = profile.input_cost_per_token
            kwargs["output_cost_per_token"] = profile.output_cost_per_token
        prompt_chars = sum(len(json.dumps(m.get("content"))) for m in messages)
        kwargs.update(self._family.request_params(profile, prompt_chars))
        kwargs.update(profile.params)
        if self._api_base is not None:
            kwargs["api_base"] = self._api_base
        if self._api_key is not None:
            kwargs["api_key"] = self._api_key
        return kwargs

    def _complete(
        self, messages: list[dict[str, JsonValue]], rung: FirstRung, request: StructuredRequest
    ) -> _Answer:
        """One completion, retried on transient provider errors only; raises `_Refused` when
        the provider refuses the rung's schema or response format."""
        profile = self._profile
        kwargs = self.completion_kwargs(messages, rung, request)
        api_key = kwargs.get("api_key")
        sent = [request.system, request.user, request.instructions]
        attempts = profile.retries + 1
        for attempt in range(1, attempts + 1):
            try:
                response = litellm.completion(**kwargs)
            except NotariusError:
                raise
            except Exception as exc:  # the provider boundary: every failure becomes an LLMError
                kind = failure_kind(exc)
                if kind == "refusal" and rung in LOWER_RUNG:
                    error = self._error(exc, attempt, sent, api_key, kind="permanent")
                    raise _Refused(refusal_reason(exc, sent, (api_key,)), error) from None
                if kind == "transient" and attempt < attempts:
                    wait = self._wait(exc, attempt)
                    if wait is not None:
                        self._sleep(wait)
                        continue
                    raise self._error(
                        exc,
                        attempt,
                        sent,
                        api_key,
                        hint=f"The provider asked to wait {retry_after_s(exc):g} s "
                        f"(Retry-After), longer than the profile's timeout_s "
                        f"({profile.timeout_s:g} s)",
                    ) from None
                raise self._error(exc, attempt, sent, api_key) from None
            answered = require_choices(response, profile.model)  # no IndexError, no key
            return without_sent_secrets(_answer_of(answered), api_key, self._api_base)
        raise AssertionError("unreachable: the retry loop returns or raises")

    def _error(
        self,
        exc: BaseException,
        attempts: int,
        sent: list[str],
        api_key: str | None,
        *,
        kind: FailureKind | None = None,
        hint: str | None = None,
    ) -> LLMError:
        return provider_error(
            exc,
            profile_name=self._profile.name,
            model=self._profile.model,
            attempts=attempts,
            sent=sent,
            api_key=api_key,
            timeout_s=self._profile.timeout_s,
            kind=kind,
            hint=hint,
        )

    def _wait(self, exc: BaseException, attempt: int) -> float | None:
        """The pause before retry `attempt + 1`: what the provider asked for (None if that is
        longer than the profile's `timeout_s`), else an exponential backoff with jitter."""
        asked = retry_after_s(exc)
        if asked is not None:
            return asked if asked <= self._profile.timeout_s else None
        base = self._retry_backoff_s * 2.0 ** (attempt - 1)
        return min(MAX_BACKOFF_S, base + random.uniform(0, self._retry_backoff_s))


def _supports_reasoning(model: str) -> bool:
    try:
        return bool(litellm.supports_reasoning(model=model))
    except Exception:  # a model litellm does not know
        return False


# Compiled validators by lane schema. A lane sends one schema thousands of times, except that
# each chunk's copy carries its own citation `enum` (the chunk's unit ids): keyed by the whole
# schema, the cache never hit and every call paid `check_schema` or at least a new validator
# and its reference resolution. So the key is the schema's *shape* (integer enums left out),
# the compiled validator is the shape's, and the chunk's enums are checked separately
# (structured.py: AnswerValidator). A schema whose integer enums that check cannot reach is
# compiled whole per chunk, as before.
_VALIDATORS: dict[str, Draft202012Validator | None] = {}
"""By shape: the compiled shape, or None where the schema is compiled whole per chunk."""
_VALIDATORS_LOCK = threading.Lock()
_MAX_VALIDATORS = 256


def compiled_validator(schema: dict[str, JsonValue]) -> AnswerValidator:
    """The validator of an answer to `schema`, its compiled part shared by every schema of the
    same shape (thread-safe). Raises `jsonschema.SchemaError` for a schema that is not valid
    JSON Schema, every time."""
    shape = prompt_schema(schema)
    if shape in _VALIDATORS:
        compiled = _VALIDATORS[shape]
    else:
        Draft202012Validator.check_schema(schema)
        compiled = Draft202012Validator(json.loads(shape)) if enums_reachable(schema) else None
        with _VALIDATORS_LOCK:
            if len(_VALIDATORS) >= _MAX_VALIDATORS:
                _VALIDATORS.clear()
            _VALIDATORS[shape] = compiled
    if compiled is None:
        return AnswerValidator(Draft202012Validator(schema), schema, separate_enums=False)
    return AnswerValidator(compiled, schema, separate_enums=True)


def _answer_of(response: ModelResponse) -> _Answer:
    """Pull content, truncation, token usage and cost out of a litellm ModelResponse."""
    choice = response.choices[0]
    usage = getattr(response, "usage", None)
    details = getattr(usage, "prompt_tokens_details", None)
    # A non-streaming call's choices are `Choices` (litellm types them with the streaming kind).
    message = choice.message if isinstance(choice, Choices) else None
    return _Answer(
        content=message.content if message is not None else None,
        truncated=getattr(choice, "finish_reason", None) == "length",
        usage=LLMUsage.of_call(
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            cached_prompt_tokens=int(getattr(details, "cached_tokens", 0) or 0),
            cost_usd=_cost_of(response),
        ),
    )


def _cost_of(response: ModelResponse) -> float | None:
    """litellm's price for the call (the profile's own prices when it sets them), or None when
    litellm cannot price it: an unpriced call is never published as $0. litellm prices every
    completion once itself (`_hidden_params["response_cost"]`, None when it has no price);
    asking `completion_cost` again cost a fifth of the client's CPU per call, so it is asked
    only for a response litellm did not price."""
    hidden = getattr(response, "_hidden_params", None) or {}
    if "response_cost" in hidden:
        priced = hidden["response_cost"]
        return float(priced) if isinstance(priced, int | float) and priced >= 0 else None
    try:
        cost = litellm.completion_cost(completion_response=response)
    except Exception:
        return None
    return float(cost) if isinstance(cost, int | float) else None
