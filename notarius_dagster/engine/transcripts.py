"""The transcript store: the project's own copy of each session's transcript, one file per
session (`<session-id>.<ext>`), so that any run of a partition (UI, sensor, CLI, backfill)
finds its input by session id alone.

Next to each copy, `<session-id>.name` holds the base name of the file it was copied from:
errors about the transcript name the user's file (`Session 12 (final).jsonl line 4`), not
the store's copy, and a second file whose name derives the same session id (two long names
cut to the same 64 characters) is told apart from the first and refused."""

from __future__ import annotations

from pathlib import Path

from notarius_dagster.engine.errors import InputError, SessionIdError, StoreError
from notarius_dagster.engine.failure_causes import cause_of
from notarius_dagster.engine.files import sweep_leftovers, write_atomically
from notarius_dagster.engine.inputs import EXTENSION_FORMATS
from notarius_dagster.engine.limits import DEFAULT_INPUT_LIMITS
from notarius_dagster.engine.reading import FileRefused, read_bounded
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


def read_transcript(
    source: Path,
    *,
    name: str | None = None,
    max_bytes: int = DEFAULT_INPUT_LIMITS.max_transcript_bytes,
) -> bytes:
    """The bytes of a transcript the user gave, through the one reader (`engine/reading.py`):
    a regular file (not a folder, FIFO or device) of at most `max_bytes`; InputError says
    what the file is, or its real size and the limit, naming the file (`name`, default its
    base name), never its path."""
    shown = Path(name or source.name).name[:_MAX_NAME]
    try:
        return read_bounded(
            source,
            max_bytes,
            name=shown,
            allowed=f"the limit is {max_bytes} (pipeline.limits.max_transcript_bytes)",
        )
    except FileRefused as exc:
        raise InputError(f"transcript: {exc}") from None


def register_transcript(
    store: Path,
    session_id: str,
    source: Path,
    *,
    name: str | None = None,
    max_bytes: int = DEFAULT_INPUT_LIMITS.max_transcript_bytes,
) -> Path:
    """Read a transcript (`read_transcript`: refused before anything is copied when it is no
    regular file or larger than `max_bytes`) and store it (`store_transcript`)."""
    shown = Path(name or source.name).name[:_MAX_NAME]
    _extension(shown, source.suffix)
    content = read_transcript(source, name=shown, max_bytes=max_bytes)
    return store_transcript(store, session_id, content, extension=source.suffix, name=shown)


def _extension(shown: str, extension: str) -> str:
    """The lower-case transcript extension, or InputError naming the file and the known ones."""
    ext = extension.lower()
    if ext not in EXTENSION_FORMATS:
        known = ", ".join(sorted(EXTENSION_FORMATS))
        raise InputError(f"{shown}: unknown transcript extension {ext!r}; known: {known}")
    return ext


def store_transcript(
    store: Path, session_id: str, content: bytes, *, extension: str, name: str
) -> Path:
    """Write `content` as the session's transcript atomically, replacing any earlier one, and
    record `name` as the file it came from. What a writer killed mid-write left for this
    session is swept first. A failed write (disk full) keeps the earlier transcript, leaves no
    temporary file, and says so naming the store, never a path (StoreError)."""
    validate_session_id(session_id)
    shown = Path(name).name[:_MAX_NAME]
    ext = _extension(shown, extension)
    target = store / f"{session_id}{ext}"
    try:
        store.mkdir(parents=True, exist_ok=True)
        sweep_leftovers(target)
        write_atomically(target, content)
        for other in EXTENSION_FORMATS:
            if other != ext:
                (store / f"{session_id}{other}").unlink(missing_ok=True)
        sidecar = store / f"{session_id}{NAME_SUFFIX}"
        sweep_leftovers(sidecar)
        write_atomically(sidecar, (shown + "\n").encode("utf-8"))
    except OSError as exc:
        cause = cause_of(exc, name=False)
        raise StoreError(
            f"cannot store the transcript of session {session_id!r} ({len(content)} bytes) in "
            f"the transcript store (<store>/transcripts): {cause}; the session's earlier "
            "transcript, if any, is unchanged",
            cause,
        ) from None
    return target


def remove_transcript(store: Path, session_id: str) -> None:
    for ext in (*EXTENSION_FORMATS, NAME_SUFFIX):
        (store / f"{session_id}{ext}").unlink(missing_ok=True)
