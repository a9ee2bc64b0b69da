"""The committed gold files: each validates against the checked-in JSON Schema and the model,
names a transcript of the repository with the right unit count and digest, covers every lane
of the complete profile, cites only units that exist, and gives every record its lane's match
field. The checked-in evaluation schemas equal what the models generate."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from notarius_dagster.engine.evaluation import evaluation_schemas
from notarius_dagster.engine.gold import gold_problems, load_gold
from notarius_dagster.engine.inputs import parse_transcript
from notarius_dagster.engine.resolution import resolve_profile_file
from notarius_dagster.modules import registry
from tests.conftest import DATA, REPO

MATCH_FIELDS = registry().match_fields()
"""What the scorer matches each D&D lane on: the `gold_match` every lane declares."""

GOLD_DIR = DATA / "gold"
GOLD_FILES = sorted(GOLD_DIR.glob("*.json"))
COMPLETE = REPO / "configs" / "dnd-complete.yaml"


def test_the_three_gold_sessions_are_committed() -> None:
    assert {p.stem for p in GOLD_FILES} == {
        "crd3-c2e001-slice",
        "fireball-sea-hag",
        "crd3-c2e003-u1944-2143",
    }


@pytest.mark.parametrize("path", GOLD_FILES, ids=lambda p: p.stem)
def test_a_gold_file_is_valid_complete_and_cites_existing_units(path: Path) -> None:
    schema = json.loads((REPO / "schemas" / "notarius.eval.gold.json").read_text())
    jsonschema.validate(json.loads(path.read_text()), schema)
    gold = load_gold(path)
    assert gold.session_id == path.stem
    assert "CC BY" in gold.attribution

    transcript = REPO / gold.source.file
    document = parse_transcript(
        transcript.read_bytes(), file_name=transcript.name, source_id=gold.session_id
    )
    assert gold.source.units == len(document.units)
    assert gold.source.digest == document.digest

    lanes = {
        lane.id: lane.kind for lane in resolve_profile_file(COMPLETE, registry=registry()).lanes
    }
    assert set(gold.lanes) == set(lanes), "gold covers every lane of the complete profile"
    required = {lane_id: MATCH_FIELDS[kind].name for lane_id, kind in lanes.items()}
    assert gold_problems(gold, (u.unit_id for u in document.units), required) == []


def test_gold_problems_name_missing_units_and_match_fields() -> None:
    gold = load_gold(GOLD_DIR / "fireball-sea-hag.json")
    problems = gold_problems(gold, range(0, 100), {"npcs": "name", "spells": "caster_name"})
    assert any(
        p.startswith("lanes.npcs[0].unit_ids: ") and "not in the transcript" in p for p in problems
    )
    assert "lanes.spells[0]: no 'caster_name' (the lane's match field)" in problems


def test_the_committed_slice_is_a_verbatim_run_of_its_episode() -> None:
    slice_lines = (DATA / "slices" / "crd3-c2e003-u1944-2143.jsonl").read_text().splitlines()
    episode = (DATA / "sessions" / "crd3-c2e003.jsonl").read_text().splitlines()
    ids = [json.loads(line)["unit_id"] for line in episode]
    start = ids.index(1944)
    assert slice_lines == episode[start : start + 200]
    assert json.loads(slice_lines[-1])["unit_id"] == 2143


@pytest.mark.parametrize("schema_id", sorted(evaluation_schemas()))
def test_checked_in_evaluation_schemas_are_current(schema_id: str) -> None:
    expected = json.dumps(evaluation_schemas()[schema_id], indent=2, sort_keys=True) + "\n"
    path = REPO / "schemas" / f"{schema_id}.json"
    assert path.read_text() == expected, (
        f"schemas/{schema_id}.json is stale: regenerate it from "
        "notarius_dagster.engine.evaluation.evaluation_schemas()"
    )
