"""The typed inputs of the report: a reader's view of the published bundle documents.

Lane files are read with the lanes' own models (the registry's `LaneSpec.list_model`, the
schema's source): their records reach the renderer as instances of the lane's record model,
with the lane's spec saying how to show them (`LaneSpec.report_table`). The other documents
have consumer-side shapes here (the evidence context, warnings, rejections, the parts of the
index and manifest the page shows), blind to keys the report does not use, as bundle.md asks
of every consumer (a warning, whose fields are all the report shows, is the engine's model read
leniently). Every string here is untrusted text to the renderer, whatever file it came from."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, InstanceOf, JsonValue

from notarius_dagster.engine.lanes import LaneSpec
from notarius_dagster.engine.models import RunWarning, SourceRef


class View(BaseModel):
    """Frozen, and blind to keys the report does not use (newer manifests add keys)."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)


SUPPORTED_SCHEMA_VERSION = "v1"


class EvidenceUnit(View):
    unit_id: int
    kind: str = "utterance"
    text: str
    metadata: dict[str, JsonValue] = {}


class EvidenceReference(View):
    source_ref: SourceRef
    lanes: tuple[str, ...]


class EvidenceWindow(View):
    start_unit_id: int
    end_unit_id: int
    references: tuple[EvidenceReference, ...]
    units: tuple[EvidenceUnit, ...]


class Evidence(View):
    window_units: int
    lanes: tuple[str, ...]
    contexts: tuple[EvidenceWindow, ...]


class WarningEntry(RunWarning):
    """The engine's warning (`RunWarning`: code, message, lane, chunk) as a reader takes it:
    blind to keys added later, and any stage name, not only the stages this version knows."""

    model_config = View.model_config
    stage: str  # type: ignore[assignment]  # wider than the engine's Literal, on purpose


class RejectionEntry(View):
    stage: str
    lane: str | None = None
    module: str | None = None
    chunk_id: str | None = None
    validator: str
    message: str
    attempts: int | None = None


class LaneSummary(View):
    """One configured lane as the manifest records it (accepted or not)."""

    lane_id: str
    kind: str
    status: str
    records: int = 0
    warnings: int = 0
    rejections: int = 0


class LaneOutput(View):
    """One accepted lane file. `spec` is the registered lane of its kind and `items` its
    records, read with that lane's record model, when the registry has the kind at the file's
    schema version; else both are None (the page lists the file without its records)."""

    model_config = ConfigDict(frozen=True, extra="ignore", arbitrary_types_allowed=True)

    lane_id: str
    kind: str
    schema_version: str
    records: int
    spec: InstanceOf[LaneSpec] | None = None
    items: tuple[InstanceOf[BaseModel], ...] | None = None

    def record_id(self, position: int) -> str:
        """The id of the record at `position` (its position when it has none)."""
        assert self.spec is not None and self.items is not None
        value = getattr(self.items[position], self.spec.id_field, None)
        return str(value) if value is not None else f"{self.lane_id}-{position + 1}"

    def refs(self, position: int) -> tuple[SourceRef, ...]:
        """The citations of the record at `position` (a single reference as one)."""
        assert self.spec is not None and self.items is not None
        value = getattr(self.items[position], self.spec.refs_field)
        return tuple(value) if isinstance(value, list | tuple) else (value,)


class ReportInputs(View):
    """Everything the page shows, read from one bundle version."""

    model_config = LaneOutput.model_config

    session_id: str
    run_id: str
    pipeline_id: str
    profile: str
    pipeline_digest: str
    status: str
    validation_status: str
    source_units: int
    chunks: int
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    lanes: tuple[LaneSummary, ...] = ()
    outputs: tuple[LaneOutput, ...] = ()
    registered: tuple[InstanceOf[LaneSpec], ...] = ()
    """Every lane of the registry the page was made with: each has a section, present or
    not (`LaneSpec.report_table`)."""
    unit_order: tuple[int, ...] = ()
    evidence: Evidence | None = None
    warnings: tuple[WarningEntry, ...] = ()
    rejections: tuple[RejectionEntry, ...] = ()
