"""`dnd-complete` on a real transcript slice through the Dagster asset job: all six lanes are
published and every source reference in every lane file is valid — with the test double, and
(slow) with the bundled offline model through the real llama.cpp server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dagster import DagsterInstance

from notarius_dagster.engine.inputs import parse_transcript
from notarius_dagster.engine.transcripts import register_transcript
from notarius_dagster.engine.validators import ref_problems, schema_problems
from notarius_dagster.modules import registry
from notarius_dagster.run.runner import run_session
from tests.lane_doubles import complete_responder
from tests.llm_double import scripted_llm

REPO = Path(__file__).resolve().parent.parent
SESSIONS = REPO / "data" / "sessions"
COMPLETE = REPO / "configs" / "dnd-complete.yaml"
LANES = {"npcs", "scene-descriptions", "combat-turns", "spells", "item-events", "npc-interactions"}


def real_slice(tmp_path: Path, name: str, start: int, count: int) -> Path:
    source = SESSIONS / name
    lines = source.read_text().splitlines()[start : start + count]
    path = tmp_path / f"slice-{name}"
    path.write_text("\n".join(lines) + "\n")
    return path


def assert_all_lanes_valid(bundle: Path, transcript: Path) -> dict[str, dict]:
    index = json.loads((bundle / "index.json").read_text())
    assert {lane["lane_id"] for lane in index["lanes"]} == LANES
    document = parse_transcript(
        transcript.read_bytes(), file_name=transcript.name, source_id=index["session_id"]
    )
    positions = document.position_index()
    payloads = {}
    for lane in index["lanes"]:
        payload = json.loads((bundle / lane["file"]).read_text())
        kind = registry().kind(lane["kind"])
        assert schema_problems(kind, payload) == [], lane["lane_id"]
        refs = kind.source_refs(payload)
        assert ref_problems(refs, document.source_id, positions) == [], lane["lane_id"]
        payloads[lane["lane_id"]] = payload
    return payloads


def test_complete_profile_publishes_six_valid_lanes_with_the_test_double(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    transcript = real_slice(tmp_path, "crd3-c2e003.jsonl", 1000, 240)
    register_transcript(tmp_path / "data" / "transcripts", "c2e003", transcript)
    with scripted_llm(complete_responder) as double:
        outcome = run_session(
            session_id="c2e003",
            profile=COMPLETE,
            data_root=tmp_path / "data",
            llm_profile="test-double",
            instance=instance,
            quiet=True,
        )
    assert outcome.success, outcome.error
    bundle = tmp_path / "data" / "bundles" / "c2e003"
    payloads = assert_all_lanes_valid(bundle, transcript)
    manifest = json.loads((bundle / "manifest.json").read_text())
    lanes = {lane["lane_id"]: lane for lane in manifest["artifact_lanes"]}
    assert lanes["combat-turns"]["depends_on"] == ["npcs", "scene-descriptions"]
    scene_kinds = [s["kind"] for s in payloads["scene-descriptions"]["scene_descriptions"]]
    combat_calls = [c for c in double.calls if c.metadata.get("lane") == "combat-turns"]
    assert len(combat_calls) == scene_kinds.count("combat")
    assert lanes["combat-turns"]["chunks"]["skipped"] == len(scene_kinds) - len(combat_calls)


@pytest.mark.slow
def test_complete_profile_publishes_six_valid_lanes_with_the_offline_model(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    pytest.importorskip("llama_cpp")
    transcript = real_slice(tmp_path, "fireball-sea-hag.jsonl", 0, 40)
    register_transcript(tmp_path / "data" / "transcripts", "sea-hag", transcript)
    outcome = run_session(
        session_id="sea-hag",
        profile=COMPLETE,
        data_root=tmp_path / "data",
        instance=instance,
        quiet=True,
    )
    assert outcome.success, outcome.error
    bundle = tmp_path / "data" / "bundles" / "sea-hag"
    assert_all_lanes_valid(bundle, transcript)
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["llm_profile"]["name"] == "offline"
    assert manifest["totals"]["llm_calls"] > 0
