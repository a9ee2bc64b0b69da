"""The asset factory: builds the session graph from a resolved pipeline profile.

    transcript (external) -> source_document -> chunk_map -> <lane>... -> session_bundle

A lane that consumes another lane's artifact depends on that lane's asset, so the graph shows
the reference and a failed producer stops its consumers. Every asset is partitioned by session
and calls one engine function (`engine/session_steps.py` for the steps before the bundle); its
body turns engine errors into a `Failure` (or a retry for a transient LLM error) and records
metadata.

Runtime references reach a run one way: as the `RuntimeReferences` run config of the assets
that take it (`source_document`, `chunk_map` and every lane), which is what a run launched in
the UI gives and what `notarius run --reference/--unbind` passes (`runtime_references_config`)."""

import hashlib
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dagster import (
    AssetExecutionContext,
    AssetIn,
    AssetKey,
    AssetsDefinition,
    AssetSpec,
    BetaWarning,
    Config,
    DataVersion,
    Failure,
    MaterializeResult,
    Output,
    RetryRequested,
    asset,
)

from assets.code_versions import chunk_code_version, lane_code_version
from assets.metadata import lane_metadata
from assets.partitions import sessions_partitions
from notarius_dagster.engine.checkpoints import CheckpointStore, RetryRejections
from notarius_dagster.engine.chunk_stage import ChunkResult
from notarius_dagster.engine.digest import digest_of
from notarius_dagster.engine.errors import (
    LLMError,
    LLMUnavailableError,
    NotariusError,
    TransientLLMError,
)
from notarius_dagster.engine.lane_runner import LaneResult
from notarius_dagster.engine.models import SourceDocument
from notarius_dagster.engine.resolution import ResolvedLane, ResolvedPipeline
from notarius_dagster.engine.session_bundle import publish_session_bundle
from notarius_dagster.engine.session_steps import (
    RunPipeline,
    RuntimeOverrides,
    chunk_document,
    file_bindings,
    load_source_document,
    run_lane_step,
)
from notarius_dagster.engine.transcripts import stored_transcript
from notarius_dagster.staleness import EXTERNAL_INPUTS_KEY
from resources.bundle_store import BundleStore
from resources.llm import LLMResource

# `Output(data_version=...)` is beta in Dagster 1.13: the data versions staleness reads
# (notarius_dagster/staleness.py). Its warning would print on every `notarius run`.
warnings.filterwarnings("ignore", category=BetaWarning, message=".*data_version.*")

TRANSCRIPT = AssetKey("transcript")
GROUP = "session"


class RuntimeReferences(Config):
    """Runtime reference overrides for one run, as `notarius run --reference/--unbind` gives
    them: `references` maps a selector (SLOT, LANE.extract.SLOT, ...) to a file path (absolute,
    or relative to the run worker's working directory); `unbind` lists selectors to unbind."""

    references: dict[str, str] = {}
    unbind: list[str] = []
    retry_rejected: bool = False
    """Ask the model again for chunks whose extraction was rejected under the same
    fingerprint (lanes only; `notarius run --retry-rejected`). Otherwise a stored rejection is
    a result and is reused."""

    def overrides(self) -> RuntimeOverrides:
        return RuntimeOverrides(references=dict(self.references), unbind=tuple(self.unbind))


def asset_name(lane_id: str) -> str:
    return lane_id.replace("-", "_")


def runtime_reference_assets(pipeline: ResolvedPipeline) -> list[str]:
    """The assets that take `RuntimeReferences` config, in graph order."""
    return ["source_document", "chunk_map", *(asset_name(lane.id) for lane in pipeline.lanes)]


RETRY_REJECTED_CONFIG = "retry_rejected"


def runtime_references_config(
    pipeline: ResolvedPipeline,
    references: Mapping[str, str],
    unbind: Sequence[str],
    *,
    retry_rejected: bool = False,
) -> dict[str, Any]:
    """Run config giving every asset that takes it the same runtime references (what
    `notarius run` passes; in the UI a person may give them to some assets only), and to the
    lanes `retry_rejected` when asked."""
    config: dict[str, Any] = {"references": dict(references), "unbind": list(unbind)}
    lanes = {asset_name(lane.id) for lane in pipeline.lanes}
    return {
        "ops": {
            name: {"config": {**config, RETRY_REJECTED_CONFIG: True}
                   if retry_rejected and name in lanes else config}
            for name in runtime_reference_assets(pipeline)
        }
    }


def _file_digest(path: str | None) -> str:
    if path is None:
        return "none"
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return "unreadable"


def _file_stamp(path: str | None) -> str:
    """Size and modification time: a reference file is read by its users only (twice per
    run at most, docs/internals.md), so what changed is told by its metadata here."""
    if path is None:
        return "none"
    try:
        stat = Path(path).stat()
    except OSError:
        return "unreadable"
    return f"{stat.st_size}:{stat.st_mtime_ns}"


def external_inputs_digest(
    plan: RunPipeline,
    overrides: RuntimeOverrides,
    *,
    transcripts: Path,
    session_id: str,
    llm_fingerprint: str,
) -> str:
    """What a session's values depend on outside the asset graph: the stored transcript's
    bytes, the runtime references, every reference file's size and modification time, the
    resolved profile and the LLM profile. `source_document` records it; the runner compares
    it (with Dagster's code and data versions) to decide what is up to date
    (notarius_dagster/staleness.py)."""
    pipeline = plan.for_run(overrides)
    return digest_of(
        {
            "transcript": _file_digest(str(stored_transcript(transcripts, session_id))),
            "overrides": overrides.model_dump(mode="json"),
            "files": [_file_stamp(b.path) for b in file_bindings(pipeline)],
            "pipeline": pipeline.digest,
            "llm": llm_fingerprint,
        }
    )


def lane_data_version(result: LaneResult) -> DataVersion:
    """A lane's value as its consumers see it (payload, status, rejections), not its
    accounting: a re-run that reused every extraction has the same data version."""
    return DataVersion(
        digest_of(
            {
                "status": result.status,
                "payload": result.payload,
                "rejections": [r.model_dump(mode="json") for r in result.rejections],
            }
        ).split(":", 1)[1][:24]
    )


def lane_checkpoints(store: BundleStore, retry_rejected: bool) -> CheckpointStore | None:
    checkpoints = store.checkpoint_store()
    if checkpoints is not None and retry_rejected:
        return RetryRejections(checkpoints)
    return checkpoints


def _fail(exc: NotariusError, what: str) -> Failure:
    """A content-safe failure a person can act on (the engine's message, not a traceback)."""
    return Failure(description=f"{what}: {exc}")


def build_source_document_asset(plan: RunPipeline) -> AssetsDefinition:
    @asset(
        name="source_document",
        group_name=GROUP,
        partitions_def=sessions_partitions,
        deps=[TRANSCRIPT],
        code_version="1",
        description="The session transcript parsed into ordered, validated source units.",
    )
    def source_document(
        context: AssetExecutionContext,
        config: RuntimeReferences,
        store: BundleStore,
        llm: LLMResource,
    ) -> Output[SourceDocument]:
        try:
            document = load_source_document(
                plan, config.overrides(), transcripts=store.transcripts,
                session_id=context.partition_key,
            )
            inputs = external_inputs_digest(
                plan, config.overrides(), transcripts=store.transcripts,
                session_id=context.partition_key, llm_fingerprint=llm.fingerprint(),
            )
        except NotariusError as exc:
            raise _fail(exc, "source_document") from None
        return Output(
            document,
            data_version=DataVersion(document.digest.split(":", 1)[-1][:24]),
            metadata={
                "units": len(document.units),
                "media_type": document.media_type,
                "source_digest": document.digest,
                EXTERNAL_INPUTS_KEY: inputs,
            },
        )

    return source_document


def build_chunk_map_asset(plan: RunPipeline) -> AssetsDefinition:
    @asset(
        name="chunk_map",
        group_name=GROUP,
        partitions_def=sessions_partitions,
        code_version=chunk_code_version(plan.pipeline),
        description=f"Validated chunks ({plan.pipeline.chunk.module} chunker).",
    )
    def chunk_map(
        context: AssetExecutionContext, config: RuntimeReferences, source_document: SourceDocument
    ) -> Output[ChunkResult]:
        try:
            # No chunker shipped today calls a model; an LLM-backed one would take the `llm`
            # resource here and join the `llm` pool.
            result = chunk_document(
                plan, source_document, config.overrides(), session_id=context.partition_key
            )
        except NotariusError as exc:
            raise _fail(exc, "chunk_map") from None
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


def build_lane_asset(plan: RunPipeline, lane: ResolvedLane) -> AssetsDefinition:
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
        try:
            result = run_lane_step(
                plan,
                lane.id,
                config.overrides(),
                document=upstream["source_document"],
                chunks=upstream["chunk_map"],
                upstream={dep: upstream[asset_name(dep)] for dep in lane.depends_on},
                open_client=llm.client,
                session_id=context.partition_key,
                llm_fingerprint=llm.fingerprint(),
                max_concurrency=llm.profile.max_concurrency,
                checkpoints=lane_checkpoints(store, config.retry_rejected),
                progress=lambda msg: context.log.info(f"progress: {msg}"),
            )
        except TransientLLMError as exc:
            raise RetryRequested(max_retries=2, seconds_to_wait=10) from exc
        except LLMUnavailableError as exc:
            raise _fail(exc, f"lane {lane.id}: the chosen LLM tier is unavailable") from None
        except (LLMError, NotariusError) as exc:
            raise _fail(exc, f"lane {lane.id}") from None
        return Output(
            result, data_version=lane_data_version(result), metadata=lane_metadata(result)
        )

    return lane_asset


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
    plan: RunPipeline, extra: Mapping[str, AssetsDefinition] | None = None
) -> list[AssetsDefinition | AssetSpec]:
    pipeline = plan.pipeline
    with_evidence = bool(extra and "evidence_context" in extra)
    assets: list[AssetsDefinition | AssetSpec] = [
        transcript_spec(),
        build_source_document_asset(plan),
        build_chunk_map_asset(plan),
    ]
    assets.extend(build_lane_asset(plan, lane) for lane in pipeline.lanes)
    assets.extend((extra or {}).values())
    assets.append(build_bundle_asset(pipeline, with_evidence=with_evidence))
    return assets
