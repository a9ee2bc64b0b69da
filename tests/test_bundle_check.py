"""The bundle check (`engine/bundle_check.py`), without Dagster: what it finds in a published
bundle against its index, and that its problems name paths and key paths, never values."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from notarius_dagster.engine.bundle import encode_bundle
from notarius_dagster.engine.bundle_assembly import assemble_bundle
from notarius_dagster.engine.bundle_check import check_encoded_bundle, check_published_bundle
from notarius_dagster.engine.bundle_documents import read_manifest
from notarius_dagster.modules import registry
from tests.bundle_doubles import chunk_result, npcs_result, publish
from tests.conftest import make_document


def edit(path: Path, change: Any) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def test_a_published_session_bundle_has_no_problems(tmp_path: Path) -> None:
    check = check_published_bundle(publish(tmp_path).path)
    assert check.problems == () and check.passed
    # index, manifest, warnings, rejected, chunk map, one lane
    assert check.listed_files == 6


def test_a_stray_lane_file_is_reported(tmp_path: Path) -> None:
    bundle = publish(tmp_path).path
    (bundle / "lanes" / "spells.json").write_text("{}")
    check = check_published_bundle(bundle)
    assert check.problems == ("lanes/spells.json: lane file not listed in index.json",)
    assert not check.passed


def test_a_stray_file_outside_lanes_is_reported(tmp_path: Path) -> None:
    bundle = publish(tmp_path).path
    (bundle / "notes.json").write_text("{}")
    assert check_published_bundle(bundle).problems == ("notes.json: file not listed in index.json",)


def test_a_missing_or_unparsable_listed_file_is_reported(tmp_path: Path) -> None:
    bundle = publish(tmp_path).path
    (bundle / "lanes" / "npcs.json").unlink()
    (bundle / "manifest.json").write_text("{not json")
    problems = check_published_bundle(bundle).problems
    assert "lanes/npcs.json: listed in index.json but missing" in problems
    assert "manifest.json: does not parse (JSONDecodeError)" in problems


def test_a_lane_file_of_another_kind_is_reported(tmp_path: Path) -> None:
    bundle = publish(tmp_path).path
    (bundle / "lanes" / "npcs.json").write_text(json.dumps({"kind": "dnd/spell-list"}))
    assert check_published_bundle(bundle).problems == (
        "lanes/npcs.json: kind 'dnd/spell-list' differs from index.json's 'dnd/npc-list'",
    )


def test_no_published_bundle_is_a_problem(tmp_path: Path) -> None:
    check = check_published_bundle(tmp_path / "nothing")
    assert check.problems == ("index.json: missing (no bundle is published)",)
    assert check.listed_files == 0


def test_an_unparsable_index_is_the_only_problem(tmp_path: Path) -> None:
    bundle = publish(tmp_path).path
    (bundle / "index.json").write_text("[")
    assert check_published_bundle(bundle).problems == (
        "index.json: does not parse (JSONDecodeError)",
    )


def test_an_index_that_does_not_validate_names_key_paths_not_values(tmp_path: Path) -> None:
    bundle = publish(tmp_path).path

    def break_index(index: dict[str, Any]) -> None:
        index["lanes"][0]["records"] = -1
        index["validation_status"] = "SECRET-VALUE"
        del index["run_id"]

    edit(bundle / "index.json", break_index)
    (problem,) = check_published_bundle(bundle).problems
    assert problem.startswith("index.json: does not validate as notarius.bundle.index")
    for where in ("run_id: missing", "validation_status: literal_error", "lanes.0.records"):
        assert where in problem
    assert "SECRET" not in problem


def test_a_manifest_that_does_not_validate_names_key_paths_not_values(tmp_path: Path) -> None:
    bundle = publish(tmp_path).path

    def break_manifest(manifest: dict[str, Any]) -> None:
        manifest["artifact_lanes"][0]["records"] = "SECRET-VALUE"
        manifest["surprise"] = "SECRET-VALUE"

    edit(bundle / "manifest.json", break_manifest)
    (problem,) = check_published_bundle(bundle).problems
    assert problem.startswith("manifest.json: does not validate as notarius.bundle.manifest")
    assert "artifact_lanes.0.records: int_parsing" in problem
    assert "surprise: extra_forbidden" in problem
    assert "SECRET" not in problem


def test_warnings_rejections_and_chunk_map_are_validated_too(tmp_path: Path) -> None:
    bundle = publish(tmp_path).path
    (bundle / "warnings.json").write_text(json.dumps([{"stage": "nowhere"}]))
    (bundle / "rejected.json").write_text(json.dumps({}))
    edit(bundle / "chunk-map.json", lambda cm: cm["chunks"][0].update(content="the text"))
    problems = check_published_bundle(bundle).problems
    assert [p.split(" (")[0] for p in problems] == [
        "warnings.json: does not validate as notarius.bundle.warnings",
        "rejected.json: does not validate as notarius.bundle.rejected",
        "chunk-map.json: does not validate as notarius.source.chunk_map",
    ]
    assert "chunks.0.content: extra_forbidden" in problems[2]


def test_a_manifest_of_another_run_is_reported(tmp_path: Path) -> None:
    bundle = publish(tmp_path).path
    edit(bundle / "manifest.json", lambda m: m.update(run_id="another-run"))
    assert check_published_bundle(bundle).problems == (
        "manifest.json: names another run or session than index.json (files of two publications)",
    )


def test_a_lane_listed_under_another_file_name_is_reported(tmp_path: Path) -> None:
    bundle = publish(tmp_path).path
    (bundle / "lanes" / "npcs.json").rename(bundle / "lanes" / "people.json")
    edit(bundle / "index.json", lambda i: i["lanes"][0].update(file="lanes/people.json"))
    assert check_published_bundle(bundle).problems == (
        "index.json: lane 'npcs' lists file 'lanes/people.json', expected 'lanes/npcs.json'",
    )


def test_an_unsafe_listed_path_is_reported_and_never_read(tmp_path: Path) -> None:
    (tmp_path / "outside.json").write_text("{}")
    bundle = publish(tmp_path / "bundles").path
    edit(bundle / "index.json", lambda i: i["files"].update(warnings="../../outside.json"))
    problems = check_published_bundle(bundle).problems
    assert "../../outside.json: listed in index.json with an unsafe path" in problems
    assert "warnings.json: file not listed in index.json" in problems


def test_the_check_before_publication_sees_what_the_published_check_sees(
    tmp_path: Path,
) -> None:
    published = publish(tmp_path)
    document = make_document()
    files = assemble_bundle(
        manifest=read_manifest(published.path),
        chunk_result=chunk_result(document),
        lane_results=[npcs_result()],
        evidence_context=None,
        kinds=registry().kinds(),
    )
    encoded = encode_bundle(files)
    assert check_encoded_bundle(encoded) == check_published_bundle(published.path)
    del encoded["rejected.json"]
    assert check_encoded_bundle(encoded).problems == (
        "rejected.json: listed in index.json but missing",
    )
