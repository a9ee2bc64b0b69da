"""What stage modules receive and return. Requests are plain dataclasses (they hold a client
and prepared references, which are not values); outputs are frozen models."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel, Field, PrivateAttr

from notarius_dagster.engine.artifact_kinds import ArtifactKind
from notarius_dagster.engine.llm_contract import LLMUsage, StructuredClient
from notarius_dagster.engine.models import Chunk, Frozen, RunWarning, SourceDocument


class ModuleOutput(Frozen):
    """A raw module output. `payload` is None only when a structured answer never validated;
    `schema_errors` then says why (paths, not values). `skipped` marks a deterministic result
    made without an LLM call (for example scene gating)."""

    payload: dict[str, Any] | None
    warnings: tuple[RunWarning, ...] = ()
    usage: LLMUsage = Field(default_factory=LLMUsage)
    schema_errors: tuple[str, ...] = ()
    skipped: bool = False
    provenance: dict[str, object] = Field(default_factory=dict)
    _typed: tuple[object, BaseModel] | None = PrivateAttr(default=None)

    def artifact(self, kind: ArtifactKind) -> BaseModel | None:
        """The payload as `kind`'s typed model, parsed once: the validators of a chain share
        it (`pydantic.ValidationError` when it is not one; its message may quote values).
        The parse is kept with the payload object it came from, so a copy with another
        payload parses its own."""
        if self.payload is None:
            return None
        self._typed = kind.parse_held(self.payload, self._typed)
        return self._typed[1]


@dataclass(frozen=True)
class PreparedReference:
    """A bound reference ready for a module: its provenance, decoded text, and (for a
    structured slot) the validated artifact: `artifact` as JSON (what its digest is of),
    `typed` as its kind's model and `records` that model's records (instances of the record
    model, for a lane's kind). Immutable and thread-safe to share."""

    slot: str
    origin: str  # "file" or "lane"
    kind: str | None
    media_type: str
    digest: str
    text: str | None = None
    artifact: Mapping[str, object] | None = None
    provenance: Mapping[str, object] = field(default_factory=dict)
    typed: BaseModel | None = None
    records: tuple[BaseModel, ...] = ()


@dataclass(frozen=True)
class RunContext:
    """What every request carries besides its own inputs."""

    session_id: str
    lane_id: str | None
    module_key: str
    options: Mapping[str, object]
    references: Mapping[str, PreparedReference]
    client: StructuredClient | None
    kind: ArtifactKind | None = None


@dataclass(frozen=True)
class ChunkRequest:
    document: SourceDocument
    context: RunContext


@dataclass(frozen=True)
class ExtractRequest:
    document: SourceDocument
    chunk: Chunk
    context: RunContext


@dataclass(frozen=True)
class MergeRequest:
    document: SourceDocument
    extracts: tuple[ModuleOutput, ...]
    context: RunContext


@dataclass(frozen=True)
class NormalizeRequest:
    document: SourceDocument
    merged: ModuleOutput
    context: RunContext


class Chunker(Protocol):
    """A `chunk` module: cuts the document into chunks (the runner checks and rebuilds them)."""

    def chunk(self, request: ChunkRequest) -> list[Chunk]: ...


class Extractor(Protocol):
    """An `extract` module: one output per chunk. Besides `extract` it answers two questions,
    each once per lane run:

    - `fingerprint_material()` (asked before extraction): what, besides its key, version and
      options, determines its output (prompt and answer-schema hashes). It is mixed into the
      checkpoint fingerprints and the lane's code version, so a prompt edit misses every
      stored extraction.
    - `manifest_metadata()` (asked after extraction, so it may report what it saw): content-
      safe facts for the lane's entry in the manifest (hashes, counts; never prompt text).
    - `reference_fingerprint(slot, reference, chunk)`: what of a bound reference the chunk's
      extraction consumes, mixed into its checkpoint fingerprint.

    Subclass `BaseExtractor` for the defaults (`{}`, `{}`, the reference's whole digest)."""

    def extract(self, request: ExtractRequest) -> ModuleOutput: ...

    def fingerprint_material(self) -> Mapping[str, object]: ...

    def manifest_metadata(self) -> Mapping[str, object]: ...

    def reference_fingerprint(
        self, slot: str, reference: PreparedReference, chunk: Chunk
    ) -> str: ...


class BaseExtractor:
    """The documented defaults of the extractor hooks: nothing to add to fingerprints (the
    key, version and options already determine the output) and no manifest metadata."""

    def fingerprint_material(self) -> Mapping[str, object]:
        return {}

    def manifest_metadata(self) -> Mapping[str, object]:
        return {}

    def reference_fingerprint(self, slot: str, reference: PreparedReference, chunk: Chunk) -> str:
        """What of `reference` (bound to `slot`) the extraction of `chunk` consumes, as a
        string mixed into the chunk's checkpoint fingerprint. Default: the whole digest (any
        change asks every chunk again). An extractor that reads only part of a reference
        (names, or the chunk's own record) returns a digest of that part, so an unrelated
        upstream edit reuses its stored extractions. The lane runner asks it when present."""
        return reference.digest


class Merger(Protocol):
    """A `merge` module: one output from the accepted extracts, in chunk order. A function of
    its inputs and options only: it has no fingerprint material and no manifest metadata."""

    def merge(self, request: MergeRequest) -> ModuleOutput: ...


class Normalizer(Protocol):
    """A `normalize` module: the lane's final artifact from the merged output. Like a merger,
    a function of its inputs and options only."""

    def normalize(self, request: NormalizeRequest) -> ModuleOutput: ...


StageModule = Chunker | Extractor | Merger | Normalizer | None
"""What a module factory returns (`None` for the `json` output spec, which builds nothing)."""
