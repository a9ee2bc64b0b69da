"""The session's steps, one function per asset of the session graph:

    load_source_document  the stored transcript parsed into a source document
    chunk_document        the chunk stage with the chunker's references prepared
    run_lane_step         one lane over the accepted chunks, with its references prepared

Each step first applies the run's runtime references (`RuntimeOverrides`) through
`RunPipeline.for_run`, the one place they are applied, whether they come from
`notarius run --reference/--unbind` or from a run launched in the UI: both pass them as the same
run config. The Dagster layer (`assets/factory.py`) calls a step, turns its errors into a
failure or a retry, and records metadata; nothing here knows Dagster.

External reference files: `load_source_document` prepares each one and discards the result, so
a missing, oversized, undecodable or malformed file fails before the transcript is parsed and
before any model call (docs/internals.md, "References"). The step that uses a file (the chunk
step or a lane) prepares it again and uses that: each file is read twice per run, once to
validate it early and once by its user, whose digest is what the manifest records."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field

from notarius_dagster.engine.checkpoints import CheckpointStore
from notarius_dagster.engine.chunk_stage import ChunkResult, run_chunk_stage
from notarius_dagster.engine.errors import InvalidReferenceError, NotariusError
from notarius_dagster.engine.inputs import parse_transcript
from notarius_dagster.engine.lane_runner import LaneDeadline, LaneResult, LaneStats, run_lane
from notarius_dagster.engine.limits import check_budget, estimate_run
from notarius_dagster.engine.llm_contract import StructuredClient
from notarius_dagster.engine.models import Chunk, Frozen, SourceDocument
from notarius_dagster.engine.references import (
    prepare_file,
    prepare_lane_references,
)
from notarius_dagster.engine.registry import LaneRegistry
from notarius_dagster.engine.resolution import (
    ResolvedBinding,
    ResolvedLane,
    ResolvedPipeline,
    RuntimeBinding,
)
from notarius_dagster.engine.transcripts import original_name, read_transcript, stored_transcript

Resolve = Callable[[Sequence[RuntimeBinding], Sequence[str]], ResolvedPipeline]
"""Resolves the code location's profile again with runtime references and unbinds."""

Progress = Callable[[str], None]
"""Receives one progress line at a time (the Dagster layer writes them to the run's log)."""

OpenClient = Callable[[], AbstractContextManager[StructuredClient]]
"""Opens the LLM client for a lane (and, for the offline model, its server) around the work."""


class RuntimeOverrides(Frozen):
    """One run's runtime references: `references` maps a selector (SLOT, chunk.SLOT,
    LANE.extract.SLOT, ...) to a file path (absolute, or relative to the working directory of
    the process that runs the step); `unbind` lists selectors whose optional binding is
    removed."""

    references: dict[str, str] = Field(default_factory=dict)
    unbind: tuple[str, ...] = ()
    max_calls: int | None = Field(default=None, gt=0)
    """`notarius run --max-calls`: replaces the profile's `pipeline.budget.max_calls`."""

    def active(self) -> bool:
        """Whether the profile must be resolved again (the call budget needs no resolution)."""
        return bool(self.references or self.unbind)

    def bindings(self) -> list[RuntimeBinding]:
        return [RuntimeBinding(selector=k, path=v) for k, v in sorted(self.references.items())]


NO_OVERRIDES = RuntimeOverrides()


@dataclass(frozen=True)
class RunPipeline:
    """The pipeline the asset graph is built from (the profile alone), the lane registry it
    was resolved against, and how to resolve the profile again for a run with runtime
    references."""

    pipeline: ResolvedPipeline
    registry: LaneRegistry
    resolve: Resolve | None = None

    def for_run(self, overrides: RuntimeOverrides = NO_OVERRIDES) -> ResolvedPipeline:
        """The pipeline one run uses. With overrides the profile is resolved again with them,
        by the same rules as everywhere (flat names only when one target declares the slot,
        required slots stay bound); errors say `runtime references: ...` and name the profile
        and selector. A runtime binding is always a file, so a run can drop a lane dependency
        (the graph keeps the edge; the lane ignores that value) but never add one."""
        if not overrides.active():
            return self.pipeline
        if self.resolve is None:
            raise InvalidReferenceError("runtime references: this code location cannot apply them")
        try:
            return self.resolve(overrides.bindings(), list(overrides.unbind))
        except NotariusError as exc:
            raise InvalidReferenceError(f"runtime references: {exc}") from None


def file_bindings(pipeline: ResolvedPipeline) -> list[ResolvedBinding]:
    """Every external file the pipeline binds: the chunker's, then each lane stage's."""
    stages = (pipeline.chunk, *[stage for lane in pipeline.lanes for stage in lane.stages()])
    return [b for stage in stages for b in stage.references if b.origin == "file"]


def load_source_document(
    plan: RunPipeline,
    overrides: RuntimeOverrides = NO_OVERRIDES,
    *,
    transcripts: Path,
    session_id: str,
) -> SourceDocument:
    """The session's stored transcript (in the transcript store `transcripts`) parsed into a
    source document, after every external reference file of the run was prepared (read,
    decoded, and validated when structured) and discarded: a bad file fails before the
    transcript is parsed and before any model call, as the reference contract asks."""
    pipeline = plan.for_run(overrides)
    for binding in file_bindings(pipeline):
        prepare_file(binding, plan.registry.kinds())
    path = stored_transcript(transcripts, session_id)
    # Errors name the user's file, not the store's copy (same extension, so the same format).
    name = original_name(transcripts, session_id)
    shown = name if name and Path(name).suffix.lower() == path.suffix.lower() else path.name
    # The one reader: a copy bigger than this profile's limit (stored under another profile's)
    # is refused with its real size, never read whole.
    raw = read_transcript(path, name=shown, max_bytes=pipeline.limits.max_transcript_bytes)
    return parse_transcript(
        raw,
        file_name=shown,
        source_id=session_id,
        input_format=pipeline.input_format,
        limits=pipeline.limits,
    )


def chunk_document(
    plan: RunPipeline,
    document: SourceDocument,
    overrides: RuntimeOverrides = NO_OVERRIDES,
    *,
    session_id: str,
) -> ChunkResult:
    """Chunk the document with the run's chunker; its reference files are prepared here (the
    chunker cannot consume a lane artifact) and their provenance and warnings recorded in the
    result."""
    pipeline = plan.for_run(overrides)
    stage = pipeline.chunk
    prepared = [prepare_file(b, plan.registry.kinds()) for b in stage.references]
    refs = {ref.slot: ref for ref, _ in prepared}
    # No chunker shipped today calls a model; an LLM-backed one would take a client here.
    result = run_chunk_stage(
        stage, document, session_id=session_id, references=refs, registry=plan.registry
    )
    if result.chunk_map is not None:
        check_run_budget(pipeline, result.chunk_map.chunks, overrides)
    return result.model_copy(
        update={
            "references": tuple(dict(ref.provenance) for ref in refs.values()),
            "warnings": tuple(w for _, warns in prepared for w in warns),
        }
    )


def check_run_budget(
    pipeline: ResolvedPipeline, chunks: Sequence[Chunk], overrides: RuntimeOverrides
) -> None:
    """Refuse the run (BudgetError) when one call per chunk per lane, or the prompt tokens
    that estimates, exceeds its budget: the profile's `pipeline.budget`, with `max_calls`
    replaced by `notarius run --max-calls`. Checked after chunking, before the first lane, so
    the UI, the sensor's runs and the CLI all stop here, before any model call."""
    budget = pipeline.budget
    source = "the profile's pipeline.budget"
    if overrides.max_calls is not None:
        budget = budget.model_copy(update={"max_calls": overrides.max_calls})
        source = f"--max-calls {overrides.max_calls} with the profile's pipeline.budget"
    estimate = estimate_run([len(c.content) for c in chunks], lanes=len(pipeline.lanes))
    check_budget(estimate, budget, source=source)


def skipped_lane_result(lane: ResolvedLane) -> LaneResult:
    """What a lane yields when chunking was rejected: nothing ran, so it is rejected too."""
    return LaneResult(
        lane_id=lane.id,
        kind=lane.kind,
        status="rejected",
        payload=None,
        stats=LaneStats(),
        metadata={"skipped": "chunking was rejected"},
    )


def run_lane_step(
    plan: RunPipeline,
    lane_id: str,
    overrides: RuntimeOverrides = NO_OVERRIDES,
    *,
    document: SourceDocument,
    chunks: ChunkResult,
    upstream: Mapping[str, LaneResult],
    open_client: OpenClient,
    session_id: str,
    llm_fingerprint: str,
    max_concurrency: int,
    checkpoints: CheckpointStore | None,
    progress: Progress | None = None,
    deadline: LaneDeadline | None = None,
) -> LaneResult:
    """Run one lane of the run's pipeline. `upstream` holds the results of the lanes it
    depends on in the asset graph, by lane id. Its references (files and other lanes'
    artifacts) are prepared once, before the client opens; their warnings come first in the
    result and their provenance goes with it. Errors are the engine's (NotariusError, LLMError)
    and the client's transient error, past its retries, unchanged."""
    lane = plan.for_run(overrides).lane(lane_id)
    if chunks.chunk_map is None:
        return skipped_lane_result(lane)
    payloads = {dep: upstream[dep].payload for dep in lane.depends_on}
    refs, ref_warnings, provenance = prepare_lane_references(
        lane.stages(), payloads, plan.registry.kinds()
    )
    with open_client() as client:
        result = run_lane(
            lane,
            document=document,
            chunks=chunks.chunk_map.chunks,
            references=refs,
            client=client,
            session_id=session_id,
            llm_fingerprint=llm_fingerprint,
            max_concurrency=max_concurrency,
            checkpoints=checkpoints,
            progress=progress,
            registry=plan.registry,
            deadline=deadline,
        )
    return result.model_copy(
        update={
            "warnings": tuple(ref_warnings) + result.warnings,
            "references": tuple(provenance),
        }
    )
