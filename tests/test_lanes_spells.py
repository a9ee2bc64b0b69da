"""The `spells` lane: castings cite their units, casters are grounded to NPC ids when the
optional `npcs` reference is bound, the same casting seen twice is merged, and ids follow
source order."""

from __future__ import annotations

import json
from typing import Any

import pytest

from notarius_dagster.engine.chunking import make_chunk
from notarius_dagster.engine.contracts import ExtractRequest, RunContext
from notarius_dagster.engine.models import SourceDocument
from notarius_dagster.engine.references import prepare_generated
from notarius_dagster.engine.validators import schema_problems
from notarius_dagster.modules import registry
from notarius_dagster.settings import REPO_ROOT
from tests.conftest import make_document
from tests.lane_doubles import answer_payload, complete_pipeline, npc_artifact, run_one_lane

KIND = "dnd/spell-list"
NPCS = npc_artifact("s1", [("npc-the-sea-hag", "the Sea Hag", ["hag"])])
TEXTS = [
    "I cast Fire Bolt at the hag.",
    "Roll it.",
    "Sea Hag casts Ray of Sickness on Mozzie.",
    "I cast Cure Wounds at 2nd level on Mozzie.",
    "Nice.",
]


def spell(caster: str, name: str, units: list[int], level: int | None = None) -> dict[str, Any]:
    return {
        "caster": caster,
        "spell": name,
        "level": level,
        "targets": ["Mozzie"],
        "outcome": "  ",
        "unit_ids": units,
    }


def convert(doc: SourceDocument, spells: list[dict[str, Any]], npcs: bool = True):
    binding = next(
        b for b in complete_pipeline().lane("spells").extract.references if b.slot == "npcs"
    )
    refs = {"npcs": prepare_generated(binding, NPCS, registry().kinds())} if npcs else {}
    ctx = RunContext(
        session_id="s1", lane_id="spells", module_key="x", options={}, references=refs, client=None
    )
    return answer_payload(
        "dnd.spells.extract",
        {"spells": spells},
        ExtractRequest(doc, make_chunk(doc, 0, doc.units), ctx),
    )


def test_a_casting_cites_its_units_and_blank_outcome_is_null(doc: SourceDocument) -> None:
    payload, _ = convert(doc, [spell("Beau", "Fire Bolt", [3, 4], level=0)], npcs=False)
    record = payload["spells"][0]
    assert record["outcome"] is None and record["level"] == 0
    assert record["source_refs"] == [{"source_id": "s1", "start_unit_id": 3, "end_unit_id": 4}]
    assert schema_problems(registry().kind(KIND), payload) == []


def test_a_caster_naming_an_npc_gets_its_id_others_are_counted(doc: SourceDocument) -> None:
    payload, warnings = convert(
        doc, [spell("Hag", "Ray of Sickness", [1]), spell("Mozzie", "Cure Wounds", [2])]
    )
    assert [s["caster_npc_id"] for s in payload["spells"]] == ["npc-the-sea-hag", None]
    assert [w.message.split(" ")[0] for w in warnings] == ["1"]


def test_a_spell_level_outside_0_to_9_is_a_schema_problem(doc: SourceDocument) -> None:
    payload, _ = convert(doc, [spell("Beau", "Wish", [1])], npcs=False)
    payload["spells"][0]["level"] = 12
    assert schema_problems(registry().kind(KIND), payload)


def test_the_npcs_and_roster_slots_are_optional() -> None:
    spec = registry().lane("spells")
    assert {s.name: s.required for s in spec.slots} == {"npcs": False, "roster": False}


def test_the_lane_runs_end_to_end_with_grounded_casters() -> None:
    doc = make_document(list(range(5)), texts=TEXTS)
    chunks = [make_chunk(doc, 0, doc.units[:3]), make_chunk(doc, 1, doc.units[2:])]
    npcs = npc_artifact("s1", [("npc-sea-hag", "Sea Hag", ["hag"])])
    result = run_one_lane(complete_pipeline().lane("spells"), doc, chunks, {"npcs": npcs})
    assert result.status == "accepted" and result.rejections == ()
    spells = result.payload["spells"]
    assert [(s["id"], s["spell"]) for s in spells] == [
        ("spell-0001", "Fire Bolt"),
        ("spell-0002", "Ray of Sickness"),
        ("spell-0003", "Cure Wounds"),
    ]
    assert [s["caster_npc_id"] for s in spells] == [None, "npc-sea-hag", None]
    assert spells[2]["level"] == 2
    assert [r["start_unit_id"] for r in spells[1]["source_refs"]] == [2]  # seen twice, once


def test_the_checked_in_schema_is_the_models() -> None:
    path = REPO_ROOT / "schemas" / "notarius.dnd.spell_list.json"
    assert json.loads(path.read_text()) == registry().kind(KIND).json_schema()


def test_unknown_options_are_refused() -> None:
    lane = registry().lane("spells")
    with pytest.raises(ValueError, match="unknown option"):
        lane.modules.normalize(lane, {"prefix": "x"})
