"""The code location's entry point (what workspace.yaml loads): assembles the Definitions
from the resolved profile and what `assets/` and `resources/` define."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from dagster import Definitions, colored_console_logger, definitions, in_process_executor

from assets.checks import build_asset_checks
from assets.evidence import build_evidence_context_asset
from assets.factory import build_session_assets
from assets.jobs import materialize_session
from assets.quality import build_quality_checks
from assets.sensors import build_sensors
from assets.stale_sensor import build_stale_lanes_sensor
from notarius_dagster.dnd.evaluation_fields import DND_MATCH_FIELDS
from notarius_dagster.engine.resolution import (
    ResolvedPipeline,
    RuntimeBinding,
    resolve_profile_file,
)
from notarius_dagster.modules import load_modules
from notarius_dagster.progress import progress_logger
from notarius_dagster.settings import Settings, load_settings
from resources.bundle_store import BundleStore
from resources.io_managers import JsonAssetIOManager
from resources.llm import LLMResource


def resolve_settings_pipeline(settings: Settings, **overrides: Any) -> ResolvedPipeline:
    load_modules()
    return resolve_profile_file(settings.profile, llm_profile=settings.llm_profile, **overrides)


def extra_assets(pipeline: ResolvedPipeline) -> dict[str, Any]:
    """Optional session assets the profile switches on (today: the evidence context)."""
    evidence = build_evidence_context_asset(pipeline)
    return {"evidence_context": evidence} if evidence is not None else {}


def build_definitions(
    settings: Settings | None = None,
    *,
    runtime_references: Sequence[RuntimeBinding] = (),
    runtime_unbinds: Sequence[str] = (),
    lanes: Sequence[str] | None = None,
) -> Definitions:
    settings = settings or load_settings()
    pipeline = resolve_settings_pipeline(
        settings,
        runtime_references=runtime_references,
        runtime_unbinds=runtime_unbinds,
        lanes=lanes,
    )
    return Definitions(
        assets=build_session_assets(
            pipeline,
            extra=extra_assets(pipeline),
            reresolve=lambda refs, unbinds: resolve_settings_pipeline(
                settings,
                runtime_references=[*runtime_references, *refs],
                runtime_unbinds=[*runtime_unbinds, *unbinds],
                lanes=lanes,
            ),
        ),
        asset_checks=[*build_asset_checks(pipeline), *build_quality_checks(DND_MATCH_FIELDS)],
        sensors=[*build_sensors(settings), build_stale_lanes_sensor()],
        jobs=[materialize_session],
        resources={
            "io_manager": JsonAssetIOManager(root=str(settings.asset_values)),
            "store": BundleStore(root=str(settings.data_root), bundles_root=str(settings.bundles)),
            "llm": LLMResource(profile_json=json.dumps(pipeline.llm_profile)),
        },
        loggers={"console": colored_console_logger, "progress": progress_logger},
        # One process per run: a step per process costs 10-20 s of code loading each here,
        # and each lane already runs its chunk extractions concurrently (up to the LLM
        # profile's max_concurrency). docs/operations.md says how to scale out instead.
        executor=in_process_executor,
    )


@definitions
def defs() -> Definitions:
    """Loaded lazily by `dagster dev` / the webserver, from the environment's settings."""
    return build_definitions()
