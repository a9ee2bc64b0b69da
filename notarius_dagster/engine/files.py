"""Writing a file so that readers see the old content or the new, never a part: the one helper
the checkpoint store, the transcript store, the session report and the campaign codex share
(the bundle has its own versioned publication, `engine/bundle.py`, which uses `fsync_dir`)."""

from __future__ import annotations

import contextlib
import os
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
