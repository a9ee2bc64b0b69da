"""Scene-aware combat extraction (docs/lanes.md, `combat-turns`, "Scene gating"): only a chunk
whose exact scene record says combat reaches the combat model; every other chunk is an
accepted empty result made without a call, with a bounded warning when the classification is
unavailable; the scene artifact is control context only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from notarius_dagster.dnd.combat_turns.extract import SceneGatedCombatExtractor
from notarius_dagster.engine.checkpoints import FileCheckpointStore
from notarius_dagster.engine.chunking import make_chunk
from notarius_dagster.engine.errors import InvalidReferenceError, LaneError, ProfileError
from notarius_dagster.engine.manifest import lane_summary
from notarius_dagster.engine.models import Chunk, SourceDocument
from notarius_dagster.engine.references import prepare_file, prepare_generated
from notarius_dagster.engine.resolution import ResolvedLane, RuntimeBinding
from notarius_dagster.modules import registry
from tests.conftest import make_document
from tests.lane_doubles import (
    MINIMAL_PROFILE,
    RecordingClient,
    complete_pipeline,
    npc_artifact,
    run_one_lane,
    scene_artifact,
)

TITLE = "Xylophone Gambit At Midnight"
SUMMARY = "Quorvath whispers an unrepeatable sentence."
PROSE = (TITLE, SUMMARY, "Xylophone", "Quorvath")
TEXTS = [f"We walk along the road, line {i}." for i in range(6)] + [
    "Gustav attacks Fjord with a dagger and hits.",
    "That is 7 piercing damage.",
    "Fjord attacks back and misses.",
    "Roll for initiative, everyone.",
    "Beau attacks Gustav and hits for 9 bludgeoning damage.",
    "Gustav falls back.",
]


@pytest.fixture
def fight() -> SourceDocument:
    return make_document(list(range(100, 112)), texts=TEXTS)


@pytest.fixture
def chunks(fight: SourceDocument) -> list[Chunk]:
    return [make_chunk(fight, 0, fight.units[:6]), make_chunk(fight, 1, fight.units[6:])]


def combat_lane(retries: int = 0) -> ResolvedLane:
    # These tests are about the gate: the double's actors are speaker labels, which the
    # `support` check drops (tests/test_record_support.py), so the chain here leaves it out,
    # as a profile's `validators:` override can.
    lane = complete_pipeline().lane("combat-turns")
    chain = tuple(v for v in lane.extract.validators if v != "support")
    return lane.model_copy(
        update={
            "extract": lane.extract.model_copy(update={"retries": retries, "validators": chain})
        }
    )


def upstream(chunks: list[Chunk], scenes: dict[str, Any]) -> dict[str, Any]:
    return {
        "scene-descriptions": scenes,
        "npcs": npc_artifact("s1", [("npc-gustav", "Gustav", ["the carnival master"])], cite=100),
    }


def run_combat(
    doc: SourceDocument,
    chunks: list[Chunk],
    scenes: dict[str, Any],
    client: RecordingClient | None = None,
    **kwargs: Any,
):
    client = client if client is not None else RecordingClient()
    result = run_one_lane(
        combat_lane(kwargs.pop("retries", 0)),
        doc,
        chunks,
        upstream(chunks, scenes),
        client=client,
        **kwargs,
    )
    return result, client


@pytest.mark.parametrize("kind", ["narrative", "recap", "meta"])
def test_exact_non_combat_match_is_an_accepted_empty_artifact_without_a_call(
    fight: SourceDocument, chunks: list[Chunk], kind: str
) -> None:
    result, client = run_combat(fight, chunks, scene_artifact(chunks, kind))
    assert client.calls == 0
    assert result.status == "accepted"
    assert result.payload == {
        "kind": "dnd/combat-turn-list",
        "schema_version": "v1",
        "source_id": "s1",
        "combat_turns": [],
    }
    assert result.chunk_status == {"chunk-0000": "skipped", "chunk-0001": "skipped"}
    assert result.warnings == () and result.rejections == ()


def test_exact_combat_match_keeps_the_combat_llm_path(
    fight: SourceDocument, chunks: list[Chunk]
) -> None:
    scenes = scene_artifact(chunks, {"chunk-0000": "narrative", "chunk-0001": "combat"})
    result, client = run_combat(fight, chunks, scenes)
    assert client.calls == 1 and client.requests[0].chunk_id == "chunk-0001"
    assert result.chunk_status == {"chunk-0000": "skipped", "chunk-0001": "llm"}
    turns = result.payload["combat_turns"]
    assert [t["id"] for t in turns] == [f"turn-000{n}" for n in range(1, 6)]
    assert all(106 <= r["start_unit_id"] <= 111 for t in turns for r in t["source_refs"])
    assert turns[0]["actor"] == "Gustav" and turns[0]["actor_npc_id"] == "npc-gustav"


def test_unbound_scene_reference_is_rejected_during_resolution() -> None:
    data = _complete_profile_data()
    del data["pipeline"]["lanes"][2]["references"]["scene_descriptions"]
    with pytest.raises(ProfileError) as info:
        _resolve(data)
    assert info.value.key_path == "pipeline.lanes[2].references.scene_descriptions"
    assert "required" in info.value.problem


def test_the_scene_reference_cannot_be_unbound_at_runtime() -> None:
    with pytest.raises(ProfileError, match="required"):
        complete_pipeline(runtime_unbinds=["scene_descriptions"])


def test_missing_coverage_is_an_empty_artifact_with_one_bounded_warning(
    fight: SourceDocument, chunks: list[Chunk]
) -> None:
    scenes = scene_artifact(chunks, {"chunk-0000": "narrative"}, TITLE, SUMMARY)
    result, client = run_combat(fight, chunks, scenes)
    assert client.calls == 0 and result.status == "accepted"
    assert result.payload["combat_turns"] == []
    assert [(w.code, w.chunk_id, w.lane) for w in result.warnings] == [
        ("scene_coverage_missing", "chunk-0001", "combat-turns")
    ]
    assert result.warnings[0].message == (
        "chunk 'chunk-0001': no exact scene classification (no scene record has this chunk "
        "id); combat extraction skipped with an empty result"
    )


def _shift_end(record: dict[str, Any]) -> None:
    record["end_unit_id"] = 110
    record["source_ref"]["end_unit_id"] = 110


def _other_source(record: dict[str, Any]) -> None:
    record["source_id"] = "another-session"
    record["source_ref"]["source_id"] = "another-session"


@pytest.mark.parametrize(
    "damage, reason",
    [
        (_shift_end, "unit range differs"),
        (_other_source, "source id differs"),
    ],
)
def test_mismatched_coverage_is_an_empty_artifact_with_one_bounded_warning(
    fight: SourceDocument, chunks: list[Chunk], damage: Any, reason: str
) -> None:
    scenes = scene_artifact(chunks, "combat", TITLE, SUMMARY)
    damage(scenes["scene_descriptions"][1])
    result, client = run_combat(fight, chunks, scenes)
    assert result.status == "accepted"
    assert result.chunk_status == {"chunk-0000": "llm", "chunk-0001": "skipped"}
    assert [r.chunk_id for r in client.requests] == ["chunk-0000"]
    gate_warnings = [w for w in result.warnings if w.code.startswith("scene_")]
    assert len(gate_warnings) == 1
    warning = gate_warnings[0]
    assert (warning.code, warning.chunk_id) == ("scene_coverage_mismatch", "chunk-0001")
    assert reason in warning.message and len(warning.message) < 200


def test_an_overlapping_combat_scene_of_another_chunk_authorizes_nothing(
    fight: SourceDocument, chunks: list[Chunk]
) -> None:
    """Eligibility never comes from overlap, adjacency or array position."""
    whole = make_chunk(fight, 0, fight.units, chunk_id="chunk-whole")
    scenes = scene_artifact([whole], "combat")
    result, client = run_combat(fight, chunks, scenes)
    assert client.calls == 0
    assert {w.code for w in result.warnings} == {"scene_coverage_missing"}


@pytest.mark.parametrize(
    "content, problem",
    [
        ("{not json", "not valid JSON"),
        (
            json.dumps(
                {"kind": "dnd/npc-list", "schema_version": "v1", "source_id": "s1", "npcs": []}
            ),
            "accepts",
        ),
        (
            json.dumps(
                {
                    "kind": "dnd/scene-description-list",
                    "schema_version": "v1",
                    "source_id": "s1",
                    "scene_descriptions": [{"scene_id": "chunk-0000"}],
                }
            ),
            "malformed external artifact",
        ),
        (json.dumps({"scene_descriptions": []}), "no artifact kind"),
    ],
)
def test_malformed_external_scene_artifact_fails_at_preparation(
    tmp_path: Path, content: str, problem: str
) -> None:
    path = tmp_path / "scenes.json"
    path.write_text(content, encoding="utf-8")
    pipeline = complete_pipeline(
        runtime_references=[
            RuntimeBinding(selector="combat-turns.extract.scene_descriptions", path=str(path))
        ]
    )
    binding = next(
        b
        for b in pipeline.lane("combat-turns").extract.references
        if b.slot == "scene_descriptions"
    )
    assert binding.origin == "file"
    with pytest.raises(InvalidReferenceError, match=problem):
        prepare_file(binding, registry().kinds())


def test_a_valid_external_scene_artifact_gates_like_a_generated_one(
    tmp_path: Path, fight: SourceDocument, chunks: list[Chunk]
) -> None:
    path = tmp_path / "scenes.json"
    path.write_text(
        json.dumps(scene_artifact(chunks, {"chunk-0000": "narrative", "chunk-0001": "combat"}))
    )
    lane = complete_pipeline(
        runtime_references=[
            RuntimeBinding(selector="combat-turns.extract.scene_descriptions", path=str(path))
        ]
    ).lane("combat-turns")
    client = RecordingClient()
    result = run_one_lane(lane, fight, chunks, {"npcs": npc_artifact("s1")}, client=client)
    assert [r.chunk_id for r in client.requests] == ["chunk-0001"]
    assert lane.depends_on == ("npcs",)
    assert result.status == "accepted"


@pytest.mark.parametrize(
    "payload, problem",
    [
        (None, "produced no accepted artifact"),
        (
            {
                "kind": "dnd/scene-description-list",
                "schema_version": "v1",
                "source_id": "s1",
                "scene_descriptions": [{"scene_id": "x", "kind": "battle"}],
            },
            "malformed generated",
        ),
        (
            {"kind": "dnd/spell-list", "schema_version": "v1", "source_id": "s1", "spells": []},
            "accepts",
        ),
    ],
)
def test_malformed_generated_scene_artifact_fails_at_the_handoff(
    payload: dict[str, Any] | None, problem: str
) -> None:
    binding = next(
        b
        for b in complete_pipeline().lane("combat-turns").extract.references
        if b.slot == "scene_descriptions"
    )
    assert (binding.origin, binding.lane) == ("lane", "scene-descriptions")
    with pytest.raises(InvalidReferenceError, match=problem):
        prepare_generated(binding, payload, registry().kinds())


def test_an_unprepared_scene_reference_fails_the_lane_instead_of_counting_as_unbound(
    fight: SourceDocument, chunks: list[Chunk]
) -> None:
    from notarius_dagster.engine.lane_runner import run_lane

    client = RecordingClient()
    with pytest.raises(LaneError, match="scene_descriptions"):
        run_lane(
            combat_lane(),
            document=fight,
            chunks=chunks,
            references={},
            client=client,
            session_id="s1",
            llm_fingerprint="fp",
            registry=registry(),
        )
    assert client.calls == 0


def test_deterministic_skips_neither_consume_nor_attempt_retries(
    fight: SourceDocument, chunks: list[Chunk], monkeypatch: pytest.MonkeyPatch
) -> None:
    attempts: list[str] = []
    real = SceneGatedCombatExtractor.extract

    def counting(self: SceneGatedCombatExtractor, request: Any) -> Any:
        attempts.append(request.chunk.chunk_id)
        return real(self, request)

    monkeypatch.setattr(SceneGatedCombatExtractor, "extract", counting)
    scenes = scene_artifact(chunks, {"chunk-0000": "meta"})  # chunk-0001 uncovered
    result, client = run_combat(fight, chunks, scenes, retries=3)
    assert sorted(attempts) == ["chunk-0000", "chunk-0001"]
    assert client.calls == 0
    assert result.rejections == () and result.stats.called_model == 0
    assert result.stats.skipped == 2 and result.stats.usage.calls == 0


def test_a_scene_classification_change_invalidates_checkpoint_reuse(
    tmp_path: Path, fight: SourceDocument, chunks: list[Chunk]
) -> None:
    store = FileCheckpointStore(tmp_path / "checkpoints")
    quiet = scene_artifact(chunks, "narrative")
    first, client = run_combat(fight, chunks, quiet, checkpoints=store)
    assert client.calls == 0 and set(first.chunk_status.values()) == {"skipped"}

    again, client = run_combat(fight, chunks, quiet, checkpoints=store)
    assert client.calls == 0 and set(again.chunk_status.values()) == {"reused"}

    fighting = scene_artifact(chunks, {"chunk-0000": "narrative", "chunk-0001": "combat"})
    changed, client = run_combat(fight, chunks, fighting, checkpoints=store)
    # chunk-0000's own scene record did not change: its stored (skipped) result is reused.
    assert changed.chunk_status == {"chunk-0000": "reused", "chunk-0001": "llm"}
    assert client.calls == 1 and changed.stats.records == 5


def test_no_scene_prose_reaches_prompts_warnings_metadata_or_manifest(
    fight: SourceDocument, chunks: list[Chunk]
) -> None:
    third = make_chunk(fight, 2, fight.units[9:])  # overlapping, and without a scene record
    all_chunks = [*chunks, third]
    scenes = scene_artifact(
        chunks, {"chunk-0000": "narrative", "chunk-0001": "combat"}, TITLE, SUMMARY
    )
    result, client = run_combat(fight, all_chunks, scenes)
    assert client.calls == 1
    assert [w.chunk_id for w in result.warnings if w.code.startswith("scene_")] == ["chunk-0002"]
    pipeline = complete_pipeline()
    binding = next(
        b
        for b in pipeline.lane("combat-turns").extract.references
        if b.slot == "scene_descriptions"
    )
    provenance = prepare_generated(binding, scenes, registry().kinds()).provenance
    exposed = json.dumps(
        {
            "prompts": [[r.system, r.user, r.schema_] for r in client.requests],
            "warnings": [w.model_dump() for w in result.warnings],
            "metadata": result.metadata,
            "payload": result.payload,
            "manifest_lane": lane_summary(result, pipeline, registry().kinds()).model_dump(
                mode="json"
            ),
            "provenance": dict(provenance),
        }
    )
    assert not [p for p in PROSE if p in exposed]
    assert "scene_descriptions" not in json.dumps(result.payload)


def test_manifest_metadata_reports_only_the_number_of_approved_scene_records(
    fight: SourceDocument, chunks: list[Chunk]
) -> None:
    result, _ = run_combat(fight, chunks, scene_artifact(chunks, "narrative", TITLE, SUMMARY))
    extractor = result.metadata["extractor"]
    assert extractor["approved_scene_records"] == 2
    assert set(extractor) == {
        "prompt_sha256",
        "answer_schema_sha256",
        "citations",
        "gate",
        "approved_scene_records",
    }


def test_fingerprint_material_is_stable_and_holds_no_scene_artifact() -> None:
    def build() -> Any:
        return registry().lane("combat-turns").extractor()

    first = build().fingerprint_material()
    assert first == build().fingerprint_material()
    assert set(first) == {"prompt", "answer_schema", "citations", "gate"}


def test_the_complete_profile_orders_lanes_by_their_references() -> None:
    pipeline = complete_pipeline()
    assert pipeline.chunk.module == "scenes"
    assert {lane.id: lane.depends_on for lane in pipeline.lanes} == {
        "npcs": (),
        "scene-descriptions": (),
        "combat-turns": ("npcs", "scene-descriptions"),
        "spells": ("npcs",),
        "item-events": ("npcs",),
        "npc-interactions": ("npcs",),
    }
    combat = pipeline.lane("combat-turns").extract
    assert {(b.slot, b.origin, b.lane, b.required) for b in combat.references} == {
        ("scene_descriptions", "lane", "scene-descriptions", True),
        ("npcs", "lane", "npcs", False),
    }


def test_the_minimal_profile_has_npcs_and_scene_descriptions_only() -> None:
    from notarius_dagster.engine.resolution import resolve_profile_file

    pipeline = resolve_profile_file(MINIMAL_PROFILE, registry=registry())
    assert pipeline.lane_ids() == ["npcs", "scene-descriptions"]
    assert pipeline.llm_profile_name == "offline"
    assert all(lane.depends_on == () for lane in pipeline.lanes)


def test_the_scene_lane_hands_its_accepted_artifact_to_combat_in_order(
    fight: SourceDocument, chunks: list[Chunk]
) -> None:
    """The complete profile's ordered dependency, engine side: producers first, then the
    consumer gets their accepted artifacts through the typed handoff."""
    pipeline = complete_pipeline()
    payloads: dict[str, Any] = {}
    clients: dict[str, RecordingClient] = {}
    for lane_id in ("npcs", "scene-descriptions", "combat-turns"):
        clients[lane_id] = RecordingClient()
        result = run_one_lane(
            pipeline.lane(lane_id), fight, chunks, payloads, client=clients[lane_id]
        )
        assert result.status == "accepted"
        payloads[lane_id] = result.payload
    kinds = {s["scene_id"]: s["kind"] for s in payloads["scene-descriptions"]["scene_descriptions"]}
    assert kinds == {"chunk-0000": "narrative", "chunk-0001": "combat"}
    assert [r.chunk_id for r in clients["combat-turns"].requests] == ["chunk-0001"]
    actors = {t["actor"]: t["actor_npc_id"] for t in payloads["combat-turns"]["combat_turns"]}
    assert actors["Gustav"] == "npc-gustav"


def _complete_profile_data() -> dict[str, Any]:
    import yaml

    from tests.lane_doubles import COMPLETE_PROFILE

    data: dict[str, Any] = yaml.safe_load(COMPLETE_PROFILE.read_text())
    data["pipeline"]["llm_profile"] = "test-double"
    return data


def _resolve(data: dict[str, Any]) -> Any:
    from notarius_dagster.engine.config import parse_profile
    from notarius_dagster.engine.resolution import resolve_pipeline

    profile = parse_profile(data, profile_name="dnd-complete.yaml")
    return resolve_pipeline(
        profile, profile_name="dnd-complete.yaml", base_dir=Path("."), registry=registry()
    )


def test_an_artifact_with_two_records_for_one_scene_is_malformed_not_unbound(
    fight: SourceDocument, chunks: list[Chunk]
) -> None:
    """Internally inconsistent (two records claim one chunk): an error at the handoff."""
    scenes = scene_artifact(chunks, "combat", TITLE, SUMMARY)
    scenes["scene_descriptions"].append(dict(scenes["scene_descriptions"][1]))
    with pytest.raises(InvalidReferenceError, match="malformed generated artifact"):
        run_combat(fight, chunks, scenes)


def test_a_record_whose_evidence_is_not_its_range_is_malformed(
    fight: SourceDocument, chunks: list[Chunk]
) -> None:
    scenes = scene_artifact(chunks, "combat", TITLE, SUMMARY)
    scenes["scene_descriptions"][0]["source_ref"]["end_unit_id"] = 101
    with pytest.raises(InvalidReferenceError, match="malformed generated artifact"):
        run_combat(fight, chunks, scenes)
