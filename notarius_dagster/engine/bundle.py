"""Publishing a bundle: logical files, the encoder's refusals, and the atomic publish (what
goes into the files is `bundle_assembly.py`'s; `session_bundle.py` chains the two).

The encoder refuses (before anything is written) unsupported media types, values that are not
valid JSON, unsafe logical paths and lane ids whose sanitized file names collide. Publishing
writes a complete new version folder, then swaps the session's symlink in one `rename`: readers
see the previous bundle or the new one, never a mix, and a failure leaves the previous intact.
One writer per session: publication holds the session's lock (`publication_lock`), and pruning
never touches a staging folder, the linked version, or a version replaced moments ago; what a
publisher killed mid-write left (staging folders, temporary links) is swept by the next
publication of the session, under the same lock."""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from notarius_dagster.engine.errors import OutputError
from notarius_dagster.engine.failure_causes import cause_of
from notarius_dagster.engine.files import fsync_dir

JSON_MEDIA_TYPE = "application/json"
VERSIONS_DIR = ".versions"
_SAFE_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_HEX32 = re.compile(r"[0-9a-f]{32}")


@dataclass(frozen=True)
class LogicalFile:
    path: str
    media_type: str
    payload: object


def sanitize_lane_file_name(lane_id: str) -> str:
    return re.sub(r"[^a-z0-9_-]+", "-", lane_id.strip().lower()).strip("-") or "lane"


def lane_file(lane_id: str) -> str:
    return f"lanes/{sanitize_lane_file_name(lane_id)}.json"


def is_safe_logical_path(path: str) -> bool:
    """A relative POSIX path of plain segments: what a bundle may contain (and list)."""
    pure = PurePosixPath(path)
    return not (
        not path
        or path.startswith("/")
        or "\\" in path
        or pure.is_absolute()
        or any(not _SAFE_SEGMENT.match(part) for part in pure.parts)
        or any(part in (".", "..") for part in pure.parts)
    )


def _check_path(path: str) -> None:
    if not is_safe_logical_path(path):
        raise OutputError(f"unsafe logical path {path!r}; nothing was written")


def encode_bundle(files: Sequence[LogicalFile]) -> dict[str, bytes]:
    """Check every refusal, then render each file as pretty-printed UTF-8 JSON."""
    encoded: dict[str, bytes] = {}
    for f in files:
        _check_path(f.path)
        if f.media_type != JSON_MEDIA_TYPE:
            raise OutputError(
                f"{f.path}: unsupported media type {f.media_type!r}; nothing was written"
            )
        if f.path.lower() in {p.lower() for p in encoded}:
            raise OutputError(
                f"{f.path}: duplicate output file name (lane ids collide after "
                "sanitizing); nothing was written"
            )
        try:
            text = json.dumps(
                f.payload, indent=2, ensure_ascii=False, allow_nan=False, sort_keys=False
            )
            json.loads(text)
        except (TypeError, ValueError) as exc:
            raise OutputError(
                f"{f.path}: payload is not valid JSON ({type(exc).__name__}); nothing was written"
            ) from None
        encoded[f.path] = (text + "\n").encode()
    return encoded


def lane_files(lanes: Sequence[tuple[str, object]]) -> list[LogicalFile]:
    """Lane payloads as logical files, refusing sanitized-name collisions."""
    seen: dict[str, str] = {}
    out = []
    for lane_id, payload in lanes:
        path = lane_file(lane_id)
        if path in seen:
            raise OutputError(
                f"lanes {seen[path]!r} and {lane_id!r} share the output file name "
                f"{path!r}; nothing was written"
            )
        seen[path] = lane_id
        out.append(LogicalFile(path, JSON_MEDIA_TYPE, payload))
    return out


LOCKS_DIR = ".locks"
RETAIN_REPLACED_S = 60.0
"""A version replaced less than this many seconds ago is kept, whatever else: a reader that
resolved the link into it a moment ago can finish reading it."""


@contextmanager
def publication_lock(root: Path, session_id: str) -> Iterator[None]:
    """Hold the session's publication lock: one writer per session at a time, whatever process
    it is in. `fcntl.flock` on `root/.locks/<session>.lock`: the kernel releases it when the
    holder's process dies (kill -9 included), so a crashed publisher never blocks the next."""
    locks = Path(root) / LOCKS_DIR
    locks.mkdir(parents=True, exist_ok=True)
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC
    fd = os.open(locks / f"{session_id}.lock", flags, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _write_file(target: Path, data: bytes, rel: str) -> None:
    """Write one bundle file; a failure (disk full) names the logical file, not the path."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        raise OutputError(
            f"publish: cannot write {rel}: {cause_of(exc)}; the published bundle is unchanged"
        ) from exc


def publish_bundle(root: Path, session_id: str, encoded: dict[str, bytes]) -> Path:
    """Write a new version and atomically point `root/session_id` at it, holding the session's
    publication lock throughout. Returns the path readers use (`root/session_id`)."""
    root = Path(root)
    with publication_lock(root, session_id):
        return _publish_locked(root, session_id, encoded)


def _publish_locked(root: Path, session_id: str, encoded: dict[str, bytes]) -> Path:
    versions = root / VERSIONS_DIR / session_id
    versions.mkdir(parents=True, exist_ok=True)
    _sweep_crashed_writers(root, versions, session_id)
    version = versions / uuid.uuid4().hex
    staging = versions / f".staging-{version.name}"
    link = root / session_id
    previous = Path(os.path.realpath(link)).name if link.is_symlink() else None
    try:
        for rel, data in encoded.items():
            _write_file(staging / rel, data, rel)
        os.replace(staging, version)
        fsync_dir(versions)
        if link.exists() and not link.is_symlink():
            raise OutputError(
                f"bundle location for session {session_id!r} is not managed by "
                "notarius (a real folder stands there); nothing was replaced"
            )
        tmp_link = root / f".link-{session_id}-{uuid.uuid4().hex}"
        os.symlink(os.path.relpath(version, root), tmp_link)
        os.replace(tmp_link, link)
        fsync_dir(root)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        if version.exists() and os.path.realpath(root / session_id) != str(version.resolve()):
            shutil.rmtree(version, ignore_errors=True)
        raise
    keep = {version.name, Path(os.path.realpath(link)).name}
    if previous is not None:
        keep.add(previous)
        with suppress(OSError):  # its mtime now says when it was replaced (see _prune_versions)
            os.utime(versions / previous)
    _prune_versions(versions, keep=keep)
    return root / session_id


def _sweep_crashed_writers(root: Path, versions: Path, session_id: str) -> None:
    """Remove what publishers of this session killed mid-write left: their staging folders and
    temporary links. Called holding the session's publication lock, so no live writer owns any
    of them (a writer keeps the lock until its staging folder is renamed or removed)."""
    for leftover in versions.glob(".staging-*"):
        shutil.rmtree(leftover, ignore_errors=True)
    prefix = f".link-{session_id}-"
    for link in root.glob(f"{prefix}*"):
        if _HEX32.fullmatch(link.name[len(prefix) :]):  # not session `<id>-more`'s link
            with suppress(OSError):
                link.unlink()


def _prune_versions(versions: Path, keep: set[str], now: float | None = None) -> None:
    """Delete replaced versions, except those in `keep` (the current one, the one the link
    points to, the one before it), any replaced less than RETAIN_REPLACED_S ago (a reader may
    still be inside), and every dot-folder (staging folders are their writer's alone)."""
    now = time.time() if now is None else now
    for p in versions.iterdir():
        if p.name in keep or p.name.startswith("."):
            continue
        try:
            if now - p.stat().st_mtime < RETAIN_REPLACED_S:
                continue
        except OSError:
            continue
        shutil.rmtree(p, ignore_errors=True)


def remove_bundle(root: Path, session_id: str) -> bool:
    """Delete a session's published bundle and all its versions."""
    root = Path(root)
    link = root / session_id
    if not (link.is_symlink() or link.exists() or (root / VERSIONS_DIR / session_id).exists()):
        return False
    with publication_lock(root, session_id):
        existed = link.is_symlink() or link.exists()
        if link.is_symlink():
            link.unlink()
        shutil.rmtree(root / VERSIONS_DIR / session_id, ignore_errors=True)
    return existed
