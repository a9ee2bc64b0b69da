"""The session's steps, one function per asset of the session graph:

    load_source_document  the stored transcript parsed into a source document
    chunk_document        the chunk stage with the chunker's references prepared
    run_lane_step         one lane over the accepted chunks, with its references prepared
    run_lane_level        the lanes of one dependency level (`lane_levels`) at the same time

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

import queue
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures import wait as wait_for
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field

from notarius_dagster.engine.checkpoints import CheckpointStore
from notarius_dagster.engine.chunk_stage import ChunkResult, run_chunk_stage
from notarius_dagster.engine.errors import InvalidReferenceError, NotariusError
from notarius_dagster.engine.inputs import parse_transcript
from notarius_dagster.engine.lane_runner import (
    DaemonPool,
    LaneDeadline,
    LaneResult,
    LaneStats,
    run_lane,
)
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


def lane_levels(pipeline: ResolvedPipeline) -> list[list[ResolvedLane]]:
    """The pipeline's lanes by dependency level, each in the pipeline's lane order: level 0 holds
    the lanes that consume no other lane's artifact, level n those whose deepest producer is on
    level n - 1. The lanes of one level never depend on each other, so they can run at the same
    time (`run_lane_level`); a level starts when the one before it has ended."""
    by_id = {lane.id: lane for lane in pipeline.lanes}
    depth: dict[str, int] = {}

    def level(lane_id: str) -> int:
        if lane_id not in depth:
            deps = [d for d in by_id[lane_id].depends_on if d in by_id]
            depth[lane_id] = 1 + max((level(d) for d in deps), default=-1)
        return depth[lane_id]

    levels: list[list[ResolvedLane]] = []
    for lane in pipeline.lanes:
        n = level(lane.id)
        while len(levels) <= n:
            levels.append([])
        levels[n].append(lane)
    return levels


@dataclass(frozen=True)
class LaneOutcome:
    """One lane of a level: its result, or the error that ended it (whatever `run_lane_step`
    raised, unchanged, for the caller to turn into a failure or a retry)."""

    lane_id: str
    result: LaneResult | None
    error: BaseException | None


PROGRESS_POLL_S = 0.2
"""How often the level's calling thread hands on progress lines while its lanes run."""


def run_lane_level(
    plan: RunPipeline,
    lane_ids: Sequence[str],
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
) -> list[LaneOutcome]:
    """Run several lanes that do not depend on each other (one level of `lane_levels`) at the
    same time, one thread each, each with its own `max_concurrency` calls in flight, and
    return one outcome per lane in the order given. A lane that fails does not stop the
    others: its error is its outcome.

    Why threads in one step: a lane spends its time waiting on the model, so lanes overlap in
    one process as well as in several, without a process (and an interpreter's imports) per
    lane. `progress` is called on the calling thread only (the lanes' lines are queued and
    handed on from here), because the caller's logging (Dagster's) is not safe from several
    threads. The threads are daemon threads (`DaemonPool`): a lane abandoned at its deadline
    never keeps the process alive."""
    lines: queue.SimpleQueue[str] = queue.SimpleQueue()

    def run_one(lane_id: str) -> LaneResult:
        return run_lane_step(
            plan,
            lane_id,
            overrides,
            document=document,
            chunks=chunks,
            upstream=upstream,
            open_client=open_client,
            session_id=session_id,
            llm_fingerprint=llm_fingerprint,
            max_concurrency=max_concurrency,
            checkpoints=checkpoints,
            progress=lines.put if progress is not None else None,
            deadline=deadline,
        )

    def hand_on() -> None:
        while progress is not None:
            try:
                progress(lines.get_nowait())
            except queue.Empty:
                return

    pool = DaemonPool(max(1, len(lane_ids)), name="level")
    futures: list[Future[LaneResult]] = [pool.submit(run_one, lane_id) for lane_id in lane_ids]
    try:
        while wait_for(futures, timeout=PROGRESS_POLL_S).not_done:
            hand_on()
        hand_on()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    outcomes: list[LaneOutcome] = []
    for lane_id, future in zip(lane_ids, futures, strict=True):
        error = future.exception()
        result = None if error is not None else future.result()
        outcomes.append(LaneOutcome(lane_id=lane_id, result=result, error=error))
    return outcomes
