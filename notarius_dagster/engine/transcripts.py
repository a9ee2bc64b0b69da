"""The transcript store: the project's own copy of each session's transcript, one file per
session (`<session-id>.<ext>`), so that any run of a partition (UI, sensor, CLI, backfill)
finds its input by session id alone."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from notarius_dagster.engine.errors import InputError
from notarius_dagster.engine.inputs import EXTENSION_FORMATS
from notarius_dagster.engine.session_ids import validate_session_id


def stored_transcript(store: Path, session_id: str) -> Path:
    """The stored transcript of a session; errors name the session, not a path."""
    validate_session_id(session_id)
    matches = [
        store / f"{session_id}{ext}"
        for ext in EXTENSION_FORMATS
        if (store / f"{session_id}{ext}").is_file()
    ]
    if not matches:
        raise InputError(
            f"no transcript is registered for session {session_id!r}; add one with "
            "`notarius run` or drop it into the inbox"
        )
    return matches[0]


def register_transcript(store: Path, session_id: str, source: Path) -> Path:
    """Copy a transcript into the store atomically, replacing any earlier one of the session."""
    validate_session_id(session_id)
    ext = source.suffix.lower()
    if ext not in EXTENSION_FORMATS:
        known = ", ".join(sorted(EXTENSION_FORMATS))
        raise InputError(f"{source.name}: unknown transcript extension {ext!r}; known: {known}")
    store.mkdir(parents=True, exist_ok=True)
    target = store / f"{session_id}{ext}"
    fd, tmp = tempfile.mkstemp(dir=store, suffix=".tmp")
    os.close(fd)
    shutil.copyfile(source, tmp)
    os.replace(tmp, target)
    for other in EXTENSION_FORMATS:
        if other != ext:
            (store / f"{session_id}{other}").unlink(missing_ok=True)
    return target


def remove_transcript(store: Path, session_id: str) -> None:
    for ext in EXTENSION_FORMATS:
        (store / f"{session_id}{ext}").unlink(missing_ok=True)
