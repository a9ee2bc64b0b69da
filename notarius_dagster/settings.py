"""What the code location is built from, read from the environment (with defaults under ./var
for a local checkout).

NOTARIUS_PROFILE      pipeline profile the code location is built from
NOTARIUS_LLM_PROFILE  optional override of the profile's LLM profile (e.g. test-double)
NOTARIUS_DATA, NOTARIUS_BUNDLES, NOTARIUS_INBOX: the store layout (notarius_dagster/store.py)"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from notarius_dagster.store import REPO_ROOT, StorePaths, store_paths

__all__ = ["DEFAULT_PROFILE", "REPO_ROOT", "Settings", "load_settings"]

DEFAULT_PROFILE = REPO_ROOT / "configs" / "offline.yaml"


@dataclass(frozen=True)
class Settings:
    profile: Path
    llm_profile: str | None
    store: StorePaths


def load_settings(environ: Mapping[str, str] = os.environ) -> Settings:
    return Settings(
        profile=Path(environ.get("NOTARIUS_PROFILE") or DEFAULT_PROFILE).resolve(),
        llm_profile=environ.get("NOTARIUS_LLM_PROFILE") or None,
        store=store_paths(environ=environ),
    )
