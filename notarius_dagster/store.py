"""The store layout, computed once: where transcripts, bundles, per-asset values, checkpoints and
the inbox live. Every layer (the code location's settings and resources, the IO manager, the
inbox sensor, the runner, the CLI, session deletion) takes a `StorePaths` instead of joining
folder names itself, so they cannot disagree.

    NOTARIUS_DATA      root of the store (default ./var/data in the repository)
    NOTARIUS_BUNDLES   publish bundles here instead of $NOTARIUS_DATA/bundles
    NOTARIUS_INBOX     the folder the inbox sensor watches (default ./var/inbox in the
                       repository, not under the store: it is where people drop files)

`notarius_dagster/settings.py: store_paths` reads them: an option wins over the environment, the
environment over the default; an empty variable counts as unset. docs/operations.md ("The
store") describes the layout."""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from notarius_dagster.engine.errors import NotariusError

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO_ROOT / "var" / "data"
DEFAULT_INBOX = REPO_ROOT / "var" / "inbox"


def session_values_folder(asset_values: Path, session_id: str) -> Path:
    """Where the IO manager keeps one session's per-asset values (one JSON file per asset)."""
    return asset_values / session_id


GOLD_FOLDER = "gold"


def gold_file(store_root: Path, session_id: str) -> Path:
    """Where a store keeps a session's gold file (`<root>/gold/<session-id>.json`): the quality
    check and `notarius eval SESSION` read it."""
    return store_root / GOLD_FOLDER / f"{session_id}.json"


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

    def gold(self, session_id: str) -> Path:
        """A session's gold file, when the store holds one (`gold_file`)."""
        return gold_file(self.root, session_id)

    def session_values(self, session_id: str) -> Path:
        return session_values_folder(self.asset_values, session_id)

    @property
    def locks(self) -> Path:
        """Session locks (`session_lock`): one file per session, never deleted."""
        return self.root / "locks"


class SessionBusyError(NotariusError):
    """Another run of the session is queued or in progress, or another command holds it."""


@contextlib.contextmanager
def session_lock(store: StorePaths, session_id: str, *, doing: str) -> Iterator[None]:
    """Hold session `session_id` for this process, or refuse at once (SessionBusyError): what
    starts a session (`notarius run`: its busy check, its transcript registration and its run,
    one transaction) and what replaces its transcript (`sessions add`, the inbox) take it, so
    two of them never interleave. `doing` says what this process wants, for the message.

    `fcntl.flock` on `<store>/locks/<session>.lock`, never waited for (a second start is
    refused, not queued behind an hour-long run). The kernel releases it when the holder's
    process ends, kill -9 included, so a crashed command never blocks the next; the file holds
    the holder's pid and host for the message. The descriptor is close-on-exec and the step
    processes fork from a server started earlier, so they never inherit the lock."""
    store.locks.mkdir(parents=True, exist_ok=True)
    path = store.locks / f"{session_id}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            raise SessionBusyError(
                f"session {session_id!r} is held by another notarius command{holder} that is "
                f"starting it, running it or replacing its transcript; cannot {doing} now. "
                "Wait for it to finish and try again: one writer per session"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _holder(fd: int) -> str:
    """` (pid N on host H)` from the lock file, or nothing when it says nothing usable."""
    try:
        pid, _, host = os.pread(fd, 200, 0).decode("utf-8", "replace").strip().partition(" ")
    except OSError:
        return ""
    return f" (pid {pid} on {host})" if pid.isdigit() and host.isprintable() and host else ""
