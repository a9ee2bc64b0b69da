"""The bundle's own documents as frozen pydantic models: `index.json`, `manifest.json`,
`warnings.json`, `rejected.json`, and the identities of the chunk map and evidence context.

These models are the single source of the documents' shape: the assembly builds them, the
publish boundary validates the encoded bytes against them, their JSON Schemas are generated
from them into `schemas/` (see `bundle_schemas.py`), and every reader (the bundle check, the run
summary, the bundle asset's metadata) reads the published files back through them. Fields are
declared in the order they are published (a pydantic model dumps in declaration order), so
the JSON stays byte-stable. None of them carries transcript text, prompts, responses,
credentials or filesystem paths."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, model_serializer
from pydantic.config import JsonDict
from pydantic.json_schema import JsonSchemaMode, SkipJsonSchema

from notarius_dagster.engine.bundle import JSON_MEDIA_TYPE
from notarius_dagster.engine.evidence import (
    EVIDENCE_KIND,
    EVIDENCE_SCHEMA_ID,
    EVIDENCE_SCHEMA_NAME,
    EVIDENCE_SCHEMA_VERSION,
    EvidenceContext,
)
from notarius_dagster.engine.models import ChunkMapView, Frozen, Rejection, RunWarning

BUNDLE_VERSION: Final = "1"
MANIFEST_VERSION: Final = "1"

INDEX_FILE = "index.json"
MANIFEST_FILE = "manifest.json"
WARNINGS_FILE = "warnings.json"
REJECTED_FILE = "rejected.json"
CHUNK_MAP_FILE = "chunk-map.json"
EVIDENCE_FILE = "evidence-context.json"

ValidationStatus = Literal["approved", "rejected"]


# --- identities ------------------------------------------------------------------------------


class DocumentDescriptor(Frozen):
    """What `index.json` says about a non-lane document: its file and the identities a
    consumer needs to choose a parser."""

    file: str
    kind: str
    media_type: str
    schema_id: str
    schema_name: str
    schema_version: str


CHUNK_MAP_DESCRIPTOR = DocumentDescriptor(
    file=CHUNK_MAP_FILE,
    kind="source/chunk-map",
    media_type=JSON_MEDIA_TYPE,
    schema_id="notarius.source.chunk_map",
    schema_name="notarius_source_chunk_map_v1",
    schema_version="v1",
)
EVIDENCE_DESCRIPTOR = DocumentDescriptor(
    file=EVIDENCE_FILE,
    kind=EVIDENCE_KIND,
    media_type=JSON_MEDIA_TYPE,
    schema_id=EVIDENCE_SCHEMA_ID,
    schema_name=EVIDENCE_SCHEMA_NAME,
    schema_version=EVIDENCE_SCHEMA_VERSION,
)


# --- index.json ------------------------------------------------------------------------------


class PipelineIdentity(Frozen):
    """The pipeline profile and the digest of its resolved form."""

    id: str
    profile: str = Field(description="the profile's file name, never its path")
    digest: str


class BundleFiles(Frozen):
    """The file names of the documents every bundle has."""

    manifest: str
    warnings: str
    rejected: str


class LaneDescriptor(Frozen):
    """One accepted lane output: its file, kind and schema identities, and its record count."""

    lane_id: str
    file: str
    kind: str
    media_type: str
    schema_id: str
    schema_name: str
    schema_version: str
    records: int = Field(ge=0, description="the number of items of the lane's list")


def _absent_when_unset(schema: JsonDict) -> None:
    """An optional descriptor is absent from the published index, never null: its schema
    states no default."""
    schema.pop("default", None)


class Index(Frozen):
    """`index.json`: what the bundle holds; a consumer finds every other file through it.
    `chunk_map` is absent when chunking was rejected, `evidence_context` unless evidence
    publication is enabled (absent, never null)."""

    bundle_version: Literal["1"]
    session_id: str
    run_id: str
    pipeline: PipelineIdentity
    source_digest: str
    validation_status: ValidationStatus
    files: BundleFiles
    lanes: tuple[LaneDescriptor, ...] = Field(description="accepted lane outputs, by lane id")
    chunk_map: DocumentDescriptor | SkipJsonSchema[None] = Field(
        default=None, json_schema_extra=_absent_when_unset
    )
    evidence_context: DocumentDescriptor | SkipJsonSchema[None] = Field(
        default=None, json_schema_extra=_absent_when_unset
    )

    @model_serializer(mode="wrap")
    def _omit_absent_descriptors(self, handler: Any) -> dict[str, object]:
        data: dict[str, object] = handler(self)
        for key in ("chunk_map", "evidence_context"):
            if data.get(key) is None:
                data.pop(key, None)
        return data

    def listed_files(self) -> list[str]:
        """Every file the index names, in publication order (without `index.json`)."""
        listed = [self.files.manifest, self.files.warnings, self.files.rejected]
        listed.extend(d.file for d in (self.chunk_map, self.evidence_context) if d is not None)
        listed.extend(lane.file for lane in self.lanes)
        return listed


# --- manifest.json ---------------------------------------------------------------------------


class ChunkerSummary(Frozen):
    key: str
    version: str
    validators: tuple[str, ...]
    validators_source: Literal["default", "override"]
    attempts: int = Field(ge=0)


class ManifestModules(Frozen):
    input: str = Field(description="the input format (or the detected media type)")
    chunker: ChunkerSummary
    output: str


class SourceSummary(Frozen):
    source_id: str
    digest: str
    media_type: str
    units: int = Field(ge=0)


class LLMProfileSummary(Frozen):
    """The public part of the LLM profile: never keys nor the variable that holds one."""

    name: str
    model: str
    api_base: str | None
    temperature: float
    max_tokens: int
    timeout_s: float
    retries: int
    max_concurrency: int
    server: str


class ManifestReferences(Frozen):
    chunk: tuple[dict[str, object], ...] = Field(
        description="provenance of the chunker's reference files (file names, never paths)"
    )


class StageModule(Frozen):
    key: str
    version: str


class ValidatorChain(Frozen):
    chain: tuple[str, ...]
    source: Literal["default", "override"]


class ChunkAccounting(Frozen):
    total: int = Field(ge=0)
    called_model: int = Field(ge=0)
    reused: int = Field(ge=0, description="reused from a checkpoint")
    skipped: int = Field(ge=0, description="skipped deterministically")
    rejected: int = Field(ge=0)


class LaneUsage(Frozen):
    calls: int = Field(ge=0)
    prompt_tokens: int = Field(ge=0)
    completion_tokens: int = Field(ge=0)
    cached_prompt_tokens: int = Field(
        default=0, ge=0, description="prompt tokens the provider served from its prompt cache"
    )
    cost_usd: float | None = Field(
        description="USD; null when a call could not be priced (see unpriced_calls)"
    )
    unpriced_calls: int = Field(
        default=0,
        ge=0,
        description="calls with no price (not in litellm's map, none in the profile)",
    )
    structured_output_rungs: dict[str, int]
    structured_output_stepdowns: dict[str, int] = Field(
        default_factory=dict,
        description="requests that stepped down the ladder, by the rung the provider refused",
    )


class ManifestLane(Frozen):
    """One lane of the run (`artifact_lanes[]`): modules, validators, outcome, accounting."""

    lane_id: str
    kind: str
    schema_id: str
    schema_version: str
    status: Literal["accepted", "rejected"]
    modules: dict[str, StageModule]
    validators: dict[str, ValidatorChain]
    depends_on: tuple[str, ...]
    records: int = Field(ge=0)
    records_rejected: int = Field(
        default=0, ge=0, description="records dropped by a record validator (e.g. `support`)"
    )
    chunks: ChunkAccounting
    llm: LaneUsage
    warnings: int = Field(ge=0)
    rejections: int = Field(ge=0)
    metadata: dict[str, object] = Field(description="module metadata (prompt digests, ...)")
    references: tuple[dict[str, object], ...] = Field(description="provenance of its references")


class ManifestOutput(Frozen):
    """One published lane file."""

    lane_id: str
    normalizer: str
    media_type: str
    source_id: str
    schema_id: str
    file: str


class Totals(Frozen):
    llm_calls: int = Field(ge=0)
    prompt_tokens: int = Field(ge=0)
    completion_tokens: int = Field(ge=0)
    cached_prompt_tokens: int = Field(
        default=0, ge=0, description="prompt tokens the provider served from its prompt cache"
    )
    cost_usd: float | None = Field(
        description="USD; null when a call could not be priced (see unpriced_calls)"
    )
    unpriced_calls: int = Field(
        default=0,
        ge=0,
        description="calls with no price (not in litellm's map, none in the profile)",
    )
    structured_output_rungs: dict[str, int]
    structured_output_stepdowns: dict[str, int] = Field(
        default_factory=dict,
        description="requests that stepped down the ladder, by the rung the provider refused",
    )


class Timing(Frozen):
    started_at: str
    completed_at: str
    wall_time_s: float


class Manifest(Frozen):
    """`manifest.json`: what ran, on what, with which outcome, and what it cost."""

    manifest_version: Literal["1"]
    run_id: str
    session_id: str
    status: Literal["succeeded"]
    validation_status: ValidationStatus
    pipeline: PipelineIdentity
    modules: ManifestModules
    source: SourceSummary
    chunks: int = Field(ge=0)
    llm_profile: LLMProfileSummary
    references: ManifestReferences
    artifact_lanes: tuple[ManifestLane, ...]
    outputs: tuple[ManifestOutput, ...]
    rejected: tuple[Rejection, ...] = Field(description="as in rejected.json")
    warnings: int = Field(ge=0, description="how many entries warnings.json has")
    evidence_context: bool = Field(description="true when evidence-context.json is published")
    totals: Totals
    timing: Timing


# --- warnings.json, rejected.json -----------------------------------------------------------


class WarningList(RootModel[tuple[RunWarning, ...]]):
    """`warnings.json`: warnings from attempts whose output was used."""

    model_config = ConfigDict(frozen=True)


class RejectionList(RootModel[tuple[Rejection, ...]]):
    """`rejected.json`: outputs a validator refused (not fatal)."""

    model_config = ConfigDict(frozen=True)


# --- the registry of typed documents ---------------------------------------------------------


@dataclass(frozen=True)
class DocumentType:
    """A bundle document with a model: its schema identity and how its schema is generated
    (the evidence context publishes its defaults, so its schema is the serialization one)."""

    model: type[BaseModel]
    schema_id: str
    schema_name: str
    schema_mode: JsonSchemaMode = "validation"

    def json_schema(self) -> dict[str, object]:
        schema = self.model.model_json_schema(mode=self.schema_mode)
        schema["$id"] = self.schema_id
        schema["title"] = self.schema_name
        return schema


INDEX_TYPE = DocumentType(Index, "notarius.bundle.index", "notarius_bundle_index_v1")
MANIFEST_TYPE = DocumentType(Manifest, "notarius.bundle.manifest", "notarius_bundle_manifest_v1")
WARNINGS_TYPE = DocumentType(WarningList, "notarius.bundle.warnings", "notarius_bundle_warnings_v1")
REJECTED_TYPE = DocumentType(
    RejectionList, "notarius.bundle.rejected", "notarius_bundle_rejected_v1"
)
CHUNK_MAP_TYPE = DocumentType(
    ChunkMapView, CHUNK_MAP_DESCRIPTOR.schema_id, CHUNK_MAP_DESCRIPTOR.schema_name
)
EVIDENCE_TYPE = DocumentType(
    EvidenceContext,
    EVIDENCE_DESCRIPTOR.schema_id,
    EVIDENCE_DESCRIPTOR.schema_name,
    schema_mode="serialization",
)
DOCUMENT_TYPES: tuple[DocumentType, ...] = (
    INDEX_TYPE,
    MANIFEST_TYPE,
    WARNINGS_TYPE,
    REJECTED_TYPE,
    CHUNK_MAP_TYPE,
    EVIDENCE_TYPE,
)


# --- reading a published bundle --------------------------------------------------------------


def read_index(bundle: Path) -> Index:
    """The published `index.json` of a bundle folder, as its model."""
    return Index.model_validate_json((Path(bundle) / INDEX_FILE).read_bytes())


def read_manifest(bundle: Path) -> Manifest:
    """The published `manifest.json` of a bundle folder, as its model."""
    return Manifest.model_validate_json((Path(bundle) / MANIFEST_FILE).read_bytes())
