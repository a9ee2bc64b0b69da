"""The `npcs` lane: answer conversion, deduplicating merge, stable-id normalize, and the
checked-in schemas."""

from __future__ import annotations

from typing import Any

from notarius_dagster.dnd.records import refs_from_unit_ids
from notarius_dagster.engine.chunking import make_chunk
from notarius_dagster.engine.contracts import (
    ExtractRequest,
    MergeRequest,
    ModuleOutput,
    NormalizeRequest,
    RunContext,
)
from notarius_dagster.engine.models import SourceDocument
from notarius_dagster.modules import registry
from notarius_dagster.schemas import stale
from tests.conftest import make_document
from tests.lane_doubles import answer_payload

CTX = RunContext(
    session_id="s1", lane_id="npcs", module_key="x", options={}, references={}, client=None
)


def merger() -> Any:
    return registry().lane("npcs").merger()


def normalizer() -> Any:
    return registry().lane("npcs").normalizer()


def extract(doc: SourceDocument, chunk_units: slice, npcs: list[dict[str, Any]]) -> ModuleOutput:
    chunk = make_chunk(doc, 0, doc.units[chunk_units])
    request = ExtractRequest(doc, chunk, CTX)
    payload, _ = answer_payload("dnd.npcs.extract", {"npcs": npcs}, request)
    return ModuleOutput(payload=payload)


def npc(name: str, units: list[int], aliases: list[str] | None = None, desc: str = "") -> dict:
    return {"name": name, "aliases": aliases or [], "description": desc, "unit_ids": units}


def test_cited_unit_ids_become_ranges_by_chunk_position() -> None:
    doc = make_document([10, 3, 7, 8, 1])
    chunk = make_chunk(doc, 0, doc.units)
    refs = refs_from_unit_ids([7, 3, 1], chunk)
    assert [(r.start_unit_id, r.end_unit_id) for r in refs] == [(3, 7), (1, 1)]


def test_ids_outside_the_chunk_are_kept_for_the_validator_to_reject() -> None:
    doc = make_document()
    chunk = make_chunk(doc, 0, doc.units[:3])
    refs = refs_from_unit_ids([1, 9], chunk)
    assert [(r.start_unit_id, r.end_unit_id) for r in refs] == [(1, 1), (9, 9)]


def test_merge_deduplicates_by_normalized_name_and_alias() -> None:
    doc = make_document()
    first = extract(
        doc,
        slice(0, 5),
        [npc("Gustav Fletching", [1], ["the Carnival Master"], "runs the carnival")],
    )
    second = extract(
        doc,
        slice(5, 10),
        [npc("gustav  fletching!", [6]), npc("The carnival master", [8], ["Gus"])],
    )
    merged = merger().merge(MergeRequest(doc, (first, second), CTX)).payload
    assert merged is not None and len(merged["npcs"]) == 1
    only = merged["npcs"][0]
    assert only["name"] == "Gustav Fletching" and only["description"] == "runs the carnival"
    assert "Gus" in only["aliases"]
    assert [r["start_unit_id"] for r in only["source_refs"]] == [1, 6, 8]


def test_two_npcs_of_one_chunk_sharing_a_group_name_stay_two() -> None:
    # The Knot Sisters: one chunk's answer gives Mona and Yuli, both "Knot Sisters"; the
    # group's name identifies neither, so it merges neither them nor a later "Knot Sisters".
    doc = make_document()
    first = extract(
        doc,
        slice(0, 5),
        [npc("Mona", [1, 2], ["Knot Sisters"]), npc("Yuli", [1, 2], ["Knot Sisters"])],
    )
    second = extract(doc, slice(5, 10), [npc("Yuli", [6]), npc("Knot Sisters", [7])])
    merged = merger().merge(MergeRequest(doc, (first, second), CTX)).payload
    assert merged is not None
    by_name = {n["name"]: n for n in merged["npcs"]}
    assert sorted(by_name) == ["Knot Sisters", "Mona", "Yuli"]
    assert [r["start_unit_id"] for r in by_name["Yuli"]["source_refs"]] == [1, 6]
    assert [r["start_unit_id"] for r in by_name["Mona"]["source_refs"]] == [1]


def test_normalize_assigns_stable_ids_in_source_order() -> None:
    doc = make_document()
    merged = merger().merge(
        MergeRequest(
            doc,
            (
                extract(
                    doc,
                    slice(0, 10),
                    [
                        npc("Yasha", [7]),
                        npc("Ornna", [2]),
                        npc("ornna?", [3]),
                        npc("O r n n a", [4]),
                    ],
                ),
            ),
            CTX,
        )
    )
    out = normalizer().normalize(NormalizeRequest(doc, merged, CTX)).payload
    assert out is not None
    assert [n["id"] for n in out["npcs"]] == ["npc-ornna", "npc-o-r-n-n-a", "npc-yasha"]
    again = normalizer().normalize(NormalizeRequest(doc, merged, CTX)).payload
    assert again == out


def test_duplicate_slugs_get_a_suffix() -> None:
    doc = make_document()
    merged = ModuleOutput(
        payload={
            "kind": "dnd/npc-list",
            "schema_version": "v1",
            "source_id": "s1",
            "npcs": [
                {
                    "name": "Bob!",
                    "aliases": [],
                    "description": "",
                    "source_refs": [{"source_id": "s1", "start_unit_id": 1, "end_unit_id": 1}],
                },
                {
                    "name": "Bob?",
                    "aliases": [],
                    "description": "",
                    "source_refs": [{"source_id": "s1", "start_unit_id": 2, "end_unit_id": 2}],
                },
            ],
        }
    )
    out = normalizer().normalize(NormalizeRequest(doc, merged, CTX)).payload
    assert out is not None and [n["id"] for n in out["npcs"]] == ["npc-bob", "npc-bob-2"]


def test_checked_in_schemas_match_the_models() -> None:
    assert stale() == [], "run `make schemas` and commit schemas/"
