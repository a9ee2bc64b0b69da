"""The campaign level: a codex across the sessions of one campaign (docs/campaign.md).

`model.py` is the codex's schema source, `build.py` the pure function that builds it from
published lane artifacts, `store.py` where it is read and written, `render.py` its HTML page."""

from notarius_dagster.campaign.build import build_codex
from notarius_dagster.campaign.model import Codex
from notarius_dagster.campaign.store import CodexError, load_codex, publish_codex

__all__ = ["Codex", "CodexError", "build_codex", "load_codex", "publish_codex"]
