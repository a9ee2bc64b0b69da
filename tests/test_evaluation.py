"""The scorer on hand-made cases: perfect, empty, partial, alias, wrong citation, missing lanes,
one-to-one and many-to-one matching, secondary fields, and how bundles and gold files that
cannot be used are refused (naming files and key paths, never content)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from notarius_dagster.engine.evaluation import (
    BundleLane,
    BundleView,
    EvaluationError,
    EvaluationReport,
    LaneScore,
    MatchFields,
    evaluate,
    load_bundle,
    normalize_name,
    score_bundle,
)
from notarius_dagster.engine.gold import GoldError, GoldFile, load_gold, parse_gold
from notarius_dagster.modules import registry

MATCH_FIELDS = registry().match_fields()
"""What the scorer matches each D&D lane on: the `gold_match` every lane declares."""

NPCS = MatchFields(items="npcs", name="name", aliases="aliases")
SPELLS = MatchFields(items="spells", name="spell", also=("caster",))
SCENES = MatchFields(items="scenes", name="kind", refs="source_ref", many_to_one=True)
TABLE = {"t/npcs": NPCS, "t/spells": SPELLS, "t/scenes": SCENES}
KINDS = {"npcs": "t/npcs", "spells": "t/spells", "scenes": "t/scenes"}
ORDER = list(range(100, 120))
CHUNKS = [list(range(100, 105)), list(range(105, 110)), list(range(110, 120))]
"""The chunk map of the hand-made bundles (a many-to-one record is placed in its chunk)."""


def ref(start: int, end: int | None = None) -> dict[str, Any]:
    return {"source_id": "s", "start_unit_id": start, "end_unit_id": start if end is None else end}


def npc(name: str, *units: int, aliases: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"name": name, "aliases": list(aliases), "source_refs": [ref(u) for u in units]}


def bundle(order: list[int] | None = None, **lanes: list[dict[str, Any]]) -> BundleView:
    return BundleView(
        name="b",
        session_id="s",
        source_digest=None,
        order=ORDER if order is None else order,
        lanes={lane: BundleLane(lane, KINDS[lane], records) for lane, records in lanes.items()},
        lane_status={lane: (KINDS[lane], "accepted") for lane in lanes},
        chunks=CHUNKS if order is None else [order],
    )


def gold(**lanes: list[dict[str, Any]]) -> GoldFile:
    return parse_gold(
        {
            "gold_version": "1",
            "session_id": "s",
            "source": {"file": "t.jsonl", "units": 20},
            "attribution": "test",
            "lanes": lanes,
        },
        "g.json",
    )


def lane(report: EvaluationReport, lane_id: str) -> LaneScore:
    return next(row for row in report.lanes if row.lane_id == lane_id)


def score(b: BundleView, g: GoldFile) -> EvaluationReport:
    return score_bundle(b, g, TABLE, "g.json")


GOLD_NPCS = [
    {"name": "Gustav Fletching", "aliases": ["Gustav"], "unit_ids": [101, 102]},
    {"name": "Ornna", "unit_ids": [105]},
    {"name": "Toya", "unit_ids": [110, 111]},
]


# --- the cases the issue names ---------------------------------------------------------------


def test_a_perfect_prediction_scores_one_everywhere() -> None:
    predicted = [npc("Gustav Fletching", 101, 102), npc("Ornna", 105), npc("Toya", 110, 111)]
    row = lane(score(bundle(npcs=predicted), gold(npcs=GOLD_NPCS)), "npcs")
    assert row.status == "scored" and (row.predicted, row.gold) == (3, 3)
    for prf in (row.by_name, row.grounded):
        assert (prf.precision, prf.recall, prf.f1) == (1.0, 1.0, 1.0)
    assert (row.citation.cited_units, row.citation.supported_units) == (5, 5)
    assert row.citation.precision == 1.0


def test_an_empty_prediction_has_recall_and_f1_zero_and_no_precision() -> None:
    row = lane(score(bundle(npcs=[]), gold(npcs=GOLD_NPCS)), "npcs")
    assert row.status == "scored"
    assert (row.by_name.precision, row.by_name.recall, row.by_name.f1) == (None, 0.0, 0.0)
    assert row.grounded.f1 == 0.0 and row.citation.precision is None


def test_an_empty_gold_makes_every_prediction_a_false_positive() -> None:
    row = lane(score(bundle(npcs=[npc("Gustav", 101)]), gold(npcs=[])), "npcs")
    assert row.status == "scored"
    assert (row.by_name.precision, row.by_name.recall, row.by_name.f1) == (0.0, None, 0.0)


def test_both_empty_is_nothing_to_measure_not_a_perfect_score() -> None:
    row = lane(score(bundle(npcs=[]), gold(npcs=[])), "npcs")
    assert row.status == "scored" and (row.predicted, row.gold) == (0, 0)
    assert (row.by_name.precision, row.by_name.recall, row.by_name.f1) == (None, None, None)


def test_a_partial_prediction() -> None:
    predicted = [npc("Gustav Fletching", 101), npc("Yasha", 103), npc("Toya", 111)]
    row = lane(score(bundle(npcs=predicted), gold(npcs=GOLD_NPCS)), "npcs")
    assert (row.by_name.matched_predicted, row.by_name.matched_gold) == (2, 2)
    assert (row.by_name.precision, row.by_name.recall, row.by_name.f1) == (0.6667, 0.6667, 0.6667)


def test_names_match_through_gold_aliases_after_normalization() -> None:
    predicted = [
        npc("GUSTAV'S", 101),  # a gold alias, possessive, case
        npc("ornna", 105, aliases=("The fire fairy",)),
        npc("Tóya", 110),
    ]  # diacritics
    row = lane(score(bundle(npcs=predicted), gold(npcs=GOLD_NPCS)), "npcs")
    assert row.by_name.f1 == 1.0 and row.grounded.f1 == 1.0


def test_a_predicted_alias_counts_only_under_the_v1_scorer() -> None:
    # v2 matches a prediction on its own name: the name it publishes is what a reader sees.
    predicted = [npc("The fire fairy", 105, aliases=("Ornna",))]
    g = gold(npcs=GOLD_NPCS[1:2])
    assert lane(score(bundle(npcs=predicted), g), "npcs").by_name.f1 == 0.0
    v1 = score_bundle(bundle(npcs=predicted), g, TABLE, "g.json", scorer="v1")
    assert v1.scorer == "v1" and lane(v1, "npcs").by_name.f1 == 1.0


def test_a_wrong_citation_matches_by_name_but_not_grounded() -> None:
    predicted = [npc("Gustav", 115, 116)]  # the right name, citing units that do not show him
    row = lane(score(bundle(npcs=predicted), gold(npcs=GOLD_NPCS[:1])), "npcs")
    assert row.by_name.f1 == 1.0
    assert (row.grounded.matched_predicted, row.grounded.f1) == (0, 0.0)
    assert (row.citation.cited_units, row.citation.supported_units) == (2, 0)
    assert row.citation.precision == 0.0


def test_citation_precision_is_the_share_of_cited_units_that_ground_the_match() -> None:
    predicted = [{"name": "Gustav", "aliases": [], "source_refs": [ref(100, 103)]}]
    row = lane(score(bundle(npcs=predicted), gold(npcs=GOLD_NPCS[:1])), "npcs")
    assert row.grounded.f1 == 1.0
    assert (row.citation.cited_units, row.citation.supported_units) == (4, 2)
    assert row.citation.precision == 0.5


def test_a_lane_missing_from_the_bundle_scores_as_empty_and_counts_in_the_totals() -> None:
    b = bundle(npcs=[npc("Gustav", 101)])
    b.lane_status["spells"] = ("t/spells", "rejected")
    g = gold(npcs=GOLD_NPCS[:1], spells=[{"spell": "Hex", "caster": "Keya", "unit_ids": [104]}])
    report = score(b, g)
    spells = lane(report, "spells")
    assert spells.status == "missing_from_bundle" and spells.bundle_status == "rejected"
    assert (spells.gold, spells.by_name.recall, spells.by_name.f1) == (1, 0.0, 0.0)
    assert report.totals.lanes == ["npcs", "spells"]
    assert (report.totals.predicted, report.totals.gold) == (1, 2)
    assert report.totals.by_name.recall == 0.5 and report.totals.by_name.precision == 1.0


def test_a_lane_absent_from_the_profile_is_missing_with_no_status() -> None:
    g = gold(npcs=GOLD_NPCS[:1], spells=[{"spell": "Hex", "unit_ids": [104]}])
    spells = lane(score(bundle(npcs=[]), g), "spells")
    assert spells.status == "missing_from_bundle" and spells.bundle_status is None


def test_a_lane_missing_from_the_gold_is_listed_and_kept_out_of_the_totals() -> None:
    b = bundle(
        npcs=[npc("Gustav", 101)],
        spells=[{"spell": "Hex", "caster": "Keya", "source_refs": [ref(104)]}],
    )
    report = score(b, gold(npcs=GOLD_NPCS[:1]))
    spells = lane(report, "spells")
    assert spells.status == "missing_from_gold" and spells.predicted == 1
    assert spells.by_name.f1 is None
    assert report.totals.lanes == ["npcs"] and report.totals.predicted == 1
    assert report.totals.by_name.f1 == 1.0


def test_totals_are_micro_averaged_over_the_gold_lanes() -> None:
    b = bundle(
        npcs=[npc("Gustav", 101), npc("Nobody", 119)],
        spells=[{"spell": "Hex", "caster": "Keya", "source_refs": [ref(104)]}],
    )
    g = gold(npcs=GOLD_NPCS, spells=[{"spell": "Hex", "caster": "Keya", "unit_ids": [104]}])
    totals = score(b, g).totals
    assert (totals.predicted, totals.gold) == (3, 4)
    assert (totals.by_name.matched_predicted, totals.by_name.matched_gold) == (2, 2)
    assert (totals.by_name.precision, totals.by_name.recall) == (0.6667, 0.5)
    assert totals.by_name.f1 == round(2 * (2 / 3) * 0.5 / ((2 / 3) + 0.5), 4)


# --- matching rules --------------------------------------------------------------------------


def spell(name: str, caster: str | None, *units: int) -> dict[str, Any]:
    return {"spell": name, "caster": caster, "source_refs": [ref(u) for u in units]}


GOLD_SPELLS = [
    {"spell": "Chaos Bolt", "caster": ["Bartholomew", "Player 3"], "unit_ids": [102]},
    {"spell": "Chaos Bolt", "caster": "Bartholomew", "unit_ids": [112]},
]
GOLD_SPELLS_TWICE = [GOLD_SPELLS[0], {**GOLD_SPELLS[1], "caster": ["Bartholomew", "Player 3"]}]


def test_matching_prefers_the_gold_record_the_citation_shows() -> None:
    # Two castings of the same spell: a prediction citing the second one is paired with it,
    # not with the first in document order, so its citation counts as supported.
    row = lane(
        score(
            bundle(spells=[spell("Chaos Bolt", "Player 3", 112)]), gold(spells=GOLD_SPELLS_TWICE)
        ),
        "spells",
    )
    assert (row.by_name.matched_predicted, row.grounded.matched_predicted) == (1, 1)
    assert (row.citation.cited_units, row.citation.supported_units) == (1, 1)


def test_matching_is_one_to_one() -> None:
    predicted = [spell("Chaos Bolt", "Player 3", 112), spell("chaos bolt", "Bartholomew", 112)]
    row = lane(score(bundle(spells=predicted), gold(spells=GOLD_SPELLS_TWICE)), "spells")
    # The first takes the casting it cites; the second takes the other casting by name only.
    assert (row.by_name.matched_predicted, row.by_name.matched_gold) == (2, 2)
    assert (row.grounded.matched_predicted, row.grounded.matched_gold) == (1, 1)
    assert (row.citation.cited_units, row.citation.supported_units) == (2, 1)


def test_a_duplicate_prediction_is_a_false_positive() -> None:
    predicted = [npc("Ornna", 105), npc("Ornna", 105)]
    row = lane(score(bundle(npcs=predicted), gold(npcs=GOLD_NPCS[1:2])), "npcs")
    assert (row.by_name.precision, row.by_name.recall) == (0.5, 1.0)


def test_a_secondary_field_must_agree_when_both_sides_set_it() -> None:
    wrong_caster = lane(
        score(bundle(spells=[spell("Chaos Bolt", "Keya", 102)]), gold(spells=GOLD_SPELLS[:1])),
        "spells",
    )
    assert wrong_caster.by_name.matched_predicted == 0
    silent = lane(
        score(bundle(spells=[spell("Chaos Bolt", None, 102)]), gold(spells=GOLD_SPELLS[:1])),
        "spells",
    )
    assert silent.grounded.f1 == 1.0
    gold_silent = lane(
        score(
            bundle(spells=[spell("Chaos Bolt", "Keya", 102)]),
            gold(spells=[{"spell": "Chaos Bolt", "unit_ids": [102]}]),
        ),
        "spells",
    )
    assert gold_silent.grounded.f1 == 1.0


def test_many_to_one_kinds_let_several_records_match_one_gold_record() -> None:
    scenes = [
        {"kind": "narrative", "source_ref": ref(100, 104)},
        {"kind": "combat", "source_ref": ref(105, 109)},
        {"kind": "combat", "source_ref": ref(110, 119)},
    ]
    g = gold(
        scenes=[
            {"kind": "narrative", "unit_ids": list(range(100, 106))},
            {"kind": "combat", "unit_ids": list(range(106, 120))},
        ]
    )
    row = lane(score(bundle(scenes=scenes), g), "scenes")
    assert (row.by_name.precision, row.by_name.recall) == (1.0, 1.0)
    assert (row.grounded.matched_predicted, row.grounded.matched_gold) == (3, 2)
    assert (row.citation.cited_units, row.citation.supported_units) == (20, 19)


def test_a_scene_of_the_wrong_kind_matches_nothing() -> None:
    scenes = [{"kind": "combat", "source_ref": ref(100, 119)}]
    row = lane(
        score(bundle(scenes=scenes), gold(scenes=[{"kind": "narrative", "unit_ids": [100]}])),
        "scenes",
    )
    assert row.by_name.f1 == 0.0 and row.grounded.f1 == 0.0


def test_ranges_are_expanded_by_document_position_not_by_id() -> None:
    order = [7, 3, 42, 5]  # ids are unique but not increasing
    predicted = [{"name": "Ornna", "aliases": [], "source_refs": [ref(3, 5)]}]
    row = lane(
        score(
            bundle(order=order, npcs=predicted),
            gold(npcs=[{"name": "Ornna", "unit_ids": [42, 5]}]),
        ),
        "npcs",
    )
    # 3..5 covers 3, 42, 5 (by id it would be 3, 4, 5, one of them Ornna's: not grounded).
    assert row.grounded.f1 == 1.0
    assert (row.citation.cited_units, row.citation.supported_units) == (3, 2)


def test_a_reference_outside_the_document_counts_only_its_endpoints() -> None:
    predicted = [{"name": "Ornna", "aliases": [], "source_refs": [ref(1, 999)]}]
    row = lane(
        score(bundle(npcs=predicted), gold(npcs=[{"name": "Ornna", "unit_ids": [105]}])), "npcs"
    )
    assert row.grounded.f1 == 0.0 and row.citation.cited_units == 2


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("The Sea Hag's", "sea hag"),
        ("  Gustav   FLETCHING! ", "gustav fletching"),
        ("Jéster", "jester"),
        ("the guards'", "guards"),
        ("Fee-ord", "fee ord"),
        ("Mollymauk’s", "mollymauk"),
        ("A", "a"),
        ("Knot Sisters", "knot sisters"),
    ],
)
def test_normalize_name(raw: str, normalized: str) -> None:
    assert normalize_name(raw) == normalized


# --- refusals --------------------------------------------------------------------------------


def test_a_bundle_from_another_transcript_is_refused() -> None:
    g = parse_gold(
        {
            "gold_version": "1",
            "session_id": "s",
            "attribution": "test",
            "source": {"file": "t.jsonl", "units": 20, "digest": "sha256:" + "0" * 64},
            "lanes": {},
        },
        "g.json",
    )
    b = bundle(npcs=[])
    with pytest.raises(EvaluationError, match="another transcript"):
        score(b, g)
    same = BundleView(
        name="b", session_id="s", source_digest="sha256:" + "0" * 64, order=ORDER, lanes={}
    )
    assert score(same, g).source_checked is True


def test_a_gold_record_without_the_lanes_match_field_is_refused_by_key_path() -> None:
    g = gold(spells=[{"caster": "Keya", "unit_ids": [104]}])
    with pytest.raises(EvaluationError, match=r"lanes\.spells\[0\]: no 'spell'"):
        score(bundle(spells=[]), g)


def test_an_invalid_gold_file_names_the_file_and_key_paths_not_values(tmp_path: Path) -> None:
    path = tmp_path / "session-1.json"
    path.write_text(
        json.dumps(
            {
                "gold_version": "1",
                "session_id": "s",
                "attribution": "x",
                "source": {"file": "t.jsonl", "units": 3},
                "lanes": {"npcs": [{"name": "Secret Name", "unit_ids": []}]},
            }
        )
    )
    with pytest.raises(GoldError) as caught:
        load_gold(path)
    message = str(caught.value)
    assert "session-1.json" in message and "lanes.npcs[0].unit_ids" in message
    assert "Secret Name" not in message and str(tmp_path) not in message
    path.write_text("{not json")
    with pytest.raises(GoldError, match="not valid JSON"):
        load_gold(path)


# --- through files ---------------------------------------------------------------------------


def write_bundle(
    folder: Path, lanes: dict[str, tuple[str, str, list[dict[str, Any]]]], order: list[int]
) -> Path:
    """A minimal published bundle: index.json, manifest.json, chunk-map.json, lane files."""
    (folder / "lanes").mkdir(parents=True)
    (folder / "chunk-map.json").write_text(
        json.dumps(
            {
                "chunks": [
                    {"chunk_id": "c0", "unit_ids": order[: len(order) // 2]},
                    {"chunk_id": "c1", "unit_ids": order[len(order) // 2 - 1 :]},
                ]
            }
        )
    )  # overlapping chunks
    entries = []
    for lane_id, (kind, items, records) in lanes.items():
        (folder / f"lanes/{lane_id}.json").write_text(json.dumps({"kind": kind, items: records}))
        entries.append({"lane_id": lane_id, "kind": kind, "file": f"lanes/{lane_id}.json"})
    (folder / "manifest.json").write_text(
        json.dumps(
            {
                "artifact_lanes": [
                    {"lane_id": lane_id, "kind": kind, "status": "accepted"}
                    for lane_id, (kind, _, _) in lanes.items()
                ]
            }
        )
    )
    (folder / "index.json").write_text(
        json.dumps(
            {
                "session_id": "s",
                "source_digest": None,
                "files": {"manifest": "manifest.json"},
                "chunk_map": {"file": "chunk-map.json"},
                "lanes": entries,
            }
        )
    )
    return folder


def test_evaluate_reads_a_published_bundle_through_its_index(tmp_path: Path) -> None:
    folder = write_bundle(
        tmp_path / "v1",
        {
            "npcs": (
                "dnd/npc-list",
                "npcs",
                [{"name": "Gustav", "aliases": [], "source_refs": [ref(101, 103)]}],
            )
        },
        ORDER,
    )
    (tmp_path / "session").symlink_to(folder)
    gold_path = tmp_path / "gold.json"
    gold_path.write_text(
        json.dumps(
            {
                "gold_version": "1",
                "session_id": "s",
                "attribution": "test",
                "source": {"file": "t.jsonl", "units": 20},
                "lanes": {"npcs": GOLD_NPCS},
            }
        )
    )
    view = load_bundle(tmp_path / "session", MATCH_FIELDS)
    assert view.order == ORDER and view.name == "session"
    report = evaluate(tmp_path / "session", gold_path, MATCH_FIELDS)
    npcs = lane(report, "npcs")
    assert npcs.citation.cited_units == 3 and npcs.citation.supported_units == 2
    assert lane(report, "npcs").by_name.recall == 0.3333


def test_each_dnd_lane_is_matched_on_what_its_lane_declares() -> None:
    """The registry's table (every lane's `gold_match`, with its list and citation fields) is
    exactly what docs/evaluation.md documents; a change here changes every score."""
    expected = {
        "dnd/npc-list": MatchFields(items="npcs", name="name", aliases="aliases"),
        "dnd/scene-description-list": MatchFields(
            items="scene_descriptions", name="kind", refs="source_ref", many_to_one=True
        ),
        "dnd/combat-turn-list": MatchFields(items="combat_turns", name="actor", also=("round",)),
        "dnd/spell-list": MatchFields(items="spells", name="spell", also=("caster",)),
        "dnd/item-event-list": MatchFields(items="item_events", name="item", also=("event",)),
        "dnd/npc-interaction-list": MatchFields(
            items="npc_interactions", name="npc", many_to_one=True
        ),
    }
    assert registry().match_fields() == expected


def test_an_unreadable_bundle_is_refused_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(EvaluationError, match="index.json is missing"):
        load_bundle(tmp_path, MATCH_FIELDS)
    folder = write_bundle(tmp_path / "b", {"npcs": ("dnd/npc-list", "npcs", [])}, ORDER)
    (folder / "lanes/npcs.json").write_text("{broken")
    with pytest.raises(EvaluationError, match=r"bundle 'b': lanes/npcs.json is not valid JSON"):
        load_bundle(folder, MATCH_FIELDS)
