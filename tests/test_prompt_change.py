"""Re-running after a prompt change: code versions mark only the edited lane, the stale
backfill re-runs that lane and its dependants in every session, and checkpoints make every
unchanged extraction free. Editing one transcript unit re-calls only the chunks holding it."""

from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from dagster import AssetKey, DagsterInstance

from notarius_dagster.cli.backfill import stale_backfill
from notarius_dagster.dnd.npcs.lane import LANE as NPCS
from notarius_dagster.engine.transcripts import register_transcript
from notarius_dagster.run.runner import run_session
from notarius_dagster.settings import store_paths
from tests.llm_double import scripted_llm
from tests.run_definitions import build_run_definitions

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "samples" / "crd3-c2e001-slice.jsonl"
COMPLETE = REPO / "configs" / "dnd-complete.yaml"
SESSIONS = {"one": (0, 60), "two": (60, 120), "three": (120, 200)}

lane_doubles = pytest.importorskip("tests.lane_doubles")


def lane_of(call: Any) -> str:
    """Which lane a recorded call belongs to (the lane rides along as request metadata)."""
    return str(call.metadata.get("lane"))


def write_slices(tmp_path: Path) -> dict[str, Path]:
    lines = SAMPLE.read_text().splitlines()
    out = {}
    for name, (a, b) in SESSIONS.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_text("\n".join(lines[a:b]) + "\n")
        out[name] = path
    return out


def materialize_all(
    tmp_path: Path, instance: DagsterInstance, slices: dict[str, Path], profile: Path = COMPLETE
) -> None:
    for session, path in slices.items():
        register_transcript(tmp_path / "data" / "transcripts", session, path)
        outcome = run_session(
            session_id=session,
            profile=profile,
            data_root=tmp_path / "data",
            llm_profile="test-double",
            instance=instance,
            quiet=True,
        )
        assert outcome.success, outcome.error


def manifest(tmp_path: Path, session: str) -> dict[str, Any]:
    return json.loads((tmp_path / "data" / "bundles" / session / "manifest.json").read_text())


@pytest.fixture
def edited_npc_prompt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prompt = tmp_path / "npcs-prompt.md"
    original = NPCS.prompt.read_text()
    edited = original.replace("are NOT NPCs.", "are NOT NPCs. Prefer full names.")
    assert edited != original  # the edit must change the prompt
    prompt.write_text(edited)
    lane_doubles.use_prompt(monkeypatch, NPCS.kind, prompt)


def code_versions(tmp_path: Path, profile: Path = COMPLETE) -> dict[str, str | None]:
    defs = build_run_definitions(
        profile=profile, data_root=tmp_path / "data", llm_profile="test-double"
    )
    graph = defs.resolve_asset_graph()
    return {k.to_user_string(): graph.get(k).code_version for k in graph.materializable_asset_keys}


def test_prompt_edit_changes_only_that_lanes_code_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = code_versions(tmp_path)
    prompt = tmp_path / "p.md"
    prompt.write_text(NPCS.prompt.read_text() + "\nBe brief.\n")
    lane_doubles.use_prompt(monkeypatch, NPCS.kind, prompt)
    after = code_versions(tmp_path)
    assert {k for k in before if before[k] != after[k]} == {"npcs"}


def test_an_output_or_publish_edit_changes_only_the_bundles_code_version(
    tmp_path: Path,
) -> None:
    """Turning on the evidence context (or changing the publish policy) in the profile makes
    every published bundle stale, as a prompt edit makes its lane stale; the lanes are not."""
    import yaml

    data = yaml.safe_load(COMPLETE.read_text())
    data["pipeline"]["output"] = {"module": "json"}  # the complete profile without it
    plain = tmp_path / "plain.yaml"
    plain.write_text(yaml.safe_dump(data))
    before = code_versions(tmp_path, plain)
    data["pipeline"]["output"] = {
        "module": "json",
        "options": {"evidence_context": {"enabled": True, "window_units": 1, "lanes": ["npcs"]}},
    }
    evidence = tmp_path / "evidence.yaml"
    evidence.write_text(yaml.safe_dump(data))
    after = code_versions(tmp_path, evidence)
    changed = {k for k in before if before[k] != after.get(k)}
    assert changed == {"session_bundle"}
    data["pipeline"]["output"]["options"]["evidence_context"]["window_units"] = 2
    evidence.write_text(yaml.safe_dump(data))
    assert code_versions(tmp_path, evidence)["session_bundle"] != after["session_bundle"]


def test_stale_backfill_calls_the_model_only_for_the_edited_lane(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, instance: DagsterInstance
) -> None:
    slices = write_slices(tmp_path)
    with scripted_llm(lane_doubles.complete_responder) as first:
        materialize_all(tmp_path, instance, slices)
    first_npc_calls = sum(1 for c in first.calls if lane_of(c) == "npcs")
    assert first_npc_calls > 0 and len({lane_of(c) for c in first.calls}) > 1

    prompt = tmp_path / "npcs-prompt.md"
    prompt.write_text(NPCS.prompt.read_text() + "\nPrefer full names.\n")
    lane_doubles.use_prompt(monkeypatch, NPCS.kind, prompt)
    defs = build_run_definitions(
        profile=COMPLETE, data_root=tmp_path / "data", llm_profile="test-double"
    )
    store = store_paths(data=tmp_path / "data")
    dry = io.StringIO()
    with scripted_llm(lane_doubles.complete_responder) as nothing:
        assert stale_backfill(instance=instance, defs=defs, dry_run=True, out=dry, store=store) == 0
    assert nothing.calls == []  # a dry run calls nothing
    plan = dry.getvalue()
    for session in SESSIONS:  # what would re-run, by name, and an upper bound of its calls
        assert f"{session}: changed npcs; re-runs " in plan and "npc_interactions" in plan
    [total] = [line for line in plan.splitlines() if line.startswith("total: ")]
    estimated_calls = int(total.split("at most ")[1].split(" ")[0])
    report = io.StringIO()
    with scripted_llm(lane_doubles.complete_responder) as second:
        code = stale_backfill(
            instance=instance, defs=defs, in_process=True, dry_run=False, out=report, store=store
        )
    assert code == 0, report.getvalue()
    assert all(s in report.getvalue() for s in SESSIONS)
    assert first_npc_calls <= len(second.calls) <= estimated_calls  # an upper bound, not a guess
    # after the run, the real figures of each session's published manifest
    assert report.getvalue().count(" model call(s), ") >= len(SESSIONS)
    # Only the edited lane's chunks called the model; its artifact came out the same, so the
    # lanes that consume it re-ran from their checkpoints.
    assert Counter(lane_of(c) for c in second.calls) == Counter({"npcs": first_npc_calls})
    for session in SESSIONS:
        lanes = {lane["lane_id"]: lane for lane in manifest(tmp_path, session)["artifact_lanes"]}
        assert lanes["npcs"]["chunks"]["reused"] == 0
        # The dependants re-ran from their checkpoints; the scene lane, npcs' level-mate (one
        # step, assets/factory.py), ran with it from its checkpoints too.
        for other in (
            "combat-turns",
            "npc-interactions",
            "item-events",
            "spells",
            "scene-descriptions",
        ):
            chunks = lanes[other]["chunks"]
            assert chunks["reused"] == chunks["total"] and lanes[other]["llm"]["calls"] == 0
    # The scene lane does not depend on npcs: its value, and so its data version, is unchanged.
    scenes = instance.fetch_materializations(AssetKey("scene_descriptions"), limit=100).records
    assert len(scenes) == 2 * len(SESSIONS)
    by_session: dict[str | None, set[str | None]] = {}
    for record in scenes:
        materialization = record.asset_materialization
        assert materialization is not None
        version = (materialization.tags or {}).get("dagster/data_version")
        assert version is not None
        by_session.setdefault(materialization.partition, set()).add(version)
    assert all(len(versions) == 1 for versions in by_session.values()), by_session

    with scripted_llm(lane_doubles.complete_responder) as third:
        assert (
            stale_backfill(
                instance=instance, defs=defs, in_process=True, dry_run=False, out=io.StringIO()
            )
            == 0
        )
    assert third.calls == []


def test_editing_one_unit_recalls_only_the_chunks_that_hold_it(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    profile = tmp_path / "npcs-only.yaml"
    profile.write_text(
        "version: 1\npipeline:\n  id: npcs-only\n  llm_profile: test-double\n"
        "  chunk: {module: generic, options: {max_units: 10, max_chars: 100000}}\n"
        "  lanes:\n    - id: npcs\n"
    )
    lines = SAMPLE.read_text().splitlines()[:50]
    source = tmp_path / "edit.jsonl"
    source.write_text("\n".join(lines) + "\n")
    with scripted_llm(lane_doubles.complete_responder) as first:
        materialize_all(tmp_path, instance, {"edit": source}, profile=profile)
    assert len(first.calls) == 5

    unit = json.loads(lines[23])
    unit["text"] += " (edited)"
    lines[23] = json.dumps(unit)
    source.write_text("\n".join(lines) + "\n")
    with scripted_llm(lane_doubles.complete_responder) as second:
        materialize_all(tmp_path, instance, {"edit": source}, profile=profile)
    assert [c.metadata.get("chunk_id") for c in second.calls] == ["chunk-0002"]
    lane = manifest(tmp_path, "edit")["artifact_lanes"][0]
    assert lane["chunks"] == {
        "total": 5,
        "called_model": 1,
        "reused": 4,
        "skipped": 0,
        "rejected": 0,
    }
