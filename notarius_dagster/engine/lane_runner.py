"""Lane execution: extract one output per accepted chunk (retries per binding, concurrently up
to the LLM profile's limit, stored extractions reused), runner-owned provenance, validation,
merge, normalize. A validator rejection is recorded and not fatal; warnings come only from
attempts whose output is used.

`run_lane` reads as its steps: build the modules, extract every chunk, collect the accepted
extracts, merge, normalize, and assemble the result."""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal, cast

from pydantic import BaseModel, Field, JsonValue, PrivateAttr, ValidationError

from notarius_dagster.engine.artifact_kinds import ArtifactKind
from notarius_dagster.engine.checkpoints import (
    CheckpointStore,
    RejectionCheckpoints,
    extraction_fingerprint,
)
from notarius_dagster.engine.contracts import (
    Extractor,
    ExtractRequest,
    Merger,
    MergeRequest,
    ModuleOutput,
    Normalizer,
    NormalizeRequest,
    PreparedReference,
    RunContext,
)
from notarius_dagster.engine.errors import (
    LaneError,
    LLMError,
    LLMUnavailableError,
    NotariusError,
    TransientLLMError,
)
from notarius_dagster.engine.failure_causes import cause_of
from notarius_dagster.engine.llm_contract import LLMUsage, StructuredClient
from notarius_dagster.engine.models import (
    Chunk,
    Frozen,
    Rejection,
    RunWarning,
    SourceDocument,
)
from notarius_dagster.engine.registry import LaneRegistry
from notarius_dagster.engine.resolution import ResolvedLane, ResolvedStage
from notarius_dagster.engine.support import KnownNames, SpeakerNames
from notarius_dagster.engine.validators import (
    ValidationContext,
    Validator,
    record_verdicts,
    run_chain,
    tighten_supported,
)

Progress = Callable[[str], None]
ChunkStatus = Literal["llm", "reused", "skipped", "rejected"]


class LaneDeadline(Frozen):
    """When a lane must be done: `at` is a wall-clock time (`time.time()`, so it holds across
    the processes of Dagster step retries); `seconds` is the configured deadline, for messages."""

    at: float
    seconds: float

    @classmethod
    def starting_at(cls, started: float, seconds: float) -> LaneDeadline:
        return cls(at=started + seconds, seconds=seconds)

    def passed(self) -> bool:
        return time.time() >= self.at

    def remaining(self) -> float:
        return max(0.0, self.at - time.time())

    def error(
        self, lane_id: str, done: int = 0, total: int = 0, cause: str = ""
    ) -> LaneDeadlineError:
        counts = f" with {done} of {total} chunks done" if total else ""
        return LaneDeadlineError(
            f"lane {lane_id!r} stopped at its deadline of {self.seconds:g} s (LLM profile "
            f"lane_deadline_s){counts}; no new model call starts after it and calls in "
            "flight are abandoned. The provider may be hanging; if the lane is just long, "
            "raise lane_deadline_s or max_concurrency" + (f". Last error: {cause}" if cause else "")
        )


class LaneDeadlineError(LaneError):
    """The lane reached its deadline; never retried (a retry would only multiply it)."""


class LaneStats(Frozen):
    chunks: int = 0
    called_model: int = 0
    reused: int = 0
    skipped: int = 0
    rejected: int = 0
    records: int = 0
    records_rejected: int = 0
    usage: LLMUsage = Field(default_factory=LLMUsage)


class LaneResult(Frozen):
    """A lane's outcome: the accepted artifact (or None), what was rejected and warned, and
    its accounting. This is the value of a lane asset.

    The artifact is typed: the lane's list model (`LaneSpec.list_model`) holding instances of
    its record model, made once after normalize (`with_artifact`). Consumers read it with
    `artifact(kind)` / `records(kind)`. `payload` is the same artifact as JSON
    (`model_dump(mode="json", by_alias=True)`, see `published_json`), the form the
    asset-value store keeps and the bundle publishes. A result read back from the store
    (another step process) holds only `payload`: the first `artifact(kind)` validates it
    against the kind's model once and keeps the typed value, so no consumer parses
    dictionaries of its own."""

    lane_id: str
    kind: str
    status: Literal["accepted", "rejected"]
    payload: dict[str, JsonValue] | None
    rejections: tuple[Rejection, ...] = ()
    warnings: tuple[RunWarning, ...] = ()
    stats: LaneStats = Field(default_factory=LaneStats)
    chunk_status: dict[str, ChunkStatus] = Field(default_factory=dict)
    metadata: dict[str, object] = Field(default_factory=dict)
    references: tuple[dict[str, object], ...] = ()
    _typed: tuple[object, BaseModel] | None = PrivateAttr(default=None)

    def with_artifact(
        self, artifact: BaseModel, written: Mapping[str, object] | None = None
    ) -> LaneResult:
        """This result carrying `artifact` (typed) and its JSON form as `payload`
        (`published_json`: in the key order of `written`, the payload the normalizer wrote,
        when that holds exactly the artifact's values)."""
        payload = published_json(artifact, written)
        typed = self.model_copy(update={"payload": payload})
        typed._typed = (payload, artifact)
        return typed

    def artifact(self, kind: ArtifactKind) -> BaseModel | None:
        """The accepted artifact as `kind`'s model (None when the lane published nothing).
        Raises `pydantic.ValidationError` when a stored payload is not one (a value written
        by other code): the message carries paths and input values, so callers report only
        its paths."""
        if self.payload is None:
            return None
        self._typed = kind.parse_held(self.payload, self._typed)
        return self._typed[1]

    def records(self, kind: ArtifactKind) -> tuple[BaseModel, ...]:
        """The accepted artifact's records (instances of the lane's record model), in order."""
        artifact = self.artifact(kind)
        return () if artifact is None else kind.records(artifact)


def published_json(
    artifact: BaseModel, written: Mapping[str, object] | None = None
) -> dict[str, JsonValue]:
    """An artifact as published: its JSON values under the record model's aliases (`from`).
    When `written` (the normalizer's payload) equals them, it is returned as it is, so the
    published bytes keep the key order the lane wrote (a record's citations last) and do not
    change with the model's field order; anything the model added or changed (a default, a
    coerced value) publishes the model's values."""
    dumped: dict[str, JsonValue] = artifact.model_dump(mode="json", by_alias=True)
    if written is not None and written == dumped:
        return cast(dict[str, JsonValue], dict(written))  # equal to JSON values: JSON values
    return dumped


def run_lane(
    lane: ResolvedLane,
    *,
    document: SourceDocument,
    chunks: Sequence[Chunk],
    references: Mapping[str, Mapping[str, PreparedReference]],
    client: StructuredClient | None,
    session_id: str,
    llm_fingerprint: str,
    max_concurrency: int = 1,
    checkpoints: CheckpointStore | None = None,
    progress: Progress | None = None,
    registry: LaneRegistry,
    deadline: LaneDeadline | None = None,
) -> LaneResult:
    """Run one lane over the accepted chunks. `references` maps stage name to its prepared
    references by slot. Raises LaneError for a framework failure after its retries; an LLM
    error that is transient or an unavailable tier escapes unchanged, unless `deadline` has
    passed (then LaneDeadlineError, as when the deadline arrives while chunks are running)."""
    spec = registry.lane(lane.id)
    run = _LaneRun(
        lane,
        spec.artifact_kind,
        document,
        references,
        client,
        session_id,
        progress,
        spec.rules(),
        registry.speaker_names,
        registry.known_names,
    )
    modules = _Modules(spec.extractor(), spec.merger(), spec.normalizer())
    extracted = _extract_all(
        run,
        modules.extractor,
        chunks,
        llm_fingerprint=llm_fingerprint,
        checkpoints=checkpoints,
        max_concurrency=max_concurrency,
        deadline=deadline,
    )
    collected = _collect(extracted)
    merged = _whole_lane_stage(
        run,
        lane.merge,
        modules.merger.merge,
        MergeRequest,
        done=f"merged {len(collected.accepted)} extract(s)",
        extracts=collected.accepted,
    )
    if merged.output is None:
        return _result(run, modules.extractor, collected, after=(merged,), artifact=None)
    normalized = _whole_lane_stage(
        run,
        lane.normalize,
        modules.normalizer.normalize,
        NormalizeRequest,
        done="normalized",
        merged=merged.output,
    )
    payload = normalized.output.payload if normalized.output is not None else None
    artifact = None if payload is None else _typed(run, payload)
    return _result(
        run,
        modules.extractor,
        collected,
        after=(merged, normalized),
        artifact=artifact,
        written=payload,
    )


def _typed(run: _LaneRun, payload: Mapping[str, object]) -> BaseModel:
    """The normalized payload as the lane's typed artifact: the one parse of a lane's records
    (the normalize chain's `schema` validator has approved it; a profile that empties the
    chain gets this check anyway). Paths and error types only: the values are transcript
    text."""
    try:
        return run.kind.parse(payload)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'/'.join(str(p) for p in e['loc']) or '(root)'}: {e['type']}"
            for e in exc.errors()[:5]
        )
        raise LaneError(
            f"lane {run.lane.id!r}: the normalized output is not a valid {run.kind.kind}: "
            f"{problems}"
        ) from None


# ---- what the steps share


@dataclass(frozen=True)
class _LaneRun:
    """The inputs every step of one lane run reads."""

    lane: ResolvedLane
    kind: ArtifactKind
    document: SourceDocument
    references: Mapping[str, Mapping[str, PreparedReference]]
    client: StructuredClient | None
    session_id: str
    progress: Progress | None
    rules: Mapping[str, Validator]
    speaker_names: tuple[SpeakerNames, ...]
    known_names: tuple[KnownNames, ...] = ()

    def context(self, stage: ResolvedStage) -> RunContext:
        return RunContext(
            session_id=self.session_id,
            lane_id=self.lane.id,
            module_key=stage.module,
            options=stage.options,
            references=self.references.get(stage.stage, {}),
            client=self.client,
            kind=self.kind,
        )

    def validation(self, stage: ResolvedStage, **inputs: Any) -> ValidationContext:
        """What the stage's validator chain sees (`chunk`, `extracts` or `merged`)."""
        return ValidationContext(
            stage=stage.stage,
            lane_id=self.lane.id,
            module_key=stage.module,
            kind=self.kind,
            document=self.document,
            references=self.references.get(stage.stage, {}),
            rules=self.rules,
            speaker_names=self.speaker_names,
            known_names=self.known_names,
            **inputs,
        )

    def report(self, line: str) -> None:
        if self.progress:
            self.progress(line)


@dataclass(frozen=True)
class _Modules:
    extractor: Extractor
    merger: Merger
    normalizer: Normalizer


class _Attempted(Frozen):
    """One stage item after its retries: the used output or the rejection, and what every
    attempt cost."""

    output: ModuleOutput | None
    rejection: Rejection | None
    usage: LLMUsage


@dataclass(frozen=True)
class _Extracted:
    chunk: Chunk
    attempted: _Attempted
    status: ChunkStatus
    stored_rejection: bool = False
    """A rejection reused from the checkpoint store (no call was made for it)."""
    dropped: tuple[Rejection, ...] = ()
    """Records of the accepted output that a record validator dropped."""


@dataclass(frozen=True)
class _Collected:
    """The extraction results folded in chunk order."""

    chunks: int
    accepted: tuple[ModuleOutput, ...]
    rejections: tuple[Rejection, ...]
    dropped: tuple[Rejection, ...]
    warnings: tuple[RunWarning, ...]
    usage: LLMUsage
    status: dict[str, ChunkStatus]
    stored_rejections: int = 0


# ---- the steps, in order


def _extract_all(
    run: _LaneRun,
    extractor: Extractor,
    chunks: Sequence[Chunk],
    *,
    llm_fingerprint: str,
    checkpoints: CheckpointStore | None,
    max_concurrency: int,
    deadline: LaneDeadline | None = None,
) -> list[_Extracted]:
    """Extract every chunk on up to `max_concurrency` threads; results and progress lines come
    in chunk order. After one chunk fails, chunks not yet started do not call the model: they
    are cancelled, and the first failure in chunk order is raised. At the deadline the same
    happens, without waiting for calls in flight (their results are dropped; their daemon
    threads end by their own timeout or with the process, whichever comes first)."""
    job = _ChunkExtraction(
        run=run,
        extractor=extractor,
        context=run.context(run.lane.extract),
        material=dict(extractor.fingerprint_material()),
        llm_fingerprint=llm_fingerprint,
        checkpoints=checkpoints,
        deadline=deadline,
    )
    stop = threading.Event()
    results: list[_Extracted] = []
    pool = DaemonPool(max(1, max_concurrency), name=f"lane-{run.lane.id}")
    timed_out = False
    try:
        futures = [pool.submit(_unless_stopped, stop, job, chunk, deadline) for chunk in chunks]
        for done, future in enumerate(futures, start=1):
            try:
                item = future.result(timeout=None if deadline is None else deadline.remaining())
            except FutureTimeout:
                timed_out = True
                stop.set()
                assert deadline is not None
                raise deadline.error(run.lane.id, done - 1, len(chunks)) from None
            except LaneDeadlineError:
                assert deadline is not None
                raise deadline.error(run.lane.id, done - 1, len(chunks)) from None
            except TransientLLMError as exc:
                if deadline is not None and deadline.passed():
                    raise deadline.error(run.lane.id, done - 1, len(chunks), str(exc)) from exc
                raise
            results.append(item)
            if is_progress_milestone(done, len(chunks)):
                run.report(
                    f"{run.lane.id}: chunk {done}/{len(chunks)} {item.chunk.chunk_id} {item.status}"
                )
    finally:
        # Past the deadline nothing is waited for: a call still in flight may never end (its
        # daemon thread ends with the process, see DaemonPool).
        abandon = timed_out or (deadline is not None and deadline.passed())
        pool.shutdown(wait=not abandon, cancel_futures=True)
    return results


class DaemonPool:
    """The part of `ThreadPoolExecutor` the lane uses (`submit`, `shutdown`), on daemon threads.

    Why not `ThreadPoolExecutor`: its threads are joined when the interpreter exits, so a call
    the lane abandoned at its deadline (a provider trickling one byte a second never trips a
    per-read timeout) kept the step process, and with it the run and the command, alive for
    good. A daemon thread ends with its process: the lane fails at its deadline, the step
    process exits, the run is recorded failed and the command returns. Only calls that were
    abandoned are cut off this way; a lane that finishes waits for all of its threads."""

    def __init__(self, workers: int, *, name: str = "lane") -> None:
        self._work: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None] = (
            queue.SimpleQueue()
        )
        self._threads = [
            threading.Thread(target=self._serve, name=f"{name}-{n}", daemon=True)
            for n in range(workers)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, fn: Callable[..., Any], /, *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        self._work.put((future, partial(fn, *args)))
        return future

    def _serve(self) -> None:
        while (item := self._work.get()) is not None:
            future, call = item
            if not future.set_running_or_notify_cancel():
                continue  # cancelled before it started
            try:
                future.set_result(call())
            except BaseException as exc:  # handed to whoever waits on the future
                future.set_exception(exc)

    def shutdown(self, *, wait: bool = True, cancel_futures: bool = False) -> None:
        """Stop the threads once the work queued before them is done (`cancel_futures`: work
        not started is cancelled instead); `wait` joins them, as `ThreadPoolExecutor` does."""
        if cancel_futures:
            while True:
                try:
                    item = self._work.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    item[0].cancel()
        for _ in self._threads:
            self._work.put(None)
        if wait:
            for thread in self._threads:
                thread.join()


def is_progress_milestone(done: int, total: int) -> bool:
    """Whether chunk `done` of `total` gets a progress line: the first, the last and the first
    of each completed tenth, so a lane writes at most 11 chunk lines however many chunks it
    has (each line is a log event the orchestrator stores; one per chunk made the event log
    the bottleneck). Every chunk's status stays in the result (`chunk_status`)."""
    if done <= 1 or done >= total:
        return True
    return (done * 10) // total > ((done - 1) * 10) // total


def _collect(extracted: Sequence[_Extracted]) -> _Collected:
    usage = LLMUsage()
    accepted: list[ModuleOutput] = []
    rejections: list[Rejection] = []
    dropped: list[Rejection] = []
    warnings: list[RunWarning] = []
    status: dict[str, ChunkStatus] = {}
    stored_rejections = 0
    for item in extracted:
        stored_rejections += item.stored_rejection
        usage = usage + item.attempted.usage
        status[item.chunk.chunk_id] = item.status
        if item.attempted.rejection is not None:
            rejections.append(item.attempted.rejection)
        else:
            assert item.attempted.output is not None
            accepted.append(item.attempted.output)
            warnings.extend(item.attempted.output.warnings)
            dropped.extend(item.dropped)
    return _Collected(
        chunks=len(extracted),
        accepted=tuple(accepted),
        rejections=tuple(rejections),
        dropped=tuple(dropped),
        warnings=tuple(warnings),
        usage=usage,
        status=status,
        stored_rejections=stored_rejections,
    )


def _whole_lane_stage(
    run: _LaneRun,
    stage: ResolvedStage,
    module_call: Callable[[Any], ModuleOutput],
    request_type: type[MergeRequest] | type[NormalizeRequest],
    *,
    done: str,
    **inputs: Any,
) -> _Attempted:
    """A stage that sees the whole lane at once (merge: `extracts=`, normalize: `merged=`): the
    module's request and its validator chain get the same input under the same name; one
    module call with the stage's retries, and a progress line `<lane>: <done>` once accepted."""
    request = request_type(document=run.document, context=run.context(stage), **inputs)
    attempted = _attempt(
        partial(module_call, request),
        run.validation(stage, **inputs),
        stage=stage,
        lane_id=run.lane.id,
        chunk_id=None,
    )
    if attempted.output is not None:
        run.report(f"{run.lane.id}: {done}")
    return attempted


def _result(
    run: _LaneRun,
    extractor: Extractor,
    collected: _Collected,
    *,
    after: Sequence[_Attempted],
    artifact: BaseModel | None,
    written: Mapping[str, object] | None = None,
) -> LaneResult:
    """The lane's value. `after` are the merge (and normalize) results that ran: a rejected
    one ends the lane. `stats.rejected` counts rejected chunks only, `stats.records_rejected`
    the records dropped from accepted ones (both are in `rejections`)."""
    rejections = list(collected.rejections) + list(collected.dropped)
    warnings = list(collected.warnings)
    later_usage = after[0].usage
    for step in after[1:]:
        later_usage = later_usage + step.usage
    for step in after:
        if step.rejection is not None:
            rejections.append(step.rejection)
        elif step.output is not None:
            warnings.extend(step.output.warnings)
    status = collected.status
    metadata = dict(extractor.manifest_metadata())
    result = LaneResult(
        lane_id=run.lane.id,
        kind=run.lane.kind,
        status="accepted" if artifact is not None else "rejected",
        payload=None,
        rejections=tuple(rejections),
        warnings=tuple(warnings),
        stats=LaneStats(
            chunks=collected.chunks,
            called_model=sum(1 for s in status.values() if s in ("llm", "rejected"))
            - collected.stored_rejections,
            reused=sum(1 for s in status.values() if s == "reused") + collected.stored_rejections,
            skipped=sum(1 for s in status.values() if s == "skipped"),
            rejected=len(collected.rejections),
            records=len(run.kind.records(artifact)) if artifact is not None else 0,
            records_rejected=len(collected.dropped),
            usage=collected.usage + later_usage,
        ),
        chunk_status=status,
        metadata={"extractor": metadata} if metadata else {},
    )
    return result if artifact is None else result.with_artifact(artifact, written)


# ---- one chunk, one attempt loop


@dataclass(frozen=True)
class _ChunkExtraction:
    """Extraction of one chunk: a stored extraction under the same fingerprint is reused;
    otherwise the extractor runs with its retries and an accepted output is stored."""

    run: _LaneRun
    extractor: Extractor
    context: RunContext
    material: Mapping[str, object]
    llm_fingerprint: str
    checkpoints: CheckpointStore | None
    deadline: LaneDeadline | None = None

    def __call__(self, chunk: Chunk) -> _Extracted:
        fingerprint = self.fingerprint(chunk)
        if self.checkpoints is not None:
            cached = self.checkpoints.get(fingerprint)
            if cached is not None:  # provenance as today's runner gives it, stored or not
                cached = cached.model_copy(update={"provenance": self.provenance(chunk)})
                reused = _Attempted(output=cached, rejection=None, usage=LLMUsage())
                return self.checked(_Extracted(chunk=chunk, attempted=reused, status="reused"))
            stored = self._stored_rejection(fingerprint)
            if stored is not None:
                again = _Attempted(output=None, rejection=stored, usage=LLMUsage())
                return _Extracted(
                    chunk=chunk, attempted=again, status="rejected", stored_rejection=True
                )
        stage = self.run.lane.extract
        request = ExtractRequest(document=self.run.document, chunk=chunk, context=self.context)
        attempted = _attempt(
            partial(
                _extract_with_provenance,
                self.extractor,
                request,
                self.provenance(chunk),
                self.deadline,
            ),
            self.run.validation(stage, chunk=chunk),
            stage=stage,
            lane_id=self.run.lane.id,
            chunk_id=chunk.chunk_id,
        )
        if attempted.output is None:
            if isinstance(self.checkpoints, RejectionCheckpoints) and attempted.rejection:
                self.checkpoints.put_rejection(fingerprint, attempted.rejection)
            return _Extracted(chunk=chunk, attempted=attempted, status="rejected")
        if self.checkpoints is not None:
            self.checkpoints.put(fingerprint, attempted.output)
        status: ChunkStatus = "skipped" if attempted.output.skipped else "llm"
        return self.checked(_Extracted(chunk=chunk, attempted=attempted, status=status))

    def checked(self, item: _Extracted) -> _Extracted:
        """`item` with the records that record validators reject dropped from its output, each
        one recorded, and the citations of the records kept cut to what supports them (a
        count-only warning, `validators.tighten_supported`). Runs on stored and fresh
        extractions alike (checkpoints keep the output as extracted), so a reused chunk
        reports the same drops and cuts."""
        output = item.attempted.output
        assert output is not None
        stage = self.run.lane.extract
        context = self.run.validation(stage, chunk=item.chunk)
        verdicts = record_verdicts(stage.validators, context, output)
        if output.payload is None:
            return item
        items_field = self.run.kind.items_field
        drop = {index for _, index, _ in verdicts}
        kept = [r for i, r in enumerate(output.payload[items_field]) if i not in drop]
        payload = {**output.payload, items_field: kept}
        tightened = tighten_supported(
            stage.validators, context, output.model_copy(update={"payload": payload})
        )
        if not verdicts and tightened.warnings == output.warnings:
            return item
        attempted = item.attempted.model_copy(update={"output": tightened})
        dropped = tuple(
            Rejection(
                stage="extract",
                lane=self.run.lane.id,
                module=stage.module,
                chunk_id=item.chunk.chunk_id,
                validator=validator,
                message=message,
                attempts=1,
                record_index=index,
            )
            for validator, index, message in verdicts
        )
        return dataclasses.replace(item, attempted=attempted, dropped=dropped)

    def reference_fingerprint(self, slot: str, ref: PreparedReference, chunk: Chunk) -> str:
        """What the extractor says it consumes of `ref` (`Extractor.reference_fingerprint`;
        `BaseExtractor`'s default is the whole digest)."""
        return str(self.extractor.reference_fingerprint(slot, ref, chunk))

    def _stored_rejection(self, fingerprint: str) -> Rejection | None:
        """A rejection stored under this fingerprint: the same inputs were rejected before,
        so asking again would most likely pay for the same answer (`RetryRejections` says
        otherwise)."""
        if isinstance(self.checkpoints, RejectionCheckpoints):
            return self.checkpoints.get_rejection(fingerprint)
        return None

    def provenance(self, chunk: Chunk) -> dict[str, object]:
        """Runner-owned: whatever the extractor put there is replaced."""
        return {
            "lane_id": self.run.lane.id,
            "extractor": self.run.lane.extract.module,
            "source_id": chunk.source_id,
            "chunk_id": chunk.chunk_id,
            "chunk_index": chunk.index,
            # the chunk's first and last unit: the merge tells an event straddling a border
            "unit_span": [chunk.unit_ids[0], chunk.unit_ids[-1]] if chunk.unit_ids else [],
        }

    def fingerprint(self, chunk: Chunk) -> str:
        stage = self.run.lane.extract
        return extraction_fingerprint(
            lane_id=self.run.lane.id,
            module_key=stage.module,
            module_version=stage.version,
            module_material=self.material,
            options=stage.options,
            llm_fingerprint=self.llm_fingerprint,
            chunk_digest=chunk.digest,
            reference_fingerprints={
                slot: self.reference_fingerprint(slot, ref, chunk)
                for slot, ref in self.context.references.items()
            },
        )


def _unless_stopped(
    stop: threading.Event, job: _ChunkExtraction, chunk: Chunk, deadline: LaneDeadline | None
) -> _Extracted:
    """Run `job` on `chunk` unless an earlier chunk failed or the deadline passed; a failure
    here stops the rest."""
    if stop.is_set():
        raise LaneError(f"lane {job.run.lane.id!r}: stopped after an earlier chunk failed")
    if deadline is not None and deadline.passed():
        stop.set()
        raise deadline.error(job.run.lane.id)  # _extract_all gives the real counts
    try:
        return job(chunk)
    except BaseException:
        stop.set()
        raise


def _extract_with_provenance(
    extractor: Extractor,
    request: ExtractRequest,
    provenance: dict[str, object],
    deadline: LaneDeadline | None = None,
) -> ModuleOutput:
    """One extraction attempt; none starts after the lane's deadline (a retry of a chunk whose
    first attempt outlived it, in a thread the lane already abandoned, included)."""
    if deadline is not None and deadline.passed():
        raise deadline.error(request.context.lane_id or "?")
    return extractor.extract(request).model_copy(update={"provenance": provenance})


def _attempt(
    call: Callable[[], ModuleOutput],
    validation: ValidationContext,
    *,
    stage: ResolvedStage,
    lane_id: str,
    chunk_id: str | None,
) -> _Attempted:
    """Run one stage item with its retries. Rejections and framework errors both consume
    retries; a deterministic skip is never retried. Usage counts every attempt (it was paid)."""
    usage = LLMUsage()
    verdict: tuple[str, str] | None = None
    attempts = stage.retries + 1
    for attempt in range(1, attempts + 1):
        try:
            output = call()
            usage = usage + output.usage
            verdict = run_chain(stage.validators, validation, output)
        except (LLMUnavailableError, TransientLLMError, LaneDeadlineError):
            # The client already retried transient provider errors with backoff; past its
            # retries the error escapes unchanged (the Dagster layer asks for a step retry);
            # the lane's deadline is never retried.
            raise
        except LLMError as exc:
            # Permanent: fail fast, one bad key must not cost more calls.
            raise LaneError(
                f"{_where(stage, lane_id, chunk_id)} failed after {attempt} attempt(s): {exc}"
            ) from exc
        except Exception as exc:  # framework-level: retry, then fail the lane
            if attempt < attempts:
                continue
            detail = str(exc) if isinstance(exc, NotariusError) else cause_of(exc)
            raise LaneError(
                f"{_where(stage, lane_id, chunk_id)} failed after {attempts} attempt(s): {detail}"
            ) from exc
        if verdict is None:
            return _Attempted(output=output, rejection=None, usage=usage)
        if output.skipped:
            break
    assert verdict is not None
    return _Attempted(
        output=None,
        usage=usage,
        rejection=stage.rejection(verdict, attempt, lane_id=lane_id, chunk_id=chunk_id),
    )


def _where(stage: ResolvedStage, lane_id: str, chunk_id: str | None) -> str:
    where = f"lane {lane_id!r} {stage.stage} ({stage.module})"
    return where + (f" chunk {chunk_id!r}" if chunk_id else "")
