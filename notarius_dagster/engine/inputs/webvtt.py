"""WebVTT transcripts (what meeting and streaming tools export), parsed without a dependency.

Only what a transcript needs is read: cue identifiers, timings and payloads. Voice tags
(`<v Name>`) carry the speaker, which is the one piece of markup that matters downstream; all
other markup is presentation and is removed. NOTE, STYLE and REGION blocks carry no speech.
"""

from __future__ import annotations

import html
import re

from notarius_dagster.engine.inputs.base import (
    UTTERANCE,
    blank_line_blocks,
    cue_times,
    line_error,
    split_lines,
)
from notarius_dagster.engine.models import SourceUnit

_HEADER = re.compile(r"WEBVTT(?:[ \t].*)?")
_SKIPPED_BLOCK = re.compile(r"(?:NOTE|STYLE|REGION)(?:[ \t].*)?")
_TIMESTAMP = r"(?:(\d{2,6}):)?([0-5]\d):([0-5]\d)\.(\d{3})"
_TIMING = re.compile(_TIMESTAMP + r"[ \t]+-->[ \t]+" + _TIMESTAMP + r"(?:[ \t]+.*)?")
# <v Name>, <v.class Name>; the annotation runs to the closing '>'.
_VOICE = re.compile(r"<v(?:\.[^\s>]*)?[ \t]+([^>]*)>")
_ANY_TAG = re.compile(r"<[^>]*>")
_TIMING_HINT = "expected '[hh:]mm:ss.ttt --> [hh:]mm:ss.ttt'"


def _payload(raw: str) -> tuple[list[str], str]:
    """Voices (distinct, in order) and the plain text of a cue payload.

    Tags are removed before entities are decoded, so an escaped `&lt;` in speech survives as a
    literal `<` instead of being mistaken for markup.
    """
    voices: list[str] = []
    for match in _VOICE.finditer(raw):
        name = html.unescape(match.group(1)).strip()
        if name and name not in voices:
            voices.append(name)
    text = html.unescape(_ANY_TAG.sub("", raw))
    return voices, text.strip()


class WebVttAdapter:
    """One unit per cue, in cue order; `unit_id` is the cue's zero-based position.

    The cue identifier, if any, is kept as metadata `cue_id`; positioning settings are
    rendering hints and are dropped.
    """

    key = "webvtt"
    media_type = "text/vtt"

    def parse_units(self, text: str, file_name: str) -> list[SourceUnit]:
        lines = split_lines(text)
        if not lines or _HEADER.fullmatch(lines[0]) is None:
            raise line_error(file_name, 1, "missing the 'WEBVTT' header")
        body_start = len(lines)
        for index in range(1, len(lines)):
            if not lines[index].strip():
                body_start = index
                break
            if "-->" in lines[index]:
                raise line_error(
                    file_name,
                    index + 1,
                    "a blank line must separate the header from the first cue",
                )
        units: list[SourceUnit] = []
        for start_line, block in blank_line_blocks(lines, body_start):
            if _SKIPPED_BLOCK.fullmatch(block[0].rstrip()) is not None:
                continue
            units.append(self._cue(block, start_line, len(units), file_name))
        return units

    def _cue(self, block: list[str], start_line: int, position: int, file_name: str) -> SourceUnit:
        """Parse one cue block: optional identifier, timing line, payload lines."""
        cue_id: str | None = None
        timing_index = 0
        if "-->" not in block[0]:
            if len(block) < 2 or "-->" not in block[1]:
                raise line_error(
                    file_name,
                    start_line + (1 if len(block) > 1 else 0),
                    f"expected a cue timing line ({_TIMING_HINT})",
                )
            cue_id, timing_index = block[0].strip(), 1
        start, end = cue_times(
            _TIMING,
            block[timing_index],
            file_name=file_name,
            line_no=start_line + timing_index,
            problem=f"malformed cue timing; {_TIMING_HINT}",
        )
        voices, body = _payload("\n".join(block[timing_index + 1 :]))
        metadata: dict[str, object] = {}
        if voices:
            metadata["speaker"] = voices[0]
        if len(voices) > 1:
            metadata["voices"] = voices
        metadata["start"] = start
        metadata["end"] = end
        if cue_id:
            metadata["cue_id"] = cue_id
        return SourceUnit(unit_id=position, kind=UTTERANCE, text=body, metadata=metadata)
