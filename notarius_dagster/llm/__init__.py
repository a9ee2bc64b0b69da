"""The LLM tier: named profiles, the litellm client with its structured-output ladder and the
bundled offline model server. (The test double is no part of it: it lives in the test suite,
`tests/llm_double.py`.)

Importing this package is cheap: litellm (several seconds to import) is loaded only when the
client or the server helper is first used, so configuration code can read profiles without
paying for it. litellm is configured (its bundled model-cost map, no network fetch, no prompts
in exception texts) in the one module that imports it, `llm/_litellm.py`."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from notarius_dagster.engine.errors import TransientLLMError
from notarius_dagster.llm.profiles import LLMProfile, offline_profile

if TYPE_CHECKING:
    from notarius_dagster.llm.client import LiteLLMClient
    from notarius_dagster.llm.offline import OfflineModelServer, ensure_server

_LAZY = {
    "LiteLLMClient": "notarius_dagster.llm.client",
    "OfflineModelServer": "notarius_dagster.llm.offline",
    "ensure_server": "notarius_dagster.llm.offline",
}

__all__ = [
    "LLMProfile",
    "LiteLLMClient",
    "OfflineModelServer",
    "TransientLLMError",
    "ensure_server",
    "offline_profile",
]


def __getattr__(name: str) -> object:
    """Load heavy members on first use (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(module), name)
