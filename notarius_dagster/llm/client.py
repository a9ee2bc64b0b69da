"""The production `StructuredClient`: one structured request in, one validated object (or an
honest "invalid") out, through `litellm.completion`.

Why the retries live here rather than in litellm's `num_retries`: in litellm 1.110.2 that
option needs `tenacity` (not a declared dependency; without it every provider error becomes a
bare `Exception("tenacity import failed ...")`), retries non-transient errors such as a bad key
too, and on the synchronous path retries without any pause. So litellm is called with
`num_retries=0` (which also sets the OpenAI SDK's own `max_retries` to 0, leaving exactly one
retry mechanism) and transient errors are retried here with exponential backoff.

The client holds only configuration, so one instance may serve many threads at once."""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import openai
from jsonschema import Draft202012Validator

from notarius_dagster.engine.errors import LLMError, NotariusError
from notarius_dagster.engine.errors import TransientLLMError as TransientLLMError  # re-export
from notarius_dagster.engine.llm_contract import (
    StructuredRequest,
    StructuredResponse,
    StructuredRung,
)
from notarius_dagster.engine.redaction import provider_fields, redact_secrets, safe_summary
from notarius_dagster.llm._litellm import litellm
from notarius_dagster.llm.answers import require_choices, without_sent_secrets
from notarius_dagster.llm.profiles import LLMProfile
from notarius_dagster.llm.structured import (
    check_answer,
    choose_rung,
    reask_message,
    response_format_for,
    system_prompt_for,
)

MAX_BACKOFF_S = 30.0
_TRANSIENT_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class _Answer:
    """What one successful completion call contributed."""

    content: str | None
    truncated: bool
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float


@dataclass
class _Tally:
    """Running totals over the calls of one structured request."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, answer: _Answer) -> None:
        self.calls += 1
        self.prompt_tokens += answer.prompt_tokens
        self.completion_tokens += answer.completion_tokens
        self.cost_usd += answer.cost_usd


class LiteLLMClient:
    """Answers `StructuredRequest`s with the model of one `LLMProfile`.

    `api_base_override` points the client at an endpoint known only at run time (the port of
    the offline server this run started). A profile that names an API key variable must find it
    set when the client is built: a missing key is reported, never replaced by another model.
    `retry_backoff_s` is the first pause between transient retries (tests pass 0)."""

    def __init__(
        self,
        profile: LLMProfile,
        *,
        api_base_override: str | None = None,
        retry_backoff_s: float = 1.0,
    ) -> None:
        profile.resolve_api_key()  # fail fast, before any request is built
        if profile.model.startswith("notarius-double/"):
            # The test-double provider lives in litellm's registry only once registered; a run
            # process launched by the daemon has imported nothing else that would do it.
            from notarius_dagster.llm.test_double import register_double

            register_double()
        self._profile = profile
        self._api_base = api_base_override or profile.api_base
        self._retry_backoff_s = retry_backoff_s

    @property
    def profile(self) -> LLMProfile:
        return self._profile

    @property
    def api_base(self) -> str | None:
        return self._api_base

    def complete_structured(self, request: StructuredRequest) -> StructuredResponse:
        """Climb the ladder for one request: first rung, then at most one re-ask.

        `calls` counts completions that came back (1, or 2 after a re-ask); transient failures
        retried before an answer arrived are not calls. A schema that is not valid JSON Schema
        raises `jsonschema.SchemaError` before anything is sent: that is a lane bug."""
        schema = request.schema_
        validator = compiled_validator(schema)
        first_rung = choose_rung(self._profile)
        response_format = response_format_for(first_rung, request.schema_name, schema)
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": system_prompt_for(first_rung, request.system, schema)},
            {"role": "user", "content": request.user},
        ]
        tally = _Tally()

        answer = self._complete(messages, response_format, request)
        tally.add(answer)
        data, errors = check_answer(answer.content, validator, truncated=answer.truncated)
        if not errors:
            return self._response(data, first_rung, errors, tally)

        messages = [
            *messages,
            {"role": "assistant", "content": answer.content or ""},
            {"role": "user", "content": reask_message(errors)},
        ]
        answer = self._complete(messages, response_format, request)
        tally.add(answer)
        data, errors = check_answer(answer.content, validator, truncated=answer.truncated)
        return self._response(data, "reask", errors, tally)

    def _response(
        self,
        data: dict[str, Any] | None,
        rung: StructuredRung,
        errors: tuple[str, ...],
        tally: _Tally,
    ) -> StructuredResponse:
        return StructuredResponse(
            data=data if not errors else None,
            rung=rung,
            valid=not errors,
            errors=errors,
            calls=tally.calls,
            prompt_tokens=tally.prompt_tokens,
            completion_tokens=tally.completion_tokens,
            cost_usd=tally.cost_usd,
            model=self._profile.model,
        )

    def _complete(
        self,
        messages: list[dict[str, Any]],
        response_format: dict[str, Any],
        request: StructuredRequest,
    ) -> _Answer:
        """One completion, retried on transient provider errors only."""
        profile = self._profile
        kwargs: dict[str, Any] = {
            "model": profile.model,
            "messages": messages,
            "response_format": response_format,
            "temperature": profile.temperature,
            "max_tokens": profile.max_tokens,
            "timeout": profile.timeout_s,
            "num_retries": 0,
            "metadata": {
                "session_id": request.session_id,
                "lane": request.lane,
                "chunk_id": request.chunk_id,
            },
        }
        if self._api_base is not None:
            kwargs["api_base"] = self._api_base
        api_key = profile.resolve_api_key()
        if api_key is not None:
            kwargs["api_key"] = api_key

        attempts = profile.retries + 1
        for attempt in range(1, attempts + 1):
            try:
                response = litellm.completion(**kwargs)
            except NotariusError:
                raise
            except Exception as exc:  # the provider boundary: every failure becomes an LLMError
                transient = is_transient(exc)
                if transient and attempt < attempts:
                    time.sleep(self._backoff(attempt))
                    continue
                raise provider_error(
                    exc,
                    profile.model,
                    attempt,
                    request,
                    sent=[str(m.get("content") or "") for m in messages],
                    api_key=api_key,
                    timeout_s=profile.timeout_s,
                ) from None
            require_choices(response, profile.model)  # llm/answers.py: no IndexError, no key
            return without_sent_secrets(_answer_of(response), api_key, self._api_base)
        raise AssertionError("unreachable: the retry loop returns or raises")

    def _backoff(self, attempt: int) -> float:
        base = self._retry_backoff_s * 2 ** (attempt - 1)
        return min(MAX_BACKOFF_S, base + random.uniform(0, self._retry_backoff_s))


# Compiled validators by canonical schema text. A lane sends the same few schemas thousands of
# times; `check_schema` plus building the validator cost more CPU than the rest of a call.
_VALIDATORS: dict[str, Draft202012Validator] = {}
_VALIDATORS_LOCK = threading.Lock()
_MAX_VALIDATORS = 256


def compiled_validator(schema: dict[str, Any]) -> Draft202012Validator:
    """The schema checked once and compiled once per process (thread-safe). Raises
    `jsonschema.SchemaError` for a schema that is not valid JSON Schema, every time."""
    key = json.dumps(schema, sort_keys=True, separators=(",", ":"))
    validator = _VALIDATORS.get(key)
    if validator is not None:
        return validator
    Draft202012Validator.check_schema(schema)
    validator = Draft202012Validator(schema)
    with _VALIDATORS_LOCK:
        if len(_VALIDATORS) >= _MAX_VALIDATORS:
            _VALIDATORS.clear()
        _VALIDATORS[key] = validator
    return validator


def is_transient(exc: BaseException) -> bool:
    """Rate limits, timeouts, lost connections and server-side 5xx may pass on their own."""
    if isinstance(
        exc, openai.RateLimitError | openai.APIConnectionError | openai.InternalServerError
    ):
        return True
    return getattr(exc, "status_code", None) in _TRANSIENT_STATUS


def provider_error(
    exc: BaseException,
    model: str,
    attempts: int,
    request: StructuredRequest,
    *,
    sent: Sequence[str] = (),
    api_key: str | None = None,
    timeout_s: float | None = None,
) -> LLMError:
    """A content-safe LLMError. A provider's message is untrusted text (it may quote the
    request, escaped, cut or re-flowed), so only an allowlist of it is kept: the HTTP status,
    the exception class, the provider's error `type`/`code` identifiers, what a timeout or a
    lost connection means, and a few leading words that cannot carry anything that was sent
    (`engine/redaction.py: safe_summary`). The key that was sent, and anything shaped like a
    credential, is redacted from the result."""
    texts = (request.system, request.user, *sent)
    raw = redact_secrets(str(exc), (api_key,))
    chain = _causes(exc)
    parts = [type(exc).__name__]
    if any(isinstance(c, openai.APITimeoutError | TimeoutError) for c in chain):
        # litellm reports a timeout as HTTP 408 and a lost connection as HTTP 500: no status
        # came from the provider, so none is shown; what happened is said instead.
        parts.append(f"no answer within {timeout_s:g} s" if timeout_s else "timed out")
    elif any(isinstance(c, openai.APIConnectionError | ConnectionError) for c in chain):
        parts.append(_connection_cause(chain))
    else:
        status = getattr(exc, "status_code", None)
        if isinstance(status, int) and 100 <= status <= 599:
            parts.insert(0, f"HTTP {status}")
    fields = {
        k: v for k, v in provider_fields(raw).items() if safe_summary(v.replace("_", " "), texts)
    }
    parts.extend(f"{k} {v}" for k, v in fields.items())
    summary = redact_secrets(safe_summary(raw, texts), (api_key,))
    tries = "attempt" if attempts == 1 else "attempts"
    text = f"LLM call to {model} failed after {attempts} {tries}: {', '.join(parts)}"
    if summary:
        text = f"{text}: {summary}"
    return TransientLLMError(text) if is_transient(exc) else LLMError(text)


def _causes(exc: BaseException) -> list[BaseException]:
    """`exc` and the exceptions it was raised from (bounded: a chain may be long)."""
    chain: list[BaseException] = []
    cause: BaseException | None = exc
    while cause is not None and len(chain) < 16 and cause not in chain:
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    return chain


def _connection_cause(chain: Sequence[BaseException]) -> str:
    """What broke a connection, named by the classes in the chain (never their text)."""
    if any(isinstance(c, ConnectionResetError) for c in chain):
        return "connection reset by the provider"
    if any(isinstance(c, ConnectionRefusedError) for c in chain):
        return "connection refused"
    names = " ".join(type(c).__name__ for c in chain).lower()
    if "remoteprotocol" in names or "disconnect" in names:
        return "the provider closed the connection without an answer"
    return "connection failed"


def _answer_of(response: Any) -> _Answer:
    """Pull content, truncation, token usage and cost out of a litellm ModelResponse."""
    choice = response.choices[0]
    usage = getattr(response, "usage", None)
    return _Answer(
        content=cast("str | None", choice.message.content),
        truncated=getattr(choice, "finish_reason", None) == "length",
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        cost_usd=_cost_of(response),
    )


def _cost_of(response: Any) -> float:
    """litellm's price for the call; models missing from its price map (local ones, the test
    double) cost 0.0 rather than failing the extraction. litellm prices every completion once
    itself (`_hidden_params["response_cost"]`, None when it has no price); asking
    `completion_cost` again cost a fifth of the client's CPU per call, so it is asked only for
    a response litellm did not price."""
    hidden = getattr(response, "_hidden_params", None) or {}
    if "response_cost" in hidden:
        priced = hidden["response_cost"]
        return float(priced) if isinstance(priced, int | float) and priced > 0 else 0.0
    try:
        return float(litellm.completion_cost(completion_response=response) or 0.0)
    except Exception:
        return 0.0
