"""Lane rules of `scene-descriptions`: a scene is a chunk. At extract, exactly one record whose
id and range are the chunk's; at merge, one record per accepted chunk and nothing else; after
normalization, unique ids, ranges inside the document, and each record's evidence equal to its
own range. Problems name indexes and fields, never titles or summaries. Registered by the lane as
`dnd.scene_descriptions.<name>`, in `RULES`."""

from __future__ import annotations

from collections import Counter
from typing import Any

from notarius_dagster.engine.contracts import ModuleOutput
from notarius_dagster.engine.digest import digest_of
from notarius_dagster.engine.lanes import LaneRule, LaneSpec
from notarius_dagster.engine.models import Chunk, SourceDocument
from notarius_dagster.engine.validators import ValidationContext

ITEMS = "scene_descriptions"


def _records(output: ModuleOutput | None) -> list[dict[str, Any]]:
    return list(((output.payload if output else None) or {}).get(ITEMS, []))


def _range(record: dict[str, Any]) -> tuple[Any, Any, Any]:
    return (record.get("source_id"), record.get("start_unit_id"), record.get("end_unit_id"))


def _ref_range(record: dict[str, Any]) -> tuple[Any, Any, Any]:
    ref = record.get("source_ref") or {}
    return (ref.get("source_id"), ref.get("start_unit_id"), ref.get("end_unit_id"))


def chunk_identity_problems(record: dict[str, Any], chunk: Chunk, where: str) -> list[str]:
    """The record is the chunk's scene: same id, source and inclusive range, cited as such."""
    problems = []
    if record.get("scene_id") != chunk.chunk_id:
        problems.append(f"{where}.scene_id: is not the chunk id")
    chunk_range = (chunk.source_id, chunk.start_unit_id, chunk.end_unit_id)
    if _range(record) != chunk_range:
        problems.append(f"{where}: source id or unit range is not the chunk's")
    if _ref_range(record) != chunk_range:
        problems.append(f"{where}.source_ref: is not the chunk's range")
    return problems


def one_scene_for_the_chunk(
    lane: LaneSpec, ctx: ValidationContext, output: ModuleOutput
) -> list[str]:
    """Extract: exactly one record, and it is this chunk's scene."""
    records = _records(output)
    if ctx.chunk is None:
        return []
    if len(records) != 1:
        return [f"{ITEMS}: expected exactly one scene for the chunk, got {len(records)}"]
    return chunk_identity_problems(records[0], ctx.chunk, f"{ITEMS}[0]")


def one_scene_per_accepted_chunk(
    lane: LaneSpec, ctx: ValidationContext, output: ModuleOutput
) -> list[str]:
    """Merge: the merged scenes are exactly the accepted extracts' scenes (none added, none
    dropped, none altered) and their ids are unique."""
    merged = _records(output)
    expected = [r for extract in ctx.extracts for r in _records(extract)]
    problems = _unique_ids(merged)
    if Counter(map(digest_of, merged)) != Counter(map(digest_of, expected)):
        problems.append(f"{ITEMS}: merged scenes are not the accepted chunks' scenes")
    return problems


def scenes_consistent(lane: LaneSpec, ctx: ValidationContext, output: ModuleOutput) -> list[str]:
    """Normalize: unique ids, the merged set of scenes, ranges inside the document, and each
    record's evidence equal to its range."""
    records = _records(output)
    problems = _unique_ids(records)
    if ctx.merged is not None and (
        sorted(str(r.get("scene_id")) for r in records)
        != sorted(str(r.get("scene_id")) for r in _records(ctx.merged))
    ):
        problems.append(f"{ITEMS}: normalized scene ids differ from the merged ones")
    for i, record in enumerate(records):
        problems.extend(_range_problems(record, ctx.document, f"{ITEMS}[{i}]"))
    return problems


def _unique_ids(records: list[dict[str, Any]]) -> list[str]:
    ids = [r.get("scene_id") for r in records]
    return [] if len(set(ids)) == len(ids) else [f"{ITEMS}: scene ids are not unique"]


def _range_problems(record: dict[str, Any], document: SourceDocument, where: str) -> list[str]:
    positions = document.position_index()
    source_id, start, end = _range(record)
    if source_id != document.source_id:
        return [f"{where}.source_id: does not match the document"]
    if start not in positions or end not in positions:
        return [f"{where}: unit range not in the document"]
    if positions[start] > positions[end]:
        return [f"{where}: start unit after end unit"]
    if _ref_range(record) != _range(record):
        return [f"{where}.source_ref: is not the scene's range"]
    return []


RULES = (
    LaneRule(stage="extract", name="one_per_chunk", check=one_scene_for_the_chunk),
    LaneRule(stage="merge", name="chunk_coverage", check=one_scene_per_accepted_chunk),
    LaneRule(stage="normalize", name="consistent", check=scenes_consistent),
)
