"""The transcript store: the project's own copy of each session's transcript, one file per
session (`<session-id>.<ext>`), so that any run of a partition (UI, sensor, CLI, backfill)
finds its input by session id alone.

Next to each copy, `<session-id>.name` holds the base name of the file it was copied from:
errors about the transcript name the user's file (`Session 12 (final).jsonl line 4`), not
the store's copy, and a second file whose name derives the same session id (two long names
cut to the same 64 characters) is told apart from the first and refused."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from notarius_dagster.engine.errors import InputError, SessionIdError
from notarius_dagster.engine.files import write_atomically
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


NAME_SUFFIX = ".name"
"""The sidecar holding the registered file's base name (a name, never a path)."""
_MAX_NAME = 255


def original_name(store: Path, session_id: str) -> str | None:
    """The base name of the file the session's transcript was registered from, if recorded."""
    sidecar = store / f"{session_id}{NAME_SUFFIX}"
    try:
        name = sidecar.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return name[:_MAX_NAME] or None


def transcript_name(store: Path, session_id: str) -> str:
    """The name errors about the session's transcript use: the user's file name when it was
    recorded, the store copy's name otherwise."""
    return original_name(store, session_id) or stored_transcript(store, session_id).name


def check_same_source(store: Path, session_id: str, name: str) -> None:
    """Refuse registering file `name` under a session id derived from its name when another
    file, by another name, is already registered under it: the two would share one session."""
    earlier = original_name(store, session_id)
    if earlier is not None and earlier != name:
        raise SessionIdError(
            f"file names {earlier!r} and {name!r} both give session id {session_id!r}; "
            "the second would replace the first's transcript. Pass --session-id to give "
            "this file its own session (or the same id on purpose to replace it)"
        )


def register_transcript(
    store: Path, session_id: str, source: Path, *, name: str | None = None
) -> Path:
    """Copy a transcript into the store atomically, replacing any earlier one of the session,
    and record `name` (default: the source's base name) as the file it came from."""
    validate_session_id(session_id)
    shown = Path(name or source.name).name[:_MAX_NAME]
    ext = source.suffix.lower()
    if ext not in EXTENSION_FORMATS:
        known = ", ".join(sorted(EXTENSION_FORMATS))
        raise InputError(f"{shown}: unknown transcript extension {ext!r}; known: {known}")
    store.mkdir(parents=True, exist_ok=True)
    target = store / f"{session_id}{ext}"
    fd, tmp = tempfile.mkstemp(dir=store, suffix=".tmp")
    os.close(fd)
    shutil.copyfile(source, tmp)
    os.replace(tmp, target)
    for other in EXTENSION_FORMATS:
        if other != ext:
            (store / f"{session_id}{other}").unlink(missing_ok=True)
    write_atomically(store / f"{session_id}{NAME_SUFFIX}", (shown + "\n").encode("utf-8"))
    return target


def remove_transcript(store: Path, session_id: str) -> None:
    for ext in (*EXTENSION_FORMATS, NAME_SUFFIX):
        (store / f"{session_id}{ext}").unlink(missing_ok=True)
