"""Gold files: what a careful reader extracts from one transcript, per lane, each record with
the units that ground it. The scorer (`evaluation.py`) compares a published bundle against one.

The format is domain-neutral: a lane is a list of records keyed by the lane id; a record holds
`unit_ids` plus whatever fields of the lane's records the match table names (a name and the
secondary fields that must agree), optionally `aliases` (other spellings a reader accepts)
and a `note` (why).
The pydantic model below is the single source of the JSON Schema (`gold_schema()`, checked in
as `schemas/notarius.eval.gold.json`). Loading errors name the file and the key path, never a
value from it (a gold file is transcript-derived content)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from notarius_dagster.engine.errors import NotariusError
from notarius_dagster.engine.reading import (
    FileRefused,
    ParseRefused,
    decode_utf8,
    load_json,
    read_bounded,
)

GOLD_SCHEMA_ID = "notarius.eval.gold"
GOLD_SCHEMA_NAME = "notarius_eval_gold_v1"

# A gold record's lane fields: a name, a number, a list of accepted spellings, or
# null (the reader does not know; the field is then not compared).
GoldValue = str | int | list[str] | None


class GoldError(NotariusError):
    """A gold file cannot be used; the message names the file and the key path."""


class GoldSource(BaseModel):
    """The transcript the gold was read from. `digest` is the bundle's `source_digest` of that
    transcript (sha256 over its canonical units): when present, the scorer refuses a bundle
    made from anything else."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    file: str = Field(min_length=1, description="the transcript's path in the repository")
    units: int = Field(ge=1, description="how many units the transcript has")
    digest: str | None = Field(default=None, pattern=r"^sha256:[0-9a-f]{64}$")


class GoldRecord(BaseModel):
    """One record a careful reader would extract. Besides `unit_ids`, `aliases` and `note`, it
    carries the lane's match fields under the lane's own field names (whatever the
    match table names); a list value means any of those spellings is right."""

    model_config = ConfigDict(extra="allow", frozen=True)
    __pydantic_extra__: dict[str, GoldValue] = Field(init=False)

    unit_ids: list[int] = Field(
        min_length=1, description="the units that mention or ground this record"
    )
    aliases: list[str] = Field(
        default_factory=list, description="other spellings of the record's match name"
    )
    note: str | None = Field(default=None, description="the reader's reason, for reviewers")

    def value(self, field: str) -> GoldValue:
        """A lane field's value (None when the record does not set it)."""
        extra = self.__pydantic_extra__ or {}
        return extra.get(field)


class GoldFile(BaseModel):
    """A gold file: one session, its source, its attribution and its lanes. A lane that is
    present with `[]` means the reader found nothing; a lane that is absent was not read."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    gold_version: Literal["1"] = "1"
    session_id: str = Field(min_length=1, max_length=64)
    source: GoldSource
    attribution: str = Field(min_length=1, description="source, authors and licence")
    lanes: dict[str, list[GoldRecord]]


def gold_schema() -> dict[str, object]:
    """The JSON Schema of a gold file, generated from `GoldFile`."""
    schema = GoldFile.model_json_schema()
    schema["$id"] = GOLD_SCHEMA_ID
    schema["title"] = GOLD_SCHEMA_NAME
    return schema


def _where(loc: Iterable[int | str]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def parse_gold(data: object, file_name: str) -> GoldFile:
    """Validate a parsed gold document; the error lists key paths and problems, not values."""
    try:
        return GoldFile.model_validate(data)
    except ValidationError as exc:
        problems = [f"{_where(e['loc'])}: {e['msg']}" for e in exc.errors(include_input=False)]
        shown = "; ".join(problems[:5]) + (
            f"; and {len(problems) - 5} more" if len(problems) > 5 else ""
        )
        raise GoldError(f"gold {file_name!r}: {shown}") from None


MAX_GOLD_BYTES = 20_000_000
"""A gold file is a session's hand-made records: far smaller than its transcript's limit."""


def load_gold(path: Path) -> GoldFile:
    """Read and validate a gold file through the one reader (`engine/reading.py`): a regular
    file of at most MAX_GOLD_BYTES, UTF-8 JSON, nesting capped, repeated keys refused."""
    try:
        raw = read_bounded(path, MAX_GOLD_BYTES, allowed=f"a gold file may have {MAX_GOLD_BYTES}")
        data = load_json(decode_utf8(raw, path.name), path.name)
    except FileRefused as exc:
        raise GoldError(f"gold: {exc}") from None
    except ParseRefused as exc:
        raise GoldError(f"gold {exc}") from None
    return parse_gold(data, path.name)


def gold_problems(
    gold: GoldFile, unit_ids: Iterable[int], required_fields: Mapping[str, str]
) -> list[str]:
    """What is wrong with a valid gold file against its transcript: unit ids that do not exist
    and records without their lane's match field (`required_fields`: lane id -> field). Lanes
    missing from `required_fields` are only checked for units. Problems name key paths."""
    known = set(unit_ids)
    problems: list[str] = []
    for lane_id, records in gold.lanes.items():
        field = required_fields.get(lane_id)
        for index, record in enumerate(records):
            where = f"lanes.{lane_id}[{index}]"
            missing = [u for u in record.unit_ids if u not in known]
            if missing:
                problems.append(
                    f"{where}.unit_ids: {len(missing)} unit id(s) not in the "
                    f"transcript (first: {missing[0]})"
                )
            if len(set(record.unit_ids)) != len(record.unit_ids):
                problems.append(f"{where}.unit_ids: repeated unit ids")
            if field is not None:
                value = record.value(field)
                if not (isinstance(value, str) and value.strip()) and not (
                    isinstance(value, list) and any(v.strip() for v in value)
                ):
                    problems.append(f"{where}: no {field!r} (the lane's match field)")
    return problems
