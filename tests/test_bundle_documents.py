"""The bundle's own documents as models (`engine/bundle_documents.py`): one source for each
published shape and schema identity, and checked-in schemas that match them."""

from __future__ import annotations

import json
from pathlib import Path

from notarius_dagster.engine.bundle_documents import (
    CHUNK_MAP_DESCRIPTOR,
    DOCUMENT_TYPES,
    EVIDENCE_DESCRIPTOR,
    Index,
)
from notarius_dagster.engine.bundle_schemas import bundle_document_schemas
from notarius_dagster.engine.chunking import make_chunk
from notarius_dagster.engine.evidence import EvidenceContext
from notarius_dagster.engine.models import ChunkMap, ChunkMapView
from tests.conftest import make_document

REPO = Path(__file__).resolve().parent.parent
TEXTS = [f"a secret line {i}" for i in range(10)]


def test_the_published_chunk_map_has_ids_ranges_and_digests_but_no_text() -> None:
    document = make_document(texts=TEXTS)
    chunk_map = ChunkMap(
        source_id="s1",
        source_digest=document.digest,
        chunker="generic",
        chunks=(
            make_chunk(document, 0, document.units[:4]),
            make_chunk(document, 1, document.units[4:]),
        ),
    )
    view = chunk_map.public_view()
    assert isinstance(view, ChunkMapView)
    published = view.model_dump(mode="json")
    assert list(published["chunks"][1]) == [
        "chunk_id", "index", "start_unit_id", "end_unit_id", "unit_ids", "digest",
    ]  # fmt: skip
    assert published["chunks"][1]["unit_ids"] == [4, 5, 6, 7, 8, 9]
    assert published["chunks"][1]["digest"] == chunk_map.chunks[1].digest != ""
    assert not any(text in json.dumps(published) for text in TEXTS)


def test_each_descriptor_names_the_identity_of_its_checked_in_schema() -> None:
    for descriptor in (CHUNK_MAP_DESCRIPTOR, EVIDENCE_DESCRIPTOR):
        schema = json.loads((REPO / "schemas" / f"{descriptor.schema_id}.json").read_text())
        assert (schema["$id"], schema["title"]) == (descriptor.schema_id, descriptor.schema_name)
    evidence = EvidenceContext(source_id="s1", source_digest="d", window_units=0, lanes=("x",))
    assert (evidence.kind, evidence.schema_version) == (
        EVIDENCE_DESCRIPTOR.kind,
        EVIDENCE_DESCRIPTOR.schema_version,
    )


def test_every_typed_document_has_its_own_schema_id() -> None:
    schemas = bundle_document_schemas()
    assert (
        sorted(schemas)
        == sorted(doc.schema_id for doc in DOCUMENT_TYPES)
        == [
            "notarius.bundle.index",
            "notarius.bundle.manifest",
            "notarius.bundle.rejected",
            "notarius.bundle.warnings",
            "notarius.source.chunk_map",
            "notarius.source.evidence_context",
        ]
    )
    for schema_id, schema in schemas.items():
        assert schema["$id"] == schema_id and schema["title"].endswith("_v1")


def test_the_index_schema_makes_optional_descriptors_absent_not_null() -> None:
    schema = bundle_document_schemas()["notarius.bundle.index"]
    assert "chunk_map" not in schema["required"]
    assert schema["properties"]["chunk_map"]["$ref"] == "#/$defs/DocumentDescriptor"
    assert "default" not in schema["properties"]["chunk_map"]
    assert "null" not in json.dumps(schema["properties"]["evidence_context"])
    assert Index.model_fields["chunk_map"].default is None


def test_checked_in_bundle_document_schemas_are_current() -> None:
    from notarius_dagster.schemas import stale

    assert not [name for name in stale() if name.startswith("notarius.bundle.")], (
        "run `python -m notarius_dagster.schemas --write`"
    )
