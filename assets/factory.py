"""The asset factory: builds the session graph from a resolved pipeline profile.

    transcript (external) -> source_document -> chunk_map -> <lane>... -> session_bundle

A lane that consumes another lane's artifact depends on that lane's asset, so the graph shows
the reference and a failed producer stops its consumers. Every asset is partitioned by session
and calls one engine function (`engine/session_steps.py` for the steps before the bundle); its
body turns engine errors into a `Failure` (or a retry for a transient LLM error) and records
metadata. The asset checks of a lane and of the bundle are declared on the asset
(`check_specs`) and evaluated by its step after its value (assets/checks.py, assets/quality.py).

Runtime references reach a run one way: as the `RuntimeReferences` run config of the assets
that take it (`source_document`, `chunk_map` and every lane), which is what a run launched in
the UI gives and what `notarius run --reference/--unbind` passes (`runtime_references_config`)."""

import hashlib
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from dagster import (
    AssetCheckResult,
    AssetExecutionContext,
    AssetIn,
    AssetKey,
    AssetMaterialization,
    AssetOut,
    AssetsDefinition,
    AssetSpec,
    BetaWarning,
    Config,
    DagsterEventType,
    DataVersion,
    Failure,
    MaterializeResult,
    Output,
    RetryRequested,
    asset,
    multi_asset,
)

from assets.automation import session_condition
from assets.bundle_summary import bundle_metadata
from assets.checks import (
    bundle_check_result,
    bundle_check_specs,
    lane_check_results,
    lane_check_specs,
    max_rejection_rate,
)
from assets.code_versions import bundle_code_version, chunk_code_version, lane_code_version
from assets.graph_style import INGEST_GROUP, LANES_GROUP, PUBLISH_GROUP, lane_description, owners
from assets.metadata import lane_metadata
from assets.partitions import sessions_partitions
from assets.quality import (
    quality_check_result,
    quality_check_spec,
    quality_materialization_metadata,
    score_session,
)
from assets.run_tags import ensure_run_tags
from assets.staleness import EXTERNAL_INPUTS_KEY, lanes_materialized_in_run
from notarius_dagster.engine.checkpoints import CheckpointStore, RetryRejections
from notarius_dagster.engine.chunk_stage import ChunkResult
from notarius_dagster.engine.digest import digest_of
from notarius_dagster.engine.errors import (
    LLMError,
    LLMUnavailableError,
    NotariusError,
    TransientLLMError,
)
from notarius_dagster.engine.failure_causes import cause_of
from notarius_dagster.engine.inputs import EXTENSION_FORMATS
from notarius_dagster.engine.lane_runner import LaneDeadline, LaneResult
from notarius_dagster.engine.models import SourceDocument
from notarius_dagster.engine.redaction import redact_secrets
from notarius_dagster.engine.registry import LaneRegistry
from notarius_dagster.engine.resolution import ResolvedLane, ResolvedPipeline
from notarius_dagster.engine.session_bundle import publish_session_bundle
from notarius_dagster.engine.session_steps import (
    LaneOutcome,
    RunPipeline,
    RuntimeOverrides,
    chunk_document,
    file_bindings,
    lane_levels,
    load_source_document,
    run_lane_level,
)
from notarius_dagster.engine.transcripts import stored_transcript
from notarius_dagster.report.publish import report_path, report_url
from notarius_dagster.settings import load_settings
from resources.bundle_store import BundleStore
from resources.llm import LLMResource


def versioned_output(
    value: Any,
    data_version: DataVersion,
    metadata: dict[str, Any],
    *,
    output_name: str = "result",
) -> Output:
    """`Output(value, data_version=...)`: the data versions staleness reads
    (assets/staleness.py). The parameter is beta in Dagster 1.13; its warning is silenced here,
    for this one call, rather than for the whole process at import."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=BetaWarning, message=".*data_version.*")
        return Output(value, output_name=output_name, data_version=data_version, metadata=metadata)


TRANSCRIPT = AssetKey("transcript")


class RuntimeReferences(Config):
    """Runtime reference overrides for one run, as `notarius run --reference/--unbind` gives
    them: `references` maps a selector (SLOT, LANE.extract.SLOT, ...) to a file path (absolute,
    or relative to the run worker's working directory); `unbind` lists selectors to unbind."""

    references: dict[str, str] = {}
    unbind: list[str] = []
    max_calls: int | None = None  # `notarius run --max-calls`: the run's call budget
    retry_rejected: bool = False
    """Ask the model again for chunks whose extraction was rejected under the same
    fingerprint (lanes only; `notarius run --retry-rejected`). Otherwise a stored rejection is
    a result and is reused."""

    def overrides(self) -> RuntimeOverrides:
        return RuntimeOverrides(
            references=dict(self.references), unbind=tuple(self.unbind), max_calls=self.max_calls
        )


def asset_name(lane_id: str) -> str:
    return lane_id.replace("-", "_")


def runtime_reference_assets(pipeline: ResolvedPipeline) -> list[str]:
    """The steps (ops) that take `RuntimeReferences` config, in graph order: the lanes' are
    their levels' steps (`level_op_names`)."""
    return ["source_document", "chunk_map", *level_op_names(pipeline)]


RETRY_REJECTED_CONFIG = "retry_rejected"


def runtime_references_config(
    pipeline: ResolvedPipeline,
    references: Mapping[str, str],
    unbind: Sequence[str],
    max_calls: int | None = None,
    *,
    retry_rejected: bool = False,
) -> dict[str, Any]:
    """Run config giving every asset that takes it the same runtime references (what
    `notarius run` passes; in the UI a person may give them to some assets only), the run's
    call budget, and to the lanes `retry_rejected` when asked."""
    config: dict[str, Any] = {"references": dict(references), "unbind": list(unbind)}
    if max_calls is not None:
        config["max_calls"] = max_calls
    lanes = set(level_op_names(pipeline))
    return {
        "ops": {
            name: {
                "config": {**config, RETRY_REJECTED_CONFIG: True}
                if retry_rejected and name in lanes
                else config
            }
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
    (assets/staleness.py)."""
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


LANE_STEP_RETRIES = 2
"""Step retries of a lane after a transient provider error outlasted the client's retries."""


def _text(exc: BaseException, what: str) -> str:
    """`what: <the engine's message>`, with anything shaped like a credential redacted."""
    return redact_secrets(f"{what}: {exc}")


def _fail(exc: NotariusError, what: str) -> Failure:
    """A content-safe failure a person can act on (the engine's message, not a traceback),
    with anything shaped like a credential redacted."""
    return Failure(description=_text(exc, what))


def _fail_unexpected(exc: BaseException, what: str) -> Failure:
    """A failure the code did not raise on purpose (disk full, out of memory): its cause,
    named without paths or content, instead of Dagster's bare `Error occurred while
    executing op`."""
    return Failure(description=f"{what}: {cause_of(exc)}")


def session_asset(name: str, group_name: str, **declared: Any) -> Any:
    """`@asset` for one asset of the session graph: owned like every asset here, one partition
    per session, Python writing JSON, materialized by the session automation condition. What
    tells the assets apart (inputs, code version, pool, tags, description) is `declared`."""
    return asset(
        name=name,
        group_name=group_name,
        owners=owners(),
        partitions_def=sessions_partitions,
        kinds={"python", "json"},
        automation_condition=session_condition(),
        **declared,
    )


def missing_transcript_message(session_id: str) -> str:
    """Why a partition without a stored transcript cannot run, and how to give it one."""
    return (
        f"source_document: no transcript is registered for session {session_id!r}; add one "
        f"with `notarius sessions add PATH --session-id {session_id}` (or `notarius run`), or "
        "drop it into the inbox"
    )


def stored_transcript_digest(store: BundleStore, session_id: str) -> str | None:
    """The sha256 of the session's stored transcript, None when there is none."""
    for ext in EXTENSION_FORMATS:
        path = store.transcripts / f"{session_id}{ext}"
        if path.is_file():
            return hashlib.sha256(path.read_bytes()).hexdigest()
    return None


def build_source_document_asset(plan: RunPipeline) -> AssetsDefinition:
    @session_asset(
        "source_document",
        INGEST_GROUP,
        deps=[TRANSCRIPT],
        code_version="1",
        description="The session transcript parsed into ordered, validated source units. "
        "Depends on: transcript (the stored file). Fails, saying how to add one, when the "
        "session has no stored transcript.",
    )
    def source_document(
        context: AssetExecutionContext,
        config: RuntimeReferences,
        store: BundleStore,
        llm: LLMResource,
    ) -> Output[SourceDocument]:
        ensure_run_tags(context, plan.pipeline)
        sha256 = stored_transcript_digest(store, context.partition_key)
        if sha256 is None:
            raise Failure(description=missing_transcript_message(context.partition_key))
        # The transcript this run read, recorded on the external `transcript` asset from inside
        # the run, so automation sees it as handled by this run (no second run for it).
        context.log_event(
            AssetMaterialization(
                asset_key=TRANSCRIPT,
                partition=context.partition_key,
                metadata={"sha256": sha256, "recorded_by": "source_document"},
            )
        )
        try:
            document = load_source_document(
                plan,
                config.overrides(),
                transcripts=store.transcripts,
                session_id=context.partition_key,
            )
            inputs = external_inputs_digest(
                plan,
                config.overrides(),
                transcripts=store.transcripts,
                session_id=context.partition_key,
                llm_fingerprint=llm.fingerprint(),
            )
        except NotariusError as exc:
            raise _fail(exc, "source_document") from None
        except (OSError, MemoryError) as exc:
            raise _fail_unexpected(exc, "source_document") from None
        return versioned_output(
            document,
            DataVersion(document.digest.split(":", 1)[-1][:24]),
            {
                "units": len(document.units),
                "media_type": document.media_type,
                "source_digest": document.digest,
                EXTERNAL_INPUTS_KEY: inputs,
            },
        )

    return source_document


def build_chunk_map_asset(plan: RunPipeline) -> AssetsDefinition:
    @session_asset(
        "chunk_map",
        INGEST_GROUP,
        code_version=chunk_code_version(plan.pipeline),
        description=f"Validated chunks ({plan.pipeline.chunk.module} chunker) of the source "
        "document. Depends on: source_document.",
    )
    def chunk_map(
        context: AssetExecutionContext, config: RuntimeReferences, source_document: SourceDocument
    ) -> Output[ChunkResult]:
        ensure_run_tags(context, plan.pipeline)
        try:
            # No chunker shipped today calls a model; an LLM-backed one would take the `llm`
            # resource here and join the `llm` pool.
            result = chunk_document(
                plan, source_document, config.overrides(), session_id=context.partition_key
            )
        except NotariusError as exc:
            raise _fail(exc, "chunk_map") from None
        except (OSError, MemoryError) as exc:
            raise _fail_unexpected(exc, "chunk_map") from None
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


STEP_RETRY_WAIT_S = 10
"""Seconds between a lane step's tries after a transient provider error (2 more tries)."""


def lane_deadline(context: AssetExecutionContext, step_key: str, seconds: float) -> LaneDeadline:
    """The lane's deadline, counted from its step's first try in this run: Dagster's step
    retries share one deadline instead of multiplying it."""
    started = time.time()
    if context.retry_number > 0:
        starts = context.instance.all_logs(context.run_id, of_type=DagsterEventType.STEP_START)
        first = [e.timestamp for e in starts if e.step_key == step_key]
        if first:
            started = min(first)
    return LaneDeadline.starting_at(started, seconds)


def level_op_name(level: int) -> str:
    """The step that runs the lanes of dependency level `level` (0-based): `lanes_1`,
    `lanes_2`, ... Each lane stays its own asset; the step is how they execute."""
    return f"lanes_{level + 1}"


def level_op_names(pipeline: ResolvedPipeline) -> list[str]:
    """The steps of the pipeline's lane levels, in order."""
    return [level_op_name(n) for n in range(len(lane_levels(pipeline)))]


def build_lane_level_asset(
    plan: RunPipeline, level: int, lanes: Sequence[ResolvedLane], max_rejection: float
) -> AssetsDefinition:
    """The assets of one dependency level of lanes (`lane_levels`), executed by one step that
    runs its lanes at the same time (`run_lane_level`). Each lane is its own asset (code
    version, data version, checks, automation condition, lineage to the lanes it references).
    The step also evaluates each lane's checks (assets/checks.py) on the value it has just
    produced, with `max_rejection` as the rejection threshold.

    The level is not subsettable: a lane is materialized with its level-mates (Dagster's
    execution set; `assets/jobs.py: with_execution_sets`). A level-mate whose inputs did not
    change reuses every chunk from its checkpoint (no model call) and keeps its data version,
    so nothing downstream of it becomes stale. Why not subsettable: a subsettable step lets the
    UI execute a lane's checks without the lane, in a run without a session, which fails in
    Dagster's input loading before any Notarius code (partitioned checks, Dagster 1.13); not
    subsettable, the UI says "This check cannot execute without materializing the asset".

    A lane that fails does not stop the others of its level: their values and checks are
    recorded first, then the step fails naming each lane that failed, so no later level runs.
    A transient provider error that outlasted the client's retries retries the whole step
    (Dagster's step retry; the lanes that had finished reuse their checkpoints and call
    nothing)."""
    policy = plan.pipeline.publish
    op_name = level_op_name(level)
    ins = {"source_document": AssetIn("source_document"), "chunk_map": AssetIn("chunk_map")}
    for lane in lanes:
        for dep in lane.depends_on:
            ins[asset_name(dep)] = AssetIn(asset_name(dep))
    specs = {lane.id: plan.registry.lane(lane.id) for lane in lanes}
    outs = {
        asset_name(lane.id): AssetOut(
            key=AssetKey(asset_name(lane.id)),
            group_name=LANES_GROUP,
            owners=owners(),
            kinds={"python", "json"},
            code_version=lane_code_version(lane, specs[lane.id]),
            automation_condition=session_condition(),
            tags={"notarius/lane": lane.id},
            description=lane_description(lane, specs[lane.id]),
        )
        for lane in lanes
    }
    internal_deps = {
        asset_name(lane.id): {
            AssetKey("source_document"),
            AssetKey("chunk_map"),
            *(AssetKey(asset_name(dep)) for dep in lane.depends_on),
        }
        for lane in lanes
    }
    check_specs = [
        spec
        for lane in lanes
        for spec in lane_check_specs(
            AssetKey(asset_name(lane.id)), lane.kind, max_rejection, policy
        )
    ]

    @multi_asset(
        name=op_name,
        outs=outs,
        ins=ins,
        internal_asset_deps=internal_deps,
        partitions_def=sessions_partitions,
        pool="llm",
        check_specs=check_specs,
        description=f"Runs the lanes of level {level + 1} "
        f"({', '.join(lane.id for lane in lanes)}) at the same time.",
    )
    def lane_level(
        context: AssetExecutionContext,
        config: RuntimeReferences,
        llm: LLMResource,
        store: BundleStore,
        **upstream: Any,
    ) -> Iterator[Output[LaneResult] | AssetCheckResult]:
        ensure_run_tags(context, plan.pipeline)
        llm.load_client()  # before the deadline starts: the import is not the lanes' time
        deadline = lane_deadline(context, op_name, llm.profile.lane_deadline_s)
        outcomes = run_lane_level(
            plan,
            [lane.id for lane in lanes],
            config.overrides(),
            document=upstream["source_document"],
            chunks=upstream["chunk_map"],
            upstream={dep: upstream[asset_name(dep)] for lane in lanes for dep in lane.depends_on},
            open_client=llm.client,
            session_id=context.partition_key,
            llm_fingerprint=llm.fingerprint(),
            max_concurrency=llm.profile.max_concurrency,
            checkpoints=lane_checkpoints(store, config.retry_rejected),
            progress=lambda msg: context.log.info(f"progress: {msg}"),
            deadline=deadline,
        )
        failed = [o for o in outcomes if o.error is not None]
        if failed and all(isinstance(o.error, TransientLLMError) for o in failed):
            retry_level(context, deadline, failed)
        for lane, outcome in zip(lanes, outcomes, strict=True):
            if outcome.result is None:
                continue
            key = AssetKey(asset_name(lane.id))
            kind = specs[lane.id].artifact_kind
            yield versioned_output(
                outcome.result,
                lane_data_version(outcome.result),
                lane_metadata(outcome.result, kind),
                output_name=asset_name(lane.id),
            )
            # After the value: a blocking check that fails stops the downstream assets, and
            # the lane's value stays stored for a re-run (docs/operations.md, "Checks").
            yield from lane_check_results(
                key, outcome.result, upstream["source_document"], kind, max_rejection, policy
            )
        if failed:
            raise lanes_failure(failed, context.retry_number, deadline)

    return lane_level


def retry_level(
    context: AssetExecutionContext, deadline: LaneDeadline, failed: Sequence[LaneOutcome]
) -> None:
    """Ask Dagster to retry the level's step after transient provider errors (each lane's
    error outlasted the client's own retries), unless the deadline or the step's tries are
    spent; then the step fails with the provider's cause (`lanes_failure`) instead of
    Dagster's bare `Exceeded max_retries`."""
    if deadline.remaining() <= STEP_RETRY_WAIT_S:  # a retry would start past it
        return
    if context.retry_number >= LANE_STEP_RETRIES:
        return
    attempt = context.retry_number + 1
    for outcome in failed:
        context.log.warning(
            redact_secrets(
                f"lane {outcome.lane_id}: step attempt {attempt} of {LANE_STEP_RETRIES + 1} "
                f"failed ({outcome.error}); retrying in {STEP_RETRY_WAIT_S} s"
            )
        )
    raise RetryRequested(max_retries=LANE_STEP_RETRIES, seconds_to_wait=STEP_RETRY_WAIT_S)


def lanes_failure(
    failed: Sequence[LaneOutcome], retry_number: int, deadline: LaneDeadline
) -> Failure:
    """One failure naming every lane of the step that failed, each with its cause (content-safe:
    the engine's messages, redacted)."""
    return Failure(
        description="; ".join(lane_failure_text(o, retry_number, deadline) for o in failed)
    )


def lane_failure_text(outcome: LaneOutcome, retry_number: int, deadline: LaneDeadline) -> str:
    """Why one lane failed, as `lane <id>: ...` (the wording each lane step used)."""
    exc, what = outcome.error, f"lane {outcome.lane_id}"
    if isinstance(exc, TransientLLMError):
        if deadline.remaining() <= STEP_RETRY_WAIT_S:  # a retry would have started past it
            return _text(deadline.error(outcome.lane_id, cause=str(exc)), what)
        if retry_number >= LANE_STEP_RETRIES:
            return _text(exc, f"{what}: failed in each of {retry_number + 1} step attempts; last")
        return _text(exc, what)
    if isinstance(exc, LLMUnavailableError):
        return _text(exc, f"{what}: the chosen LLM tier is unavailable")
    if isinstance(exc, (LLMError, NotariusError)):
        return _text(exc, what)
    # Anything else (disk full, out of memory, a bug): its cause, without paths or content.
    return f"{what}: {cause_of(exc) if exc is not None else 'failed'}"


def build_bundle_asset(
    pipeline: ResolvedPipeline, registry: LaneRegistry, *, with_evidence: bool
) -> AssetsDefinition:
    kinds = registry.kinds()
    match_fields = registry.match_fields()
    ins = {"source_document": AssetIn("source_document"), "chunk_map": AssetIn("chunk_map")}
    for lane in pipeline.lanes:
        ins[asset_name(lane.id)] = AssetIn(asset_name(lane.id))
    if with_evidence:
        ins["evidence_context"] = AssetIn("evidence_context")

    @session_asset(
        "session_bundle",
        PUBLISH_GROUP,
        ins=ins,
        code_version=bundle_code_version(pipeline),
        description="Writes manifest, index, warnings, rejections, chunk map and lane files, "
        "and publishes the bundle atomically. Depends on: source_document, chunk_map, every "
        "lane" + (", evidence_context." if with_evidence else ".") + " Its metadata links the "
        "bundle folder and the session report, with a summary and this run's LLM usage; with "
        "a gold file for the session, its quality scores (`quality.*`, plotted per session).",
        check_specs=[*bundle_check_specs(), quality_check_spec()],
    )
    def session_bundle(
        context: AssetExecutionContext, store: BundleStore, **upstream: Any
    ) -> Iterator[MaterializeResult | AssetCheckResult]:
        ensure_run_tags(context, pipeline)
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
                kinds=kinds,
            )
        except NotariusError as exc:
            raise _fail(exc, "session_bundle") from None
        except (OSError, MemoryError) as exc:
            raise _fail_unexpected(exc, "session_bundle: publish") from None
        session_id = context.partition_key
        results = [upstream[asset_name(lane.id)] for lane in pipeline.lanes]
        ran = lanes_materialized_in_run(
            context.instance,
            context.run_id,
            session_id,
            [AssetKey(asset_name(lane.id)) for lane in pipeline.lanes],
        )
        served_at = load_settings().report_base_url
        scoring = score_session(Path(store.root), store.bundles, session_id, match_fields)
        yield MaterializeResult(
            metadata={
                **bundle_metadata(
                    manifest=published.manifest,
                    files=published.files,
                    path=published.path,
                    results=results,
                    ran_in_run={
                        r.lane_id for r in results if AssetKey(asset_name(r.lane_id)) in ran
                    },
                    report_path=report_path(store.bundles, session_id),
                    report_url=report_url(served_at, session_id) if served_at else None,
                ),
                **quality_materialization_metadata(scoring),
            }
        )
        yield bundle_check_result(store.bundles, session_id)
        yield quality_check_result(scoring)

    return session_bundle


def _run_start(context: AssetExecutionContext) -> float:
    record = context.instance.get_run_record_by_id(context.run_id)
    if record is not None and record.start_time:
        return float(record.start_time)
    return time.time()


def transcript_spec() -> AssetSpec:
    return AssetSpec(
        TRANSCRIPT,
        group_name=INGEST_GROUP,
        owners=owners(),
        partitions_def=sessions_partitions,
        kinds={"file"},
        description="The session's transcript in the transcript store (external: registered by "
        "`notarius sessions add`, `notarius run` or the inbox sensor). A session whose "
        "transcript was never recorded here is never run by automation.",
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
    max_rejection = max_rejection_rate()
    assets.extend(
        build_lane_level_asset(plan, level, lanes, max_rejection)
        for level, lanes in enumerate(lane_levels(pipeline))
    )
    assets.extend((extra or {}).values())
    assets.append(build_bundle_asset(pipeline, plan.registry, with_evidence=with_evidence))
    return assets
