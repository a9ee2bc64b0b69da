"""The store layout, computed once: where transcripts, bundles, per-asset values, checkpoints and
the inbox live. Every layer (the code location's settings and resources, the IO manager, the
inbox sensor, the runner, the CLI, session deletion) takes a `StorePaths` instead of joining
folder names itself, so they cannot disagree.

    NOTARIUS_DATA      root of the store (default ./var/data in the repository)
    NOTARIUS_BUNDLES   publish bundles here instead of $NOTARIUS_DATA/bundles
    NOTARIUS_INBOX     the folder the inbox sensor watches (default ./var/inbox in the
                       repository, not under the store: it is where people drop files)

An option given to `store_paths` wins over the environment, the environment over the default;
an empty variable counts as unset. docs/operations.md ("The store") describes the layout."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO_ROOT / "var" / "data"
DEFAULT_INBOX = REPO_ROOT / "var" / "inbox"


def session_values_folder(asset_values: Path, session_id: str) -> Path:
    """Where the IO manager keeps one session's per-asset values (one JSON file per asset)."""
    return asset_values / session_id


@dataclass(frozen=True)
class StorePaths:
    """The store's folders. `root` holds transcripts/, assets/, checkpoints/ and, unless
    NOTARIUS_BUNDLES says otherwise, bundles/; on a cluster it must be shared storage."""

    root: Path
    bundles: Path
    inbox: Path

    @property
    def transcripts(self) -> Path:
        """The transcript store: one `<session-id>.<ext>` per session."""
        return self.root / "transcripts"

    @property
    def asset_values(self) -> Path:
        """The IO manager's root: `<session-id>/<asset>.json`."""
        return self.root / "assets"

    @property
    def checkpoints(self) -> Path:
        """Per-chunk extraction checkpoints, keyed by content (shared by sessions)."""
        return self.root / "checkpoints"

    def session_values(self, session_id: str) -> Path:
        return session_values_folder(self.asset_values, session_id)


def store_paths(
    *,
    data: Path | str | None = None,
    bundles: Path | str | None = None,
    inbox: Path | str | None = None,
    environ: Mapping[str, str] = os.environ,
) -> StorePaths:
    """The layout from the options, else the environment, else the defaults (absolute paths).
    The bundle root defaults to `<root>/bundles` of the root chosen here."""

    def pick(option: Path | str | None, variable: str) -> Path | None:
        if option is not None and str(option):
            return Path(option).resolve()
        value = environ.get(variable, "")
        return Path(value).resolve() if value else None

    root = pick(data, "NOTARIUS_DATA") or DEFAULT_DATA.resolve()
    return StorePaths(
        root=root,
        bundles=pick(bundles, "NOTARIUS_BUNDLES") or root / "bundles",
        inbox=pick(inbox, "NOTARIUS_INBOX") or DEFAULT_INBOX.resolve(),
    )
