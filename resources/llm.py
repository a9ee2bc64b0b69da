"""The LLM resource: builds the litellm client for the resolved LLM profile and, for the
bundled offline model, starts and stops the local llama.cpp server around the work."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from dagster import ConfigurableResource

from notarius_dagster.llm.profiles import LLMProfile

if TYPE_CHECKING:
    from notarius_dagster.llm.client import LiteLLMClient


class LLMResource(ConfigurableResource):
    """`profile_json` is the resolved LLM profile (no secrets: keys stay in the environment)."""

    profile_json: str

    @property
    def profile(self) -> LLMProfile:
        return LLMProfile.model_validate(json.loads(self.profile_json))

    def fingerprint(self) -> str:
        return self.profile.fingerprint()

    @contextmanager
    def client(self) -> Iterator[LiteLLMClient]:
        # Imported here, not at module level: litellm costs seconds of CPU to import, and the
        # code location (loaded by every command, the webserver and each step) must not pay
        # for it before a lane actually calls a model.
        from notarius_dagster.llm.client import LiteLLMClient
        from notarius_dagster.llm.offline import ensure_server

        profile = self.profile
        with ensure_server(profile) as api_base:
            yield LiteLLMClient(profile, api_base_override=api_base)
