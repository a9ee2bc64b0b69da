"""One materialization of the bundled sample through the Dagster asset job, on an ephemeral
instance, with the in-process LLM test double behind litellm's real call path."""

from __future__ import annotations

import json
from pathlib import Path

from dagster import DagsterInstance

from notarius_dagster.engine.transcripts import register_transcript
from notarius_dagster.run.runner import run_session
from tests.doubles import lane_responder
from tests.llm_double import scripted_llm

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "samples" / "crd3-c2e001-slice.jsonl"


def materialize(
    tmp_path: Path,
    instance: DagsterInstance,
    session: str = "sample",
    profile: str = "offline.yaml",
    source: Path = SAMPLE,
) -> Path:
    register_transcript(tmp_path / "data" / "transcripts", session, source)
    outcome = run_session(
        session_id=session,
        profile=REPO / "configs" / profile,
        data_root=tmp_path / "data",
        llm_profile="test-double",
        instance=instance,
        quiet=True,
    )
    assert outcome.success, outcome.error
    return tmp_path / "data" / "bundles" / session


def test_sample_materializes_into_a_published_bundle(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    with scripted_llm(lane_responder) as double:
        bundle = materialize(tmp_path, instance)
    index = json.loads((bundle / "index.json").read_text())
    manifest = json.loads((bundle / "manifest.json").read_text())
    npcs = json.loads((bundle / "lanes" / "npcs.json").read_text())
    assert index["lanes"][0]["lane_id"] == "npcs"
    assert index["chunk_map"]["file"] == "chunk-map.json"
    assert {n["name"] for n in npcs["npcs"]} >= {"Gustav", "Ornna", "Yasha"}
    assert all(n["id"].startswith("npc-") for n in npcs["npcs"])
    lane = manifest["artifact_lanes"][0]
    assert lane["llm"]["calls"] == len(double.calls) == manifest["chunks"]
    assert lane["llm"]["structured_output_rungs"] == {"json_object": manifest["chunks"]}
    assert manifest["validation_status"] == "approved"
    assert all(call.session_id == "sample" for call in double.calls)


def test_bundle_files_hold_no_transcript_text_outside_lanes(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    with scripted_llm(lane_responder):
        bundle = materialize(tmp_path, instance)
    texts = [json.loads(line)["text"] for line in SAMPLE.read_text().splitlines()]
    long_texts = [t for t in texts if len(t) > 40]
    for name in ("manifest.json", "index.json", "chunk-map.json", "warnings.json", "rejected.json"):
        content = (bundle / name).read_text()
        assert not any(t in content for t in long_texts), name
        assert str(tmp_path) not in content, name


def test_asset_metadata_reports_counts_and_tokens(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    with scripted_llm(lane_responder):
        materialize(tmp_path, instance)
    from dagster import AssetKey

    event = instance.get_latest_materialization_event(AssetKey("npcs"))
    assert event is not None and event.asset_materialization is not None
    meta = event.asset_materialization.metadata
    assert meta["records"].value >= 3
    assert meta["llm_calls"].value > 0 and meta["prompt_tokens"].value > 0
    assert "Gustav" in [r.data.get("name") for r in meta["preview"].value.records]


def test_failed_run_keeps_the_previous_bundle(tmp_path: Path, instance: DagsterInstance) -> None:
    with scripted_llm(lane_responder):
        bundle = materialize(tmp_path, instance)
    before = (bundle / "lanes" / "npcs.json").read_text()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok"}\n{"speaker": "x"}\n')
    register_transcript(tmp_path / "data" / "transcripts", "sample", bad)
    with scripted_llm(lane_responder):
        outcome = run_session(
            session_id="sample",
            profile=REPO / "configs" / "offline.yaml",
            data_root=tmp_path / "data",
            llm_profile="test-double",
            instance=instance,
            quiet=True,
        )
    assert not outcome.success
    # the user's file, not the store's copy (`sample.jsonl`)
    assert outcome.error is not None and "bad.jsonl line 2" in outcome.error
    assert "text" in outcome.error
    assert (bundle / "lanes" / "npcs.json").read_text() == before
