"""Frozen value models that cross stage boundaries: source units, documents, references,
chunks, warnings and rejections. Everything here is domain-neutral."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from types import MappingProxyType
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Frozen(BaseModel):
    """Base for immutable, strict values."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class ReferenceSlot(Frozen):
    """A named input a chunker or a lane's extractor may receive: an external file or another
    lane's artifact (docs/configuration.md, "Reference bindings")."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,47}$")
    required: bool = False
    accepted_kinds: tuple[str, ...] = ()
    accepted_media_types: tuple[str, ...] = ()
    max_bytes: int = 1_000_000


class SourceUnit(Frozen):
    """One utterance or line of a transcript. `unit_id` is unique but not ordered: order is
    the unit's position in the document, never id arithmetic."""

    unit_id: int
    kind: str = "utterance"
    text: str
    metadata: dict[str, object] = Field(default_factory=dict)


class SourceDocument(Frozen):
    """A parsed transcript: the session id and its units in document order."""

    source_id: str
    media_type: str
    units: tuple[SourceUnit, ...]
    digest: str = Field(description="sha256 over the canonical units (semantic, not raw bytes)")

    @model_validator(mode="after")
    def _unique_ids(self) -> SourceDocument:
        seen: set[int] = set()
        for position, unit in enumerate(self.units):
            if unit.unit_id in seen:
                raise ValueError(f"unit id {unit.unit_id} repeats at position {position}")
            seen.add(unit.unit_id)
        return self

    def position_index(self) -> Mapping[int, int]:
        """Map unit id to its zero-based document position (read-only, built once per
        document: validators, mergers and the evidence projector ask for it per record)."""
        return self._positions

    @cached_property
    def _positions(self) -> Mapping[int, int]:
        return MappingProxyType({unit.unit_id: pos for pos, unit in enumerate(self.units)})


class SourceRef(Frozen):
    """A citation: an inclusive range of unit ids of one source document, resolved by
    document position (start at or before end)."""

    source_id: str
    start_unit_id: int
    end_unit_id: int


class Chunk(Frozen):
    """A slice of the document handed to one extraction. `unit_ids` are in document order."""

    chunk_id: str
    index: int
    source_id: str
    start_unit_id: int
    end_unit_id: int
    unit_ids: tuple[int, ...]
    content: str
    media_type: str = "text/plain"
    metadata: dict[str, object] = Field(default_factory=dict)
    digest: str = ""

    def source_ref(self) -> SourceRef:
        return SourceRef(
            source_id=self.source_id,
            start_unit_id=self.start_unit_id,
            end_unit_id=self.end_unit_id,
        )


class ChunkView(Frozen):
    """One published chunk: identity, position, unit range and ids, digest; never content."""

    chunk_id: str
    index: int = Field(ge=0)
    start_unit_id: int
    end_unit_id: int
    unit_ids: list[int] = Field(min_length=1)
    digest: str


# The single source of `schemas/notarius.source.chunk_map.json` (its docstring is the schema's
# description): ids, ranges and digests, no transcript text.
class ChunkMapView(Frozen):
    """`chunk-map.json`, as `ChunkMap.public_view()` renders it."""

    source_id: str
    source_digest: str
    chunker: str
    chunks: list[ChunkView]


class ChunkMap(Frozen):
    """The validated chunks of one document, published as chunk-map.json (no transcript text)."""

    source_id: str
    source_digest: str
    chunker: str
    chunks: tuple[Chunk, ...]

    def public_view(self) -> ChunkMapView:
        """The published form: every `ChunkView` field of each chunk (so never its content)."""
        fields = set(ChunkView.model_fields)
        return ChunkMapView(
            source_id=self.source_id,
            source_digest=self.source_digest,
            chunker=self.chunker,
            chunks=[ChunkView.model_validate(c.model_dump(include=fields)) for c in self.chunks],
        )


Stage = Literal["input", "chunk", "extract", "merge", "normalize", "validate", "output"]


class RunWarning(Frozen):
    """A bounded, content-safe warning from an attempt whose output was used."""

    stage: Stage
    code: str
    message: str
    lane: str | None = None
    chunk_id: str | None = None


class Rejection(Frozen):
    """A validator rejected an output, or one record of it (`record_index`): recorded in
    rejected.json, not fatal."""

    stage: Stage
    lane: str | None
    module: str
    chunk_id: str | None
    validator: str
    message: str
    attempts: int
    record_index: int | None = Field(
        default=None,
        description="set when one record was dropped (a record validator such as `support`) "
        "and the rest of the output kept; null when the whole output was rejected",
    )
