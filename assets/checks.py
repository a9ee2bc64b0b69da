"""Asset checks on each lane and on the bundle (filled in by the operations issue)."""

from __future__ import annotations

from dagster import AssetChecksDefinition

from notarius_dagster.engine.resolution import ResolvedPipeline


def build_asset_checks(pipeline: ResolvedPipeline) -> list[AssetChecksDefinition]:
    return []
