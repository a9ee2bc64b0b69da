"""The `combat-turns` lane on an exact combat scene: answer conversion, NPC grounding (and its
lane rule), merging of the same turn seen by overlapping chunks, and `turn-0001` ids in source
order. Scene gating itself is specified in test_scene_gating.py."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from notarius_dagster.engine.chunking import make_chunk
from notarius_dagster.engine.contracts import (
    ExtractRequest,
    MergeRequest,
    ModuleOutput,
    NormalizeRequest,
    PreparedReference,
    RunContext,
)
from notarius_dagster.engine.models import Chunk, SourceDocument
from notarius_dagster.engine.references import prepare_generated
from notarius_dagster.engine.validators import ValidationContext
from notarius_dagster.modules import registry
from notarius_dagster.settings import REPO_ROOT
from tests.conftest import make_document
from tests.lane_doubles import (
    answer_payload,
    complete_pipeline,
    npc_artifact,
    run_one_lane,
    scene_artifact,
)

KIND = "dnd/combat-turn-list"
NPCS = npc_artifact(
    "s1",
    [
        ("npc-gustav", "Gustav Fletching", ["the Carnival Master"]),
        ("npc-twin-a", "Twin", []),
        ("npc-twin-b", "twin!", []),
    ],
)


def npcs_reference(artifact: dict[str, Any] = NPCS) -> PreparedReference:
    binding = next(
        b for b in complete_pipeline().lane("combat-turns").extract.references if b.slot == "npcs"
    )
    return prepare_generated(binding, artifact, registry().kinds())


def request(doc: SourceDocument, chunk: Chunk, npcs: bool = True) -> ExtractRequest:
    refs = {"npcs": npcs_reference()} if npcs else {}
    ctx = RunContext(
        session_id="s1",
        lane_id="combat-turns",
        module_key="x",
        options={},
        references=refs,
        client=None,
    )
    return ExtractRequest(doc, chunk, ctx)


def turn(actor: str, units: list[int], **kw: Any) -> dict[str, Any]:
    return {
        "round": kw.get("round"),
        "actor": actor,
        "action": kw.get("action", "attack"),
        "targets": kw.get("targets", []),
        "outcome": {"hit": kw.get("hit"), "damage": kw.get("damage"), "effect": None},
        "unit_ids": units,
    }


def convert(doc: SourceDocument, chunk: Chunk, turns: list[dict[str, Any]], npcs: bool = True):
    return answer_payload(
        "dnd.combat_turns.extract", {"combat_turns": turns}, request(doc, chunk, npcs)
    )


def test_a_turn_cites_its_units_and_keeps_its_outcome(doc: SourceDocument) -> None:
    chunk = make_chunk(doc, 0, doc.units[:6])
    payload, _ = convert(
        doc, chunk, [turn("Beau", [2, 3], round=1, targets=[" Gustav ", ""], hit=True, damage=12)]
    )
    record = payload["combat_turns"][0]
    assert record["round"] == 1 and record["targets"] == ["Gustav"]
    assert record["outcome"] == {"hit": True, "damage": "12", "effect": None}
    assert record["source_refs"] == [{"source_id": "s1", "start_unit_id": 2, "end_unit_id": 3}]
    assert registry().kind(KIND).parse(payload)


def test_an_actor_naming_an_npc_by_name_or_alias_gets_its_id(doc: SourceDocument) -> None:
    chunk = make_chunk(doc, 0, doc.units)
    payload, warnings = convert(
        doc, chunk, [turn("gustav fletching", [1]), turn("The carnival master!", [2])]
    )
    assert [t["actor_npc_id"] for t in payload["combat_turns"]] == ["npc-gustav", "npc-gustav"]
    assert warnings == []


def test_unmatched_names_stay_names_with_one_count_only_warning(doc: SourceDocument) -> None:
    chunk = make_chunk(doc, 0, doc.units)
    payload, warnings = convert(
        doc, chunk, [turn("Beauregard", [1]), turn("Caleb", [2]), turn("Gustav Fletching", [3])]
    )
    assert [t["actor_npc_id"] for t in payload["combat_turns"]] == [None, None, "npc-gustav"]
    assert len(warnings) == 1 and warnings[0].code == "npc_unmatched"
    assert warnings[0].message.startswith("2 name(s)")
    assert "Beauregard" not in warnings[0].message and "Caleb" not in warnings[0].message


def test_a_name_shared_by_two_npcs_is_not_grounded(doc: SourceDocument) -> None:
    payload, warnings = convert(doc, make_chunk(doc, 0, doc.units), [turn("Twin", [1])])
    assert payload["combat_turns"][0]["actor_npc_id"] is None and len(warnings) == 1


def test_without_an_npcs_reference_ids_stay_null_silently(doc: SourceDocument) -> None:
    payload, warnings = convert(
        doc, make_chunk(doc, 0, doc.units), [turn("Gustav Fletching", [1])], npcs=False
    )
    assert payload["combat_turns"][0]["actor_npc_id"] is None and warnings == []


@dataclass(frozen=True)
class ContextWithReferences(ValidationContext):
    """A validation context with references, as the lane runner builds it."""

    references: Mapping[str, PreparedReference] = field(default_factory=dict)


def _rule_problems(doc: SourceDocument, payload: dict[str, Any], refs: Any) -> list[str]:
    rule = registry().lane("combat-turns").rules()["dnd.combat_turns.npc_grounding"]
    ctx = ContextWithReferences(
        stage="extract",
        lane_id="combat-turns",
        module_key="x",
        kind=registry().kind(KIND),
        document=doc,
        references=refs,
    )
    return rule(ctx, ModuleOutput(payload=payload))


def test_lane_rule_an_actor_naming_an_npc_must_carry_its_id(doc: SourceDocument) -> None:
    payload, _ = convert(
        doc, make_chunk(doc, 0, doc.units), [turn("Gustav Fletching", [1]), turn("Beau", [2])]
    )
    refs = {"npcs": npcs_reference()}
    assert _rule_problems(doc, payload, refs) == []
    payload["combat_turns"][0]["actor_npc_id"] = None
    assert _rule_problems(doc, payload, refs) == [
        "combat_turns[0].actor_npc_id: names an NPC but lacks its id"
    ]
    payload["combat_turns"][0]["actor_npc_id"] = "npc-gustav"
    payload["combat_turns"][1]["actor_npc_id"] = "npc-nobody"
    assert _rule_problems(doc, payload, refs) == [
        "combat_turns[1].actor_npc_id: not an id of the npcs reference"
    ]
    payload["combat_turns"][1]["actor_npc_id"] = None
    assert _rule_problems(doc, payload, {}) == [
        "combat_turns[0].actor_npc_id: NPC id set but no npcs reference is bound"
    ]


def test_lane_rule_stands_aside_while_the_engine_gives_validators_no_references(
    doc: SourceDocument,
) -> None:
    payload, _ = convert(doc, make_chunk(doc, 0, doc.units), [turn("Gustav Fletching", [1])])
    payload["combat_turns"][0]["actor_npc_id"] = None
    rule = registry().lane("combat-turns").rules()["dnd.combat_turns.npc_grounding"]
    ctx = ValidationContext(
        stage="extract",
        lane_id="combat-turns",
        module_key="x",
        kind=registry().kind(KIND),
        document=doc,
    )
    assert rule(ctx, ModuleOutput(payload=payload)) == []


def _ctx() -> RunContext:
    return RunContext(
        session_id="s1",
        lane_id="combat-turns",
        module_key="x",
        options={},
        references={},
        client=None,
    )


def test_merge_folds_the_same_turn_seen_by_overlapping_chunks(doc: SourceDocument) -> None:
    first, second = make_chunk(doc, 0, doc.units[:6]), make_chunk(doc, 1, doc.units[4:])
    a, _ = convert(doc, first, [turn("Beau", [4, 5], hit=True), turn("Caleb", [2])])
    b, _ = convert(doc, second, [turn("Beau", [5, 6], hit=True), turn("Beau", [8], hit=False)])
    merger = registry().lane("combat-turns").merger()
    merged = merger.merge(
        MergeRequest(doc, (ModuleOutput(payload=a), ModuleOutput(payload=b)), _ctx())
    ).payload
    turns = merged["combat_turns"]
    assert [(t["actor"], t["outcome"]["hit"]) for t in turns] == [
        ("Beau", True),
        ("Caleb", None),
        ("Beau", False),
    ]
    assert [(r["start_unit_id"], r["end_unit_id"]) for r in turns[0]["source_refs"]] == [
        (4, 5),
        (5, 6),
    ]


def test_merge_folds_one_turn_told_on_both_sides_of_a_chunk_border() -> None:
    # A turn whose lines straddle the border between two chunks is answered in both; the
    # pieces are one turn when equal but for citations and the later starts where the earlier
    # ends (at most CITATION_WINDOW uncited units between). A turn further on stays its own.
    doc = make_document(list(range(20)))
    first, second = make_chunk(doc, 0, doc.units[:10]), make_chunk(doc, 1, doc.units[10:])
    a, _ = convert(doc, first, [turn("Beau", [7, 9], hit=True)], npcs=False)
    b, _ = convert(
        doc, second, [turn("Beau", [11, 12], hit=True), turn("Beau", [16], hit=True)], npcs=False
    )
    merger = registry().lane("combat-turns").merger()
    extracts = (
        ModuleOutput(payload=a, provenance={"unit_span": [0, 9]}),  # as the lane runner says
        ModuleOutput(payload=b, provenance={"unit_span": [10, 19]}),
    )
    merged = merger.merge(MergeRequest(doc, extracts, _ctx())).payload
    spans = [
        [(r["start_unit_id"], r["end_unit_id"]) for r in t["source_refs"]]
        for t in merged["combat_turns"]
    ]
    assert spans == [[(7, 7), (9, 9), (11, 12)], [(16, 16)]]


def test_merge_folds_one_round_numbered_turn_told_in_two_chunks() -> None:
    # A creature takes one turn per round: the same turn (every field equal, round 2, the
    # actor grounded to one NPC however spelt) told again further on in the next chunk is
    # that turn; without a round it stays two records.
    doc = make_document(list(range(20)))
    first, second = make_chunk(doc, 0, doc.units[:10]), make_chunk(doc, 1, doc.units[10:])
    a, _ = convert(doc, first, [turn("imps", [3], round=2), turn("Nott", [4])], npcs=False)
    b, _ = convert(doc, second, [turn("imp", [17], round=2), turn("Nott", [18])], npcs=False)
    for record, npc_id in ((a["combat_turns"][0], "npc-imps"), (b["combat_turns"][0], "npc-imps")):
        record["actor_npc_id"] = npc_id  # grounding found both spellings to be one NPC
    merger = registry().lane("combat-turns").merger()
    merged = merger.merge(
        MergeRequest(doc, (ModuleOutput(payload=a), ModuleOutput(payload=b)), _ctx())
    ).payload
    turns = [
        (t["actor"], [r["start_unit_id"] for r in t["source_refs"]]) for t in merged["combat_turns"]
    ]
    assert turns == [("imps", [3, 17]), ("Nott", [4]), ("Nott", [18])]


def test_normalize_numbers_turns_in_source_order_stably() -> None:
    doc = make_document([50, 40, 30, 20, 10])
    chunk = make_chunk(doc, 0, doc.units)
    payload, _ = convert(
        doc, chunk, [turn("Late", [10]), turn("Early", [50]), turn("Middle", [30])], npcs=False
    )
    normalizer = registry().lane("combat-turns").normalizer()
    req = NormalizeRequest(doc, ModuleOutput(payload=payload), _ctx())
    out = normalizer.normalize(req).payload
    assert [(t["id"], t["actor"]) for t in out["combat_turns"]] == [
        ("turn-0001", "Early"),
        ("turn-0002", "Middle"),
        ("turn-0003", "Late"),
    ]
    assert normalizer.normalize(req).payload == out
    assert list(out["combat_turns"][0])[0] == "id"


def test_the_lane_runs_end_to_end_and_its_rules_accept_the_result(doc: SourceDocument) -> None:
    texts = [
        "Gustav Fletching attacks Beau and hits.",
        "Beau attacks back and misses.",
        "That was 5 fire damage.",
    ]
    fight = make_document([1, 2, 3], texts=texts)
    chunks = [make_chunk(fight, 0, fight.units)]
    lane = complete_pipeline().lane("combat-turns")
    # The double's actors for lines 2 and 3 are speaker labels, which `support` drops (and
    # records: tests/test_record_support.py); this test is about the lane's own rules.
    lane = lane.model_copy(
        update={
            "extract": lane.extract.model_copy(
                update={"validators": tuple(v for v in lane.extract.validators if v != "support")}
            )
        }
    )
    result = run_one_lane(
        lane,
        fight,
        chunks,
        {
            "scene-descriptions": scene_artifact(chunks, "combat"),
            "npcs": npc_artifact("s1", [("npc-gustav", "Gustav Fletching", ["Gustav"])]),
        },
    )
    assert result.status == "accepted" and result.rejections == ()
    turns = result.payload["combat_turns"]
    assert [t["actor_npc_id"] for t in turns] == ["npc-gustav", None, None]
    assert turns[2]["outcome"]["damage"] == "5 fire damage"


def test_the_checked_in_schema_is_the_models() -> None:
    path = REPO_ROOT / "schemas" / "notarius.dnd.combat_turn_list.json"
    assert json.loads(path.read_text()) == registry().kind(KIND).json_schema()


@pytest.mark.parametrize(
    "module", ["dnd.combat_turns.extract", "dnd.combat_turns.merge", "dnd.combat_turns.normalize"]
)
def test_unknown_options_are_refused(module: str) -> None:
    stage = module.rsplit(".", 1)[1]
    lane = registry().lane("combat-turns")
    with pytest.raises(ValueError, match="unknown option"):
        getattr(lane.modules, stage)(lane, {"surprise": True})
