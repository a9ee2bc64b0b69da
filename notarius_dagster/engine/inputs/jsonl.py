"""JSON Lines transcripts: one JSON object per utterance.

This is the native format (what the sample sessions ship as), so it is the strictest adapter:
every type is checked, because a silently coerced id or timestamp would surface much later as
a citation that points at the wrong words.
"""

from __future__ import annotations

import json
import math
from typing import Any

from notarius_dagster.engine.inputs.base import UTTERANCE, line_error, split_lines
from notarius_dagster.engine.limits import UNIT_ID_MAX, UNIT_ID_MIN
from notarius_dagster.engine.models import SourceUnit
from notarius_dagster.engine.reading import MAX_NESTING, json_nesting

_KEY_SHOWN_CHARS = 40


class _LineProblem(ValueError):
    """Raised from json hooks; carries a content-safe description of what is wrong."""


def _json_type(value: object) -> str:
    """The JSON name of a value's type: errors say what kind of value was found, never the
    value itself (it may be transcript text)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _shown_key(key: str) -> str:
    """A key name as shown in errors: keys are schema, not speech, but are truncated anyway."""
    return repr(key if len(key) <= _KEY_SHOWN_CHARS else key[:_KEY_SHOWN_CHARS] + "...")


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, object]:
    """Reject repeated keys instead of letting the last one win silently."""
    result: dict[str, object] = {}
    for key, value in pairs:
        if key in result:
            raise _LineProblem(f"key {_shown_key(key)} appears twice in one object")
        result[key] = value
    return result


def _no_constants(name: str) -> Any:
    """NaN and Infinity are not JSON; Python's parser accepts them unless told otherwise."""
    raise _LineProblem(f"{name} is not valid JSON")


def _load_object(line: str, file_name: str, line_no: int) -> dict[str, object]:
    """Parse one line into a JSON object, reporting position and kind of problem only. A line
    nested deeper than `MAX_NESTING` is refused before it is parsed (the bracket count is a
    cheap first look: most lines have one pair of braces)."""
    if line.count("{") + line.count("[") > MAX_NESTING and json_nesting(line) is not None:
        raise line_error(
            file_name, line_no, f"nested deeper than {MAX_NESTING} levels of arrays and objects"
        )
    try:
        value = json.loads(line, object_pairs_hook=_unique_pairs, parse_constant=_no_constants)
    except _LineProblem as problem:
        raise line_error(file_name, line_no, str(problem)) from None
    except json.JSONDecodeError as exc:
        # exc.msg is a fixed phrase ("Expecting ',' delimiter"); exc.doc would be the line.
        raise line_error(
            file_name, line_no, f"invalid JSON ({exc.msg} at column {exc.colno})"
        ) from None
    except (ValueError, RecursionError):
        raise line_error(file_name, line_no, "invalid JSON") from None
    if not isinstance(value, dict):
        raise line_error(file_name, line_no, f"expected a JSON object, got {_json_type(value)}")
    return value


def _seconds(obj: dict[str, object], key: str, file_name: str, line_no: int) -> float | None:
    """An optional timestamp in seconds, normalised to float so `1` and `1.0` digest alike."""
    if key not in obj:
        return None
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise line_error(
            file_name,
            line_no,
            f"key {key!r} must be a number (seconds), got {_json_type(value)}",
        )
    try:
        seconds = float(value)
    except OverflowError:
        seconds = math.inf
    if not math.isfinite(seconds) or seconds < 0:
        raise line_error(
            file_name, line_no, f"key {key!r} must be a finite, non-negative number of seconds"
        )
    return seconds


class JsonlAdapter:
    """`{"text": ..., "speaker"?: ..., "unit_id"?: ..., "start"?: ..., "end"?: ...}` per line.

    Keys other than `text` and `unit_id` go to the unit's metadata, so nothing the input
    carried is lost. `unit_id` is either on every line or on none (then it is the unit's
    position): mixing the two would let a default collide with an explicit id.
    """

    key = "jsonl"
    media_type = "application/x-ndjson"

    def parse_units(self, text: str, file_name: str) -> list[SourceUnit]:
        units: list[SourceUnit] = []
        id_lines: dict[int, int] = {}
        first_line: int | None = None
        explicit_ids: bool | None = None
        for line_no, line in enumerate(split_lines(text), start=1):
            if not line.strip():
                continue
            obj = _load_object(line, file_name, line_no)
            unit = self._unit(obj, len(units), file_name, line_no)
            has_id = "unit_id" in obj
            if explicit_ids is None:
                explicit_ids, first_line = has_id, line_no
            elif has_id != explicit_ids:
                given, missing = (first_line, line_no) if explicit_ids else (line_no, first_line)
                raise line_error(
                    file_name,
                    line_no,
                    f"key 'unit_id' is given on line {given} but missing on line {missing}; "
                    "give unit_id on every line or on none",
                )
            if unit.unit_id in id_lines:
                raise line_error(
                    file_name,
                    line_no,
                    f"unit_id {unit.unit_id} repeats the one on line {id_lines[unit.unit_id]}",
                )
            id_lines[unit.unit_id] = line_no
            units.append(unit)
        return units

    def _unit(
        self, obj: dict[str, object], position: int, file_name: str, line_no: int
    ) -> SourceUnit:
        """Build one unit from a parsed line, checking each known key's type."""
        if "text" not in obj:
            raise line_error(file_name, line_no, "key 'text' is required (a string)")
        body = obj["text"]
        if not isinstance(body, str):
            raise line_error(
                file_name, line_no, f"key 'text' must be a string, got {_json_type(body)}"
            )
        unit_id = obj.get("unit_id", position)
        if isinstance(unit_id, bool) or not isinstance(unit_id, int):
            raise line_error(
                file_name,
                line_no,
                f"key 'unit_id' must be an integer, got {_json_type(unit_id)}",
            )
        if not UNIT_ID_MIN <= unit_id <= UNIT_ID_MAX:
            raise line_error(file_name, line_no, "key 'unit_id' must fit a signed 64-bit integer")
        metadata: dict[str, object] = {}
        if "speaker" in obj:
            speaker = obj["speaker"]
            if not isinstance(speaker, str):
                raise line_error(
                    file_name,
                    line_no,
                    f"key 'speaker' must be a string, got {_json_type(speaker)}",
                )
            metadata["speaker"] = speaker
        start = _seconds(obj, "start", file_name, line_no)
        end = _seconds(obj, "end", file_name, line_no)
        if start is not None:
            metadata["start"] = start
        if end is not None:
            metadata["end"] = end
        if start is not None and end is not None and end < start:
            raise line_error(file_name, line_no, "'end' is before 'start'")
        for key, value in obj.items():
            if key not in ("text", "unit_id", "speaker", "start", "end"):
                metadata[key] = value
        try:
            return SourceUnit(unit_id=unit_id, kind=UTTERANCE, text=body, metadata=metadata)
        except ValueError:  # pydantic ValidationError; its text would quote the input
            raise line_error(file_name, line_no, "not a valid unit") from None
