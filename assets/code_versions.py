"""Content-hash code versions: a lane asset's code version changes when its prompt, answer
schema, artifact schema, module versions or lane configuration change, so Dagster marks it
stale in every session partition (in the spirit of hooli's dbt_code_version)."""

from __future__ import annotations

from notarius_dagster.engine.artifact_kinds import get_kind
from notarius_dagster.engine.catalog import CATALOG
from notarius_dagster.engine.digest import digest_of
from notarius_dagster.engine.resolution import ResolvedLane, ResolvedPipeline, ResolvedStage


def _stage_material(stage: ResolvedStage) -> dict[str, object]:
    return {
        "stage": stage.model_dump(mode="json"),
        "material": CATALOG.fingerprint_material(stage.stage, stage.module, stage.options),
    }


def lane_code_version(lane: ResolvedLane) -> str:
    kind = get_kind(lane.kind)
    digest = digest_of(
        {
            "lane": lane.id,
            "kind_schema": kind.json_schema(),
            "stages": [_stage_material(s) for s in lane.stages()],
        }
    )
    return digest.split(":", 1)[1][:16]


def chunk_code_version(pipeline: ResolvedPipeline) -> str:
    return digest_of(_stage_material(pipeline.chunk)).split(":", 1)[1][:16]
