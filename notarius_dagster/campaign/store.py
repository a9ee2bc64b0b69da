"""Where a campaign's codex lives and how it is read and written.

    <bundles root>/.campaigns/index.json              every campaign with a codex
    <bundles root>/.campaigns/<campaign>/codex.json   the codex
    <bundles root>/.campaigns/<campaign>/codex.html   its page (links into the session reports)

Beside the bundles, never inside one, and in a folder starting with a dot (like `.reports` and
`.versions`) so it can never be taken for a session (a session id starts with a letter or
digit: a folder `campaigns` would be one). Every file is written to a temporary file in its
folder, fsynced and renamed over the previous one: a reader sees the old codex or the new one.
The index is rewritten under a lock, so two campaigns published at once both stay listed.

Reading: only the published bundles of the sessions the roster lists, each read through its
`index.json` from the version its symlink points at (bundle.md, "Reading a bundle"); a session
without a bundle is unpublished (not run yet, or deleted) and contributes nothing."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import ValidationError

from notarius_dagster.campaign.build import LaneArtifact, SessionLanes, build_codex, codex_lane
from notarius_dagster.campaign.model import CampaignEntry, CampaignIndex, Codex
from notarius_dagster.dnd.roster import Roster, roster_slot
from notarius_dagster.engine.digest import digest_of
from notarius_dagster.engine.errors import NotariusError
from notarius_dagster.engine.files import write_atomically
from notarius_dagster.engine.reading import (
    FileRefused,
    ParseRefused,
    decode_utf8,
    load_yaml,
    read_bounded,
)
from notarius_dagster.engine.registry import LaneRegistry

CAMPAIGNS_DIR = ".campaigns"
INDEX_FILE = "index.json"
CODEX_FILE = "codex.json"
PAGE_FILE = "codex.html"


class CodexError(NotariusError):
    """A codex could not be built or written (names the session, file or campaign only)."""


def campaigns_root(bundles_root: Path) -> Path:
    return Path(bundles_root) / CAMPAIGNS_DIR


def codex_path(bundles_root: Path, campaign: str) -> Path:
    return campaigns_root(bundles_root) / campaign / CODEX_FILE


def page_path(bundles_root: Path, campaign: str) -> Path:
    return campaigns_root(bundles_root) / campaign / PAGE_FILE


def _read_json(path: Path, where: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CodexError(f"{where}: missing") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CodexError(f"{where}: unreadable ({type(exc).__name__})") from None


def load_roster(path: Path) -> Roster:
    """The roster, read by the one reader (`engine/reading.py`: a regular file within the
    roster slot's byte limit, nesting capped, repeated keys refused) and validated; errors
    name the file, the line or the key path, never content."""
    limit = roster_slot().max_bytes
    try:
        raw = read_bounded(
            path, limit, allowed=f"a roster may have {limit} (the roster slot's limit)"
        )
        data = load_yaml(decode_utf8(raw, path.name), path.name)
        return Roster.model_validate(data)
    except FileRefused as exc:
        raise CodexError(f"roster: {exc}") from None
    except ParseRefused as exc:
        raise CodexError(f"roster {exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise CodexError(f"roster {path.name!r}: {where}: {first['type']}") from None


def read_session(
    bundles_root: Path, session_id: str, registry: LaneRegistry
) -> SessionLanes | None:
    """The lane artifacts the codex reads from one published bundle, or None when the session
    has no bundle. A lane file that is not a valid artifact of its kind is an error."""
    link = Path(bundles_root) / session_id
    if not link.exists():
        return None
    folder = Path(os.path.realpath(link))  # one version, even if a publish swaps the link
    index = _read_json(folder / "index.json", f"session {session_id!r}: index.json")
    lanes: dict[str, LaneArtifact] = {}
    for lane in index.get("lanes", []):
        kind, name = lane.get("kind"), str(lane.get("file", ""))
        spec = registry.lane_of_kind(kind) if isinstance(kind, str) else None
        if spec is None or not codex_lane(spec):
            continue
        rel = PurePosixPath(name)
        if not name or rel.is_absolute() or ".." in rel.parts:
            raise CodexError(f"session {session_id!r}: index.json names an unsafe file")
        payload = _read_json(folder / rel, f"session {session_id!r}: {name}")
        try:  # the lane's pydantic model, the schema's source (paths and types, no values)
            artifact = spec.list_model.model_validate(payload)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = "/".join(str(p) for p in first["loc"]) or "(root)"
            raise CodexError(f"session {session_id!r}: {name}: {where}: {first['type']}") from None
        lanes[spec.kind] = LaneArtifact.of(spec, artifact)
    return lanes


def read_published(
    bundles_root: Path, roster: Roster, registry: LaneRegistry
) -> dict[str, SessionLanes]:
    """The published sessions of the roster's campaign (session id -> lane artifacts)."""
    out: dict[str, SessionLanes] = {}
    for session in roster.ordered_sessions():
        lanes = read_session(bundles_root, session.id, registry)
        if lanes is not None:
            out[session.id] = lanes
    return out


def codex_text(codex: Codex) -> str:
    return (
        json.dumps(codex.model_dump(mode="json", by_alias=True), indent=2, ensure_ascii=False)
        + "\n"
    )


def _write_atomic(target: Path, data: str) -> None:
    try:
        write_atomically(target, data.encode("utf-8"), durable=True)
    except OSError as exc:
        raise CodexError(f"{target.name} could not be written ({type(exc).__name__})") from None


@contextlib.contextmanager
def _index_lock(root: Path) -> Iterator[None]:
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "a+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def read_index(bundles_root: Path) -> CampaignIndex:
    path = campaigns_root(bundles_root) / INDEX_FILE
    if not path.exists():
        return CampaignIndex(campaigns=[])
    return CampaignIndex.model_validate(_read_json(path, f"{CAMPAIGNS_DIR}/{INDEX_FILE}"))


@dataclass(frozen=True)
class Published:
    """What one codex publication did: the codex, where it is, and whether it changed."""

    codex: Codex
    path: Path
    changed: bool
    digest: str


def publish_codex(bundles_root: Path, roster: Roster, registry: LaneRegistry) -> Published:
    """Build the campaign's codex from its published sessions and publish it (codex, page,
    index entry). The codex file is rewritten only when its content changes."""
    from notarius_dagster.campaign.render import render_codex_page

    codex = build_codex(roster, read_published(bundles_root, roster, registry))
    text = codex_text(codex)
    path = codex_path(bundles_root, roster.campaign)
    previous = path.read_text(encoding="utf-8") if path.exists() else None
    changed = previous != text
    if changed:
        _write_atomic(path, text)
    _write_atomic(page_path(bundles_root, roster.campaign), render_codex_page(codex))
    digest = digest_of(codex.model_dump(mode="json", by_alias=True))
    entry = CampaignEntry(
        campaign=codex.campaign,
        title=codex.title,
        codex=f"{codex.campaign}/{CODEX_FILE}",
        page=f"{codex.campaign}/{PAGE_FILE}",
        sessions=[s.id for s in codex.sessions],
        published=[s.id for s in codex.sessions if s.published],
        digest=digest,
    )
    root = campaigns_root(bundles_root)
    with _index_lock(root):
        current = read_index(bundles_root)
        others = [c for c in current.campaigns if c.campaign != entry.campaign]
        index = CampaignIndex(campaigns=sorted([*others, entry], key=lambda c: c.campaign))
        _write_atomic(root / INDEX_FILE, json.dumps(index.model_dump(mode="json"), indent=2) + "\n")
    return Published(codex=codex, path=path, changed=changed, digest=digest)


def load_codex(bundles_root: Path, campaign: str) -> Codex:
    path = codex_path(bundles_root, campaign)
    data = _read_json(path, f"campaign {campaign!r}: {CODEX_FILE}")
    try:
        return Codex.model_validate(data)
    except ValueError:
        raise CodexError(f"campaign {campaign!r}: {CODEX_FILE} is not a valid codex") from None
