"""The asset factory: builds the session graph from a resolved pipeline profile.

    transcript (external) -> source_document -> chunk_map -> <lane>... -> session_bundle

A lane that consumes another lane's artifact depends on that lane's asset, so the graph shows
the reference and a failed producer stops its consumers. Every asset is partitioned by session
and calls one engine function."""

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dagster import (
    AssetExecutionContext,
    AssetIn,
    AssetKey,
    AssetsDefinition,
    AssetSpec,
    Config,
    Failure,
    MaterializeResult,
    Output,
    RetryRequested,
    asset,
)

from assets.code_versions import chunk_code_version, lane_code_version
from assets.metadata import lane_metadata
from assets.partitions import sessions_partitions
from notarius_dagster.engine.chunk_stage import ChunkResult, run_chunk_stage
from notarius_dagster.engine.errors import LLMError, LLMUnavailableError, NotariusError
from notarius_dagster.engine.inputs import parse_transcript
from notarius_dagster.engine.lane_runner import LaneResult, LaneStats, run_lane
from notarius_dagster.engine.models import SourceDocument
from notarius_dagster.engine.references import prepare_file, prepare_lane_references
from notarius_dagster.engine.resolution import ResolvedLane, ResolvedPipeline, RuntimeBinding
from notarius_dagster.engine.session_bundle import publish_session_bundle
from notarius_dagster.engine.transcripts import stored_transcript
from notarius_dagster.llm.client import TransientLLMError
from resources.bundle_store import BundleStore
from resources.llm import LLMResource

TRANSCRIPT = AssetKey("transcript")
GROUP = "session"

Reresolve = Callable[[Sequence[RuntimeBinding], Sequence[str]], ResolvedPipeline]


class RuntimeReferences(Config):
    """Runtime reference overrides for one run, as `notarius run --reference/--unbind` gives
    them: `references` maps a selector (SLOT, LANE.extract.SLOT, ...) to a file path (absolute,
    or relative to the run worker's working directory); `unbind` lists selectors to unbind."""

    references: dict[str, str] = {}
    unbind: list[str] = []

    def active(self) -> bool:
        return bool(self.references or self.unbind)

    def bindings(self) -> list[RuntimeBinding]:
        return [RuntimeBinding(selector=k, path=v) for k, v in sorted(self.references.items())]


def asset_name(lane_id: str) -> str:
    return lane_id.replace("-", "_")


def _fail(exc: NotariusError, what: str) -> Failure:
    """A content-safe failure a person can act on (the engine's message, not a traceback)."""
    return Failure(description=f"{what}: {exc}")


def build_source_document_asset(pipeline: ResolvedPipeline) -> AssetsDefinition:
    file_bindings = [
        b
        for s in (pipeline.chunk, *[st for ln in pipeline.lanes for st in ln.stages()])
        for b in s.references
        if b.origin == "file"
    ]

    @asset(
        name="source_document",
        group_name=GROUP,
        partitions_def=sessions_partitions,
        deps=[TRANSCRIPT],
        code_version="1",
        description="The session transcript parsed into ordered, validated source units.",
    )
    def source_document(
        context: AssetExecutionContext, store: BundleStore
    ) -> Output[SourceDocument]:
        session_id = context.partition_key
        try:
            for binding in file_bindings:  # external references fail before any parsing
                prepare_file(binding)
            path = stored_transcript(store.transcripts, session_id)
            document = parse_transcript(
                path.read_bytes(),
                file_name=path.name,
                source_id=session_id,
                input_format=pipeline.input_format,
            )
        except NotariusError as exc:
            raise _fail(exc, "source_document") from None
        return Output(
            document,
            data_version=None,
            metadata={
                "units": len(document.units),
                "media_type": document.media_type,
                "source_digest": document.digest,
            },
        )

    return source_document


def build_chunk_map_asset(pipeline: ResolvedPipeline) -> AssetsDefinition:
    @asset(
        name="chunk_map",
        group_name=GROUP,
        partitions_def=sessions_partitions,
        code_version=chunk_code_version(pipeline),
        description=f"Validated chunks ({pipeline.chunk.module} chunker).",
    )
    def chunk_map(
        context: AssetExecutionContext, source_document: SourceDocument
    ) -> Output[ChunkResult]:
        try:
            prepared = [prepare_file(b) for b in pipeline.chunk.references]
            refs = {ref.slot: ref for ref, _ in prepared}
            # No chunker shipped today calls a model; an LLM-backed one would take the `llm`
            # resource here and join the `llm` pool.
            result = run_chunk_stage(
                pipeline.chunk, source_document, session_id=context.partition_key, references=refs
            )
        except NotariusError as exc:
            raise _fail(exc, "chunk_map") from None
        result = result.model_copy(
            update={
                "references": tuple(dict(ref.provenance) for ref in refs.values()),
                "warnings": tuple(w for _, warns in prepared for w in warns),
            }
        )
        meta: dict[str, Any] = {
            "chunks": len(result.chunk_map.chunks) if result.chunk_map else 0,
            "rejected": result.rejection is not None,
        }
        if result.rejection is not None:
            context.log.warning(
                f"chunking rejected: {result.rejection.message}; lanes will not run"
            )
        return Output(result, metadata=meta)

    return chunk_map


def build_lane_asset(
    pipeline: ResolvedPipeline, lane: ResolvedLane, reresolve: Reresolve | None = None
) -> AssetsDefinition:
    ins = {"source_document": AssetIn("source_document"), "chunk_map": AssetIn("chunk_map")}
    for dep in lane.depends_on:
        ins[asset_name(dep)] = AssetIn(asset_name(dep))

    @asset(
        name=asset_name(lane.id),
        group_name=GROUP,
        partitions_def=sessions_partitions,
        ins=ins,
        code_version=lane_code_version(lane),
        pool="llm",
        kinds={"json"},
        tags={"notarius/lane": lane.id},
        description=f"The `{lane.id}` lane ({lane.kind}): extract per chunk, merge, normalize.",
    )
    def lane_asset(
        context: AssetExecutionContext,
        config: RuntimeReferences,
        llm: LLMResource,
        store: BundleStore,
        **upstream: Any,
    ) -> Output[LaneResult]:
        document: SourceDocument = upstream["source_document"]
        current = lane
        if config.active():
            current = _runtime_lane(lane, config, reresolve)
        chunks: ChunkResult = upstream["chunk_map"]
        if chunks.chunk_map is None:
            result = LaneResult(
                lane_id=lane.id,
                kind=lane.kind,
                status="rejected",
                payload=None,
                stats=LaneStats(),
                metadata={"skipped": "chunking was rejected"},
            )
            return Output(result, metadata=lane_metadata(result))
        payloads = {dep: upstream[asset_name(dep)].payload for dep in lane.depends_on}
        try:
            refs, ref_warnings, provenance = prepare_lane_references(current.stages(), payloads)
            with llm.client() as client:
                result = run_lane(
                    current,
                    document=document,
                    chunks=chunks.chunk_map.chunks,
                    references=refs,
                    client=client,
                    session_id=context.partition_key,
                    llm_fingerprint=llm.fingerprint(),
                    max_concurrency=llm.profile.max_concurrency,
                    checkpoints=store.checkpoint_store(),
                    progress=lambda msg: context.log.info(f"progress: {msg}"),
                )
        except TransientLLMError as exc:
            raise RetryRequested(max_retries=2, seconds_to_wait=10) from exc
        except LLMUnavailableError as exc:
            raise _fail(exc, f"lane {lane.id}: the chosen LLM tier is unavailable") from None
        except (LLMError, NotariusError) as exc:
            raise _fail(exc, f"lane {lane.id}") from None
        result = result.model_copy(
            update={
                "warnings": tuple(ref_warnings) + result.warnings,
                "references": tuple(provenance),
            }
        )
        return Output(result, metadata=lane_metadata(result))

    return lane_asset


def _runtime_lane(
    lane: ResolvedLane, config: RuntimeReferences, reresolve: Reresolve | None
) -> ResolvedLane:
    """Re-resolve the profile with this run's reference overrides (the same rules as the CLI:
    flat names only when unambiguous, required slots stay bound)."""
    if reresolve is None:
        raise Failure(description="this code location cannot apply runtime references")
    try:
        resolved = reresolve(config.bindings(), config.unbind)
    except NotariusError as exc:
        raise _fail(exc, f"lane {lane.id}: runtime references") from None
    new = resolved.lane(lane.id)
    if new.depends_on != lane.depends_on:
        raise Failure(
            description=f"lane {lane.id}: runtime references cannot change which "
            "lanes it depends on"
        )
    return new


def build_bundle_asset(pipeline: ResolvedPipeline, *, with_evidence: bool) -> AssetsDefinition:
    ins = {"source_document": AssetIn("source_document"), "chunk_map": AssetIn("chunk_map")}
    for lane in pipeline.lanes:
        ins[asset_name(lane.id)] = AssetIn(asset_name(lane.id))
    if with_evidence:
        ins["evidence_context"] = AssetIn("evidence_context")

    @asset(
        name="session_bundle",
        group_name=GROUP,
        partitions_def=sessions_partitions,
        ins=ins,
        code_version="1",
        kinds={"json"},
        description="Writes manifest, index, warnings, rejections, chunk map and lane files, "
        "and publishes the bundle atomically.",
    )
    def session_bundle(
        context: AssetExecutionContext, store: BundleStore, **upstream: Any
    ) -> MaterializeResult:
        try:
            published = publish_session_bundle(
                store_root=store.bundles,
                session_id=context.partition_key,
                run_id=context.run_id,
                pipeline=pipeline,
                document=upstream["source_document"],
                chunk_result=upstream["chunk_map"],
                lane_results=[upstream[asset_name(lane.id)] for lane in pipeline.lanes],
                evidence=upstream.get("evidence_context"),
                started_at=_run_start(context),
                completed_at=time.time(),
            )
        except NotariusError as exc:
            raise _fail(exc, "session_bundle") from None
        manifest = published.manifest
        return MaterializeResult(
            metadata={
                "session_id": manifest.session_id,
                "files": published.files,
                "validation_status": manifest.validation_status,
                "lanes": len(manifest.outputs),
                "rejections": len(manifest.rejected),
                "warnings": manifest.warnings,
                "llm_calls": manifest.totals.llm_calls,
                "prompt_tokens": manifest.totals.prompt_tokens,
                "completion_tokens": manifest.totals.completion_tokens,
                "cost_usd": manifest.totals.cost_usd,
                "wall_time_s": manifest.timing.wall_time_s,
            }
        )

    return session_bundle


def _run_start(context: AssetExecutionContext) -> float:
    record = context.instance.get_run_record_by_id(context.run_id)
    if record is not None and record.start_time:
        return float(record.start_time)
    return time.time()


def transcript_spec() -> AssetSpec:
    return AssetSpec(
        TRANSCRIPT,
        group_name=GROUP,
        partitions_def=sessions_partitions,
        description="The session's transcript in the transcript store (external: "
        "registered by the inbox sensor or `notarius run`).",
    )


def build_session_assets(
    pipeline: ResolvedPipeline,
    extra: Mapping[str, AssetsDefinition] | None = None,
    reresolve: Reresolve | None = None,
) -> list[AssetsDefinition | AssetSpec]:
    with_evidence = bool(extra and "evidence_context" in extra)
    assets: list[AssetsDefinition | AssetSpec] = [
        transcript_spec(),
        build_source_document_asset(pipeline),
        build_chunk_map_asset(pipeline),
    ]
    assets.extend(build_lane_asset(pipeline, lane, reresolve) for lane in pipeline.lanes)
    assets.extend((extra or {}).values())
    assets.append(build_bundle_asset(pipeline, with_evidence=with_evidence))
    return assets
