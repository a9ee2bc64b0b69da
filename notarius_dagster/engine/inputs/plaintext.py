"""Plain-text transcripts: one utterance per non-blank line, `[ts] Speaker: text`.

This is the format people type or paste by hand, so both the timestamp and the speaker are
optional. A lead that looks like a timestamp but is not a valid one is an error rather than
text, because a typo there would otherwise silently become part of the speech.
"""

from __future__ import annotations

import re

from notarius_dagster.engine.inputs.base import (
    UTTERANCE,
    clock_seconds,
    line_error,
    split_lines,
    split_speaker,
)
from notarius_dagster.engine.models import SourceUnit

# Anything in brackets made of digits, colons and dots with at least one colon is meant as a
# timestamp; "[laughs]" or "[1]" are text.
_LOOKS_LIKE_TIMESTAMP = re.compile(r"\[(\d[\d.]*:[\d:.]*)\][ \t]*(.*)", re.DOTALL)
_TIMESTAMP = re.compile(r"(?:(\d{1,6}):)?([0-5]?\d):([0-5]\d)(?:\.(\d{1,3}))?")
_TIMESTAMP_HINT = "expected a leading [hh:mm:ss] or [mm:ss]"


class PlainTextAdapter:
    """`unit_id` is the unit's zero-based position among non-blank lines."""

    key = "text"
    media_type = "text/plain"

    def parse_units(self, text: str, file_name: str) -> list[SourceUnit]:
        units: list[SourceUnit] = []
        for line_no, raw_line in enumerate(split_lines(text), start=1):
            line = raw_line.strip()
            if not line:
                continue
            metadata: dict[str, object] = {}
            stamped = _LOOKS_LIKE_TIMESTAMP.fullmatch(line)
            if stamped is not None:
                clock = _TIMESTAMP.fullmatch(stamped.group(1))
                if clock is None:
                    raise line_error(file_name, line_no, f"malformed timestamp; {_TIMESTAMP_HINT}")
                start = clock_seconds(*clock.group(1, 2, 3, 4))
                line = stamped.group(2).strip()
                if not line:
                    raise line_error(file_name, line_no, "timestamp without any text after it")
                metadata["start"] = start
            speaker, body = split_speaker(line)
            if speaker is not None:
                metadata = {"speaker": speaker, **metadata}
            units.append(
                SourceUnit(unit_id=len(units), kind=UTTERANCE, text=body, metadata=metadata)
            )
        return units
