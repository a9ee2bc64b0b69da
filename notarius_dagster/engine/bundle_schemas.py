"""Schemas of the bundle's own documents (not lanes): index, manifest, warnings, rejections,
chunk map and evidence context. `python -m notarius_dagster.schemas --write` writes them to
`schemas/<schema_id>.json`, next to the lane schemas. They are generated from the models and
identities of `bundle_documents.py`, the same ones `index.json`'s descriptors carry."""

from __future__ import annotations

from notarius_dagster.engine.bundle_documents import DOCUMENT_TYPES


def bundle_document_schemas() -> dict[str, dict[str, object]]:
    """Schema id -> JSON Schema of every non-lane bundle document."""
    return {doc.schema_id: doc.json_schema() for doc in DOCUMENT_TYPES}
