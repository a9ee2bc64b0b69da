"""The lane registry: every lane is one `LaneSpec` in a folder of the same shape; its list
envelope and answer model are derived from its record model; the schemas and the docs' lane
table are generated from the registry; and adding a lane is one folder and one profile entry
(a throwaway lane from a temporary folder runs through the same discovery, resolution and lane
runner as the real ones)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from notarius_dagster.dnd.spells.lane import LANE as SPELLS
from notarius_dagster.engine.chunking import make_chunk
from notarius_dagster.engine.lane_models import AnswerSpec
from notarius_dagster.engine.lane_runner import run_lane
from notarius_dagster.engine.lanes import GoldMatch, LaneSpec, load_lane_folder
from notarius_dagster.engine.registry import LaneRegistry
from notarius_dagster.engine.resolution import resolve_profile_file
from notarius_dagster.engine.validators import schema_problems
from notarius_dagster.llm.client import LiteLLMClient
from notarius_dagster.modules import registry
from notarius_dagster.schemas import generated, lane_table, lanes_doc, stale_docs
from notarius_dagster.settings import REPO_ROOT
from tests.conftest import make_document
from tests.lane_doubles import write_lane_folder
from tests.llm_double import double_profile, scripted_llm

DND = REPO_ROOT / "notarius_dagster" / "dnd"


def dnd_lanes() -> list[LaneSpec]:
    return [lane for lane in registry().lanes if lane.kind.startswith("dnd/")]


def test_the_six_lanes_are_registered_from_their_folders() -> None:
    assert sorted(lane.lane_id for lane in dnd_lanes()) == [
        "combat-turns",
        "item-events",
        "npc-interactions",
        "npcs",
        "scene-descriptions",
        "spells",
    ]
    folders = sorted(p.name for p in DND.iterdir() if (p / "__init__.py").is_file())
    assert folders == sorted(lane.items_field for lane in dnd_lanes())


@pytest.mark.parametrize(
    "folder", sorted(p.name for p in DND.iterdir() if p.is_dir() and (p / "__init__.py").is_file())
)
def test_every_lane_folder_has_the_same_shape(folder: str) -> None:
    path = DND / folder
    assert {"__init__.py", "lane.py", "model.py", "prompt.md"} <= {p.name for p in path.iterdir()}
    lane = next(lane for lane in dnd_lanes() if lane.items_field == folder)
    assert lane.record_model.__module__ == f"notarius_dagster.dnd.{folder}.model"
    assert lane.prompt == path / "prompt.md"
    model_source = (path / "model.py").read_text()
    assert "List(" not in model_source and "Answer(" not in model_source.replace(
        "OutcomeAnswer(", ""
    )  # envelopes and answers are derived, never written


def test_the_answer_is_the_record_without_runner_fields_plus_cited_units() -> None:
    answer = SPELLS.answer_model.model_json_schema()
    item = answer["$defs"]["SpellAnswerItem"]
    assert list(item["properties"]) == [
        "caster",
        "spell",
        "level",
        "targets",
        "outcome",
        "unit_ids",
    ]
    assert item["required"] == ["caster", "spell", "unit_ids"]
    assert answer["properties"]["spells"]["maxItems"] == 40
    record = SPELLS.record_model.model_json_schema()["properties"]
    assert item["properties"]["spell"] == record["spell"]  # same constraints as the record


def test_the_list_envelope_is_derived_and_strict() -> None:
    kind = registry().kind("dnd/spell-list")
    assert kind.model is SPELLS.list_model and kind.items_field == "spells"
    assert list(kind.model.model_fields) == ["kind", "schema_version", "source_id", "spells"]
    payload = SPELLS.envelope("s1", [])
    assert schema_problems(kind, payload) == []
    assert schema_problems(kind, {**payload, "extra": 1})


def test_a_unique_field_makes_a_repeating_artifact_malformed() -> None:
    scene = {
        "scene_id": "c0",
        "source_id": "s1",
        "start_unit_id": 0,
        "end_unit_id": 1,
        "kind": "combat",
        "title": "t",
        "summary": "",
        "source_ref": {"source_id": "s1", "start_unit_id": 0, "end_unit_id": 1},
    }
    kind = registry().kind("dnd/scene-description-list")
    payload = {
        "kind": kind.kind,
        "schema_version": "v1",
        "source_id": "s1",
        "scene_descriptions": [scene],
    }
    assert schema_problems(kind, payload) == []
    assert schema_problems(kind, {**payload, "scene_descriptions": [scene, scene]})


def spells_spec(**fields: Any) -> LaneSpec:
    """The spells lane's spec declared again, with `fields` changed."""
    return LaneSpec(
        lane_id="spells",
        kind="dnd/spell-list",
        record_model=SPELLS.record_model,
        answer=SPELLS.answer,
        modules=SPELLS.modules,
        **fields,
    )


def test_a_spec_that_names_no_record_field_fails_at_declaration() -> None:
    with pytest.raises(ValueError, match=r"lane 'spells': preview_fields names no record field"):
        spells_spec(preview_fields=("nmae",))


def test_what_the_evaluation_matches_on_names_record_fields_checked_at_declaration() -> None:
    with pytest.raises(ValueError, match=r"lane 'spells': gold_match.also names no record field"):
        spells_spec(gold_match=GoldMatch(name="spell", also=("castr",)))
    with pytest.raises(ValueError, match=r"lane 'spells': gold_match names no record field"):
        spells_spec(gold_match=GoldMatch(name="spel"))
    unscored = spells_spec()
    assert unscored.match_fields is None


def test_a_kind_is_registered_by_one_lane_only() -> None:
    assert LaneRegistry(lanes=(SPELLS,)).lane("spells") is SPELLS
    other = LaneSpec(
        lane_id="other-spells",
        kind="dnd/spell-list",
        record_model=SPELLS.record_model,
        answer=SPELLS.answer,
        modules=SPELLS.modules,
    )
    with pytest.raises(ValueError, match="registered twice"):
        LaneRegistry(lanes=(SPELLS, other))


def test_the_checked_in_lane_table_is_the_registrys() -> None:
    assert stale_docs() == [], "run `make schemas` and commit docs/lanes.md"


def test_a_stale_lane_table_is_found(tmp_path: Path) -> None:
    doc = tmp_path / "lanes.md"
    current = (REPO_ROOT / "docs" / "lanes.md").read_text()
    doc.write_text(current.replace("`dnd.spells.ids`", "`dnd.spells.old`"))
    assert stale_docs(doc) == ["docs/lanes.md"]
    doc.write_text(lanes_doc(doc.read_text()))
    assert stale_docs(doc) == []


# ---- adding a lane: one folder and one profile entry ----------------------------------------

LANE_PY = '''
    """A throwaway lane: creature sightings."""

    from notarius_dagster.dnd.event_lists import EventMerger, EventNormalizer
    from notarius_dagster.dnd.llm_extract import llm_extractor
    from notarius_dagster.dnd.records import ids_rule
    from notarius_dagster.engine.lane_models import AnswerSpec
    from notarius_dagster.engine.lanes import LaneModules, LaneSpec

    from .model import Sighting

    LANE = LaneSpec(
        lane_id="sightings",
        kind="test/sighting-list",
        schema_id="test.sighting_list",
        record_model=Sighting,
        answer=AnswerSpec("SightingAnswer"),
        modules=LaneModules(extract=llm_extractor(), merge=EventMerger,
                            normalize=EventNormalizer, rules=(ids_rule(),)),
        id_prefix="sighting",
        support_fields=("creature",),
        preview_fields=("id", "creature"),
    )
'''
MODEL_PY = """
    from pydantic import Field

    from notarius_dagster.dnd.records import Record


    class Sighting(Record):
        id: str | None = Field(default=None, pattern=r"^sighting-[0-9]{4,}$")
        creature: str = Field(min_length=1, max_length=80)
        place: str | None = Field(max_length=80)
"""
PROMPT_MD = "You list creature sightings.\n"
PROFILE = {
    "version": 1,
    "pipeline": {
        "id": "throwaway",
        "chunk": {"module": "generic", "options": {"max_units": 3}},
        "llm_profile": "test-double",
        "lanes": [{"id": "sightings"}],
        "output": {"module": "json"},
    },
}


def write_lane(root: Path) -> Path:
    return write_lane_folder(
        root / "throwaway_sightings", lane_py=LANE_PY, model_py=MODEL_PY, prompt=PROMPT_MD
    )


def sightings(messages: list[dict[str, Any]], response_format: Any) -> str:
    """The new lane's own responder: a wolf wherever a line names one."""
    from tests.doubles import units_in

    return json.dumps(
        {
            "sightings": [
                {"creature": " wolf ", "place": "", "unit_ids": [unit]}
                for unit, _, text in units_in(messages)
                if "wolf" in text
            ]
        }
    )


def test_adding_a_lane_is_one_folder_and_one_profile_entry(tmp_path: Path) -> None:
    folder = write_lane(tmp_path)
    spec = load_lane_folder(folder)
    assert spec.lane_id == "sightings"
    assert load_lane_folder(folder) is spec  # loading again gives the same spec
    lanes = registry().with_lanes(spec)
    profile = tmp_path / "profile.yaml"
    profile.write_text(yaml.safe_dump(PROFILE))

    pipeline = resolve_profile_file(profile, llm_profile="test-double", registry=lanes)
    lane = pipeline.lane("sightings")
    assert lane.kind == "test/sighting-list"
    assert lane.normalize.validators == ("schema", "refs_in_document", "test.sightings.ids")
    assert set(spec.rules()) == {"test.sightings.ids"}

    texts = ["A wolf howls.", "Nothing.", "Another wolf!", "Quiet.", "The wolf returns."]
    doc = make_document(list(range(5)), texts=texts)
    chunks = [make_chunk(doc, 0, doc.units[:3]), make_chunk(doc, 1, doc.units[2:])]
    with scripted_llm(sightings) as double:
        result = run_lane(
            lane,
            document=doc,
            chunks=chunks,
            references={},
            client=LiteLLMClient(double_profile(), retry_backoff_s=0),
            session_id="s1",
            llm_fingerprint="test-double",
            registry=lanes,
        )
    assert result.status == "accepted" and result.rejections == ()
    records = result.payload["sightings"]
    assert [(r["id"], r["creature"], r["place"]) for r in records] == [
        ("sighting-0001", "wolf", None),
        ("sighting-0002", "wolf", None),
        ("sighting-0003", "wolf", None),
    ]
    assert [r["source_refs"][0]["start_unit_id"] for r in records] == [0, 2, 4]
    sent = double.calls[0].messages  # the json_object rung spells the schema out
    assert "SightingAnswerItem" in json.dumps(sent)
    assert lanes.kind("test/sighting-list").preview_fields == ("id", "creature")
    assert lane.extract.module == "test.sightings.extract"
    assert "sightings" not in registry().lane_ids()  # the D&D registry is a value: untouched
    # A test lane is never published: no schema file, no row in the docs' table.
    assert not any(name.startswith("test.") for name in generated())
    assert "sightings" not in lane_table()


def test_answer_defaults_and_replaced_fields_are_declared_not_guessed() -> None:
    from notarius_dagster.dnd.npc_interactions.lane import LANE as INTERACTIONS

    item = INTERACTIONS.answer_model.model_json_schema()["$defs"]["InteractionAnswerItem"]
    assert item["properties"]["kind"]["default"] == "other"
    assert item["required"] == ["npc", "unit_ids"]
    with pytest.raises(ValueError, match="answer.defaults names no record field"):
        LaneSpec(
            lane_id="npc-interactions",
            kind="dnd/npc-interaction-list",
            record_model=INTERACTIONS.record_model,
            modules=INTERACTIONS.modules,
            answer=AnswerSpec("InteractionAnswer", defaults={"knd": "other"}),
        )
