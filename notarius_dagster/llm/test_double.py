"""A TEST DOUBLE for the model boundary. It is not a model and knows nothing about language.

It is a litellm `CustomLLM` registered under the provider name `notarius-double`, so code under
test runs the real `litellm.completion` path (parameter mapping, exception mapping, usage and
response objects) with `model="notarius-double/<anything>"`. What it answers comes from a
responder callable the test supplies; every call is recorded (messages, response format,
metadata including the session id) so tests can assert what would have been sent to a model.

Usage:

    with scripted_llm(replay('not json', '{"name": "Mira"}')) as double:
        client.complete_structured(request)
    assert len(double.calls) == 2

A responder may raise a litellm exception (see `provider_error_of`) to exercise retries and
error mapping. The active double is process-wide (not per thread or context), because lane
extraction calls the client from worker threads; it is not visible to other processes, so use
it only with in-process execution.

ONLY for end-to-end tests of the real webserver and daemon, whose runs execute in other
processes where no `scripted_llm` block can be opened: set the environment variable
NOTARIUS_TEST_DOUBLE_RESPONDER="module:function" (e.g. `tests.doubles:lane_responder`) for those
processes. `register_double()` (called when this module is imported) then installs that
responder as the process's default double, which answers every call made while no
`scripted_llm` block is active; a block, when open, still answers instead. The module must be
importable in that process (put the repository root on PYTHONPATH), and a malformed value fails
the import loudly. Without the variable a call outside a block fails loudly, as it always has.
Never set it for a real deployment: it replaces the model with canned answers."""

from __future__ import annotations

import copy
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import import_module
from typing import Any, Literal

from notarius_dagster.llm._litellm import litellm
from notarius_dagster.llm.profiles import DOUBLE_PROVIDER, LLMProfile, builtin_profile

RESPONDER_ENV = "NOTARIUS_TEST_DOUBLE_RESPONDER"
"""Opt-in default responder for end-to-end tests across processes ("module:function")."""

Responder = Callable[[list[dict[str, Any]], dict[str, Any] | None], str]
ProviderErrorKind = Literal[
    "rate_limit", "timeout", "connection", "authentication", "bad_request", "not_found"
]


def double_profile(name: str = "test-double", **overrides: Any) -> LLMProfile:
    """The built-in `test-double` LLM profile (it routes to the double), with `overrides`."""
    return builtin_profile("test-double", name=name, **overrides)


@dataclass(frozen=True)
class DoubleCall:
    """One request as the double received it from litellm (deep copies, safe to inspect)."""

    model: str
    messages: tuple[dict[str, Any], ...]
    response_format: dict[str, Any] | None
    metadata: dict[str, Any]
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def session_id(self) -> str | None:
        value = self.metadata.get("session_id")
        return value if isinstance(value, str) else None


class ScriptedLLM:
    """A responder plus the thread-safe record of every call made to it."""

    def __init__(self, responder: Responder) -> None:
        self._responder = responder
        self._lock = threading.Lock()
        self._calls: list[DoubleCall] = []

    @property
    def calls(self) -> list[DoubleCall]:
        """The calls so far, in arrival order (a snapshot)."""
        with self._lock:
            return list(self._calls)

    def answer(self, call: DoubleCall) -> str:
        """Record the call, then ask the responder (which may raise a provider error; the call
        is recorded either way, so retries are visible)."""
        with self._lock:
            self._calls.append(call)
        return self._responder([dict(m) for m in call.messages], call.response_format)


def replay(*answers: str) -> Responder:
    """A responder that returns `answers` in order, one per call (from any thread), and
    fails loudly if asked more often than scripted."""
    lock = threading.Lock()
    remaining = list(answers)

    def respond(messages: list[dict[str, Any]], response_format: dict[str, Any] | None) -> str:
        with lock:
            if not remaining:
                raise AssertionError(f"the test double was scripted for {len(answers)} calls")
            return remaining.pop(0)

    return respond


def provider_error_of(kind: ProviderErrorKind, message: str) -> Exception:
    """A litellm exception as a provider would raise it, for responders to raise."""
    model = f"{DOUBLE_PROVIDER}/scripted"
    if kind == "rate_limit":
        return litellm.RateLimitError(message=message, llm_provider=DOUBLE_PROVIDER, model=model)
    if kind == "timeout":
        return litellm.Timeout(message=message, model=model, llm_provider=DOUBLE_PROVIDER)
    if kind == "connection":
        return litellm.APIConnectionError(
            message=message, llm_provider=DOUBLE_PROVIDER, model=model
        )
    if kind == "authentication":
        return litellm.AuthenticationError(
            message=message, llm_provider=DOUBLE_PROVIDER, model=model
        )
    if kind == "not_found":
        return litellm.NotFoundError(message=message, model=model, llm_provider=DOUBLE_PROVIDER)
    return litellm.BadRequestError(message=message, model=model, llm_provider=DOUBLE_PROVIDER)


class _DoubleHandler(litellm.CustomLLM):  # type: ignore[misc]
    """The litellm-side adapter: turns litellm's handler call into a `DoubleCall` for the
    active `ScriptedLLM` and its answer into a ModelResponse with usage."""

    def completion(self, *args: Any, **kwargs: Any) -> Any:
        double = _active_double()
        model = str(kwargs["model"])
        if double is None:
            raise litellm.BadRequestError(
                message="no test double is active; wrap the call in scripted_llm(...) (an "
                f"end-to-end test of separate processes may set {RESPONDER_ENV}=module:function)",
                model=model,
                llm_provider=DOUBLE_PROVIDER,
            )
        optional_params: dict[str, Any] = dict(kwargs.get("optional_params") or {})
        litellm_params: dict[str, Any] = kwargs.get("litellm_params") or {}
        messages: Sequence[dict[str, Any]] = kwargs["messages"]
        response_format = optional_params.pop("response_format", None)
        call = DoubleCall(
            model=model,
            messages=tuple(copy.deepcopy(dict(m)) for m in messages),
            response_format=copy.deepcopy(response_format),
            metadata=copy.deepcopy(dict(litellm_params.get("metadata") or {})),
            params=copy.deepcopy(optional_params),
        )
        text = double.answer(call)
        response = kwargs["model_response"]
        response.model = model
        response.choices[0].message.content = text
        response.choices[0].finish_reason = "stop"
        prompt_chars = sum(len(str(m.get("content") or "")) for m in messages)
        response.usage = litellm.Usage(
            prompt_tokens=prompt_chars // 4,
            completion_tokens=len(text) // 4,
            total_tokens=prompt_chars // 4 + len(text) // 4,
        )
        return response

    async def acompletion(self, *args: Any, **kwargs: Any) -> Any:
        return self.completion(*args, **kwargs)


_HANDLER = _DoubleHandler()
_ACTIVE_LOCK = threading.Lock()
_ACTIVE: list[ScriptedLLM] = []
# The default double from RESPONDER_ENV, with the value it was loaded from (None: no default).
_DEFAULT: tuple[str, ScriptedLLM] | None = None


def register_double() -> None:
    """Make `notarius-double/...` models resolvable in litellm (idempotent; appends to
    `litellm.custom_provider_map` so other custom providers stay registered), and install or
    remove the default double as RESPONDER_ENV says (see the module docstring)."""
    if not any(item.get("provider") == DOUBLE_PROVIDER for item in litellm.custom_provider_map):
        litellm.custom_provider_map.append(
            {"provider": DOUBLE_PROVIDER, "custom_handler": _HANDLER}
        )
    _sync_default_double()


def responder_from_spec(spec: str) -> Responder:
    """The callable named by "package.module:function" (the function part may be dotted)."""
    module_name, sep, attribute = spec.strip().partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"{RESPONDER_ENV} must look like 'package.module:function', got {spec!r}")
    target: Any = import_module(module_name)
    for part in attribute.split("."):
        target = getattr(target, part)
    if not callable(target):
        raise TypeError(f"{RESPONDER_ENV}={spec!r} does not name a callable")
    return target  # type: ignore[no-any-return]


def _sync_default_double() -> None:
    global _DEFAULT
    spec = os.environ.get(RESPONDER_ENV, "").strip()
    with _ACTIVE_LOCK:
        if _DEFAULT is not None and _DEFAULT[0] == spec:
            return
        if not spec:
            _DEFAULT = None
            return
    double = ScriptedLLM(responder_from_spec(spec))  # imports outside the lock
    with _ACTIVE_LOCK:
        _DEFAULT = (spec, double)


def default_double() -> ScriptedLLM | None:
    """The default double installed from RESPONDER_ENV, if any (its calls are recorded)."""
    with _ACTIVE_LOCK:
        return _DEFAULT[1] if _DEFAULT is not None else None


def _active_double() -> ScriptedLLM | None:
    """The innermost `scripted_llm` block's double, else the default one, else None."""
    with _ACTIVE_LOCK:
        if _ACTIVE:
            return _ACTIVE[-1]
        return _DEFAULT[1] if _DEFAULT is not None else None


@contextmanager
def scripted_llm(responder: Responder) -> Iterator[ScriptedLLM]:
    """Answer every `notarius-double/...` call inside the block with `responder`. Blocks
    nest; the innermost one answers."""
    register_double()
    double = ScriptedLLM(responder)
    with _ACTIVE_LOCK:
        _ACTIVE.append(double)
    try:
        yield double
    finally:
        with _ACTIVE_LOCK:
            _ACTIVE.remove(double)


register_double()
