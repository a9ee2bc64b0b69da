"""What every input adapter is, plus the small helpers they share.

The helpers exist so that all adapters report problems the same content-safe way
(`<base name> line <n>: <problem>`, never transcript text) and split lines and speaker
prefixes identically, so the same words give the same units whatever the format.
"""

from __future__ import annotations

import re
from typing import Protocol, runtime_checkable

from notarius_dagster.engine.errors import InputError
from notarius_dagster.engine.models import SourceUnit

UTTERANCE = "utterance"
"""The unit kind every transcript adapter produces."""

SPEAKER_MAX_CHARS = 40
# A speaker prefix: 1-40 characters without a colon, then the first ": " of the line. The name
# must start with a non-blank so an indented "  : x" is not read as an empty speaker.
_SPEAKER_PREFIX = re.compile(
    r"([^:\s][^:\n]{0," + str(SPEAKER_MAX_CHARS - 1) + r"}): (.*)", re.DOTALL
)


@runtime_checkable
class InputAdapter(Protocol):
    """Turns the decoded text of one transcript format into source units.

    `key` is the format's name in profiles and on the command line; `media_type` is recorded
    on the source document so later stages know what the units came from.
    """

    @property
    def key(self) -> str: ...

    @property
    def media_type(self) -> str: ...

    def parse_units(self, text: str, file_name: str) -> list[SourceUnit]:
        """Parse `text` (already decoded, BOM removed); raise InputError naming the file's base
        name and line on any problem."""
        ...


def display_name(file_name: str) -> str:
    """The base name of a file: errors name the file but never leak the directory layout
    (which may hold user names or client names). Both separators count, whatever the OS."""
    return file_name.replace("\\", "/").rsplit("/", 1)[-1]


def line_error(file_name: str, line_no: int, problem: str) -> InputError:
    """An InputError in the one shape every adapter uses. `problem` must not quote the input."""
    return InputError(f"{display_name(file_name)} line {line_no}: {problem}")


def split_lines(text: str) -> list[str]:
    """Split on CRLF, CR and LF only. `str.splitlines` would also split on U+2028, U+0085 and
    friends, which may legally sit inside a JSON string or a subtitle and would shift every
    reported line number."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def blank_line_blocks(lines: list[str], first: int = 0) -> list[tuple[int, list[str]]]:
    """The blank-line separated blocks of `lines` from index `first` on, each with the 1-based
    line number of its first line: a subtitle or cue is one block in SRT and WebVTT alike, and
    errors name the line a block starts on."""
    blocks: list[tuple[int, list[str]]] = []
    current: list[str] = []
    start = 0
    for index in range(first, len(lines)):
        line = lines[index]
        if line.strip():
            if not current:
                start = index + 1
            current.append(line)
        elif current:
            blocks.append((start, current))
            current = []
    if current:
        blocks.append((start, current))
    return blocks


def cue_times(
    timing: re.Pattern[str], line: str, *, file_name: str, line_no: int, problem: str
) -> tuple[float, float]:
    """Start and end seconds of a timing line (`start --> end`, as SRT and WebVTT write it).

    `timing` must capture hours, minutes, seconds and fraction of the start (groups 1-4) and
    of the end (groups 5-8); a line it does not match is `problem` at `line_no`, and an end
    before the start is malformed timing too."""
    match = timing.fullmatch(line.strip())
    if match is None:
        raise line_error(file_name, line_no, problem)
    start = clock_seconds(*match.group(1, 2, 3, 4))
    end = clock_seconds(*match.group(5, 6, 7, 8))
    require_ordered_times(file_name, line_no, start, end)
    return start, end


def split_speaker(text: str) -> tuple[str | None, str]:
    """Split a `Speaker: text` prefix off `text`; (None, text) when there is none.

    A prefix is up to 40 non-colon characters before the first `": "`; longer or colon-free
    leads are ordinary text. This is a heuristic shared by the SRT and plain-text adapters so
    both read the same line the same way.
    """
    match = _SPEAKER_PREFIX.fullmatch(text)
    if match is None:
        return None, text
    speaker = match.group(1).strip()
    if not speaker:
        return None, text
    return speaker, match.group(2)


def clock_seconds(hours: str | None, minutes: str, seconds: str, fraction: str | None) -> float:
    """Seconds from clock parts (the caller's regex bounds every part's digits and range).

    The sum is formatted as a decimal and parsed once, so `00:00:36.313` gives exactly the
    float `36.313` a JSON file would hold, and the same moment digests the same in any format.
    """
    whole = int(hours or 0) * 3600 + int(minutes) * 60 + int(seconds)
    return float(f"{whole}.{fraction}") if fraction else float(whole)


def require_ordered_times(file_name: str, line_no: int, start: float, end: float) -> None:
    """A cue that ends before it starts is malformed timing, not something to reorder."""
    if end < start:
        raise line_error(file_name, line_no, "cue ends before it starts")
