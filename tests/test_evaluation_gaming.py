"""The scorer cannot be gamed: the five ways issue 19 found to score well with wrong bundles,
each written as published files (index, manifest, chunk map, lane files) and a gold file, and
scored through `evaluate` with the D&D lanes' own match table, as `notarius eval` does.

Each of the five cases fails with the scorer before v2 (kept for one release as
`scorer="v1"`; checked by running these tests against it, and two of them are shown again
through the flag in `test_the_v1_scorer_still_reproduces_the_old_figures`)."""

from __future__ import annotations

import json
import random
from itertools import permutations
from pathlib import Path
from typing import Any

from notarius_dagster.engine.evaluation import EvaluationReport, LaneScore, evaluate
from notarius_dagster.modules import registry

MATCH_FIELDS = registry().match_fields()
ORDER = list(range(100, 120))
CHUNKS = [ORDER[:10], ORDER[10:]]  # two chunks: units 100-109 and 110-119
KINDS = {
    "npcs": ("dnd/npc-list", "npcs"),
    "npc-interactions": ("dnd/npc-interaction-list", "npc_interactions"),
    "scene-descriptions": ("dnd/scene-description-list", "scene_descriptions"),
}
GOLD_NPCS: list[dict[str, Any]] = [
    {"name": "Gustav Fletching", "aliases": ["Gustav"], "unit_ids": [101, 102]},
    {"name": "Ornna", "unit_ids": [105]},
    {"name": "Toya", "unit_ids": [110, 111]},
]


def ref(start: int, end: int | None = None) -> dict[str, Any]:
    return {"source_id": "s", "start_unit_id": start, "end_unit_id": start if end is None else end}


def npc(name: str, *refs: dict[str, Any], aliases: list[str] | None = None) -> dict[str, Any]:
    return {"name": name, "aliases": aliases or [], "source_refs": list(refs)}


def interaction(npc_name: str, *refs: dict[str, Any]) -> dict[str, Any]:
    return {"npc": npc_name, "kind": "talk", "source_refs": list(refs)}


def scene(kind: str, start: int, end: int) -> dict[str, Any]:
    return {"kind": kind, "source_ref": ref(start, end)}


def score(tmp_path: Path, scorer: str | None = None, **lanes: Any) -> EvaluationReport:
    """Publish `lanes` (lane id -> (predicted records, gold records)) as a bundle folder and a
    gold file under `tmp_path`, and score them."""
    folder = tmp_path / "bundle"
    (folder / "lanes").mkdir(parents=True)
    chunks = [{"chunk_id": f"c{i}", "unit_ids": units} for i, units in enumerate(CHUNKS)]
    (folder / "chunk-map.json").write_text(json.dumps({"chunks": chunks}))
    entries, gold_lanes = [], {}
    for lane_id, (predicted, gold) in lanes.items():
        kind, items = KINDS[lane_id.replace("_", "-")]
        lane_id = lane_id.replace("_", "-")
        (folder / f"lanes/{lane_id}.json").write_text(json.dumps({"kind": kind, items: predicted}))
        entries.append({"lane_id": lane_id, "kind": kind, "file": f"lanes/{lane_id}.json"})
        gold_lanes[lane_id] = gold
    manifest = {
        "artifact_lanes": [
            {"lane_id": e["lane_id"], "kind": e["kind"], "status": "accepted"} for e in entries
        ]
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))
    index = {
        "session_id": "s",
        "source_digest": None,
        "files": {"manifest": "manifest.json"},
        "chunk_map": {"file": "chunk-map.json"},
        "lanes": entries,
    }
    (folder / "index.json").write_text(json.dumps(index))
    gold_path = tmp_path / "gold.json"
    gold_path.write_text(
        json.dumps(
            {
                "gold_version": "1",
                "session_id": "s",
                "attribution": "test",
                "source": {"file": "t.jsonl", "units": 20},
                "lanes": gold_lanes,
            }
        )
    )
    if scorer is None:
        return evaluate(folder, gold_path, MATCH_FIELDS)
    return evaluate(folder, gold_path, MATCH_FIELDS, scorer=scorer)  # type: ignore[arg-type]


def row(report: EvaluationReport, lane_id: str) -> LaneScore:
    return next(r for r in report.lanes if r.lane_id == lane_id)


# --- the five gaming cases ---------------------------------------------------------------------


def test_citing_the_whole_transcript_is_not_grounded(tmp_path: Path) -> None:
    # Every record cites all 20 units: the right names, evidence nobody could check.
    predicted = [npc(g["name"], ref(100, 119)) for g in GOLD_NPCS]
    npcs = row(score(tmp_path, npcs=(predicted, GOLD_NPCS)), "npcs")
    assert npcs.by_name.f1 == 1.0
    assert (npcs.grounded.matched_predicted, npcs.grounded.f1) == (0, 0.0)
    assert npcs.citation.precision == 0.0833  # 5 of 60 cited units show them


def test_mostly_supporting_citations_are_grounded(tmp_path: Path) -> None:
    # The threshold is a share, not all: half of the cited units showing the record is enough.
    predicted = [npc("Gustav Fletching", ref(101, 104)), npc("Toya", ref(110, 112))]
    npcs = row(score(tmp_path, npcs=(predicted, GOLD_NPCS)), "npcs")
    assert npcs.grounded.matched_predicted == 2  # 2 of 4 and 2 of 3 cited units are theirs


def test_duplicates_in_a_many_to_one_lane_are_false_positives(tmp_path: Path) -> None:
    # One dealing with Gustav in the first chunk, reported three times over; a dealing with
    # Toya that runs across both chunks, reported once per chunk (both right).
    gold = [
        {"npc": "Gustav Fletching", "aliases": ["Gustav"], "unit_ids": [101, 102, 103]},
        {"npc": "Toya", "unit_ids": [108, 109, 110, 111]},
    ]
    predicted = [interaction("Gustav", ref(101, 103)) for _ in range(3)]
    predicted += [interaction("Toya", ref(108, 109)), interaction("Toya", ref(110, 111))]
    lane = row(score(tmp_path, npc_interactions=(predicted, gold)), "npc-interactions")
    assert (lane.by_name.matched_predicted, lane.by_name.matched_gold) == (3, 2)
    assert (lane.by_name.precision, lane.by_name.recall) == (0.6, 1.0)


def test_a_predictions_own_aliases_do_not_match_gold_names(tmp_path: Path) -> None:
    # Junk records that list every gold name as an alias, citing the right units.
    every_name = ["Gustav Fletching", "Gustav", "Ornna", "Toya"]
    predicted = [
        npc(f"Somebody {n}", *(ref(u) for u in g["unit_ids"]), aliases=every_name)
        for n, g in enumerate(GOLD_NPCS)
    ]
    npcs = row(score(tmp_path, npcs=(predicted, GOLD_NPCS)), "npcs")
    assert (npcs.by_name.precision, npcs.by_name.recall) == (0.0, 0.0)
    assert npcs.grounded.f1 == 0.0


def test_matching_is_optimal_and_independent_of_record_order(tmp_path: Path) -> None:
    # Two gold NPCs answer to "Gustav". The prediction "Gustav" cites the first one's unit,
    # so a greedy pass gives it the first and leaves "Gustav Fletching" without a partner;
    # the optimal matching pairs both, whatever the order of the records.
    gold = [
        {"name": "Gustav Fletching", "aliases": ["Gustav"], "unit_ids": [101, 102]},
        {"name": "Gustav", "note": "his nephew", "unit_ids": [110]},
    ]
    records = [npc("Gustav", ref(101)), npc("Gustav Fletching", ref(102))]
    for number, order in enumerate(permutations(records)):
        npcs = row(score(tmp_path / str(number), npcs=(list(order), gold)), "npcs")
        assert (npcs.by_name.matched_predicted, npcs.by_name.f1) == (2, 1.0)


def test_a_scene_of_the_wrong_kind_is_no_hit_anywhere(tmp_path: Path) -> None:
    # The first chunk is narrative and is called combat: a miss, though the session has a
    # combat scene elsewhere.
    gold = [
        {"kind": "narrative", "unit_ids": ORDER[:10]},
        {"kind": "combat", "unit_ids": ORDER[10:]},
    ]
    predicted = [scene("combat", 100, 109), scene("combat", 110, 119)]
    scenes = row(score(tmp_path, scene_descriptions=(predicted, gold)), "scene-descriptions")
    assert (scenes.by_name.matched_predicted, scenes.by_name.precision) == (1, 0.5)
    assert (scenes.by_name.matched_gold, scenes.by_name.recall) == (1, 0.5)


# --- around them ---------------------------------------------------------------------------


def test_a_scene_is_grounded_in_the_gold_scene_holding_most_of_it(tmp_path: Path) -> None:
    gold = [
        {"kind": "narrative", "unit_ids": ORDER[:13]},  # 100-112
        {"kind": "combat", "unit_ids": ORDER[13:]},  # 113-119
    ]
    # The second chunk (110-119) touches both scenes; most of it is the fight.
    predicted = [scene("narrative", 100, 109), scene("combat", 110, 119)]
    scenes = row(score(tmp_path, scene_descriptions=(predicted, gold)), "scene-descriptions")
    assert scenes.grounded.f1 == 1.0
    called_narrative = [scene("narrative", 100, 109), scene("narrative", 110, 119)]
    scenes = row(
        score(tmp_path / "n", scene_descriptions=(called_narrative, gold)), "scene-descriptions"
    )
    # By kind and span the second chunk touches the narrative scene; grounded it is not (3 of
    # its 10 units are narrative), so one grounded hit and no combat scene found.
    assert (scenes.by_name.matched_predicted, scenes.grounded.matched_predicted) == (2, 1)
    assert scenes.grounded.recall == 0.5


def test_the_v1_scorer_still_reproduces_the_old_figures(tmp_path: Path) -> None:
    every_name = ["Gustav Fletching", "Gustav", "Ornna", "Toya"]
    junk = [
        npc(f"Somebody {n}", *(ref(u) for u in g["unit_ids"]), aliases=every_name)
        for n, g in enumerate(GOLD_NPCS)
    ]
    broad = [npc(g["name"], ref(100, 119)) for g in GOLD_NPCS]
    v1 = score(tmp_path / "a", "v1", npcs=(junk, GOLD_NPCS))
    assert v1.scorer == "v1" and row(v1, "npcs").by_name.f1 == 1.0
    assert row(score(tmp_path / "b", "v1", npcs=(broad, GOLD_NPCS)), "npcs").grounded.f1 == 1.0
    v2 = score(tmp_path / "c", npcs=(junk, GOLD_NPCS))
    assert v2.scorer == "v2" and row(v2, "npcs").by_name.f1 == 0.0


def test_max_weight_matching_is_optimal_on_small_graphs() -> None:
    """Against brute force on 400 random bipartite graphs (seeded): the matching's weight is
    the best any matching reaches, and no vertex is used twice."""
    from notarius_dagster.engine.evaluation import max_weight_matching

    rng = random.Random(19)

    def best(weights: dict[tuple[int, int], int], left: list[int], used: frozenset[int]) -> int:
        if not left:
            return 0
        i, rest = left[0], left[1:]
        options = [best(weights, rest, used)]
        for (a, b), w in weights.items():
            if a == i and b not in used:
                options.append(w + best(weights, rest, used | {b}))
        return max(options)

    for _ in range(400):
        n, m = rng.randint(0, 6), rng.randint(0, 6)
        weights = {
            (i, j): rng.randint(1, 9) for i in range(n) for j in range(m) if rng.random() < 0.4
        }
        pairs = max_weight_matching(weights)
        assert len({i for i, _ in pairs}) == len({j for _, j in pairs}) == len(pairs)
        assert sum(weights[p] for p in pairs) == best(weights, list(range(n)), frozenset())
