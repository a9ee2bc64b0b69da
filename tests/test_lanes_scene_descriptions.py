"""The `scene-descriptions` lane: one classified scene per chunk, whose identity and range are
the chunk's (never the model's), cited by a single reference, checked at every stage."""

from __future__ import annotations

import json
from typing import Any

import pytest

from notarius_dagster.engine.chunking import make_chunk
from notarius_dagster.engine.contracts import ModuleOutput, NormalizeRequest, RunContext
from notarius_dagster.engine.models import Chunk, SourceDocument
from notarius_dagster.engine.validators import ValidationContext
from notarius_dagster.modules import registry
from notarius_dagster.settings import REPO_ROOT
from tests.conftest import make_document
from tests.lane_doubles import RecordingClient, complete_pipeline, run_one_lane, scene_artifact

KIND = "dnd/scene-description-list"


@pytest.fixture
def chunks(doc: SourceDocument) -> list[Chunk]:
    return [make_chunk(doc, 0, doc.units[:4]), make_chunk(doc, 1, doc.units[4:])]


def run_scenes(doc: SourceDocument, chunks: list[Chunk], client: RecordingClient | None = None):
    return run_one_lane(complete_pipeline().lane("scene-descriptions"), doc, chunks, client=client)


def test_one_scene_per_chunk_with_the_chunk_id_and_exact_range(
    doc: SourceDocument, chunks: list[Chunk]
) -> None:
    result = run_scenes(doc, chunks)
    assert result.status == "accepted"
    scenes = result.payload["scene_descriptions"]
    assert [(s["scene_id"], s["start_unit_id"], s["end_unit_id"]) for s in scenes] == [
        ("chunk-0000", 0, 3),
        ("chunk-0001", 4, 9),
    ]
    assert scenes[0]["source_ref"] == {"source_id": "s1", "start_unit_id": 0, "end_unit_id": 3}
    assert scenes[0]["kind"] == "narrative"


def test_identity_and_range_are_the_runners_even_if_the_model_answers_them(
    doc: SourceDocument, chunks: list[Chunk]
) -> None:
    def liar(messages: Any, response_format: Any) -> str:
        return json.dumps(
            {
                "kind": "combat",
                "title": "Fight",
                "summary": "",
                "scene_id": "scene-evil",
                "start_unit_id": 99,
                "end_unit_id": 98,
            }
        )

    result = run_scenes(doc, chunks, RecordingClient(liar))
    assert [s["scene_id"] for s in result.payload["scene_descriptions"]] == [
        "chunk-0000",
        "chunk-0001",
    ]
    assert {s["start_unit_id"] for s in result.payload["scene_descriptions"]} == {0, 4}


def test_the_prompt_states_mixed_scene_precedence(doc: SourceDocument, chunks: list[Chunk]) -> None:
    client = RecordingClient()
    run_scenes(doc, chunks, client)
    instructions = client.requests[0].instructions
    assert "combat is a substantive, central activity" in instructions
    assert '"combat"' in instructions and "even when" in instructions


def test_a_chunk_with_any_fighting_is_classified_combat_by_the_double() -> None:
    texts = ["We chat with the innkeeper."] * 5 + ["The goblin attacks and hits."]
    doc = make_document(list(range(6)), texts=texts)
    result = run_scenes(doc, [make_chunk(doc, 0, doc.units)])
    assert result.payload["scene_descriptions"][0]["kind"] == "combat"


def test_the_evidence_is_one_reference_and_the_projection_returns_it() -> None:
    kind = registry().kind(KIND)
    schema = kind.json_schema()
    record = schema["$defs"]["SceneDescription"]
    assert record["properties"]["source_ref"] == {"$ref": "#/$defs/SourceRef"}
    assert "source_refs" not in record["properties"]
    doc = make_document()
    artifact = scene_artifact([make_chunk(doc, 0, doc.units[2:5])], "meta")
    refs = kind.source_refs(artifact)
    assert [(r.start_unit_id, r.end_unit_id) for r in refs] == [(2, 4)]


def _extract_ctx(doc: SourceDocument, chunk: Chunk) -> ValidationContext:
    return ValidationContext(
        stage="extract",
        lane_id="scene-descriptions",
        module_key="x",
        kind=registry().kind(KIND),
        document=doc,
        chunk=chunk,
    )


@pytest.mark.parametrize(
    "damage, problem",
    [
        (
            lambda a: a["scene_descriptions"].append(dict(a["scene_descriptions"][0])),
            "exactly one scene",
        ),
        (lambda a: a["scene_descriptions"][0].update(scene_id="other"), "not the chunk id"),
        (lambda a: a["scene_descriptions"][0].update(end_unit_id=2), "not the chunk's"),
        (
            lambda a: a["scene_descriptions"][0]["source_ref"].update(start_unit_id=1),
            "source_ref: is not the chunk's range",
        ),
    ],
)
def test_extract_rule_requires_exactly_the_chunks_scene(
    doc: SourceDocument, damage: Any, problem: str
) -> None:
    chunk = make_chunk(doc, 0, doc.units[:4])
    artifact = scene_artifact([chunk], "narrative")
    rule = registry().lane("scene-descriptions").rules()["dnd.scene_descriptions.one_per_chunk"]
    assert rule(_extract_ctx(doc, chunk), ModuleOutput(payload=artifact)) == []
    damage(artifact)
    problems = rule(_extract_ctx(doc, chunk), ModuleOutput(payload=artifact))
    assert any(problem in p for p in problems)


def test_merge_rule_refuses_a_scene_that_is_not_an_accepted_chunks(
    doc: SourceDocument, chunks: list[Chunk]
) -> None:
    extracts = tuple(ModuleOutput(payload=scene_artifact([c], "narrative")) for c in chunks)
    ctx = ValidationContext(
        stage="merge",
        lane_id="scene-descriptions",
        module_key="x",
        kind=registry().kind(KIND),
        document=doc,
        extracts=extracts,
    )
    rule = registry().lane("scene-descriptions").rules()["dnd.scene_descriptions.chunk_coverage"]
    merged = scene_artifact(chunks, "narrative")
    assert rule(ctx, ModuleOutput(payload=merged)) == []
    merged["scene_descriptions"][1]["kind"] = "combat"
    assert rule(ctx, ModuleOutput(payload=merged)) == [
        "scene_descriptions: merged scenes are not the accepted chunks' scenes"
    ]
    merged["scene_descriptions"].pop()
    assert rule(ctx, ModuleOutput(payload=merged))


@pytest.mark.parametrize(
    "damage, problem",
    [
        (lambda a: a["scene_descriptions"][1].update(scene_id="chunk-0000"), "not unique"),
        (lambda a: a["scene_descriptions"][1].update(end_unit_id=42), "not in the document"),
        (lambda a: a["scene_descriptions"][1].update(source_id="s2"), "source_id"),
        (
            lambda a: a["scene_descriptions"][1]["source_ref"].update(end_unit_id=8),
            "source_ref: is not the scene's range",
        ),
    ],
)
def test_normalize_rule_requires_unique_ids_and_ranges_inside_the_document(
    doc: SourceDocument, chunks: list[Chunk], damage: Any, problem: str
) -> None:
    artifact = scene_artifact(chunks, "recap")
    ctx = ValidationContext(
        stage="normalize",
        lane_id="scene-descriptions",
        module_key="x",
        kind=registry().kind(KIND),
        document=doc,
        merged=ModuleOutput(payload=scene_artifact(chunks, "recap")),
    )
    rule = registry().lane("scene-descriptions").rules()["dnd.scene_descriptions.consistent"]
    assert rule(ctx, ModuleOutput(payload=artifact)) == []
    damage(artifact)
    assert any(problem in p for p in rule(ctx, ModuleOutput(payload=artifact)))


def test_normalize_orders_scenes_by_source_position_and_keeps_chunk_ids() -> None:
    doc = make_document([30, 10, 20, 40])
    late, early = make_chunk(doc, 0, doc.units[2:]), make_chunk(doc, 1, doc.units[:2])
    merged = ModuleOutput(payload=scene_artifact([late, early], "narrative"))
    ctx = RunContext(
        session_id="s1",
        lane_id="scene-descriptions",
        module_key="x",
        options={},
        references={},
        client=None,
    )
    normalizer = registry().lane("scene-descriptions").normalizer()
    out = normalizer.normalize(NormalizeRequest(doc, merged, ctx)).payload
    assert [s["scene_id"] for s in out["scene_descriptions"]] == ["chunk-0001", "chunk-0000"]


def test_unknown_options_are_refused() -> None:
    lane = registry().lane("scene-descriptions")
    with pytest.raises(ValueError, match="unknown option"):
        lane.modules.extract(lane, {"temperature": 1})


def test_the_checked_in_schema_is_the_models() -> None:
    path = REPO_ROOT / "schemas" / "notarius.dnd.scene_description_list.json"
    assert json.loads(path.read_text()) == registry().kind(KIND).json_schema()
