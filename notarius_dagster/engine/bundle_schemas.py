"""Schemas of the bundle's own documents (not lanes): the chunk map and the evidence context.
`python -m notarius_dagster.schemas --write` writes them to `schemas/<schema_id>.json`, next to
the lane schemas; the identities match the descriptors `index.json` carries."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from notarius_dagster.engine.evidence import evidence_context_schema
from notarius_dagster.engine.models import Frozen

CHUNK_MAP_SCHEMA_ID = "notarius.source.chunk_map"
CHUNK_MAP_SCHEMA_NAME = "notarius_source_chunk_map_v1"


class ChunkView(Frozen):
    """One published chunk: identity, position, unit range and ids, digest; never content."""

    chunk_id: str
    index: int = Field(ge=0)
    start_unit_id: int
    end_unit_id: int
    unit_ids: list[int] = Field(min_length=1)
    digest: str


class ChunkMapView(Frozen):
    """`chunk-map.json`, as `ChunkMap.public_view()` renders it."""

    source_id: str
    source_digest: str
    chunker: str
    chunks: list[ChunkView]


def chunk_map_schema() -> dict[str, Any]:
    schema = ChunkMapView.model_json_schema()
    schema["$id"] = CHUNK_MAP_SCHEMA_ID
    schema["title"] = CHUNK_MAP_SCHEMA_NAME
    return schema


def bundle_document_schemas() -> dict[str, dict[str, Any]]:
    """Schema id -> JSON Schema of every non-lane bundle document that has one."""
    evidence = evidence_context_schema()
    return {CHUNK_MAP_SCHEMA_ID: chunk_map_schema(), evidence["$id"]: evidence}
