"""Chunking: the `generic` chunker, the framework's chunk invariants, and the rebuild of
accepted chunks from source units (so later stages see canonical units, whatever the chunker
returned)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from notarius_dagster.engine.contracts import ChunkRequest
from notarius_dagster.engine.digest import digest_of
from notarius_dagster.engine.models import Chunk, SourceDocument, SourceUnit
from notarius_dagster.engine.registry import ChunkerSpec

MAX_SPEAKER_CHARS = 40
"""A speaker label longer than this is cut (with `…`): a label is a name, not a paragraph."""
LINE_BREAK_MARK = "\u23ce"
"""What a line break inside a unit becomes in the prompt (`⏎`), so a unit stays one line."""
_LINE_BREAKS = re.compile(r"\r\n|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]")


def one_line(text: str) -> str:
    """`text` as a single prompt line: every line break becomes `⏎`, every other control or
    format character (tabs included) a space. A unit can then never start a line of its own
    in the prompt, so it cannot forge another unit's `[id]` marker."""
    text = _LINE_BREAKS.sub(LINE_BREAK_MARK, text)
    return "".join(
        " " if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") else ch for ch in text
    )


def speaker_label(speaker: object) -> str:
    """A speaker label as the prompt shows it: one line, brackets and colons (the marker and
    separator syntax) replaced, whitespace collapsed, at most `MAX_SPEAKER_CHARS`."""
    label = one_line(str(speaker)).replace(LINE_BREAK_MARK, " ")
    label = " ".join(label.translate(_LABEL_SYNTAX).split())
    if len(label) > MAX_SPEAKER_CHARS:
        label = label[: MAX_SPEAKER_CHARS - 1].rstrip() + "\u2026"
    return label


_LABEL_SYNTAX = str.maketrans({"[": "(", "]": ")", ":": " "})


def render_unit(unit: SourceUnit, marker: str | int | None = None) -> str:
    """One unit as the model sees it: `[id] Speaker: text` on exactly one line (the id lets it
    cite units; `marker` shows another label instead, e.g. a line number). Text and speaker
    are made single-line (`one_line`, `speaker_label`), so no unit can forge another's marker."""
    speaker = unit.metadata.get("speaker")
    label = speaker_label(speaker) if speaker else ""
    prefix = f"[{unit.unit_id if marker is None else marker}] "
    text = one_line(unit.text)
    return f"{prefix}{label}: {text}" if label else f"{prefix}{text}"


def render_units(units: Sequence[SourceUnit]) -> str:
    return "\n".join(render_unit(u) for u in units)


def chunk_digest(source_id: str, unit_ids: Sequence[int], content: str, media_type: str) -> str:
    return digest_of(
        {
            "source_id": source_id,
            "unit_ids": list(unit_ids),
            "content": content,
            "media_type": media_type,
        }
    )


def make_chunk(
    document: SourceDocument,
    index: int,
    units: Sequence[SourceUnit],
    chunk_id: str | None = None,
    metadata: dict[str, object] | None = None,
) -> Chunk:
    """Build a chunk over consecutive or selected units of `document`."""
    content = render_units(units)
    unit_ids = tuple(u.unit_id for u in units)
    return Chunk(
        chunk_id=chunk_id or f"chunk-{index:04d}",
        index=index,
        source_id=document.source_id,
        start_unit_id=unit_ids[0],
        end_unit_id=unit_ids[-1],
        unit_ids=unit_ids,
        content=content,
        media_type="text/plain",
        metadata=dict(metadata or {}),
        digest=chunk_digest(document.source_id, unit_ids, content, "text/plain"),
    )


class GenericChunkOptions(BaseModel):
    """Bounded by units and characters; `overlap_units` repeats the tail of one chunk at the
    head of the next."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    max_units: int = Field(default=40, ge=1, le=2000)
    max_chars: int = Field(default=6000, ge=200)
    overlap_units: int = Field(default=0, ge=0)

    def model_post_init(self, __context: object) -> None:
        if self.overlap_units >= self.max_units:
            raise ValueError("overlap_units must be smaller than max_units")


class GenericChunker:
    """Cuts the document into consecutive windows of at most `max_units` units and about
    `max_chars` characters (a single longer unit still forms its own chunk)."""

    def __init__(self, options: dict[str, object]) -> None:
        self.options = GenericChunkOptions.model_validate(options)

    def chunk(self, request: ChunkRequest) -> list[Chunk]:
        doc = request.document
        units = doc.units
        chunks: list[Chunk] = []
        start = 0
        while start < len(units):
            end = start
            size = 0
            while end < len(units) and end - start < self.options.max_units:
                line = len(render_unit(units[end])) + 1
                if end > start and size + line > self.options.max_chars:
                    break
                size += line
                end += 1
            chunks.append(make_chunk(doc, len(chunks), units[start:end]))
            if end >= len(units):
                break
            start = max(end - self.options.overlap_units, start + 1)
        return chunks


GENERIC_CHUNKER = ChunkerSpec(key="generic", build=GenericChunker)
"""The default chunker (`pipeline.chunk.module: generic`)."""


def chunk_invariant_problems(document: SourceDocument, chunks: Sequence[Chunk]) -> list[str]:
    """The framework invariants every chunker's result must meet: non-empty unique ids, the
    document's source id, each index equal to its position, start and end units in the
    document and in order, non-empty content and media type, at least one unit, no unit twice,
    every unit in the document and in document order. Each problem names the chunk by index
    and id, never its content."""
    problems: list[str] = []
    positions = document.position_index()
    seen_ids: set[str] = set()
    for returned_index, chunk in enumerate(chunks):
        where = f"chunk {returned_index}"
        if not chunk.chunk_id.strip():
            problems.append(f"{where}: empty chunk id")
        elif chunk.chunk_id in seen_ids:
            problems.append(f"{where}: duplicate chunk id {chunk.chunk_id!r}")
        seen_ids.add(chunk.chunk_id)
        if chunk.source_id != document.source_id:
            problems.append(f"{where}: source id does not match the document")
        if chunk.index != returned_index:
            problems.append(f"{where}: index {chunk.index} is not its position {returned_index}")
        start = positions.get(chunk.start_unit_id)
        end = positions.get(chunk.end_unit_id)
        if start is None or end is None:
            problems.append(f"{where}: start or end unit id not in the document")
        elif start > end:
            problems.append(f"{where}: start unit comes after end unit")
        if not chunk.content.strip() or not chunk.media_type.strip():
            problems.append(f"{where}: empty content or media type")
        if not chunk.unit_ids:
            problems.append(f"{where}: contains no source unit")
            continue
        if len(set(chunk.unit_ids)) != len(chunk.unit_ids):
            problems.append(f"{where}: repeats a source unit")
        missing = [u for u in chunk.unit_ids if u not in positions]
        if missing:
            problems.append(f"{where}: unit ids not in the document: {missing[:5]}")
            continue
        order = [positions[u] for u in chunk.unit_ids]
        if order != sorted(order):
            problems.append(f"{where}: units are not in document order")
    return problems


def rebuild_chunks(document: SourceDocument, chunks: Sequence[Chunk]) -> tuple[Chunk, ...]:
    """Rebuild validated chunks from the document's units by id, keeping boundaries, content
    bytes, media type and a copy of chunk metadata; the digest is recomputed."""
    by_id = {u.unit_id: u for u in document.units}
    rebuilt = []
    for chunk in chunks:
        units = [by_id[u] for u in chunk.unit_ids]
        unit_ids = tuple(u.unit_id for u in units)
        rebuilt.append(
            Chunk(
                chunk_id=chunk.chunk_id,
                index=chunk.index,
                source_id=document.source_id,
                start_unit_id=chunk.start_unit_id,
                end_unit_id=chunk.end_unit_id,
                unit_ids=unit_ids,
                content=chunk.content,
                media_type=chunk.media_type,
                metadata=dict(chunk.metadata),
                digest=chunk_digest(document.source_id, unit_ids, chunk.content, chunk.media_type),
            )
        )
    return tuple(rebuilt)
