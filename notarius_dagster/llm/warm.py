"""litellm's first-call work done before a lane's deadline starts: the parts litellm loads
lazily on its first completion, paid by the process once, outside the lanes' time.

Measured (issue 22): a lane step paid 0.40–0.52 s of CPU on its first litellm call and 0.02 s
on later ones. Tracing that first call against a loopback server showed what it loads: about a
hundred modules imported inside `litellm.completion` (litellm's proxy types, pulled in by its
file-id handling, httpcore, h11/h2), pydantic models that build their validators on first use,
and the response path (ModelResponse, pricing).

`warm_litellm()` runs that whole path once without a network: one `litellm.completion` in the
shape the client sends (`LiteLLMClient.completion_kwargs`: a structured-output request on the
`json_schema` rung), through an OpenAI SDK client whose HTTP transport is an in-memory
`httpx.MockTransport` answering a valid chat completion. No socket is opened and no client is
cached. `LLMResource.load_client` calls it, in the process that runs the lanes.

Never in a process that forks afterwards: the completion leaves litellm's logging threads
running (its success handler runs on one after the call returns), and a child forked while
one of them holds a lock hangs. Tried in the `--jobs` forkserver, it hung the workers on an
import lock (notarius_dagster/run/forkserver_freeze.py)."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx

_WARMED: dict[str, float] = {}
_KEY_ENV = "NOTARIUS_WARM_UP_KEY"


def _answer(request: httpx.Request) -> httpx.Response:
    import httpx

    body = {
        "id": "chatcmpl-warm",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "gpt-4o-mini",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": json.dumps({"items": []})},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
    }
    return httpx.Response(200, json=body)


def warm_litellm() -> float:
    """One offline structured completion through litellm's OpenAI path; returns the CPU seconds
    it took (0 when this process already warmed it). Never raises: a warm-up that fails leaves
    the first real call to pay, as before."""
    if "cpu_s" in _WARMED:
        return 0.0
    started = time.process_time()
    with contextlib.suppress(Exception):  # an optimisation: never a failure of its own
        _complete_offline()
    _WARMED["cpu_s"] = time.process_time() - started
    return _WARMED["cpu_s"]


_TRANSPORT_MODULES = ("httpcore", "h11", "h2.connection")
"""What litellm's own HTTP client imports when it is first created (the offline call passes
its own in-memory transport, so it does not get there)."""


def _complete_offline() -> None:
    for name in _TRANSPORT_MODULES:
        if importlib.util.find_spec(name.split(".")[0]) is not None:
            importlib.import_module(name)
    import httpx
    import openai

    from notarius_dagster.engine.llm_contract import StructuredRequest
    from notarius_dagster.llm._litellm import litellm
    from notarius_dagster.llm.client import LiteLLMClient
    from notarius_dagster.llm.profiles import LLMProfile

    profile = LLMProfile(
        name="warm-up",
        model="openai/gpt-4o-mini",
        api_base="http://127.0.0.1:9/v1",
        api_key_env=_KEY_ENV,
    )
    schema = {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "unit_ids": {"type": "array", "items": {"type": "integer", "enum": [1]}}
                    },
                    "required": ["unit_ids"],
                },
            }
        },
        "required": ["items"],
        "title": "WarmAnswer",
    }
    request = StructuredRequest(
        system="warm-up",
        user="[1] A: warm-up",
        schema=schema,
        schema_name="WarmAnswer",
        session_id="warm-up",
        lane="warm-up",
        chunk_id="warm-up",
    )
    # A key for the preflight, given to the client (never to the environment, which the lanes'
    # threads read); no request leaves the process.
    client = LiteLLMClient(profile, api_key="warm-up")
    rung = client.first_rung(request.lane)
    kwargs = client.completion_kwargs(client.messages(rung, request), rung, request)
    http = httpx.Client(transport=httpx.MockTransport(_answer))
    # litellm hands the SDK an httpx client too (the SDK types it as its vendored httpx2).
    sdk = openai.OpenAI(api_key="warm-up", base_url="http://127.0.0.1:9/v1", http_client=http)  # type: ignore[arg-type]
    try:
        kwargs.update(api_key="warm-up", client=sdk)
        litellm.completion(**kwargs)
    finally:
        sdk.close()
