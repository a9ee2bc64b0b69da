"""The party roster (docs/configuration.md, "The party roster"): player characters are never
NPCs (dropped and counted, never named), speaker labels name characters for the lanes that name
actors and casters, the prompts name the party, the roster's digest invalidates checkpoints,
a malformed roster is an error naming the key path, and without a roster nothing changes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from notarius_dagster.dnd.roster import (
    DM_CODE,
    DROPPED_CODE,
    ROSTER_SLOT,
    Roster,
    RosterIndex,
    dm_dropped_count,
    dropped_count,
)
from notarius_dagster.engine.checkpoints import FileCheckpointStore
from notarius_dagster.engine.chunking import make_chunk
from notarius_dagster.engine.contracts import ExtractRequest, PreparedReference, RunContext
from notarius_dagster.engine.errors import InvalidReferenceError
from notarius_dagster.engine.inputs import parse_transcript
from notarius_dagster.engine.models import Chunk, SourceDocument
from notarius_dagster.engine.references import prepare_lane_references
from notarius_dagster.engine.resolution import ResolvedPipeline, resolve_profile_file
from notarius_dagster.engine.support import speaker_names
from notarius_dagster.modules import registry
from tests.lane_doubles import (
    RecordingClient,
    answer_payload,
    complete_pipeline,
    run_one_lane,
)

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "samples" / "crd3-c2e001-slice.jsonl"
SAMPLE_PROFILE = REPO / "configs" / "dnd-complete-sample.yaml"
ROSTERS = REPO / "configs" / "rosters"


def sample() -> tuple[SourceDocument, list[Chunk]]:
    doc = parse_transcript(
        SAMPLE.read_bytes(), file_name=SAMPLE.name, source_id="crd3-c2e001-slice"
    )
    units = list(doc.units)
    chunks = [
        make_chunk(doc, i, units[at : at + 25]) for i, at in enumerate(range(0, len(units), 25))
    ]
    return doc, chunks


def with_roster(**kwargs: Any) -> ResolvedPipeline:
    return resolve_profile_file(
        SAMPLE_PROFILE, llm_profile="test-double", **kwargs, registry=registry()
    )


def names(result_payload: dict[str, Any] | None) -> set[str]:
    return {n["name"] for n in (result_payload or {}).get("npcs", [])}


def roster_reference() -> PreparedReference:
    """The sample profile's prepared roster, as every lane that declares the slot receives it."""
    refs, _, _ = prepare_lane_references(
        with_roster().lane("npcs").stages(), {}, registry().kinds()
    )
    return refs["extract"][ROSTER_SLOT]


def roster_pipeline(path: Path) -> ResolvedPipeline:
    """The sample profile with its roster binding pointed at `path` (a stage-level override)."""
    from notarius_dagster.engine.resolution import RuntimeBinding

    return with_roster(
        runtime_references=[
            RuntimeBinding(selector=f"{lane}.extract.roster", path=str(path))
            for lane in ("npcs", "combat-turns", "spells", "item-events", "npc-interactions")
        ]
    )


def extract_request(
    doc: SourceDocument, chunk: Chunk, lane: str, refs: dict[str, PreparedReference]
) -> ExtractRequest:
    ctx = RunContext(
        session_id=doc.source_id,
        lane_id=lane,
        module_key="x",
        options={},
        references=refs,
        client=None,
    )
    return ExtractRequest(doc, chunk, ctx)


# ---- player characters are never NPCs ----


def test_without_a_roster_the_double_names_a_player_character_as_an_npc() -> None:
    doc, chunks = sample()
    result = run_one_lane(complete_pipeline().lane("npcs"), doc, chunks)
    assert "Yasha" in names(result.payload)  # the premise of the next test
    assert not [w for w in result.warnings if w.code == DROPPED_CODE]


def test_a_player_character_is_dropped_from_the_npcs_and_counted_never_named() -> None:
    doc, chunks = sample()
    plain = run_one_lane(complete_pipeline().lane("npcs"), doc, chunks)
    result = run_one_lane(with_roster().lane("npcs"), doc, chunks)
    assert "Yasha" not in names(result.payload)
    assert names(result.payload) == names(plain.payload) - {"Yasha"}
    dropped = [w for w in result.warnings if w.code == DROPPED_CODE]
    assert dropped and all("Yasha" not in w.message for w in dropped)
    yasha_chunks = {c.chunk_id for c in chunks if "Yasha" in c.content}
    assert {w.chunk_id for w in dropped} == yasha_chunks
    assert dropped_count(result.warnings) == len(yasha_chunks)  # one record per such chunk


def test_an_alias_or_a_player_name_also_marks_a_player_character() -> None:
    index = RosterIndex(Roster.model_validate(_roster_doc()), "crd3-c2e001")
    assert index.is_party(["Jester Lavorre"]) and index.is_party(["x", "laura"])
    assert index.is_party(["Beauregard"]) and not index.is_party(["Gustav"])


def test_asset_metadata_counts_the_dropped_records() -> None:
    from assets.metadata import lane_metadata

    doc, chunks = sample()
    result = run_one_lane(with_roster().lane("npcs"), doc, chunks)
    provenance = ({"slot": ROSTER_SLOT},)
    meta = lane_metadata(
        result.model_copy(update={"references": provenance}), registry().kind(result.kind)
    )
    assert meta["party_records_dropped"] == dropped_count(result.warnings) > 0
    assert "party_records_dropped" not in lane_metadata(
        result, registry().kind(result.kind)
    )  # no roster bound: no key


# ---- the party is never the NPC side of an interaction ----


def interaction(npc: str, unit: int, participants: list[str] | None = None) -> dict[str, Any]:
    return {
        "npc": npc,
        "participants": participants or [],
        "kind": "talk",
        "summary": "",
        "unit_ids": [unit],
    }


def test_an_interaction_whose_npc_is_a_party_member_is_dropped_and_counted() -> None:
    doc, chunks = sample()
    refs = {ROSTER_SLOT: roster_reference()}
    unit = chunks[0].unit_ids[0]
    answer = {
        "npc_interactions": [
            interaction("Jester", unit),  # a character
            interaction("LAURA", unit),  # her player's label: Jester too
            interaction("Gustav", unit, ["Jester"]),  # an NPC: kept, Jester takes part
        ]
    }
    request = extract_request(doc, chunks[0], "npc-interactions", refs)
    payload, warnings = answer_payload("dnd.npc_interactions.extract", answer, request)
    assert [(r["npc"], r["participants"]) for r in payload["npc_interactions"]] == [
        ("Gustav", ["Jester"])
    ]
    assert dropped_count(warnings) == 2
    assert all("Jester" not in w.message and "LAURA" not in w.message for w in warnings)
    plain = extract_request(doc, chunks[0], "npc-interactions", {})
    payload, _ = answer_payload("dnd.npc_interactions.extract", answer, plain)
    assert len(payload["npc_interactions"]) == 3  # no roster: nothing known to drop


# ---- the DM's label is never a character ----


def test_the_dms_label_is_never_an_npc_actor_caster_or_item_holder() -> None:
    doc, chunks = sample()
    refs = {ROSTER_SLOT: roster_reference()}
    unit = chunks[0].unit_ids[0]

    def extract(lane: str, module: str, answer: dict[str, Any]) -> tuple[Any, list[Any]]:
        return answer_payload(module, answer, extract_request(doc, chunks[0], lane, refs))

    npc = {"name": "MATT", "aliases": [], "description": "", "unit_ids": [unit]}
    other = {"name": "Gustav", "aliases": ["Matt"], "description": "", "unit_ids": [unit]}
    payload, warnings = extract("npcs", "dnd.npcs.extract", {"npcs": [npc, other]})
    assert [(r["name"], r["aliases"]) for r in payload["npcs"]] == [("Gustav", [])]
    assert dm_dropped_count(warnings) == 1
    turn = {
        "round": 1,
        "action": "attack",
        "outcome": {"hit": True, "damage": None, "effect": None},
        "unit_ids": [unit],
    }
    payload, warnings = extract(
        "combat-turns",
        "dnd.combat_turns.extract",
        {
            "combat_turns": [
                {**turn, "actor": "MATT", "targets": []},
                {**turn, "actor": "Beau", "targets": ["MATT", "goblin"]},
            ]
        },
    )
    assert [(r["actor"], r["targets"]) for r in payload["combat_turns"]] == [("Beau", ["goblin"])]
    assert dm_dropped_count(warnings) == 1
    cast = {"spell": "Fire Bolt", "level": 0, "outcome": None, "unit_ids": [unit]}
    payload, warnings = extract(
        "spells",
        "dnd.spells.extract",
        {
            "spells": [
                {**cast, "caster": "MATT", "targets": []},
                {**cast, "caster": "LIAM", "targets": ["Matt"]},
            ]
        },
    )
    assert [(r["caster"], r["targets"]) for r in payload["spells"]] == [("Caleb", [])]
    event = {"event": "given", "quantity": None, "unit_ids": [unit]}
    payload, warnings = extract(
        "item-events",
        "dnd.item_events.extract",
        {"item_events": [{**event, "item": "sickle", "from": "MATT", "to": "Yasha"}]},
    )
    assert [(r["item"], r["from"], r["to"]) for r in payload["item_events"]] == [
        ("sickle", None, "Yasha")
    ]
    [warning] = [w for w in warnings if w.code == DM_CODE]
    assert warning.message.startswith("0 record(s)") and "1 other name(s)" in warning.message
    assert all("MATT" not in w.message and "Matt" not in w.message for w in warnings)


def test_the_dms_label_cannot_also_be_a_party_members() -> None:
    doc = _roster_doc()
    doc["dm"] = ["LAURA"]
    with pytest.raises(ValueError, match="dm: 'LAURA' is also a name or label of a party member"):
        Roster.model_validate(doc)


def test_asset_metadata_counts_the_records_the_dms_label_dropped() -> None:
    from assets.metadata import lane_metadata
    from notarius_dagster.engine.models import RunWarning

    warning = RunWarning(
        stage="extract", code=DM_CODE, message="3 record(s) named the DM's label as a character"
    )
    result = run_one_lane(with_roster().lane("npcs"), *sample_one_chunk())
    with_warning = result.model_copy(
        update={"references": ({"slot": ROSTER_SLOT},), "warnings": (*result.warnings, warning)}
    )
    assert (
        lane_metadata(with_warning, registry().kind(with_warning.kind))["dm_records_dropped"] == 3
    )


def sample_one_chunk() -> tuple[SourceDocument, list[Chunk]]:
    doc, chunks = sample()
    return doc, chunks[:1]


# ---- speaker labels name characters ----


def test_a_players_speaker_label_becomes_the_character_for_actor_and_caster() -> None:
    doc, chunks = sample()
    refs = {ROSTER_SLOT: roster_reference()}
    spell = {
        "spells": [
            {
                "caster": "LAURA",
                "spell": "Guiding Bolt",
                "level": 1,
                "targets": [],
                "outcome": None,
                "unit_ids": [chunks[0].unit_ids[0]],
            }
        ]
    }
    payload, _ = answer_payload(
        "dnd.spells.extract", spell, extract_request(doc, chunks[0], "spells", refs)
    )
    assert payload["spells"][0]["caster"] == "Jester"
    turn = {
        "combat_turns": [
            {
                "round": 1,
                "actor": "MARISHA",
                "action": "attack",
                "targets": [],
                "outcome": {"hit": True, "damage": None, "effect": None},
                "unit_ids": [chunks[0].unit_ids[0]],
            }
        ]
    }
    payload, _ = answer_payload(
        "dnd.combat_turns.extract", turn, extract_request(doc, chunks[0], "combat-turns", refs)
    )
    assert payload["combat_turns"][0]["actor"] == "Beau"
    payload, _ = answer_payload(
        "dnd.spells.extract", spell, extract_request(doc, chunks[0], "spells", {})
    )
    assert payload["spells"][0]["caster"] == "LAURA"  # no roster: unchanged


def test_a_label_maps_to_the_character_played_in_that_session() -> None:
    roster = Roster.model_validate(_roster_doc())
    assert RosterIndex(roster, "e1").character_for("TALIESIN") == "Mollymauk"
    assert RosterIndex(roster, "e30").character_for("TALIESIN") == "Caduceus"
    # a session the roster does not list: the label is ambiguous and maps to no one
    assert RosterIndex(roster, "unknown").character_for("TALIESIN") is None
    assert RosterIndex(roster, "unknown").character_for("laura") == "Jester"


def test_the_speaker_hook_gives_the_support_validator_the_players_names() -> None:
    refs = {ROSTER_SLOT: roster_reference()}
    hooks = registry().speaker_names  # the D&D registry carries the roster's hook
    assert "Jester" in speaker_names(hooks, refs, "LAURA")
    assert "LAURA" in speaker_names(hooks, refs, "Jester")
    assert speaker_names(hooks, refs, "Gustav") == ()
    assert speaker_names(hooks, {}, "LAURA") == ()


# ---- the prompts name the party ----


def test_the_prompt_names_the_party_and_only_with_a_roster() -> None:
    doc, chunks = sample()
    client = RecordingClient()
    run_one_lane(with_roster().lane("npcs"), doc, chunks[:1], client=client)
    sent = client.requests[0]
    lane_text = sent.instructions
    assert "Jester (played by LAURA)" in lane_text and "Yasha (played by ASHLEY)" in lane_text
    assert "MATT: the Dungeon Master, never a character." in lane_text
    assert "Laura Bailey" not in lane_text  # the label the transcript uses, not the person
    plain = RecordingClient()
    run_one_lane(complete_pipeline().lane("npcs"), doc, chunks[:1], client=plain)
    assert "The party" not in plain.requests[0].user + plain.requests[0].instructions
    # The same prompt, one line added after the lane's instructions (the shared part, the
    # chunk, is untouched, so it stays a prefix shared with the other lanes).
    assert sent.user == plain.requests[0].user
    assert lane_text.startswith(plain.requests[0].instructions)


# ---- checkpoints follow the roster ----


def test_editing_the_roster_misses_every_stored_extraction(tmp_path: Path) -> None:
    doc, chunks = sample()
    store = FileCheckpointStore(tmp_path / "checkpoints")
    roster = tmp_path / "roster.yaml"
    roster.write_text((ROSTERS / "sample.yaml").read_text())
    lane = roster_pipeline(roster).lane("npcs")
    first = run_one_lane(lane, doc, chunks, checkpoints=store)
    again = run_one_lane(roster_pipeline(roster).lane("npcs"), doc, chunks, checkpoints=store)
    assert first.stats.called_model == len(chunks) and again.stats.reused == len(chunks)
    assert dropped_count(again.warnings) == dropped_count(first.warnings)  # kept on reuse
    roster.write_text(roster.read_text().replace("Yasha Nydoorin", "Yasha the Zealot"))
    edited = run_one_lane(roster_pipeline(roster).lane("npcs"), doc, chunks, checkpoints=store)
    assert edited.stats.reused == 0 and edited.stats.called_model == len(chunks)


# ---- a malformed roster ----


def test_a_malformed_roster_is_an_error_naming_the_key_path(tmp_path: Path) -> None:
    roster = tmp_path / "roster.yaml"
    roster.write_text("campaign: c\nparty:\n  - {player: Secret Person, character: 7}\n")
    pipeline = roster_pipeline(roster)
    with pytest.raises(InvalidReferenceError) as err:
        prepare_lane_references(pipeline.lane("npcs").stages(), {}, registry().kinds())
    message = str(err.value)
    assert "party/0/character" in message and "roster.yaml" in message
    assert "Secret Person" not in message


def test_a_roster_that_is_not_yaml_names_the_line(tmp_path: Path) -> None:
    roster = tmp_path / "roster.yaml"
    roster.write_text("campaign: c\nparty: [\n  {player: X\n")
    with pytest.raises(InvalidReferenceError, match=r"not valid YAML \(line \d+\)"):
        prepare_lane_references(
            roster_pipeline(roster).lane("npcs").stages(), {}, registry().kinds()
        )


def test_session_order_must_be_explicit() -> None:
    doc = _roster_doc()
    doc["sessions"] = [{"id": "a", "number": 1}, {"id": "b", "date": "2018-01-01"}]
    with pytest.raises(ValueError, match="every session a number"):
        Roster.model_validate(doc)
    doc["sessions"] = [{"id": "b", "date": "2018-02-01"}, {"id": "a", "date": "2018-01-01"}]
    assert [s.id for s in Roster.model_validate(doc).ordered_sessions()] == ["a", "b"]


def test_every_shipped_roster_validates_and_names_real_speakers() -> None:
    for path in sorted(ROSTERS.glob("*.yaml")):
        roster = Roster.model_validate(_load(path))
        for session in roster.sessions:
            transcript = next(
                p
                for p in [
                    REPO / "data" / "sessions" / f"{session.id}.jsonl",
                    REPO / "samples" / f"{session.id}.jsonl",
                ]
                if p.exists()
            )
            speakers = {
                json.loads(line)["speaker"]
                for line in transcript.read_text().splitlines()
                if line.strip()
            }
            active = RosterIndex(roster, session.id).active
            labels = {label for m in active for label in m.labels()}
            assert labels & speakers, (path.name, session.id)


# ---- helpers ----


def _load(path: Path) -> dict[str, Any]:
    import yaml

    data: dict[str, Any] = yaml.safe_load(path.read_text())
    for s in data.get("sessions", []):
        if "date" in s:
            s["date"] = str(s["date"])
    return data


def _roster_doc() -> dict[str, Any]:
    data = _load(ROSTERS / "mighty-nein.yaml")
    data["sessions"] = [{"id": "e1", "number": 1}, {"id": "e30", "number": 30}]
    return data
