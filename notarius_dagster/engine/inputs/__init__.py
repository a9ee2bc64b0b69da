"""The input adapter tier: raw transcript bytes in, a SourceDocument out.

The format is chosen by the file's extension or named explicitly (explicit wins). An unknown
format stops the run and lists the formats that exist; the tier never falls back to another
format, because a transcript read with the wrong grammar still "parses" into wrong units.

Every error names the file by base name and, where one exists, the line, and never quotes
transcript text: errors end up in Dagster logs and run manifests, which are not the place for
what players said.
"""

from __future__ import annotations

from notarius_dagster.engine.digest import digest_of
from notarius_dagster.engine.errors import InputError
from notarius_dagster.engine.inputs.base import InputAdapter, display_name, split_lines
from notarius_dagster.engine.inputs.jsonl import JsonlAdapter
from notarius_dagster.engine.inputs.plaintext import PlainTextAdapter
from notarius_dagster.engine.inputs.srt import SrtAdapter
from notarius_dagster.engine.inputs.webvtt import WebVttAdapter
from notarius_dagster.engine.limits import (
    DEFAULT_INPUT_LIMITS,
    UNIT_ID_MAX,
    UNIT_ID_MIN,
    InputLimits,
)
from notarius_dagster.engine.models import SourceDocument, SourceUnit
from notarius_dagster.engine.session_ids import validate_session_id

__all__ = [
    "EXTENSION_FORMATS",
    "INPUT_FORMATS",
    "InputAdapter",
    "document_digest",
    "format_for",
    "parse_transcript",
]

INPUT_FORMATS: dict[str, InputAdapter] = {
    adapter.key: adapter
    for adapter in (JsonlAdapter(), WebVttAdapter(), SrtAdapter(), PlainTextAdapter())
}
"""Every input format by key; the only formats the tier will ever read."""

EXTENSION_FORMATS: dict[str, str] = {
    ".jsonl": "jsonl",
    ".vtt": "webvtt",
    ".srt": "srt",
    ".txt": "text",
}
"""Lower-case file extension to format key, for files whose format is not named explicitly."""

_UTF8_BOM = b"\xef\xbb\xbf"


def _formats_list() -> str:
    return ", ".join(sorted(INPUT_FORMATS))


def format_for(file_name: str, explicit: str | None) -> str:
    """The format key for a file: `explicit` if given, else by extension (case-insensitive).

    Raises InputError naming the file and listing the formats when neither gives a known one.
    """
    name = display_name(file_name)
    if explicit is not None:
        key = explicit.strip().lower()
        if key in INPUT_FORMATS:
            return key
        raise InputError(
            f"unknown input format {explicit!r} for file {name!r}; formats: {_formats_list()}"
        )
    dot = name.rfind(".")
    extension = name[dot:].lower() if dot > 0 else ""
    if extension in EXTENSION_FORMATS:
        return EXTENSION_FORMATS[extension]
    shown = extension if extension else "(no extension)"
    raise InputError(
        f"unknown input format {shown!r} for file {name!r}; formats: {_formats_list()} "
        f"(extensions: {', '.join(sorted(EXTENSION_FORMATS))})"
    )


def _decode(raw: bytes, file_name: str) -> str:
    """UTF-8 only (an optional BOM is removed). Other encodings are refused, not guessed:
    a wrongly guessed code page turns names and dice results into plausible-looking garbage."""
    offset = len(_UTF8_BOM) if raw.startswith(_UTF8_BOM) else 0
    try:
        return raw[offset:].decode("utf-8")
    except UnicodeDecodeError as exc:
        position = offset + exc.start
        line_no = raw.count(b"\n", 0, position) + 1
        raise InputError(
            f"{display_name(file_name)} line {line_no}: not valid UTF-8 "
            f"(byte offset {position}); transcripts must be UTF-8"
        ) from None


def _unit_place(text: str, position: int, format_key: str, file_name: str) -> str:
    """Where the unit at `position` is, for an error: its line in the line-per-unit formats
    (JSON Lines, plain text: the position-th non-blank line), its cue in the subtitle formats."""
    name = display_name(file_name)
    if format_key in ("jsonl", "text"):
        seen = -1
        for line_no, line in enumerate(split_lines(text), start=1):
            if line.strip():
                seen += 1
                if seen == position:
                    return f"{name} line {line_no}"
    return f"{name} cue {position + 1}"


def _check_units(
    units: tuple[SourceUnit, ...],
    text: str,
    format_key: str,
    file_name: str,
    limits: InputLimits,
) -> None:
    """The unit count, each unit's size and its id range, against the limits."""
    if len(units) > limits.max_units:
        raise InputError(
            f"{display_name(file_name)}: {len(units)} units; the limit is {limits.max_units} "
            "(pipeline.limits.max_units)"
        )
    for position, unit in enumerate(units):
        if len(unit.text) > limits.max_unit_chars:
            raise InputError(
                f"{_unit_place(text, position, format_key, file_name)}: unit has "
                f"{len(unit.text)} characters; the limit is {limits.max_unit_chars} "
                "(pipeline.limits.max_unit_chars); split the utterance"
            )
        if not UNIT_ID_MIN <= unit.unit_id <= UNIT_ID_MAX:
            raise InputError(
                f"{_unit_place(text, position, format_key, file_name)}: unit id must fit a "
                "signed 64-bit integer"
            )


def document_digest(units: tuple[SourceUnit, ...] | list[SourceUnit]) -> str:
    """The semantic digest of a document: sha256 over canonical units, not the raw bytes, so
    reformatting a file (key order, whitespace, line endings, BOM) does not look like a new
    transcript, while any change to a unit's id, kind, text or metadata does."""
    return digest_of(
        [
            {
                "unit_id": unit.unit_id,
                "kind": unit.kind,
                "text": unit.text,
                "metadata": unit.metadata,
            }
            for unit in units
        ]
    )


def parse_transcript(
    raw: bytes,
    *,
    file_name: str,
    source_id: str,
    input_format: str | None = None,
    limits: InputLimits = DEFAULT_INPUT_LIMITS,
) -> SourceDocument:
    """Parse raw transcript bytes into a SourceDocument with id `source_id` (a session id).

    `file_name` picks the format (unless `input_format` names one) and is how errors refer to
    the file. Raises InputError for an unknown format, bytes that are not UTF-8, malformed
    content or a transcript with no units, and SessionIdError for an invalid `source_id`.
    """
    validate_session_id(source_id)
    adapter = INPUT_FORMATS[format_for(file_name, input_format)]
    if len(raw) > limits.max_transcript_bytes:
        raise InputError(
            f"{display_name(file_name)}: the transcript is {len(raw)} bytes; the limit is "
            f"{limits.max_transcript_bytes} (pipeline.limits.max_transcript_bytes)"
        )
    text = _decode(raw, file_name)
    units = tuple(adapter.parse_units(text, file_name))
    if not units:
        raise InputError(f"{display_name(file_name)}: the transcript has no units")
    _check_units(units, text, adapter.key, file_name, limits)
    seen: dict[int, int] = {}
    for position, unit in enumerate(units):
        if unit.unit_id in seen:  # adapters check this with line numbers; this guards new ones
            raise InputError(
                f"{display_name(file_name)}: unit id {unit.unit_id} at position {position} "
                f"repeats the one at position {seen[unit.unit_id]}"
            )
        seen[unit.unit_id] = position
    return SourceDocument(
        source_id=source_id,
        media_type=adapter.media_type,
        units=units,
        digest=document_digest(units),
    )
