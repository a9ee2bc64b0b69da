"""A TEST DOUBLE for the model boundary, and the pytest plugin that installs it. It is not a
model, knows nothing about language, and is not part of the installed package: it lives here,
in `tests/`, and only a test process (or a benchmark that puts the repository root on its
path) can use it.

Two routes, both through litellm's real code:

- **In process** (`scripted_llm`): a litellm `CustomLLM` registered under the provider name
  `notarius-double` in `litellm.custom_provider_map`, so code under test runs the real
  `litellm.completion` path (parameter mapping, exception mapping, usage and response
  objects) with `model="notarius-double/<anything>"`. What it answers comes from a responder
  callable the test supplies; every call is recorded (messages, response format, metadata
  including the session id) so tests can assert what would have been sent to a model.

      with scripted_llm(replay('not json', '{"name": "Mira"}')) as double:
          client.complete_structured(request)
      assert len(double.calls) == 2

  A responder may raise a litellm exception (see `provider_error_of`) to exercise retries and
  error mapping. The active double is process-wide (not per thread or context), because lane
  extraction calls the client from worker threads. Outside a block a call fails loudly.

- **Across processes** (`ResponderServer`, `loopback_profile_file`): the real webserver and
  daemon, their step processes and `notarius run` subprocesses cannot open a block. For them
  the same responders answer from an OpenAI-compatible HTTP server on 127.0.0.1 (the OpenAI
  server of `tests/provider_servers.py`, which checks what arrives against OpenAI's documented
  rules), and the process is given a pipeline profile whose LLM profile is
  `openai/notarius-double` with `api_base` at that server: litellm's real OpenAI path.

`install_profile()` (called from `pytest_configure` in `tests/conftest.py`) makes the LLM
profile `test-double` (`TEST_DOUBLE`: it routes to the in-process double) known to this
process's D&D lane registry, the one `notarius_dagster.modules.registry()` returns, so a test may
resolve any profile with `llm_profile="test-double"`. The product knows no such profile."""

from __future__ import annotations

import copy
import dataclasses
import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml

from notarius_dagster import modules
from notarius_dagster.engine.llm_profiles import LLMProfileCatalog
from notarius_dagster.engine.registry import LaneRegistry
from notarius_dagster.llm.profiles import LLMProfile
from tests.provider_servers import Exchange, Fault, Inspection, OpenAIServer, Reply

if TYPE_CHECKING:
    from litellm import CustomLLM
else:  # litellm takes seconds to import: only the in-process route needs it
    CustomLLM = object

DOUBLE_PROVIDER = "notarius-double"
"""The litellm provider name of the in-process double."""

TEST_DOUBLE = LLMProfile(
    name="test-double",
    model=f"{DOUBLE_PROVIDER}/scripted",
    temperature=0.0,
    max_tokens=512,
    timeout_s=30,
    retries=0,
    max_concurrency=2,
    input_cost_per_token=0.0,
    output_cost_per_token=0.0,
)
"""The LLM profile of the in-process double (not a model): what `llm_profile="test-double"`
resolves to in a test process."""

Messages = list[dict[str, Any]]
Responder = Callable[[Messages, dict[str, Any] | None], str]
"""Answers one request: its messages and its `response_format` (None when it has none)."""
ProviderErrorKind = Literal[
    "rate_limit", "timeout", "connection", "authentication", "bad_request", "not_found"
]


def double_profile(name: str = "test-double", **overrides: Any) -> LLMProfile:
    """The `test-double` LLM profile (it routes to the in-process double), with `overrides`."""
    return LLMProfile.model_validate({**TEST_DOUBLE.model_dump(), "name": name, **overrides})


# ---- the plugin: the test-double profile in this process's lane registry


_PRODUCT_REGISTRY = modules._dnd_registry


@cache
def _registry_with_double() -> LaneRegistry:
    base = _PRODUCT_REGISTRY()
    catalog = base.llm_profiles
    builtins = {**catalog.builtins, TEST_DOUBLE.name: _config_of(TEST_DOUBLE)}
    profiles = LLMProfileCatalog(builtins=builtins, validator=catalog.validator)
    return dataclasses.replace(base, llm_profiles=profiles)


def _config_of(profile: LLMProfile) -> dict[str, Any]:
    return profile.model_dump(mode="json", exclude={"name"})


def install_profile() -> None:
    """Make `test-double` a profile every pipeline may name, in this process only: the D&D
    registry that `notarius_dagster.modules.registry()` builds gets it beside the product's
    built-in profiles (idempotent)."""
    modules._dnd_registry = _registry_with_double  # type: ignore[assignment]


# ---- the in-process double


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

    def respond(messages: Messages, response_format: dict[str, Any] | None) -> str:
        with lock:
            if not remaining:
                raise AssertionError(f"the test double was scripted for {len(answers)} calls")
            return remaining.pop(0)

    return respond


def provider_error_of(kind: ProviderErrorKind, message: str) -> Exception:
    """A litellm exception as a provider would raise it, for responders to raise."""
    from notarius_dagster.llm._litellm import litellm

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


_ACTIVE_LOCK = threading.Lock()
_ACTIVE: list[ScriptedLLM] = []


def _active_double() -> ScriptedLLM | None:
    """The innermost `scripted_llm` block's double, else None."""
    with _ACTIVE_LOCK:
        return _ACTIVE[-1] if _ACTIVE else None


@cache
def _handler() -> CustomLLM:
    """The litellm-side adapter (built once, when litellm is first needed)."""
    from notarius_dagster.llm._litellm import litellm

    class DoubleHandler(litellm.CustomLLM):  # type: ignore[misc]
        """Turns litellm's handler call into a `DoubleCall` for the active `ScriptedLLM`,
        and its answer into a ModelResponse with usage."""

        def completion(self, *args: Any, **kwargs: Any) -> Any:
            double = _active_double()
            model = str(kwargs["model"])
            if double is None:
                raise litellm.BadRequestError(
                    message="no test double is active; wrap the call in scripted_llm(...) "
                    "(another process reaches the responders through tests/llm_double.py: "
                    "ResponderServer)",
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

    return DoubleHandler()


def register_provider() -> None:
    """Make `notarius-double/...` models resolvable in litellm (idempotent; appends to
    `litellm.custom_provider_map` so other custom providers stay registered)."""
    from notarius_dagster.llm._litellm import litellm

    if not any(item.get("provider") == DOUBLE_PROVIDER for item in litellm.custom_provider_map):
        litellm.custom_provider_map.append(
            {"provider": DOUBLE_PROVIDER, "custom_handler": _handler()}
        )


@contextmanager
def scripted_llm(responder: Responder) -> Iterator[ScriptedLLM]:
    """Answer every `notarius-double/...` call inside the block with `responder`. Blocks
    nest; the innermost one answers."""
    register_provider()
    double = ScriptedLLM(responder)
    with _ACTIVE_LOCK:
        _ACTIVE.append(double)
    try:
        yield double
    finally:
        with _ACTIVE_LOCK:
            _ACTIVE.remove(double)


# ---- the loopback route, for processes a test cannot open a block in

LOOPBACK_MODEL = "notarius-double"
LOOPBACK_KEY_ENV = "NOTARIUS_LOOPBACK_KEY"
"""The variable the loopback LLM profile names for its key (the server checks it)."""
LOOPBACK_KEY = "sk-loopback-test-double"


class ResponderServer(OpenAIServer):
    """OpenAI chat completions on 127.0.0.1 whose answers come from a responder (the same
    callables `scripted_llm` takes): the server still checks every request against OpenAI's
    documented rules and the key, and answers in OpenAI's shapes with usage. A responder that
    raises is answered with OpenAI's 500 error and kept in `errors`. `requests` holds every
    request as the other process sent it (path, headers, JSON body)."""

    def __init__(self, responder: Responder, **kwargs: Any) -> None:
        super().__init__("openai", api_key=LOOPBACK_KEY, model_names=[LOOPBACK_MODEL], **kwargs)
        self.responder = responder
        self.errors: list[str] = []

    def answer_text(self, ex: Exchange, inspection: Inspection, body: Mapping[str, Any]) -> str:
        messages = body.get("messages")
        fmt = body.get("response_format")
        text = self.responder(
            [dict(m) for m in messages] if isinstance(messages, list) else [],
            dict(fmt) if isinstance(fmt, Mapping) else None,
        )
        try:
            ex.answer = json.loads(text)
        except ValueError:
            ex.answer = text
        return text

    def handle(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Reply:
        try:
            return super().handle(method, path, headers, raw)
        except Exception as exc:  # the responder's own failure: the other process sees a 500
            self.errors.append(f"{type(exc).__name__}: {exc}")
            return self.fault_reply(Fault("server_error"), {"model": LOOPBACK_MODEL})

    def profile_fields(self, **overrides: Any) -> dict[str, Any]:
        """An LLM profile (as profile YAML holds it) whose calls reach this server through
        litellm's OpenAI route; the same limits as `TEST_DOUBLE`."""
        fields = {
            **_config_of(TEST_DOUBLE),
            "model": f"openai/{LOOPBACK_MODEL}",
            "api_base": self.api_base,
            "api_key_env": LOOPBACK_KEY_ENV,
            **overrides,
        }
        return {k: v for k, v in fields.items() if v is not None}


@contextmanager
def responder_server(responder: Responder, **kwargs: Any) -> Iterator[ResponderServer]:
    """A started `ResponderServer`, stopped after the block."""
    with ResponderServer(responder, **kwargs) as server:
        assert isinstance(server, ResponderServer)
        yield server


def loopback_profile_file(
    original: Path,
    folder: Path,
    server: ResponderServer,
    *,
    name: str = "loopback",
    select: bool = True,
) -> Path:
    """A copy of pipeline profile `original`, written to `folder` under the original's file
    name (in place when `folder` is the original's), with the LLM profile `name` that calls
    `server`, which `pipeline.llm_profile` names unless `select` is false. Reference paths are
    made absolute, so the copy reads the files the original does."""
    config = yaml.safe_load(original.read_text(encoding="utf-8"))
    pipeline = config["pipeline"]
    if select:
        pipeline["llm_profile"] = name
    _absolute_paths(pipeline.get("references"), original.parent)
    for lane in pipeline.get("lanes") or ():
        if isinstance(lane, dict):
            _absolute_paths(lane.get("references"), original.parent)
    config["llm_profiles"] = {**(config.get("llm_profiles") or {}), name: server.profile_fields()}
    folder.mkdir(parents=True, exist_ok=True)
    copied = folder / original.name
    copied.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return copied


def _absolute_paths(bindings: object, base: Path) -> None:
    if not isinstance(bindings, dict):
        return
    for binding in bindings.values():
        if isinstance(binding, dict) and isinstance(binding.get("path"), str):
            binding["path"] = str((base / binding["path"]).resolve())


def loopback_environ() -> dict[str, str]:
    """What the other process's environment needs for the loopback profile: its key."""
    return {LOOPBACK_KEY_ENV: LOOPBACK_KEY}
