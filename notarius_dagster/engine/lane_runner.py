"""Lane execution (reference/pipeline.md, "Within an artifact lane"): extract one output per
accepted chunk (retries per binding, concurrently up to the LLM profile's limit), runner-owned
provenance, validation, merge, normalize. A validator rejection is recorded and not fatal;
warnings come only from attempts whose output is used."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, cast

from pydantic import Field

from notarius_dagster.engine.artifact_kinds import get_kind
from notarius_dagster.engine.catalog import CATALOG, ModuleCatalog
from notarius_dagster.engine.checkpoints import CheckpointStore, extraction_fingerprint
from notarius_dagster.engine.contracts import (
    ExtractRequest,
    LLMUsage,
    MergeRequest,
    ModuleOutput,
    NormalizeRequest,
    PreparedReference,
    RunContext,
)
from notarius_dagster.engine.errors import LaneError, LLMError, LLMUnavailableError, NotariusError
from notarius_dagster.engine.llm_contract import StructuredClient
from notarius_dagster.engine.models import (
    Chunk,
    Frozen,
    Rejection,
    RunWarning,
    SourceDocument,
    Stage,
)
from notarius_dagster.engine.resolution import ResolvedLane, ResolvedStage
from notarius_dagster.engine.validators import ValidationContext, run_chain

Progress = Callable[[str], None]
ChunkStatus = Literal["llm", "reused", "skipped", "rejected"]


class LaneStats(Frozen):
    chunks: int = 0
    called_model: int = 0
    reused: int = 0
    skipped: int = 0
    rejected: int = 0
    records: int = 0
    usage: LLMUsage = Field(default_factory=LLMUsage)


class LaneResult(Frozen):
    """A lane's outcome: the accepted normalized payload (or None), what was rejected and
    warned, and its accounting. This is the value of a lane asset."""

    lane_id: str
    kind: str
    status: Literal["accepted", "rejected"]
    payload: dict[str, Any] | None
    rejections: tuple[Rejection, ...] = ()
    warnings: tuple[RunWarning, ...] = ()
    stats: LaneStats = Field(default_factory=LaneStats)
    chunk_status: dict[str, ChunkStatus] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
    references: tuple[dict[str, Any], ...] = ()


class _Attempted(Frozen):
    output: ModuleOutput | None
    rejection: Rejection | None
    usage: LLMUsage


def _attempt(
    call: Callable[[], ModuleOutput],
    validate: Callable[[ModuleOutput], tuple[str, str] | None],
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
            verdict = validate(output)
        except LLMUnavailableError:
            raise
        except LLMError as exc:
            # The client already retried transient provider errors with backoff. Transient past
            # its retries: escape unchanged (the Dagster layer asks for a step retry). Permanent:
            # fail fast, one bad key must not cost more calls.
            if getattr(exc, "transient", False):
                raise
            raise LaneError(
                f"{_where(stage, lane_id, chunk_id)} failed after {attempt} attempt(s): {exc}"
            ) from exc
        except Exception as exc:  # framework-level: retry, then fail the lane
            if attempt < attempts:
                continue
            detail = str(exc) if isinstance(exc, NotariusError) else type(exc).__name__
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
        rejection=Rejection(
            stage=cast(Stage, stage.stage),
            lane=lane_id,
            module=stage.module,
            chunk_id=chunk_id,
            validator=verdict[0],
            message=verdict[1],
            attempts=attempt,
        ),
    )


def _where(stage: ResolvedStage, lane_id: str, chunk_id: str | None) -> str:
    where = f"lane {lane_id!r} {stage.stage} ({stage.module})"
    return where + (f" chunk {chunk_id!r}" if chunk_id else "")


def _module_material(module: object) -> dict[str, Any]:
    material = getattr(module, "fingerprint_material", None)
    return dict(material()) if callable(material) else {}


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
    catalog: ModuleCatalog = CATALOG,
) -> LaneResult:
    """Run one lane over the accepted chunks. `references` maps stage name to its prepared
    references by slot."""
    kind = get_kind(lane.kind)

    def context(stage: ResolvedStage) -> RunContext:
        return RunContext(
            session_id=session_id,
            lane_id=lane.id,
            module_key=stage.module,
            options=stage.options,
            references=references.get(stage.stage, {}),
            client=client,
            kind=kind,
        )

    extractor = catalog.build("extract", lane.extract.module, lane.extract.options)
    merger = catalog.build("merge", lane.merge.module, lane.merge.options)
    normalizer = catalog.build("normalize", lane.normalize.module, lane.normalize.options)
    ex_ctx = context(lane.extract)
    material = _module_material(extractor)
    ref_fps = {slot: ref.digest for slot, ref in ex_ctx.references.items()}

    def extract_one(chunk: Chunk) -> tuple[Chunk, _Attempted, ChunkStatus]:
        fingerprint = extraction_fingerprint(
            lane_id=lane.id,
            module_key=lane.extract.module,
            module_version=lane.extract.version,
            module_material=material,
            options=lane.extract.options,
            llm_fingerprint=llm_fingerprint,
            chunk_digest=chunk.digest,
            reference_fingerprints=ref_fps,
        )
        if checkpoints is not None:
            cached = checkpoints.get(fingerprint)
            if cached is not None:
                return chunk, _Attempted(output=cached, rejection=None, usage=LLMUsage()), "reused"
        vctx = ValidationContext(
            stage="extract",
            lane_id=lane.id,
            module_key=lane.extract.module,
            kind=kind,
            document=document,
            chunk=chunk,
            references=ex_ctx.references,
        )
        provenance = {
            "lane_id": lane.id,
            "extractor": lane.extract.module,
            "source_id": chunk.source_id,
            "chunk_id": chunk.chunk_id,
            "chunk_index": chunk.index,
        }

        def call() -> ModuleOutput:
            out = extractor.extract(ExtractRequest(document=document, chunk=chunk, context=ex_ctx))
            return out.model_copy(update={"provenance": provenance})

        result = _attempt(
            call,
            lambda out: run_chain(lane.extract.validators, vctx, out),
            stage=lane.extract,
            lane_id=lane.id,
            chunk_id=chunk.chunk_id,
        )
        if result.rejection is not None:
            return chunk, result, "rejected"
        assert result.output is not None
        if checkpoints is not None:
            checkpoints.put(fingerprint, result.output)
        return chunk, result, "skipped" if result.output.skipped else "llm"

    done = 0
    results: list[tuple[Chunk, _Attempted, ChunkStatus]] = []
    stop = threading.Event()

    def guarded(chunk: Chunk) -> tuple[Chunk, _Attempted, ChunkStatus]:
        """After one chunk fails, chunks not yet started do not call the model."""
        if stop.is_set():
            raise LaneError(f"lane {lane.id!r}: stopped after an earlier chunk failed")
        try:
            return extract_one(chunk)
        except BaseException:
            stop.set()
            raise

    pool = ThreadPoolExecutor(max_workers=max(1, max_concurrency))
    try:
        futures = [pool.submit(guarded, chunk) for chunk in chunks]
        for future in futures:
            item = future.result()
            results.append(item)
            done += 1
            if progress:
                progress(f"{lane.id}: chunk {done}/{len(chunks)} {item[0].chunk_id} {item[2]}")
    finally:
        # On failure, chunks not yet started are cancelled instead of calling the model.
        pool.shutdown(wait=True, cancel_futures=True)

    usage = LLMUsage()
    warnings: list[RunWarning] = []
    rejections: list[Rejection] = []
    accepted: list[ModuleOutput] = []
    status: dict[str, ChunkStatus] = {}
    for chunk, attempted, chunk_state in results:
        usage = usage + attempted.usage
        status[chunk.chunk_id] = chunk_state
        if attempted.rejection is not None:
            rejections.append(attempted.rejection)
        else:
            assert attempted.output is not None
            accepted.append(attempted.output)
            warnings.extend(attempted.output.warnings)

    stats = dict(
        chunks=len(chunks),
        called_model=sum(1 for s in status.values() if s in ("llm", "rejected")),
        reused=sum(1 for s in status.values() if s == "reused"),
        skipped=sum(1 for s in status.values() if s == "skipped"),
        rejected=len(rejections),
    )
    metadata = {
        "extractor": _manifest_metadata(extractor),
        "merger": _manifest_metadata(merger),
        "normalizer": _manifest_metadata(normalizer),
    }

    def finish(payload: dict[str, Any] | None, extra_usage: LLMUsage) -> LaneResult:
        records = len(payload.get(kind.items_field, [])) if payload else 0
        return LaneResult(
            lane_id=lane.id,
            kind=lane.kind,
            status="accepted" if payload is not None else "rejected",
            payload=payload,
            rejections=tuple(rejections),
            warnings=tuple(warnings),
            stats=LaneStats(**stats, records=records, usage=usage + extra_usage),
            chunk_status=status,
            metadata={k: v for k, v in metadata.items() if v},
        )

    mg_ctx = context(lane.merge)
    merge_v = ValidationContext(
        stage="merge",
        lane_id=lane.id,
        module_key=lane.merge.module,
        kind=kind,
        document=document,
        extracts=tuple(accepted),
        references=mg_ctx.references,
    )
    merged = _attempt(
        lambda: merger.merge(
            MergeRequest(document=document, extracts=tuple(accepted), context=mg_ctx)
        ),
        lambda out: run_chain(lane.merge.validators, merge_v, out),
        stage=lane.merge,
        lane_id=lane.id,
        chunk_id=None,
    )
    if merged.rejection is not None or merged.output is None:
        rejections.append(merged.rejection)  # type: ignore[arg-type]
        return finish(None, merged.usage)
    warnings.extend(merged.output.warnings)
    if progress:
        progress(f"{lane.id}: merged {len(accepted)} extract(s)")

    nm_ctx = context(lane.normalize)
    norm_v = ValidationContext(
        stage="normalize",
        lane_id=lane.id,
        module_key=lane.normalize.module,
        kind=kind,
        document=document,
        merged=merged.output,
        references=nm_ctx.references,
    )
    merged_output = merged.output
    normalized = _attempt(
        lambda: normalizer.normalize(
            NormalizeRequest(document=document, merged=merged_output, context=nm_ctx)
        ),
        lambda out: run_chain(lane.normalize.validators, norm_v, out),
        stage=lane.normalize,
        lane_id=lane.id,
        chunk_id=None,
    )
    if normalized.rejection is not None or normalized.output is None:
        rejections.append(normalized.rejection)  # type: ignore[arg-type]
        return finish(None, merged.usage + normalized.usage)
    warnings.extend(normalized.output.warnings)
    if progress:
        progress(f"{lane.id}: normalized")
    return finish(normalized.output.payload, merged.usage + normalized.usage)


def _manifest_metadata(module: object) -> dict[str, Any]:
    provider = getattr(module, "manifest_metadata", None)
    return dict(provider()) if callable(provider) else {}
