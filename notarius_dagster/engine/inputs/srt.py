"""SubRip (.srt) transcripts, parsed without a dependency.

SRT has no speaker field, so a `Speaker: text` lead on the subtitle text is read as the
speaker (the same heuristic as plain text). The sequence number becomes the unit id because
it is the one stable name the file gives each subtitle; it must therefore be an integer and
unique, and is never renumbered.
"""

from __future__ import annotations

import re

from notarius_dagster.engine.inputs.base import (
    UTTERANCE,
    blank_line_blocks,
    cue_times,
    line_error,
    split_lines,
    split_speaker,
)
from notarius_dagster.engine.models import SourceUnit

_SEQUENCE = re.compile(r"[0-9]{1,18}")
_TIMESTAMP = r"(\d{1,6}):([0-5]\d):([0-5]\d),(\d{3})"
# Trailing text after the end time (e.g. "X1:40 X2:600 Y1:20 Y2:50") is positioning; ignored.
_TIMING = re.compile(_TIMESTAMP + r"[ \t]+-->[ \t]+" + _TIMESTAMP + r"(?:[ \t]+.*)?")
# The formatting tags SRT players honour; anything else in angle brackets is left as text.
_FORMAT_TAG = re.compile(r"</?(?:i|b|u|font)(?:\s[^>]*)?>", re.IGNORECASE)
_TIMING_HINT = "expected 'HH:MM:SS,mmm --> HH:MM:SS,mmm'"


def _sequence_number(
    line: str, start_line: int, first_lines: dict[int, int], file_name: str
) -> int:
    """The block's sequence number, which becomes its unit id: an integer that no earlier block
    used (`first_lines` maps each number seen to its line, for the error)."""
    if _SEQUENCE.fullmatch(line.strip()) is None:
        raise line_error(file_name, start_line, "expected a subtitle sequence number (an integer)")
    unit_id = int(line.strip())
    if unit_id in first_lines:
        raise line_error(
            file_name,
            start_line,
            f"sequence number {unit_id} repeats the one on line {first_lines[unit_id]}",
        )
    first_lines[unit_id] = start_line
    return unit_id


def _subtitle(unit_id: int, block: list[str], start_line: int, file_name: str) -> SourceUnit:
    """One subtitle block after its sequence number: the timing line, then the text lines
    (formatting tags removed, a `Speaker: ` lead read as the speaker)."""
    if len(block) < 2:
        raise line_error(
            file_name, start_line, f"sequence number without a timing line; {_TIMING_HINT}"
        )
    start, end = cue_times(
        _TIMING,
        block[1],
        file_name=file_name,
        line_no=start_line + 1,
        problem=f"malformed timing; {_TIMING_HINT}",
    )
    body = _FORMAT_TAG.sub("", "\n".join(line.strip() for line in block[2:])).strip()
    speaker, body = split_speaker(body)
    metadata: dict[str, object] = {}
    if speaker is not None:
        metadata["speaker"] = speaker
    metadata["start"] = start
    metadata["end"] = end
    return SourceUnit(unit_id=unit_id, kind=UTTERANCE, text=body, metadata=metadata)


class SrtAdapter:
    """One unit per subtitle block, in file order; `unit_id` is the block's sequence number."""

    key = "srt"
    media_type = "application/x-subrip"

    def parse_units(self, text: str, file_name: str) -> list[SourceUnit]:
        first_lines: dict[int, int] = {}
        units: list[SourceUnit] = []
        for start_line, block in blank_line_blocks(split_lines(text)):
            unit_id = _sequence_number(block[0], start_line, first_lines, file_name)
            units.append(_subtitle(unit_id, block, start_line, file_name))
        return units
