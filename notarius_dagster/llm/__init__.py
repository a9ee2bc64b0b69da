"""The LLM tier: named profiles, the litellm client with its structured-output ladder, the
bundled offline model server and an honest test double.

Importing this package is cheap: litellm (several seconds to import) is loaded only when the
client, the server helper or the test double is first used, so configuration code can read
profiles without paying for it. litellm is configured (its bundled model-cost map, no network
fetch, no prompts in exception texts) in the one module that imports it, `llm/_litellm.py`."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from notarius_dagster.engine.errors import TransientLLMError
from notarius_dagster.llm.profiles import LLMProfile, offline_profile

if TYPE_CHECKING:
    from notarius_dagster.llm.client import LiteLLMClient
    from notarius_dagster.llm.offline import OfflineModelServer, ensure_server
    from notarius_dagster.llm.test_double import ScriptedLLM, scripted_llm

_LAZY = {
    "LiteLLMClient": "notarius_dagster.llm.client",
    "OfflineModelServer": "notarius_dagster.llm.offline",
    "ensure_server": "notarius_dagster.llm.offline",
    "ScriptedLLM": "notarius_dagster.llm.test_double",
    "scripted_llm": "notarius_dagster.llm.test_double",
}

__all__ = [
    "LLMProfile",
    "LiteLLMClient",
    "OfflineModelServer",
    "ScriptedLLM",
    "TransientLLMError",
    "ensure_server",
    "offline_profile",
    "scripted_llm",
]


def __getattr__(name: str) -> Any:
    """Load heavy members on first use (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(module), name)
