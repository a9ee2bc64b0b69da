"""The code location's entry point (what workspace.yaml loads): assembles the Definitions
from the resolved profile and what `assets/` and `resources/` define."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial

from dagster import (
    AssetsDefinition,
    Definitions,
    colored_console_logger,
    definitions,
    in_process_executor,
)

from assets.automation import build_automation_sensor
from assets.campaign import build_campaign_assets, pipeline_roster
from assets.evidence import build_evidence_context_asset
from assets.factory import build_session_assets
from assets.jobs import materialize_session
from assets.report import build_report_asset
from assets.run_tags import pipeline_tags
from assets.sensors import build_sensors
from assets.up_to_date import build_staleness_definitions
from notarius_dagster.engine.registry import LaneRegistry
from notarius_dagster.engine.resolution import (
    ResolvedPipeline,
    RuntimeBinding,
    resolve_profile_file,
)
from notarius_dagster.engine.session_steps import RunPipeline
from notarius_dagster.modules import registry as dnd_registry
from notarius_dagster.progress import progress_logger
from notarius_dagster.settings import Settings, api_key, load_settings
from resources.bundle_store import BundleStore
from resources.io_managers import JsonAssetIOManager
from resources.llm import llm_resource

session_executor = in_process_executor
"""Every step of a run in the run's own process, one after another: the lanes of one level run
at the same time inside their level's step (assets/factory.py: `build_lane_level_asset`), so a
run is one process, whoever launches it (docs/operations.md, "Concurrency and retries")."""


def llm_not_ready(profile: Mapping[str, object]) -> str | None:
    """The inbox sensor's check before it takes a transcript: the model's key and package."""
    from notarius_dagster.llm.preflight import readiness_problems
    from notarius_dagster.llm.profiles import LLMProfile

    llm = LLMProfile.model_validate(profile)
    problems = readiness_problems(llm, api_key(llm.api_key_env))
    return "; ".join(problems) if problems else None


def resolve_settings_pipeline(
    settings: Settings,
    registry: LaneRegistry,
    *,
    runtime_references: Sequence[RuntimeBinding] = (),
    runtime_unbinds: Sequence[str] = (),
    lanes: Sequence[str] | None = None,
) -> ResolvedPipeline:
    return resolve_profile_file(
        settings.profile,
        llm_profile=settings.llm_profile,
        registry=registry,
        runtime_references=runtime_references,
        runtime_unbinds=runtime_unbinds,
        lanes=lanes,
    )


def run_pipeline(
    settings: Settings,
    *,
    lanes: Sequence[str] | None = None,
    registry: LaneRegistry | None = None,
) -> RunPipeline:
    """The profile resolved alone against `registry` (default: the D&D one; what the graph is
    built from), and how a run resolves it again with its runtime references."""
    lane_registry = registry or dnd_registry()

    def resolve(references: Sequence[RuntimeBinding], unbinds: Sequence[str]) -> ResolvedPipeline:
        return resolve_settings_pipeline(
            settings,
            lane_registry,
            runtime_references=references,
            runtime_unbinds=unbinds,
            lanes=lanes,
        )

    return RunPipeline(pipeline=resolve((), ()), registry=lane_registry, resolve=resolve)


def extra_assets(pipeline: ResolvedPipeline, registry: LaneRegistry) -> dict[str, AssetsDefinition]:
    """Optional session assets the profile switches on (today: the evidence context)."""
    evidence = build_evidence_context_asset(pipeline, registry)
    return {"evidence_context": evidence} if evidence is not None else {}


def build_definitions(
    settings: Settings | None = None,
    *,
    lanes: Sequence[str] | None = None,
    registry: LaneRegistry | None = None,
) -> Definitions:
    """The code location for `settings` (default: from the environment), optionally with a
    subset of the profile's lanes. Runtime references are not part of it: a run passes them as
    run config (assets/factory.py: RuntimeReferences)."""
    settings = settings or load_settings()
    return definitions_for(settings, run_pipeline(settings, lanes=lanes, registry=registry))


def definitions_for(settings: Settings, plan: RunPipeline) -> Definitions:
    """The Definitions of an already resolved `plan` (the runner resolves it first to check a
    run's runtime references before anything is launched)."""
    pipeline, registry = plan.pipeline, plan.registry
    campaign_assets, campaign_sensors = build_campaign_assets(
        pipeline, registry, settings.store.bundles
    )
    tags = pipeline_tags(pipeline)
    session_assets = [
        *build_session_assets(plan, extra=extra_assets(pipeline, registry)),
        build_report_asset(
            pipeline=pipeline, roster_file=pipeline_roster(pipeline), registry=registry
        ),
    ]
    up_to_date_check, staleness_sensor = build_staleness_definitions(session_assets)
    return Definitions(
        assets=[*session_assets, *campaign_assets],
        asset_checks=[up_to_date_check],
        sensors=[
            *build_sensors(
                settings.store,
                pipeline.limits.max_transcript_bytes,
                run_tags=tags,
                llm_not_ready=partial(llm_not_ready, pipeline.llm_profile),
            ),
            build_automation_sensor(tags),
            staleness_sensor,
            *campaign_sensors,
        ],
        jobs=[materialize_session],
        resources={
            "io_manager": JsonAssetIOManager(root=str(settings.store.asset_values)),
            "store": BundleStore.from_paths(settings.store),
            "llm": llm_resource(pipeline.llm_profile),  # a secret endpoint by EnvVar
        },
        loggers={"console": colored_console_logger, "progress": progress_logger},
        executor=session_executor,
    )


@definitions
def defs() -> Definitions:
    """Loaded lazily by `dagster dev` / the webserver, from the environment's settings."""
    return build_definitions()
