"""Where things live, from the environment (with defaults under ./var for a local checkout).

NOTARIUS_PROFILE      pipeline profile the code location is built from
NOTARIUS_DATA         root of the store (bundles/, transcripts/, assets/, checkpoints/)
NOTARIUS_BUNDLES      optional: publish bundles here instead of NOTARIUS_DATA/bundles
NOTARIUS_INBOX        folder the inbox sensor watches
NOTARIUS_LLM_PROFILE  optional override of the profile's LLM profile (e.g. test-double)"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PROFILE = REPO_ROOT / "configs" / "offline.yaml"


@dataclass(frozen=True)
class Settings:
    profile: Path
    data_root: Path
    inbox: Path
    llm_profile: str | None
    bundles_root: Path | None = None

    @property
    def bundles(self) -> Path:
        return self.bundles_root or self.data_root / "bundles"

    @property
    def transcripts(self) -> Path:
        return self.data_root / "transcripts"

    @property
    def asset_values(self) -> Path:
        return self.data_root / "assets"

    @property
    def checkpoints(self) -> Path:
        return self.data_root / "checkpoints"


def load_settings() -> Settings:
    data = Path(os.environ.get("NOTARIUS_DATA", REPO_ROOT / "var" / "data")).resolve()
    return Settings(
        profile=Path(os.environ.get("NOTARIUS_PROFILE", DEFAULT_PROFILE)).resolve(),
        data_root=data,
        inbox=Path(os.environ.get("NOTARIUS_INBOX", REPO_ROOT / "var" / "inbox")).resolve(),
        llm_profile=os.environ.get("NOTARIUS_LLM_PROFILE") or None,
        bundles_root=Path(os.environ["NOTARIUS_BUNDLES"]).resolve()
        if os.environ.get("NOTARIUS_BUNDLES")
        else None,
    )
