"""The LLM resource: builds the litellm client for the resolved LLM profile and, for the
bundled offline model, starts and stops the local llama.cpp server around the work.

Secrets out of the instance database: a resource's configuration is recorded in the run's job
snapshot (`runs.db` for the SQLite instance) and shown on the UI's resource page. An API key
never is (a profile names its environment variable, `api_key_env`). An endpoint that carries
credentials (`http://user:password@host/v1`) or a query (`?api_key=...`) is configured by
reference: the profile's copy keeps only the public endpoint, and `api_base` is Dagster's
`EnvVar` naming the variable that holds the endpoint as written (`endpoint_variable`). The code
location sets that variable when it loads the profile, in every process that runs the
pipeline (the CLI, the daemon's run workers, each step process), so the resource reads the
secret there and the database holds only the variable's name."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from typing import TYPE_CHECKING

from dagster import ConfigurableResource, EnvVar

from notarius_dagster.engine.redaction import public_endpoint
from notarius_dagster.llm.profiles import LLMProfile
from notarius_dagster.settings import api_key, load_settings

if TYPE_CHECKING:
    from notarius_dagster.llm.client import LiteLLMClient

ENDPOINT_VARIABLE_PREFIX = "NOTARIUS_LLM_ENDPOINT_"


class LLMResource(ConfigurableResource):
    """`profile_json` is the resolved LLM profile with its public endpoint (no secrets: keys
    stay in the environment); `api_base`, when set, is the endpoint as sent, configured by an
    `EnvVar` reference (see the module docstring)."""

    profile_json: str
    api_base: str | None = None

    @property
    def profile(self) -> LLMProfile:
        data = json.loads(self.profile_json)
        if self.api_base:
            data["api_base"] = self.api_base
        return LLMProfile.model_validate(data)

    def fingerprint(self) -> str:
        return self.profile.fingerprint()

    def load_client(self) -> None:
        """Import the LLM client (and litellm with it) and do litellm's lazy first-call work
        now (`warm_litellm`, offline): what a lane step does before its deadline starts, so
        the seconds it takes (once per process) never count against a lane's
        `lane_deadline_s`, and what it loads lives for the process's life, out of the
        collector's way (engine/long_lived.py)."""
        from notarius_dagster.engine.long_lived import loading_for_life
        from notarius_dagster.llm.warm import warm_litellm

        with loading_for_life():
            warm_litellm()

    @contextmanager
    def client(self) -> Iterator[LiteLLMClient]:
        # Imported here, not at module level: litellm costs seconds of CPU to import, and the
        # code location (loaded by every command, the webserver and each step) must not pay
        # for it before a lane actually calls a model.
        from notarius_dagster.llm.client import LiteLLMClient
        from notarius_dagster.llm.offline import ensure_server

        profile = self.profile
        settings = load_settings()
        with ensure_server(profile, settings.offline_server) as api_base:
            yield LiteLLMClient(
                profile, api_key=api_key(profile.api_key_env), api_base_override=api_base
            )


def endpoint_variable(profile_name: str, public: str | None) -> str:
    """The environment variable that carries a profile's endpoint as written: named after the
    profile and its public endpoint (no secret goes into a name), the same in every process."""
    tag = hashlib.sha256(f"{profile_name}\n{public}".encode()).hexdigest()[:12].upper()
    return f"{ENDPOINT_VARIABLE_PREFIX}{tag}"


def llm_resource(
    profile: Mapping[str, object], environ: MutableMapping[str, str] | None = None
) -> LLMResource:
    """The `llm` resource of a resolved LLM profile. An endpoint without credentials or query
    is configured as is; one with them is written into `environ` (default this process's
    environment, which the processes it starts inherit: a write, never read back here; Dagster
    reads it through `EnvVar`) and the resource names it by `EnvVar`."""
    api_base = profile.get("api_base")
    public = public_endpoint(api_base) if isinstance(api_base, str) else None
    if not isinstance(api_base, str) or public == api_base:
        return LLMResource(profile_json=json.dumps(dict(profile)))
    variable = endpoint_variable(str(profile.get("name", "")), public)
    if environ is None:
        os.environ[variable] = api_base
    else:
        environ[variable] = api_base
    return LLMResource(
        profile_json=json.dumps({**profile, "api_base": public}),
        api_base=EnvVar(variable),
    )
