"""Writing a file so that readers see the old content or the new, never a part: the one helper
the checkpoint store, the transcript store, the per-asset values, the session report and the
campaign codex share (the bundle has its own versioned publication, `engine/bundle.py`, which
uses `fsync_dir`); and sweeping what a writer killed mid-write left behind."""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from pathlib import Path


def fsync_dir(path: Path) -> None:
    """Make a rename inside `path` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(target: Path, data: bytes, *, durable: bool = False) -> None:
    """Write `data` to a hidden temporary file beside `target` and rename it over `target`.

    `durable` also fsyncs the file and the folder (for published files a reader or a server may
    pick up at once); without it a crash may lose the write but never leaves half a file. On an
    error the temporary file is removed and the OSError propagates for the caller to name."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, target)
        if durable:
            fsync_dir(target.parent)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


LEGACY_LEFTOVER_AGE_S = 3600.0
"""Temporary files named `tmp*.tmp` (what earlier versions left when killed mid-write) are
swept once they are this old: no write takes an hour."""


def sweep_leftovers(target: Path, *, now: float | None = None) -> int:
    """Remove what a writer of `target` killed mid-write left beside it: its hidden temporary
    files (`.<name>.<hex>.tmp`, see `write_atomically`) and old `tmp*.tmp` files. Call it only
    where one writer at a time writes `target` (one per session: the run guard and the session
    lock see to it); returns how many files were removed."""
    folder = target.parent
    now = time.time() if now is None else now
    removed = 0
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    for entry in entries:
        name = entry.name
        ours = name.startswith(f".{target.name}.") and name.endswith(".tmp")
        legacy = name.startswith("tmp") and name.endswith(".tmp")
        try:
            if not entry.is_file(follow_symlinks=False):
                continue
            if legacy and now - entry.stat(follow_symlinks=False).st_mtime < LEGACY_LEFTOVER_AGE_S:
                continue
            if ours or legacy:
                os.unlink(entry.path)
                removed += 1
        except OSError:
            continue
    return removed
