"""What a provider failure means, and how it is told: passes on its own (retry, after what the
provider asks), refuses our schema (step down the ladder), or is permanent (fail at once).

Every exception out of `litellm.completion` comes here. The text of a provider's error is
untrusted (it may quote the prompt), so what is kept of it goes through
`engine/redaction.py`; what we read of it to decide (a status, an error class, a
`Retry-After`, a `retryDelay`) is parsed, never shown whole."""

from __future__ import annotations

import email.utils
import json
import re
import time
from collections.abc import Sequence
from typing import Literal, Protocol

import openai

from notarius_dagster.engine.errors import LLMError, TransientLLMError
from notarius_dagster.engine.redaction import (
    provider_fields,
    provider_reason,
    redact_secrets,
    safe_summary,
)

FailureKind = Literal["transient", "refusal", "permanent"]

TRANSIENT_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
"""Statuses that may pass on their own: timeouts, conflicts, rate limits, server errors and
Anthropic's 529 `overloaded_error`."""

_REFUSAL_WORDS = (
    "response_format",
    "json_schema",
    "schema",
    "output_format",
    "response_mime_type",
    "responsemimetype",
    "grammar",
    "xgrammar",
    "too many states",
)
"""A 400 naming one of these refuses the structured-output request itself (the schema or the
response format), not the prompt: the ladder steps down instead of failing. Besides the words
of OpenAI ("Invalid schema for response_format"), Ollama ("invalid JSON schema in format") and
LM Studio ("'response_format.type' must be ..."), a schema too large to compile is refused by
Anthropic ("The compiled grammar is too large"), Gemini ("too many states for serving") and
vLLM ("not supported by xgrammar")."""

_SETUP_PHRASES = (
    "missing credentials",
    "api_key client option must be set",
    "google cloud sdk not found",
    "could not automatically determine credentials",
    "default credentials",
    "no module named",
    "please install",
    "pip install",
    "llm provider not provided",
    "unable to locate credentials",
)
"""What litellm and the SDKs say when the call could not even be made: no key, no provider
package, no cloud credentials, a model string litellm cannot route. Retrying changes nothing."""

_RETRY_DELAY = re.compile(r"""["']?retryDelay["']?\s*:\s*["'](\d+(?:\.\d+)?)s["']""")


def error_text(exc: BaseException) -> str:
    """The exception's text, and the provider's error body where litellm kept it apart (LM
    Studio's reason is only in `exc.body`; the text says just "Error code: 400")."""
    text = str(exc)
    body = getattr(exc, "body", None)
    if body:
        extra = json.dumps(body, ensure_ascii=False) if not isinstance(body, str) else body
        if extra not in text:
            text = f"{text} {extra}"
    return text


def failure_kind(exc: BaseException) -> FailureKind:
    """Classify one failed call."""
    chain = causes(exc)
    if any(isinstance(c, ImportError) for c in chain) or _is_setup_error(exc):
        return "permanent"
    status = getattr(exc, "status_code", None)
    if status in (400, 422) or isinstance(exc, openai.BadRequestError):
        text = error_text(exc).lower()
        return "refusal" if any(word in text for word in _REFUSAL_WORDS) else "permanent"
    if isinstance(
        exc,
        openai.AuthenticationError | openai.PermissionDeniedError | openai.NotFoundError,
    ):
        return "permanent"
    if isinstance(
        exc, openai.RateLimitError | openai.APIConnectionError | openai.InternalServerError
    ):
        return "transient"
    return "transient" if status in TRANSIENT_STATUS else "permanent"


def _is_setup_error(exc: BaseException) -> bool:
    status = getattr(exc, "status_code", None)
    if status in (429, 529):
        return False
    text = str(exc).lower()
    return any(phrase in text for phrase in _SETUP_PHRASES)


def retry_after_s(exc: BaseException, now: float | None = None) -> float | None:
    """How long the provider asked us to wait, if it said: the `retry-after-ms` or
    `Retry-After` header (seconds or an HTTP date; RFC 9110 section 10.2.3), or Gemini's
    `RetryInfo.retryDelay` ("7s") in the error body."""
    for headers in _headers_of(exc):
        millis = headers.get("retry-after-ms")
        if millis is not None:
            try:
                return max(0.0, float(millis) / 1000)
            except ValueError:
                pass
        value = headers.get("retry-after")
        if value is not None:
            try:
                return max(0.0, float(value))
            except ValueError:
                when = email.utils.parsedate_to_datetime(value) if value.strip() else None
                if when is not None:
                    return max(0.0, when.timestamp() - (now if now is not None else time.time()))
    match = _RETRY_DELAY.search(str(exc))
    if match:
        return float(match.group(1))
    return None


class _Headers(Protocol):
    """Response headers as both kinds below offer them (httpx `Headers`, a dict)."""

    def get(self, key: str, /) -> str | None: ...


def _headers_of(exc: BaseException) -> list[_Headers]:
    """The response headers a litellm exception carries, wherever it keeps them: the
    `response` it was raised from (an httpx `Headers`, case-insensitive) and litellm's own
    copy (`litellm_response_headers`), which it fills when it rebuilt the response."""
    found: list[_Headers] = []
    for headers in (
        getattr(getattr(exc, "response", None), "headers", None),
        getattr(exc, "litellm_response_headers", None),
    ):
        if headers is not None and hasattr(headers, "get"):
            found.append(headers)
    return found


def refusal_reason(exc: BaseException, sent: Sequence[str], secrets: Sequence[str | None]) -> str:
    """The provider's reason for refusing our schema or response format: it is about our
    schema, not the user's text, so it is shown, once it is shown not to quote anything that
    was sent (`engine/redaction.provider_reason`)."""
    return provider_reason(redact_secrets(error_text(exc), secrets), sent)


def provider_error(
    exc: BaseException,
    *,
    profile_name: str,
    model: str,
    attempts: int,
    sent: Sequence[str] = (),
    api_key: str | None = None,
    timeout_s: float | None = None,
    kind: FailureKind | None = None,
    hint: str | None = None,
) -> LLMError:
    """A content-safe LLMError. A provider's message is untrusted text (it may quote the
    request, escaped, cut or re-flowed), so only an allowlist of it is kept: the HTTP status,
    the exception class, the provider's error `type`/`code` identifiers, what a timeout or a
    lost connection means, and a few leading words that cannot carry anything that was sent
    (`engine/redaction.py: safe_summary`). The key that was sent, and anything shaped like a
    credential, is redacted from the result; the model and profile names are not secrets."""
    kind = kind or failure_kind(exc)
    raw = redact_secrets(error_text(exc), (api_key,))
    chain = causes(exc)
    parts = [type(exc).__name__]
    if any(isinstance(c, openai.APITimeoutError | TimeoutError) for c in chain):
        # litellm reports a timeout as HTTP 408 and a lost connection as HTTP 500: no status
        # came from the provider, so none is shown; what happened is said instead.
        parts.append(f"no answer within {timeout_s:g} s" if timeout_s else "timed out")
    elif kind == "transient" and any(
        isinstance(c, openai.APIConnectionError | ConnectionError) for c in chain
    ):
        parts.append(_connection_cause(chain))
    else:
        status = getattr(exc, "status_code", None)
        if isinstance(status, int) and 100 <= status <= 599:
            parts.insert(0, f"HTTP {status}")
    fields = {
        k: v for k, v in provider_fields(raw).items() if safe_summary(v.replace("_", " "), sent)
    }
    parts.extend(f"{k} {v}" for k, v in fields.items())
    summary = redact_secrets(safe_summary(raw, sent), (api_key,))
    tries = "attempt" if attempts == 1 else "attempts"
    text = (
        f"LLM call to {model} (profile {profile_name!r}) failed after {attempts} {tries}: "
        f"{', '.join(parts)}"
    )
    if summary:
        text = f"{text}: {summary}"
    advice = hint or _advice(exc, kind)
    if advice:
        text = f"{text}. {advice}"
    return TransientLLMError(text) if kind == "transient" else LLMError(text)


def _advice(exc: BaseException, kind: FailureKind) -> str | None:
    """What to do about a permanent error, in one sentence."""
    if kind != "permanent":
        return None
    text = str(exc).lower()
    if any(isinstance(c, ImportError) for c in causes(exc)) or "no module named" in text:
        return "The provider's Python package is not installed (docs/providers.md)"
    if "google cloud sdk" in text or "default credentials" in text:
        return (
            "Google Cloud credentials are missing: install google-auth and set "
            "GOOGLE_APPLICATION_CREDENTIALS (docs/providers.md, Vertex AI)"
        )
    if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError) or (
        "credentials" in text or "api_key" in text
    ):
        return "Check the API key variable of the profile (notarius validate --ping)"
    if isinstance(exc, openai.NotFoundError):
        return "Check the model name and the endpoint of the profile"
    return None


def causes(exc: BaseException) -> list[BaseException]:
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
