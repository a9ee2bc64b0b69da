"""The `scenes` chunker: cuts a D&D session where a new scene plausibly starts, so that each
chunk is one scene for the scene-description lane (and so the combat gate sees whole fights).

Deterministic, from cues in the transcript:
- an initiative call ("roll for initiative", "roll initiative"): a fight starts here;
- a break: the unit after an announcement ("we'll be right back", "take a break") and a unit
  that says "welcome back" start a new scene;
- a long silence: the gap between one unit's end (or start) and the next unit's start is at
  least `gap_seconds` (only when the transcript has timestamps);
- the Dungeon Master narrating a change of place or time ("meanwhile", "the next morning",
  "you arrive at", "a few hours later"). The DM is `dm_speakers` when given, else the most
  frequent speaker (at a real table, the DM talks most).
A cue is honoured only once the running chunk has `min_units` units (so a burst of cues does
not make confetti); any chunk also ends at `max_units` units or `max_chars` characters. The
chunks cover the document in order without overlap. Each chunk's metadata says which cue
opened it (`opened_by`), never any text. There is no LLM-backed variant (yet)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from notarius_dagster.engine.chunking import make_chunk, render_unit
from notarius_dagster.engine.contracts import ChunkRequest
from notarius_dagster.engine.models import Chunk, SourceUnit
from notarius_dagster.engine.registry import ChunkerSpec

INITIATIVE = re.compile(r"\broll(?:ing)?\s+(?:for\s+|your\s+)?initiative\b", re.IGNORECASE)
BREAK_ANNOUNCED = re.compile(
    r"\b(?:we'?ll be right back|be right back|take (?:a|our) (?:quick |short |little )?break"
    r"|(?:go|head) (?:to|into) (?:a |our )?break|break time)\b",
    re.IGNORECASE,
)
WELCOME_BACK = re.compile(r"\bwelcome back\b", re.IGNORECASE)
SCENE_CHANGE = re.compile(
    r"\b(?:meanwhile|the (?:next|following) (?:morning|day|evening|night)"
    r"|(?:later|early|earlier) that (?:day|night|evening|morning)"
    r"|(?:a few|some|several|many|two|three) (?:minutes|hours|days|weeks) later"
    r"|(?:hours|days|weeks) later|as you (?:arrive|enter|approach|make your way)"
    r"|you (?:arrive|make your way|head (?:back|out|towards?)) |cut to|fast[- ]forward)",
    re.IGNORECASE,
)
CUE_WINDOW = 240  # scene-change narration opens an utterance; look at its start only


class ScenesChunkOptions(BaseModel):
    """Bounds and cue settings; unknown options are refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    min_units: int = Field(default=8, ge=1, le=2000)
    max_units: int = Field(default=60, ge=1, le=2000)
    max_chars: int = Field(default=8000, ge=200)
    gap_seconds: float = Field(default=300.0, gt=0)
    dm_speakers: list[str] | None = Field(default=None, min_length=1)

    def model_post_init(self, __context: object) -> None:
        if self.min_units > self.max_units:
            raise ValueError("min_units must not exceed max_units")


def dungeon_masters(units: Sequence[SourceUnit], configured: list[str] | None) -> set[str]:
    """The configured DM speaker labels, else the most frequent speaker (ties: first seen)."""
    if configured:
        return {s.casefold() for s in configured}
    counts = Counter(str(u.metadata["speaker"]) for u in units if u.metadata.get("speaker"))
    if not counts:
        return set()
    return {counts.most_common(1)[0][0].casefold()}


def _seconds(unit: SourceUnit, key: str) -> float | None:
    value = unit.metadata.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _gap(previous: SourceUnit, unit: SourceUnit) -> float | None:
    """Seconds between the end (or start) of `previous` and the start of `unit`."""
    before = _seconds(previous, "end")
    before = before if before is not None else _seconds(previous, "start")
    after = _seconds(unit, "start")
    return None if before is None or after is None else after - before


def scene_cue(
    units: Sequence[SourceUnit], i: int, dms: set[str], options: ScenesChunkOptions
) -> str | None:
    """Why a new scene would start at unit `i` (None: no cue). Checked in order of strength."""
    unit, previous = units[i], units[i - 1]
    if INITIATIVE.search(unit.text):
        return "initiative"
    if BREAK_ANNOUNCED.search(previous.text) or WELCOME_BACK.search(unit.text):
        return "break"
    gap = _gap(previous, unit)
    if gap is not None and gap >= options.gap_seconds:
        return "gap"
    speaker = str(unit.metadata.get("speaker", "")).casefold()
    if speaker in dms and SCENE_CHANGE.search(unit.text[:CUE_WINDOW]):
        return "scene_change"
    return None


class ScenesChunker:
    """Consecutive, non-overlapping scene chunks with ids `scene-0000`, `scene-0001`, ..."""

    def __init__(self, options: dict[str, object]) -> None:
        self.options = ScenesChunkOptions.model_validate(options)

    def chunk(self, request: ChunkRequest) -> list[Chunk]:
        doc = request.document
        units = doc.units
        dms = dungeon_masters(units, self.options.dm_speakers)
        chunks: list[Chunk] = []
        current: list[SourceUnit] = []
        opened_by = "start"
        size = 0

        def flush() -> None:
            index = len(chunks)
            chunks.append(
                make_chunk(
                    doc,
                    index,
                    current,
                    chunk_id=f"scene-{index:04d}",
                    metadata={"opened_by": opened_by},
                )
            )

        for i, unit in enumerate(units):
            line = len(render_unit(unit)) + 1
            cue = scene_cue(units, i, dms, self.options) if i else None
            if current and cue is not None and len(current) >= self.options.min_units:
                flush()
                current, size, opened_by = [], 0, cue
            elif current and (
                len(current) >= self.options.max_units or size + line > self.options.max_chars
            ):
                flush()
                current, size, opened_by = [], 0, "size"
            current.append(unit)
            size += line
        if current:
            flush()
        return chunks


SCENES_CHUNKER = ChunkerSpec(key="scenes", build=ScenesChunker)
"""The scene chunker a profile names as `pipeline.chunk.module: scenes`."""
