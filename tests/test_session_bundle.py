"""Publishing a session bundle in one call (`engine/session_bundle.py`): the typed documents
it writes validate against the checked-in schemas and read back as the same models, and a
bundle that does not match its index or its models is refused before anything is written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from notarius_dagster.engine import session_bundle
from notarius_dagster.engine.bundle import LogicalFile
from notarius_dagster.engine.bundle_documents import (
    CHUNK_MAP_DESCRIPTOR,
    Index,
    Manifest,
    read_index,
    read_manifest,
)
from notarius_dagster.engine.errors import OutputError
from tests.bundle_doubles import (
    REPO,
    chunk_result,
    npcs_result,
    publish,
    rejection,
    warning,
)
from tests.conftest import make_document

SCHEMAS = REPO / "schemas"


def schema(schema_id: str) -> dict[str, Any]:
    return json.loads((SCHEMAS / f"{schema_id}.json").read_text())


def read(bundle: Path, rel: str) -> Any:
    return json.loads((bundle / rel).read_text())


def test_every_bundle_document_validates_against_its_checked_in_schema(tmp_path: Path) -> None:
    document = make_document()
    chunks = chunk_result(document, warnings=(warning("chunk-w"),))
    lanes = [npcs_result(warnings=(warning("lane-w"),), rejections=(rejection(),))]
    bundle = publish(tmp_path, document=document, chunks=chunks, lanes=lanes).path
    for rel, schema_id in [
        ("index.json", "notarius.bundle.index"),
        ("manifest.json", "notarius.bundle.manifest"),
        ("warnings.json", "notarius.bundle.warnings"),
        ("rejected.json", "notarius.bundle.rejected"),
        ("chunk-map.json", "notarius.source.chunk_map"),
    ]:
        jsonschema.validate(read(bundle, rel), schema(schema_id))
    assert [w["code"] for w in read(bundle, "warnings.json")] == ["chunk-w", "lane-w"]
    assert read(bundle, "rejected.json") == read(bundle, "manifest.json")["rejected"]
    assert read(bundle, "manifest.json")["validation_status"] == "rejected"


def test_the_schemas_refuse_what_the_models_refuse(tmp_path: Path) -> None:
    bundle = publish(tmp_path).path
    index = read(bundle, "index.json")
    del index["lanes"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(index, schema("notarius.bundle.index"))
    manifest = read(bundle, "manifest.json")
    manifest["llm_profile"]["api_key_env"] = "OPENAI_API_KEY"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(manifest, schema("notarius.bundle.manifest"))


def test_published_documents_read_back_as_the_same_models(tmp_path: Path) -> None:
    published = publish(tmp_path)
    assert read_manifest(published.path) == published.manifest
    index = read_index(published.path)
    assert isinstance(index, Index) and index.run_id == published.manifest.run_id == "run-1"
    assert index.chunk_map == CHUNK_MAP_DESCRIPTOR and index.evidence_context is None
    assert [lane.file for lane in index.lanes] == ["lanes/npcs.json"]
    assert published.files == 6
    assert published.path == tmp_path / "s1"


def test_absent_descriptors_are_left_out_never_null(tmp_path: Path) -> None:
    document = make_document()
    rejected_chunks = chunk_result(document).model_copy(
        update={"chunk_map": None, "rejection": rejection()}
    )
    bundle = publish(tmp_path, document=document, chunks=rejected_chunks, lanes=[]).path
    index = read(bundle, "index.json")
    assert "chunk_map" not in index and "evidence_context" not in index
    assert not (bundle / "chunk-map.json").exists()
    assert read(bundle, "manifest.json")["chunks"] == 0


def test_the_manifest_records_utc_times_and_the_wall_time_between_them(tmp_path: Path) -> None:
    timing = read(publish(tmp_path).path, "manifest.json")["timing"]
    assert timing == {
        "started_at": "2001-09-09T01:46:40+00:00",
        "completed_at": "2001-09-09T01:46:52.345600+00:00",
        "wall_time_s": 12.346,
    }


def test_manifest_keys_keep_their_published_order(tmp_path: Path) -> None:
    manifest = read(publish(tmp_path).path, "manifest.json")
    assert list(manifest) == list(Manifest.model_fields) == [
        "manifest_version", "run_id", "session_id", "status", "validation_status", "pipeline",
        "modules", "source", "chunks", "llm_profile", "references", "artifact_lanes",
        "outputs", "rejected", "warnings", "evidence_context", "totals", "timing",
    ]  # fmt: skip
    assert list(manifest["llm_profile"]) == [
        "name", "model", "api_base", "temperature", "max_tokens", "timeout_s", "retries",
        "max_concurrency", "server",
    ]  # fmt: skip


def test_a_bundle_that_does_not_match_its_index_is_refused_before_anything_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = publish(tmp_path, run_id="first").path
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    real = session_bundle.assemble_bundle

    def without_rejected(**kwargs: Any) -> list[LogicalFile]:
        return [f for f in real(**kwargs) if f.path != "rejected.json"]

    monkeypatch.setattr(session_bundle, "assemble_bundle", without_rejected)
    with pytest.raises(OutputError, match="rejected.json: listed in index.json but missing"):
        publish(tmp_path, run_id="second")
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    assert read(first, "manifest.json")["run_id"] == "first"


def test_a_manifest_that_does_not_validate_is_refused_naming_the_key_not_the_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = session_bundle.assemble_bundle

    def corrupt_manifest(**kwargs: Any) -> list[LogicalFile]:
        files = real(**kwargs)
        for f in files:
            if f.path == "manifest.json":
                f.payload["artifact_lanes"][0]["status"] = "SECRET-VALUE"
        return files

    monkeypatch.setattr(session_bundle, "assemble_bundle", corrupt_manifest)
    with pytest.raises(OutputError) as info:
        publish(tmp_path)
    message = str(info.value)
    assert "manifest.json: does not validate as notarius.bundle.manifest" in message
    assert "artifact_lanes.0.status: literal_error" in message
    assert "nothing was written" in message and "SECRET" not in message
    assert not (tmp_path / "s1").exists()


def test_lane_metadata_that_is_not_json_is_refused_by_the_encoder(tmp_path: Path) -> None:
    lanes = [npcs_result(metadata={"score": float("nan")})]
    with pytest.raises(OutputError, match="manifest.json: payload is not valid JSON"):
        publish(tmp_path, lanes=lanes)
    assert not (tmp_path / "s1").exists()


def test_a_rejected_lane_has_no_file_descriptor_or_output(tmp_path: Path) -> None:
    # Published only where the policy allows a lane without a payload (test_publish_policy.py).
    lanes = [npcs_result(status="rejected", payload=None, rejections=(rejection(),))]
    published = publish(tmp_path, lanes=lanes, min_accepted_chunk_share=0)
    index = read_index(published.path)
    assert index.lanes == () and published.manifest.outputs == ()
    assert [lane.status for lane in published.manifest.artifact_lanes] == ["rejected"]
    assert not (published.path / "lanes").exists()
    assert published.files == 5


def test_lane_descriptors_carry_the_kind_identities_and_record_count(tmp_path: Path) -> None:
    lanes = [npcs_result(units=(1, 2, 3))]
    (descriptor,) = read(publish(tmp_path, lanes=lanes).path, "index.json")["lanes"]
    assert descriptor == {
        "lane_id": "npcs",
        "file": "lanes/npcs.json",
        "kind": "dnd/npc-list",
        "media_type": "application/json",
        "schema_id": "notarius.dnd.npc_list",
        "schema_name": "dnd_npc_list_v1",
        "schema_version": "v1",
        "records": 3,
    }
