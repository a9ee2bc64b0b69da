"""Asset metadata for lanes: counts and a short preview table (names and kinds, never
transcript text), built with pandas and rendered as Markdown."""

from __future__ import annotations

from typing import Any

import pandas as pd
from dagster import MetadataValue

from notarius_dagster.engine.lane_runner import LaneResult

PREVIEW_ROWS = 8
# Fields that are names, ids or kinds: safe to preview. Summaries and descriptions are not.
PREVIEW_FIELDS = ("id", "name", "kind", "scene_id", "actor", "spell", "item", "event", "npc_id",
                  "round", "caster")


def preview_table(result: LaneResult, items_field: str | None) -> str:
    if not result.payload or not items_field:
        return "_no records_"
    records = result.payload.get(items_field, [])[:PREVIEW_ROWS]
    rows = [{k: r[k] for k in PREVIEW_FIELDS if k in r and not isinstance(r[k], dict | list)}
            for r in records]
    if not rows:
        return "_no records_"
    return pd.DataFrame(rows).to_markdown(index=False)


def lane_metadata(result: LaneResult) -> dict[str, Any]:
    from notarius_dagster.engine.artifact_kinds import get_kind

    stats = result.stats
    items_field = get_kind(result.kind).items_field
    return {
        "status": result.status,
        "records": stats.records,
        "chunks": stats.chunks,
        "chunks_called_model": stats.called_model,
        "chunks_reused": stats.reused,
        "chunks_skipped": stats.skipped,
        "rejections": len(result.rejections),
        "warnings": len(result.warnings),
        "llm_calls": stats.usage.calls,
        "prompt_tokens": stats.usage.prompt_tokens,
        "completion_tokens": stats.usage.completion_tokens,
        "cost_usd": stats.usage.cost_usd,
        "structured_output_rungs": MetadataValue.json(stats.usage.rungs),
        "preview": MetadataValue.md(preview_table(result, items_field)),
    }
