"""The campaign codex (docs/campaign.md): over three real sessions of one campaign, and over
hand-made lane artifacts for each merge rule; the codex changes exactly when a session's lane
artifact changes; deleting a session removes it; publication order does not matter."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from notarius_dagster.campaign.build import LaneArtifact, codex_lane
from notarius_dagster.campaign.build import build_codex as build_typed_codex
from notarius_dagster.campaign.model import Codex
from notarius_dagster.campaign.render import render_codex_page
from notarius_dagster.campaign.store import (
    codex_text,
    load_codex,
    load_roster,
    publish_codex,
    read_index,
)
from notarius_dagster.cli.main import main
from notarius_dagster.dnd.roster import Roster, RosterIndex, name_key
from notarius_dagster.engine.bundle import remove_bundle
from notarius_dagster.modules import registry
from tests.campaign_sessions import ROSTER, SLICES, publish_session, read_codex, session_lanes

E1, E3, E30 = "crd3-c2e001", "crd3-c2e003", "crd3-c2e030"
NPC, SCENE, ITEM, SPELL = (
    "dnd/npc-list",
    "dnd/scene-description-list",
    "dnd/item-event-list",
    "dnd/spell-list",
)


def roster() -> Roster:
    return load_roster(ROSTER)


# ---- three real sessions ----


def publish_real(bundles: Path) -> dict[str, Any]:
    for session in SLICES:
        publish_session(bundles, session, session_lanes(session))
    return {s: session_lanes(s) for s in SLICES}


def test_the_codex_of_three_real_sessions(tmp_path: Path) -> None:
    bundles = tmp_path / "bundles"
    lanes = publish_real(bundles)
    published = publish_codex(bundles, roster(), registry())
    codex = published.codex
    assert [(s.id, s.position, s.published) for s in codex.sessions] == [
        (E1, 1, True),
        (E3, 2, True),
        (E30, 3, True),
    ]
    party = RosterIndex(roster(), E1)
    assert not [n.name for n in codex.npcs if party.is_party([n.name, *n.aliases])]
    # Gustav is in 2x01 and 2x03: one entry, the roster's known NPC, merged with its reason
    gustav = next(n for n in codex.npcs if n.name == "Gustav Fletching")
    assert gustav.known and gustav.sessions == [E1, E3]
    assert (gustav.first_session, gustav.last_session) == (E1, E3)
    assert [m.reason for m in gustav.merges] == ["roster_npc"]
    assert all(a.source_refs for a in gustav.appearances)
    # counts are the lanes' counts
    total = {
        k: sum(len(next(v for v in lanes[s][k].values() if isinstance(v, list))) for s in lanes)
        for k in (ITEM, SPELL, SCENE)
    }
    assert len(codex.item_events) == total[ITEM] > 0
    assert sum(s.count for s in codex.spells) == total[SPELL] > 0
    assert sum(c.count for c in codex.spells_by_caster) == total[SPELL]
    assert len(codex.scenes) == total[SCENE]
    assert [s.session for s in codex.scenes] == sorted(
        (s.session for s in codex.scenes), key=[E1, E3, E30].index
    )
    # casters are characters, never the players' speaker labels
    labels = {"LAURA", "TRAVIS", "MARISHA", "LIAM", "SAM", "TALIESIN", "ASHLEY"}
    assert not {c.caster for c in codex.spells_by_caster} & labels
    assert read_index(bundles).campaigns[0].published == [E1, E3, E30]


def test_the_codex_changes_exactly_when_a_lane_artifact_changes(tmp_path: Path) -> None:
    bundles = tmp_path / "bundles"
    publish_real(bundles)
    first = publish_codex(bundles, roster(), registry())
    text = (bundles / ".campaigns" / "mighty-nein" / "codex.json").read_text()
    # a re-run that publishes the same lane files (a new run id): the codex is unchanged
    publish_session(bundles, E3, session_lanes(E3), run_id="run-2")
    again = publish_codex(bundles, roster(), registry())
    assert not again.changed and again.digest == first.digest
    assert (bundles / ".campaigns" / "mighty-nein" / "codex.json").read_text() == text
    # re-running one session after a prompt edit changed its spells: only that changes
    edited = copy.deepcopy(dict(session_lanes(E1)))
    edited[SPELL]["spells"] = edited[SPELL]["spells"][1:]
    publish_session(bundles, E1, edited, run_id="run-3")
    changed = publish_codex(bundles, roster(), registry())
    assert changed.changed and changed.digest != first.digest
    before = {s.id: s.lanes_digest for s in first.codex.sessions}
    after = {s.id: s.lanes_digest for s in changed.codex.sessions}
    assert [s for s in before if before[s] != after[s]] == [E1]
    assert (
        sum(s.count for s in changed.codex.spells) == sum(s.count for s in first.codex.spells) - 1
    )
    assert changed.codex.npcs == first.codex.npcs  # the npcs lane did not change


def test_a_deleted_session_leaves_the_codex_on_the_next_build(tmp_path: Path) -> None:
    bundles = tmp_path / "bundles"
    publish_real(bundles)
    publish_codex(bundles, roster(), registry())
    remove_bundle(bundles, E30)
    codex = publish_codex(bundles, roster(), registry()).codex
    assert [(s.id, s.published) for s in codex.sessions] == [(E1, True), (E3, True), (E30, False)]
    assert all(E30 not in n.sessions for n in codex.npcs)
    assert all(e.session != E30 for e in codex.item_events)
    assert all(s.session != E30 for s in codex.scenes)


# ---- the merge rules, on hand-made artifacts ----


def ref(session: str, unit: int) -> dict[str, Any]:
    return {"source_id": session, "start_unit_id": unit, "end_unit_id": unit}


def npcs(session: str, *people: tuple[str, list[str]]) -> dict[str, Any]:
    return {
        "kind": NPC,
        "schema_version": "v1",
        "source_id": session,
        "npcs": [
            {
                "id": f"npc-{i}",
                "name": name,
                "aliases": aliases,
                "description": "",
                "source_refs": [ref(session, 10 + i)],
            }
            for i, (name, aliases) in enumerate(people)
        ],
    }


def items(session: str, *events: tuple[str, str, str | None, str | None]) -> dict[str, Any]:
    return {
        "kind": ITEM,
        "schema_version": "v1",
        "source_id": session,
        "item_events": [
            {
                "id": f"item-event-{i + 1:04d}",
                "item": item,
                "event": event,
                "from": giver,
                "to": taker,
                "from_npc_id": None,
                "to_npc_id": None,
                "quantity": None,
                "source_refs": [ref(session, 100 + i)],
            }
            for i, (item, event, giver, taker) in enumerate(events)
        ],
    }


def spells(session: str, *casts: tuple[str, str]) -> dict[str, Any]:
    return {
        "kind": SPELL,
        "schema_version": "v1",
        "source_id": session,
        "spells": [
            {
                "id": f"spell-{i + 1:04d}",
                "caster": caster,
                "caster_npc_id": None,
                "spell": spell,
                "level": None,
                "targets": [],
                "outcome": None,
                "source_refs": [ref(session, 200 + i)],
            }
            for i, (caster, spell) in enumerate(casts)
        ],
    }


def scenes(session: str, *ranges: tuple[int, int]) -> dict[str, Any]:
    return {
        "kind": SCENE,
        "schema_version": "v1",
        "source_id": session,
        "scene_descriptions": [
            {
                "scene_id": f"scene-{i:04d}",
                "source_id": session,
                "start_unit_id": a,
                "end_unit_id": b,
                "kind": "narrative",
                "title": f"Scene {i}",
                "summary": "",
                "source_ref": {"source_id": session, "start_unit_id": a, "end_unit_id": b},
            }
            for i, (a, b) in enumerate(ranges)
        ],
    }


def build_codex(roster: Roster, published: dict[str, dict[str, Any]]) -> Codex:
    """The codex of lane files in their published form (session -> kind -> artifact), read as
    `publish_codex` reads a bundle's: the lanes whose record model the codex reads, with the
    registry's models."""
    lanes = registry()
    typed = {
        session: {
            kind: LaneArtifact.of(spec, spec.list_model.model_validate(artifact))
            for kind, artifact in by_kind.items()
            if (spec := lanes.lane_of_kind(kind)) is not None and codex_lane(spec)
        }
        for session, by_kind in published.items()
    }
    return build_typed_codex(roster, typed)


HANDMADE: dict[str, dict[str, Any]] = {
    E1: {
        NPC: npcs(
            E1,
            ("Kylre", []),
            ("Desmond Moondrop", ["the Fiddler"]),
            ("Toya", []),
            ("Bosun", []),
            ("Twin A", []),
            ("Twin B", []),
        ),
        ITEM: items(
            E1, ("sickle", "given", "Jester", "Yasha"), ("a dagger", "acquired", None, "Caleb")
        ),
        SPELL: spells(E1, ("Jester", "Guiding Bolt"), ("Jester", "Guiding Bolt")),
        SCENE: scenes(E1, (0, 9), (10, 19)),
    },
    E3: {
        NPC: npcs(
            E3,
            ("kylre!", []),
            ("The Fiddler", []),
            ("Toya the Vivid Voice", []),
            ("Twin", ["Twin A", "Twin B"]),
            ("Jonas", ["the old man"]),
        ),
        ITEM: items(E3, ("Sickle", "given", "Yasha", "Jester")),
        SPELL: spells(E3, ("jester", "guiding bolt")),
        SCENE: scenes(E3, (0, 30)),
    },
    E30: {
        NPC: npcs(E30, ("Bosun the Strongman", []), ("Enon", ["the old man"])),
        ITEM: items(
            E30,
            ("the dagger", "lost", "Caleb", None),
            ("Bag of Holding", "acquired", None, "Fjord"),
            ("bag of holding", "used", "Fjord", None),
        ),
        SPELL: spells(E30, ("Caleb", "Fire Bolt")),
        SCENE: scenes(E30, (5, 8)),
    },
}


def entry(codex: Codex, name: str) -> Any:
    return next(
        n
        for n in codex.npcs
        if name_key(name) in {name_key(n.name)} | {name_key(a) for a in n.aliases}
    )


def holding(codex: Codex, session: str, name: str) -> Any:
    """The entry that holds the appearance of `name` in `session`."""
    return next(
        n for n in codex.npcs if any(a.session == session and a.name == name for a in n.appearances)
    )


def test_merges_each_with_its_reason() -> None:
    codex = build_codex(roster(), HANDMADE)
    kylre = entry(codex, "Kylre")
    assert kylre.sessions == [E1, E3] and kylre.merges[0].reason == "roster_npc"
    fiddler = entry(codex, "Desmond Moondrop")
    assert fiddler.sessions == [E1, E3] and fiddler.name == "Desmond Moondrop"
    assert [(m.session, m.to_session, m.reason, m.key) for m in fiddler.merges] == [
        (E3, E1, "declared_alias", "fiddler")  # compared without the leading article
    ]
    toya = entry(codex, "Toya the Vivid Voice")
    assert toya.name == "Toya" and toya.known and toya.merges[0].reason == "roster_npc"


def test_same_name_merges_without_a_roster_npc() -> None:
    bare = roster().model_copy(update={"npcs": []})
    kylre = entry(build_codex(bare, HANDMADE), "Kylre")
    assert kylre.sessions == [E1, E3] and not kylre.known
    assert [(m.reason, m.key) for m in kylre.merges] == [("same_name", "kylre")]


def test_weaker_signals_are_listed_as_possibly_the_same_never_merged() -> None:
    codex = build_codex(roster(), HANDMADE)
    bosun, strongman = entry(codex, "Bosun"), entry(codex, "Bosun the Strongman")
    jonas, enon = entry(codex, "Jonas"), entry(codex, "Enon")
    assert bosun.id != strongman.id and jonas.id != enon.id
    pairs = {(p.a, p.b): (p.reason, p.key) for p in codex.possibly_same}
    assert pairs[tuple(sorted((bosun.id, strongman.id)))] == ("name_within_name", "bosun")
    assert pairs[tuple(sorted((jonas.id, enon.id)))] == ("shared_alias", "old man")
    # "Twin" declares both twins of 2x01: it joins one of them, never both into one person
    twin_a, twin_b = holding(codex, E1, "Twin A"), holding(codex, E1, "Twin B")
    assert twin_a.id != twin_b.id
    assert pairs[tuple(sorted((twin_a.id, twin_b.id)))][0] == "merge_would_join_one_session"


def test_the_item_ledger_and_each_items_holder() -> None:
    codex = build_codex(roster(), HANDMADE)
    assert [(e.position, e.session, e.item) for e in codex.item_events] == [
        (1, E1, "sickle"),
        (2, E1, "a dagger"),
        (3, E3, "Sickle"),
        (4, E30, "the dagger"),
        (5, E30, "Bag of Holding"),
        (6, E30, "bag of holding"),
    ]
    holders = {h.item_key: h for h in codex.item_holders}
    assert (
        holders["sickle"].holder,
        holders["sickle"].session,
        holders["sickle"].event_id,
        holders["sickle"].events,
    ) == ("Jester", E3, "item-event-0001", 2)
    assert (holders["dagger"].status, holders["dagger"].holder) == ("lost", None)
    bag = holders["bag of holding"]
    assert (bag.status, bag.holder, bag.event_id) == ("held", "Fjord", "item-event-0002")


def test_spells_per_caster_and_per_spell() -> None:
    codex = build_codex(roster(), HANDMADE)
    by_caster = {(c.caster_key, c.spell_key): (c.count, c.sessions) for c in codex.spells_by_caster}
    assert by_caster == {
        ("jester", "guiding bolt"): (3, [E1, E3]),
        ("caleb", "fire bolt"): (1, [E30]),
    }
    totals = {s.spell_key: (s.count, s.casters) for s in codex.spells}
    assert totals["guiding bolt"] == (3, ["Jester"])


def test_scenes_in_campaign_order_and_the_page_links_to_the_reports() -> None:
    codex = build_codex(roster(), HANDMADE)
    assert [(s.session, s.scene_id) for s in codex.scenes] == [
        (E1, "scene-0000"),
        (E1, "scene-0001"),
        (E3, "scene-0000"),
        (E30, "scene-0000"),
    ]
    page = render_codex_page(codex)
    assert f'href="../../.reports/{E3}.html#u-10"' in page  # the Fiddler's 2x03 appearance
    assert "<script" not in page and "default-src 'none'" in page


def test_the_codex_holds_no_prose_or_paths(tmp_path: Path) -> None:
    lanes = copy.deepcopy(HANDMADE)
    lanes[E1][NPC]["npcs"][0]["description"] = "SECRET DESCRIPTION"
    lanes[E1][SCENE]["scene_descriptions"][0]["summary"] = "SECRET SUMMARY"
    for session, by_kind in lanes.items():
        publish_session(tmp_path, session, by_kind)
    text = tmp_path / ".campaigns" / "mighty-nein" / "codex.json"
    publish_codex(tmp_path, roster(), registry())
    body = text.read_text()
    assert "SECRET" not in body and str(tmp_path) not in body
    assert load_codex(tmp_path, "mighty-nein") == build_codex(roster(), lanes)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(order=st.permutations([E1, E3, E30]), subset=st.sets(st.sampled_from([E1, E3, E30])))
def test_the_codex_does_not_depend_on_publication_order(
    tmp_path_factory: Any, order: list[str], subset: set[str]
) -> None:
    sessions = [s for s in order if s in subset]
    expected = codex_text(build_codex(roster(), {s: HANDMADE[s] for s in sorted(subset)}))
    assert codex_text(build_codex(roster(), {s: HANDMADE[s] for s in sessions})) == expected
    bundles = tmp_path_factory.mktemp("bundles")
    for s in sessions:  # published one by one in this order, the codex rebuilt after each
        publish_session(bundles, s, HANDMADE[s])
        publish_codex(bundles, roster(), registry())
    published = publish_codex(bundles, roster(), registry())
    assert codex_text(published.codex) == expected
    assert json.dumps(read_codex(bundles), indent=2, ensure_ascii=False) + "\n" == expected


# ---- the table is not the world: articles, the party, the DM, merge keys by name ----


def test_a_roster_npc_with_a_leading_article_links_the_name_without_it() -> None:
    lanes = {
        E1: {NPC: npcs(E1, ("Gentleman", []))},
        E3: {NPC: npcs(E3, ("the gentleman", []))},
    }
    codex = build_codex(roster(), lanes)
    [gentleman] = [n for n in codex.npcs if "entleman" in n.name]
    assert gentleman.known and gentleman.name == "The Gentleman"  # the roster's name
    assert gentleman.sessions == [E1, E3]


def test_a_roster_npc_merge_key_is_the_npcs_name_not_its_roster_position() -> None:
    kylre = entry(build_codex(roster(), HANDMADE), "Kylre")
    assert [(m.reason, m.key) for m in kylre.merges] == [("roster_npc", "kylre")]


def dm_lanes() -> dict[str, dict[str, Any]]:
    """Lanes published before the DM rules (or without a roster): MATT as an NPC, an item
    holder and a caster; Jester as an NPC."""
    return {
        E1: {
            NPC: npcs(E1, ("MATT", []), ("Jester", []), ("Gustav", [])),
            ITEM: items(
                E1, ("sickle", "given", "MATT", "Yasha"), ("gold", "acquired", None, "MATT")
            ),
            SPELL: spells(E1, ("MATT", "Fire Bolt"), ("Caleb", "Fire Bolt")),
        }
    }


def test_the_dms_label_is_never_a_codex_npc_holder_or_caster() -> None:
    codex = build_codex(roster(), dm_lanes())
    assert codex.dm == ["MATT"]
    assert [n.name for n in codex.npcs] == ["Gustav Fletching"]  # no MATT, no Jester
    holders = {h.item_key: (h.status, h.holder) for h in codex.item_holders}
    assert holders == {"sickle": ("held", "Yasha"), "gold": ("unknown", None)}
    assert codex.item_events[0].from_ is None
    assert [(c.caster, c.count) for c in codex.spells_by_caster] == [("Caleb", 1)]
    assert [(s.spell, s.count, s.casters) for s in codex.spells] == [("Fire Bolt", 1, ["Caleb"])]


def show(tmp_path: Path, *args: str) -> int:
    return main(["campaign", "show", "mighty-nein", "--bundles", str(tmp_path), *args])


def test_campaign_show_says_a_party_member_or_the_dm_is_no_npc(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for session, by_kind in dm_lanes().items():
        publish_session(tmp_path, session, by_kind)
    publish_codex(tmp_path, roster(), registry())
    assert show(tmp_path, "--npc", "jester lavorre") == 1
    err = capsys.readouterr().err
    assert "Jester is a party member" in err and "played by LAURA" in err and "lavorre" not in err
    assert show(tmp_path, "--npc", "LAURA") == 1
    assert "Jester is a party member" in capsys.readouterr().err
    assert show(tmp_path, "--npc", "Matt") == 1
    assert "MATT is the DM's label" in capsys.readouterr().err
    assert show(tmp_path, "--npc", "Nobody") == 1
    assert "no NPC of campaign 'mighty-nein' has that name" in capsys.readouterr().err
    assert show(tmp_path, "--npc", "the gustav fletching", "--width", "200") == 0


def test_campaign_show_prints_a_roster_merge_by_the_npcs_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for session, by_kind in HANDMADE.items():
        publish_session(tmp_path, session, by_kind)
    publish_codex(tmp_path, roster(), registry())
    assert show(tmp_path, "--npc", "Kylre", "--width", "200") == 0
    out = capsys.readouterr().out
    assert "roster_npc (kylre)" in out and "known npc" not in out
