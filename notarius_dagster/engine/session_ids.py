"""Session ids: the single name a transcript goes by everywhere.

A session id is a Dagster partition key, a folder name in the output bundle and the `source_id`
of the parsed document, so it must be safe in all three places on every file system: lowercase
ASCII letters, digits, `_` and `-`, starting with a letter or digit, at most 64 characters.
Ids are names, not transcript content, so error messages may show them (truncated).
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from notarius_dagster.engine.errors import SessionIdError

SESSION_ID_PATTERN = r"[a-z0-9][a-z0-9_-]{0,63}"
"""The rule every session id satisfies (matched against the whole id)."""

SESSION_ID_MAX_LENGTH = 64

_SESSION_ID_RE = re.compile(SESSION_ID_PATTERN)
_RULE = (
    f"session id must match {SESSION_ID_PATTERN} (lowercase letters, digits, '_' and '-', "
    f"starting with a letter or digit, at most {SESSION_ID_MAX_LENGTH} characters)"
)
_SHOWN_CHARS = 80
_OUTSIDE_ALPHABET = re.compile(r"[^a-z0-9_-]+")


def _shown(value: str) -> str:
    """The offending id as it appears in a message: repr'd, so blanks and control characters
    are visible, and truncated so a pasted paragraph cannot flood a log line."""
    if len(value) > _SHOWN_CHARS:
        return repr(value[:_SHOWN_CHARS]) + f"... ({len(value)} characters)"
    return repr(value)


def validate_session_id(value: str) -> str:
    """Return `value` unchanged if it is a valid session id; raise SessionIdError otherwise.

    Validation never rewrites the id: an explicitly given id that is wrong is a mistake to
    report, not something to silently repair (that is what `session_id_from_filename` is for).
    """
    if not isinstance(value, str):
        raise SessionIdError(f"{_RULE}; got a {type(value).__name__}, not a string")
    if _SESSION_ID_RE.fullmatch(value) is None:
        raise SessionIdError(f"{_RULE}; got {_shown(value)}")
    return value


def session_id_from_filename(name: str) -> str:
    """Derive a session id from a transcript's file name, deterministically.

    Takes the base name's stem (last extension removed), lowercases it, replaces every run of
    characters outside `[a-z0-9_-]` with one `-`, strips leading `_`/`-` and trailing `-`, and
    truncates to 64 characters. The same name always gives the same id, so re-running a file
    lands on the same partition. Raises SessionIdError when nothing usable remains.
    """
    base = PurePosixPath(name.replace("\\", "/")).name
    stem = PurePosixPath(base).stem if base else ""
    candidate = _OUTSIDE_ALPHABET.sub("-", stem.lower())
    candidate = candidate.lstrip("_-").rstrip("-")
    candidate = candidate[:SESSION_ID_MAX_LENGTH].rstrip("-")
    if not candidate:
        raise SessionIdError(
            f"cannot derive a session id from file name {_shown(base)}: no letters or digits "
            f"remain; give the session id explicitly ({_RULE})"
        )
    return validate_session_id(candidate)
