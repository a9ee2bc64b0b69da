"""Asset metadata for lanes: counts and a short preview table (names, ids and kinds, never
transcript text), as Dagster's own table metadata (the UI renders it as a table).

The preview is an allowlist: only the record fields the lane declares as `preview_fields` (its
`LaneSpec`, carried by the artifact kind), only scalar values, strings cut to
`PREVIEW_CELL_CHARS`. Prose fields are never declared, so never shown, and a name the model
filled with a long quotation is cut short. A kind that declares no preview fields shows none."""

from __future__ import annotations

from typing import Any

from dagster import MetadataValue, TableColumn, TableMetadataValue, TableRecord, TableSchema

from notarius_dagster.dnd.roster import ROSTER_SLOT, dm_dropped_count, dropped_count
from notarius_dagster.engine.artifact_kinds import ArtifactKind
from notarius_dagster.engine.lane_runner import LaneResult

PREVIEW_ROWS = 8
PREVIEW_CELL_CHARS = 40


def _cell(value: str | int | float | bool) -> str | int | float | bool:
    """A scalar as shown in the table: numbers as they are, strings on one line, no table
    syntax, at most PREVIEW_CELL_CHARS characters."""
    if not isinstance(value, str):
        return value
    text = " ".join(value.replace("|", "/").split())
    return text if len(text) <= PREVIEW_CELL_CHARS else text[: PREVIEW_CELL_CHARS - 1] + "…"


def preview_table(result: LaneResult, kind: ArtifactKind) -> TableMetadataValue:
    """The first records as a table of the kind's preview fields (a field a record lacks, or
    holds no scalar in, is an empty cell); no records, no rows."""
    fields = list(kind.preview_fields)
    records = [
        record.model_dump(mode="json", by_alias=True)
        for record in result.records(kind)[:PREVIEW_ROWS]
    ]
    rows = [
        TableRecord(
            {
                k: _cell(v) if isinstance(v := r.get(k), str | int | float | bool) else ""
                for k in fields
            }
        )
        for r in records
    ]
    schema = TableSchema(columns=[TableColumn(name) for name in fields])
    return MetadataValue.table(records=rows, schema=schema)


def lane_metadata(result: LaneResult, kind: ArtifactKind) -> dict[str, Any]:
    stats = result.stats
    return {
        "status": result.status,
        "records": stats.records,
        "chunks": stats.chunks,
        "chunks_called_model": stats.called_model,
        "chunks_reused": stats.reused,
        "chunks_skipped": stats.skipped,
        "rejections": len(result.rejections),
        "records_rejected": stats.records_rejected,
        "warnings": len(result.warnings),
        "llm_calls": stats.usage.calls,
        "prompt_tokens": stats.usage.prompt_tokens,
        "completion_tokens": stats.usage.completion_tokens,
        "cached_prompt_tokens": stats.usage.cached_prompt_tokens,
        "cost_usd": (
            "unpriced" if stats.usage.priced_cost_usd is None else stats.usage.priced_cost_usd
        ),
        "unpriced_calls": stats.usage.unpriced_calls,
        "structured_output_rungs": MetadataValue.json(stats.usage.rungs),
        "structured_output_stepdowns": MetadataValue.json(stats.usage.stepdowns),
        "preview": preview_table(result, kind),
        **roster_metadata(result),
    }


def roster_metadata(result: LaneResult) -> dict[str, Any]:
    """With a roster bound: how many records it dropped as player characters and as the DM's
    label (counted from the lane's count-only warnings, which reused extractions keep too)."""
    if not any(ref.get("slot") == ROSTER_SLOT for ref in result.references):
        return {}
    return {
        "party_records_dropped": dropped_count(result.warnings),
        "dm_records_dropped": dm_dropped_count(result.warnings),
    }
