"""Records verified against what they cite: the `support` record validator drops a record whose
supported field (its lane's `support_fields`) none of its cited units mentions, records each
drop (rejected.json entry with the record index, manifest and asset counts), and keeps the
other records of the chunk; a kept record's citations are cut to the units that support it
plus a window (`citations_trimmed`, counted in a warning); a player's own line supports their
character only as a combat turn's actor."""

from __future__ import annotations

import json
from typing import Any

from notarius_dagster.engine.chunking import make_chunk
from notarius_dagster.engine.inputs import document_digest
from notarius_dagster.engine.manifest import lane_summary
from notarius_dagster.engine.models import SourceDocument, SourceUnit
from notarius_dagster.engine.references import prepare_generated
from notarius_dagster.engine.support import (
    CITATION_WINDOW,
    mentions,
    tighten_citations,
    tokens,
    unsupported_records,
)
from notarius_dagster.engine.validators import TRIMMED_CODE
from notarius_dagster.modules import registry
from tests.doubles import units_in
from tests.lane_doubles import RecordingClient, complete_pipeline, run_one_lane

TEXTS = [
    ("DM", "Gustav Fletching waves from the wagon."),
    ("LAURA", "I wave back at him."),
    ("DM", "The sea-hag's eyes glint; Jérôme the cook hides."),
    ("DM", "Nothing else happens."),
]


def document() -> SourceDocument:
    units = tuple(
        SourceUnit(unit_id=i, text=t, metadata={"speaker": s}) for i, (s, t) in enumerate(TEXTS)
    )
    return SourceDocument(
        source_id="s1",
        media_type="application/x-ndjson",
        units=units,
        digest=document_digest(units),
    )


def ref(*units: int) -> list[dict[str, Any]]:
    return [{"source_id": "s1", "start_unit_id": u, "end_unit_id": u} for u in units]


def npc(name: str, units: list[int], aliases: list[str] | None = None) -> dict[str, Any]:
    return {
        "id": None,
        "name": name,
        "aliases": aliases or [],
        "description": "",
        "source_refs": ref(*units),
    }


def npc_payload(*records: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "dnd/npc-list",
        "schema_version": "v1",
        "source_id": "s1",
        "npcs": list(records),
    }


def test_tokens_fold_case_diacritics_punctuation_and_possessives() -> None:
    assert tokens("Jérôme's  COOK-house!") == ["jerome", "cook", "house"]
    assert tokens("the Sea\u2019s edge") == ["the", "sea", "edge"]
    assert tokens("...") == []


def test_a_name_is_mentioned_when_its_tokens_come_in_order_in_one_text() -> None:
    text = tokens("Gustav, the circus master, Fletching")
    assert mentions(tokens("Gustav Fletching"), text)
    assert not mentions(tokens("Fletching Gustav"), text)
    assert not mentions(tokens("Gustav Ornna"), text)
    assert not mentions([], text)


def test_name_or_alias_must_be_mentioned_by_the_cited_units() -> None:
    kind = registry().kind("dnd/npc-list")
    payload = npc_payload(
        npc("Gustav Fletching", [0]),  # named in unit 0: kept
        npc("Sea Hag", [2]),  # "sea-hag's": kept
        npc("Jerome", [2]),  # diacritics folded: kept
        npc("Kylre", [1, 3]),  # not in units 1 or 3: dropped
        npc("The Stranger", [0], aliases=["Gustav"]),  # alias in unit 0: kept
        npc("Gustav Hag", [0, 2]),  # tokens split over two units: dropped
    )
    found = unsupported_records(kind, payload, document())
    assert sorted(found) == [3, 5]
    assert found[3] == "record 3: no value of name/aliases is mentioned in its 2 cited unit(s)"
    assert all("Kylre" not in m and "Gustav" not in m for m in found.values())


def test_a_speaker_label_is_not_a_mention_unless_a_hook_maps_it() -> None:
    kind = registry().kind("dnd/combat-turn-list")
    assert kind.support_fields == ("actor",) and not kind.speaker_mentions
    payload = {
        "kind": kind.kind,
        "schema_version": "v1",
        "source_id": "s1",
        "combat_turns": [
            {
                "id": None,
                "round": None,
                "actor": "Jester",
                "actor_npc_id": None,
                "action": "waves",
                "targets": [],
                "outcome": {"hit": None, "damage": None, "effect": None},
                "source_refs": ref(1),
            }
        ],
    }
    assert list(unsupported_records(kind, payload, document())) == [0]
    hooks = (lambda refs, label: ["Jester"] if label == "LAURA" else [],)
    assert unsupported_records(kind, payload, document(), None, hooks) == {}


def test_every_lane_with_records_that_cite_declares_its_support_fields() -> None:
    declared = {
        lane.lane_id: lane.support_fields
        for lane in {lane.kind: lane for lane in registry().lanes}.values()
        if lane.kind.startswith("dnd/")
    }  # other tests register throwaway lanes
    assert declared == {
        "npcs": ("name", "aliases"),
        "spells": ("spell",),
        "item-events": ("item",),
        "combat-turns": ("actor",),
        "npc-interactions": ("npc",),
        "scene-descriptions": (),
    }


def answer_two_npcs(messages: list[dict[str, Any]], schema: Any) -> str:
    """One NPC cited where it is named, one cited where it is not (the model's mistake)."""
    ids = [u for u, _, _ in units_in(messages)]
    return json.dumps(
        {
            "npcs": [
                {"name": "Gustav", "aliases": [], "description": "", "unit_ids": [ids[0]]},
                {"name": "Kylre", "aliases": [], "description": "", "unit_ids": [ids[1]]},
            ]
        }
    )


def test_the_runner_drops_unsupported_records_and_records_each_one() -> None:
    pipeline = complete_pipeline()
    lane = pipeline.lane("npcs")
    doc = document()
    chunks = [make_chunk(doc, 0, doc.units[0:2]), make_chunk(doc, 1, doc.units[2:4])]
    result = run_one_lane(lane, doc, chunks, client=RecordingClient(answer_two_npcs))
    assert result.status == "accepted" and result.payload is not None
    assert [r["name"] for r in result.payload["npcs"]] == ["Gustav"]
    dropped = [r for r in result.rejections if r.record_index is not None]
    assert [(r.stage, r.lane, r.chunk_id, r.validator, r.record_index) for r in dropped] == [
        ("extract", "npcs", "chunk-0000", "support", 1),
        ("extract", "npcs", "chunk-0001", "support", 0),
        ("extract", "npcs", "chunk-0001", "support", 1),
    ]
    assert all("Kylre" not in r.message and "Gustav" not in r.message for r in dropped)
    assert result.stats.records_rejected == 3 and result.stats.rejected == 0
    summary = lane_summary(result, pipeline, registry().kinds())
    assert summary.records_rejected == 3 and summary.chunks.rejected == 0
    assert summary.rejections == 3


def test_a_players_own_line_supports_their_character_only_as_a_turns_actor() -> None:
    from notarius_dagster.dnd.roster import ROSTER_SLOT
    from tests.test_roster import roster_reference

    refs = {ROSTER_SLOT: roster_reference()}  # the sample roster: LAURA plays Jester
    met = registry().kind("dnd/npc-interaction-list")
    assert met.support_fields == ("npc",) and not met.speaker_acts
    payload = {
        "kind": met.kind,
        "schema_version": "v1",
        "source_id": "s1",
        "npc_interactions": [
            {
                "id": None,
                "npc": "Jester",
                "npc_id": None,
                "participants": [],
                "kind": "talk",
                "summary": "",
                "source_refs": ref(1),  # LAURA: "I wave back at him."
            }
        ],
    }
    hooks = registry().speaker_names  # the roster's hook, as the D&D registry carries it
    assert list(unsupported_records(met, payload, document(), refs, hooks)) == [0]
    turns = registry().kind("dnd/combat-turn-list")
    assert turns.speaker_acts  # the actor is the one who speaks
    turn = {
        "kind": turns.kind,
        "schema_version": "v1",
        "source_id": "s1",
        "combat_turns": [
            {
                "id": None,
                "round": None,
                "actor": "Jester",
                "actor_npc_id": None,
                "action": "waves",
                "targets": [],
                "outcome": {"hit": None, "damage": None, "effect": None},
                "source_refs": ref(1),
            }
        ],
    }
    speakers = registry().speaker_names  # the roster: LAURA plays Jester
    assert unsupported_records(turns, turn, document(), refs, speakers) == {}


def long_document(mentions_at: list[int], size: int = 60, name: str = "Caleb") -> SourceDocument:
    """`size` units numbered from 2000; `name` is said on the units at `mentions_at`."""
    units = tuple(
        SourceUnit(
            unit_id=2000 + i,
            text=f"{name} raises a hand." if i in mentions_at else "The rain keeps falling.",
            metadata={"speaker": "MATT"},
        )
        for i in range(size)
    )
    return SourceDocument(
        source_id="s1",
        media_type="application/x-ndjson",
        units=units,
        digest=document_digest(units),
    )


def spell_payload(spell: str, start: int, end: int) -> dict[str, Any]:
    return {
        "kind": "dnd/spell-list",
        "schema_version": "v1",
        "source_id": "s1",
        "spells": [
            {
                "id": None,
                "caster": "Caleb",
                "caster_npc_id": None,
                "spell": spell,
                "level": None,
                "targets": [],
                "outcome": None,
                "source_refs": [{"source_id": "s1", "start_unit_id": start, "end_unit_id": end}],
            }
        ],
    }


def test_a_citation_is_cut_to_the_units_that_mention_the_record_plus_the_window() -> None:
    # mentions close together: the window's context stays the smaller part of the citation
    doc = long_document(mentions_at=[10, 11, 12, 13, 14, 49, 50, 51, 52, 53])
    kind = registry().kind("dnd/spell-list")
    tightened = tighten_citations(kind, spell_payload("Caleb", 2004, 2053), doc)
    refs = tightened.payload["spells"][0]["source_refs"]
    assert CITATION_WINDOW == 2
    assert [(r["start_unit_id"], r["end_unit_id"]) for r in refs] == [
        (2008, 2016),  # 2010-2014, two units either side
        (2047, 2053),  # 2049-2053: the window stops where the citation did (2054 not cited)
    ]
    assert (tightened.records, tightened.units) == (1, 50 - 16)


def test_an_over_broad_citation_is_cut_to_the_mentioning_units_alone() -> None:
    # the case: a "spell" named Caleb cites 50 units (2004-2053), 4 of them say Caleb.
    # Their windows would keep 15 units, 11 of them context: still mostly not evidence, so
    # only the 4 units that mention Caleb are kept (at least half of a citation is evidence).
    doc = long_document(mentions_at=[10, 11, 30, 52])
    kind = registry().kind("dnd/spell-list")
    tightened = tighten_citations(kind, spell_payload("Caleb", 2004, 2053), doc)
    refs = tightened.payload["spells"][0]["source_refs"]
    assert [(r["start_unit_id"], r["end_unit_id"]) for r in refs] == [
        (2010, 2011),
        (2030, 2030),
        (2052, 2052),
    ]
    assert (tightened.records, tightened.units) == (1, 50 - 4)


def test_a_tight_citation_and_a_record_nothing_supports_are_left_as_they_are() -> None:
    doc = long_document(mentions_at=[10, 11])
    kind = registry().kind("dnd/spell-list")
    tight = spell_payload("Caleb", 2009, 2012)  # two mentions, two units of context
    assert tighten_citations(kind, tight, doc).payload is tight
    broad = spell_payload("Caleb", 2008, 2012)  # one mention, four units of context: cut
    cut = tighten_citations(kind, broad, doc).payload["spells"][0]["source_refs"]
    assert [(r["start_unit_id"], r["end_unit_id"]) for r in cut] == [(2010, 2011)]
    unsupported = spell_payload("Fireball", 2004, 2053)  # the support validator drops it
    assert tighten_citations(kind, unsupported, doc).payload is unsupported


def answer_whole_chunk(messages: list[dict[str, Any]], schema: Any) -> str:
    """Every NPC cites every unit of its chunk (a broad citation)."""
    ids = [u for u, _, _ in units_in(messages)]
    return json.dumps(
        {"npcs": [{"name": "Gustav", "aliases": [], "description": "", "unit_ids": ids}]}
    )


def test_the_runner_cuts_broad_citations_and_says_so_in_a_count_only_warning() -> None:
    lane = complete_pipeline().lane("npcs")
    doc = long_document(mentions_at=[3], size=40, name="Gustav")
    chunks = [make_chunk(doc, 0, doc.units[0:20]), make_chunk(doc, 1, doc.units[20:40])]
    result = run_one_lane(lane, doc, chunks, client=RecordingClient(answer_whole_chunk))
    assert result.payload is not None
    [gustav] = result.payload["npcs"]
    # one mention in a whole-chunk citation: over-broad, so the mention alone is kept
    assert [(r["start_unit_id"], r["end_unit_id"]) for r in gustav["source_refs"]] == [(2003, 2003)]
    [trimmed] = [w for w in result.warnings if w.code == TRIMMED_CODE]
    assert (trimmed.stage, trimmed.lane, trimmed.chunk_id) == ("extract", "npcs", "chunk-0000")
    assert trimmed.message.startswith("1 record(s) cited units more than 2 units") and (
        "19 such unit(s) removed" in trimmed.message
    )
    assert "Gustav" not in trimmed.message
    # chunk 1 never says Gustav: its record is dropped by `support`, not cut
    assert [r.chunk_id for r in result.rejections if r.validator == "support"] == ["chunk-0001"]


def interaction(npc: str, units: list[int]) -> dict[str, Any]:
    return {
        "id": None,
        "npc": npc,
        "npc_id": None,
        "participants": [],
        "summary": "",
        "source_refs": ref(*units),
    }


def bound_npcs(*npcs: dict[str, Any]) -> dict[str, Any]:
    """The `npcs` slot bound to an artifact of `npcs` (as the lane runner prepares it)."""
    binding = next(
        b
        for b in complete_pipeline().lane("npc-interactions").extract.references
        if b.slot == "npcs"
    )
    return {"npcs": prepare_generated(binding, npc_payload(*npcs), registry().kinds())}


def test_a_known_npc_is_mentioned_by_any_name_the_npcs_lane_knows_it_by() -> None:
    # An interaction "with Gustav Fletching" on a line that says only "the circus master":
    # the npcs lane published Gustav with that alias, so the line shows him. A name the npcs
    # artifact does not know (invented, misspelt) gains nothing, nor does an ambiguous one.
    doc = SourceDocument(
        source_id="s1",
        media_type="application/x-ndjson",
        units=(units := (SourceUnit(unit_id=0, text="The circus master bows.", metadata={}),)),
        digest=document_digest(units),
    )
    kind = registry().kind("dnd/npc-interaction-list")
    names = registry().known_names  # the npcs lane's names, as the lane runner passes them
    payload = {
        "kind": "dnd/npc-interaction-list",
        "schema_version": "v1",
        "source_id": "s1",
        "npc_interactions": [
            interaction("Gustav Fletching", [0]),
            interaction("Gustov Fletchling", [0]),
            interaction("Aldric Vane", [0]),
        ],
    }
    gustav = dict(npc("Gustav Fletching", [0], ["the circus master"]), id="npc-gustav-fletching")
    assert sorted(unsupported_records(kind, payload, doc, {})) == [0, 1, 2]
    assert sorted(unsupported_records(kind, payload, doc, bound_npcs(gustav), names=names)) == [
        1,
        2,
    ]
    # without the registry's hook the alias is not known: the interaction is unsupported
    assert sorted(unsupported_records(kind, payload, doc, bound_npcs(gustav))) == [0, 1, 2]
    twin = dict(npc("Other", [0], ["Gustav Fletching"]), id="npc-other")
    both = bound_npcs(gustav, twin)
    assert sorted(unsupported_records(kind, payload, doc, both, names=names)) == [0, 1, 2]
