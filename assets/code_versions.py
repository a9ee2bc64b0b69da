"""Content-hash code versions: a lane asset's code version changes when its prompt, answer
schema, artifact schema, module versions or lane configuration change, and `session_bundle`'s
when the profile's output options or publish policy change, so Dagster marks it stale in every
session partition (in the spirit of hooli's dbt_code_version)."""

from __future__ import annotations

from notarius_dagster.engine.digest import digest_of
from notarius_dagster.engine.lanes import LaneSpec
from notarius_dagster.engine.resolution import ResolvedLane, ResolvedPipeline, ResolvedStage


def _stage_material(stage: ResolvedStage, material: object = None) -> dict[str, object]:
    """The stage as resolved, and what else determines its output: an extractor's own material
    (`Extractor.fingerprint_material`: its prompt and answer schema); nothing for the other
    stages, whose output is a function of their inputs."""
    return {"stage": stage.model_dump(mode="json"), "material": material or {}}


def lane_code_version(lane: ResolvedLane, spec: LaneSpec) -> str:
    extract = dict(spec.extractor().fingerprint_material())
    digest = digest_of(
        {
            "lane": lane.id,
            "kind_schema": spec.artifact_kind.json_schema(),
            "stages": [
                _stage_material(lane.extract, extract),
                _stage_material(lane.merge),
                _stage_material(lane.normalize),
            ],
        }
    )
    return digest.split(":", 1)[1][:16]


def chunk_code_version(pipeline: ResolvedPipeline) -> str:
    return digest_of(_stage_material(pipeline.chunk)).split(":", 1)[1][:16]


BUNDLE_BUILDER_VERSION = "1"
"""Bump when the same lane results give a different bundle."""


def bundle_code_version(pipeline: ResolvedPipeline) -> str:
    """`session_bundle`'s code version: the builder's version, the output options (which lanes
    the evidence context covers, its window, ...) and the publish policy. A profile edit to
    either makes every published bundle stale, as a prompt edit makes its lane stale."""
    material = {
        "builder": BUNDLE_BUILDER_VERSION,
        "output": {"module": pipeline.output_module, "options": pipeline.output_options},
        "publish": pipeline.publish.model_dump(mode="json"),
    }
    return f"{BUNDLE_BUILDER_VERSION}-{digest_of(material).split(':', 1)[1][:12]}"
