"""Every environment variable Notarius reads, read here and nowhere else in the package
(`tests/test_settings.py` walks the AST of every module for `os.environ` and `os.getenv`).

A `Settings` is one reading of the environment: the raw values, stripped, an empty variable
counting as unset. Parsing with a clear error naming the variable stays with the code that
uses a value (`assets/checks.py: max_rejection_rate`, `assets/automation.py`,
`notarius_dagster/inbox.py: InboxLimits.from_env`, ...), so a bad value fails the command or
the check that needs it, not every command. Call `load_settings()` where a value is needed:
a variable a test or a parent process sets later is then seen.

Writing the environment is allowed elsewhere, for one purpose: handing a value to the
processes this one starts (DAGSTER_HOME, the offline server's address, an endpoint with
credentials, litellm's own switches before it is imported). Those values are
read back here.

    NOTARIUS_PROFILE       pipeline profile the code location is built from
    NOTARIUS_LLM_PROFILE   optional override of the profile's LLM profile
    NOTARIUS_DATA, NOTARIUS_BUNDLES, NOTARIUS_INBOX: the store layout (`store_paths`)
    NOTARIUS_REPORT_BASE_URL, NOTARIUS_BUNDLE_BASE_URL: where reports and bundles are served
    NOTARIUS_OWNER         the owner of every asset
    NOTARIUS_AUTOMATION, NOTARIUS_AUTOMATION_INTERVAL: the automation sensor
    NOTARIUS_MAX_REJECTION_RATE: the lane checks' threshold
    NOTARIUS_INBOX_INTERVAL, _MAX_SCAN, _MAX_RUNS, _SETTLE_SECONDS: the inbox sensor
    NOTARIUS_OFFLINE_API_BASE: set by `notarius run` for its own children
    DAGSTER_HOME           Dagster's instance folder
    a profile's `api_key_env`: the API key, read when a client is built (`api_key`)"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from notarius_dagster.store import DEFAULT_DATA, DEFAULT_INBOX, REPO_ROOT, StorePaths

__all__ = [
    "DEFAULT_PROFILE",
    "REPO_ROOT",
    "Settings",
    "api_key",
    "load_settings",
    "store_paths",
]

DEFAULT_PROFILE = REPO_ROOT / "configs" / "offline.yaml"

PROFILE_ENV = "NOTARIUS_PROFILE"
LLM_PROFILE_ENV = "NOTARIUS_LLM_PROFILE"
DATA_ENV = "NOTARIUS_DATA"
BUNDLES_ENV = "NOTARIUS_BUNDLES"
INBOX_ENV = "NOTARIUS_INBOX"
REPORT_BASE_URL_ENV = "NOTARIUS_REPORT_BASE_URL"
BUNDLE_BASE_URL_ENV = "NOTARIUS_BUNDLE_BASE_URL"
OWNER_ENV = "NOTARIUS_OWNER"
AUTOMATION_ENV = "NOTARIUS_AUTOMATION"
AUTOMATION_INTERVAL_ENV = "NOTARIUS_AUTOMATION_INTERVAL"
MAX_REJECTION_RATE_ENV = "NOTARIUS_MAX_REJECTION_RATE"
INBOX_INTERVAL_ENV = "NOTARIUS_INBOX_INTERVAL"
INBOX_MAX_SCAN_ENV = "NOTARIUS_INBOX_MAX_SCAN"
INBOX_MAX_RUNS_ENV = "NOTARIUS_INBOX_MAX_RUNS"
INBOX_SETTLE_SECONDS_ENV = "NOTARIUS_INBOX_SETTLE_SECONDS"
INBOX_LIMIT_ENVS = (
    INBOX_INTERVAL_ENV,
    INBOX_MAX_SCAN_ENV,
    INBOX_MAX_RUNS_ENV,
    INBOX_SETTLE_SECONDS_ENV,
)
OFFLINE_SERVER_ENV = "NOTARIUS_OFFLINE_API_BASE"
"""`<context tokens> <api base>` of an offline server started for the whole run."""
"""The session job a parallel run's forkserver builds before forking steps."""
DAGSTER_HOME_ENV = "DAGSTER_HOME"


def _value(environ: Mapping[str, str], name: str) -> str | None:
    value = environ.get(name, "").strip()
    return value or None


def store_paths(
    *,
    data: Path | str | None = None,
    bundles: Path | str | None = None,
    inbox: Path | str | None = None,
    environ: Mapping[str, str] | None = None,
) -> StorePaths:
    """The store layout from the options, else the environment (`environ`, default this
    process's), else the defaults (absolute paths). The bundle root defaults to
    `<root>/bundles` of the root chosen here."""
    source = os.environ if environ is None else environ

    def pick(option: Path | str | None, variable: str) -> Path | None:
        if option is not None and str(option):
            return Path(option).resolve()
        value = source.get(variable, "")
        return Path(value).resolve() if value else None

    root = pick(data, DATA_ENV) or DEFAULT_DATA.resolve()
    return StorePaths(
        root=root,
        bundles=pick(bundles, BUNDLES_ENV) or root / "bundles",
        inbox=pick(inbox, INBOX_ENV) or DEFAULT_INBOX.resolve(),
    )


@dataclass(frozen=True)
class Settings:
    """One reading of the environment (see the module docstring for each variable)."""

    profile: Path
    llm_profile: str | None
    store: StorePaths
    report_base_url: str | None = None
    bundle_base_url: str | None = None
    owner: str | None = None
    automation: str | None = None
    automation_interval: str | None = None
    max_rejection_rate: str | None = None
    inbox_limits: Mapping[str, str] = field(default_factory=dict)
    """The NOTARIUS_INBOX_* variables that are set (`InboxLimits.from_env` parses them)."""
    offline_server: str | None = None
    dagster_home: str | None = None


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Read the settings from `environ` (default: this process's environment, now)."""
    source = os.environ if environ is None else environ
    return Settings(
        profile=Path(_value(source, PROFILE_ENV) or DEFAULT_PROFILE).resolve(),
        llm_profile=_value(source, LLM_PROFILE_ENV),
        store=store_paths(environ=source),
        report_base_url=_value(source, REPORT_BASE_URL_ENV),
        bundle_base_url=_value(source, BUNDLE_BASE_URL_ENV),
        owner=_value(source, OWNER_ENV),
        automation=_value(source, AUTOMATION_ENV),
        automation_interval=_value(source, AUTOMATION_INTERVAL_ENV),
        max_rejection_rate=_value(source, MAX_REJECTION_RATE_ENV),
        inbox_limits={name: source[name] for name in INBOX_LIMIT_ENVS if name in source},
        offline_server=_value(source, OFFLINE_SERVER_ENV),
        dagster_home=_value(source, DAGSTER_HOME_ENV),
    )


def api_key(variable: str | None, environ: Mapping[str, str] | None = None) -> str | None:
    """The value of the variable an LLM profile names for its API key (`api_key_env`), read
    when a client is built and never kept in a `Settings` (it is a secret). None when the
    profile names no variable or the variable is unset or empty: the LLM layer says which
    variable is missing (`LLMProfile.resolve_api_key`)."""
    if variable is None:
        return None
    return _value(os.environ if environ is None else environ, variable)
