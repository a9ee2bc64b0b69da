"""The `npc-interactions` lane: it needs the `npcs` reference (resolution refuses it unbound),
shows the model the known NPC names (names only), grounds `npc` to its id, and numbers
interactions in source order."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from notarius_dagster.engine.chunking import make_chunk
from notarius_dagster.engine.config import parse_profile
from notarius_dagster.engine.contracts import ExtractRequest, RunContext
from notarius_dagster.engine.errors import ProfileError
from notarius_dagster.engine.models import SourceDocument
from notarius_dagster.engine.references import prepare_generated
from notarius_dagster.engine.resolution import resolve_pipeline
from notarius_dagster.modules import registry
from notarius_dagster.settings import REPO_ROOT
from tests.conftest import make_document
from tests.lane_doubles import (
    COMPLETE_PROFILE,
    RecordingClient,
    answer_payload,
    complete_pipeline,
    npc_artifact,
    run_one_lane,
)

KIND = "dnd/npc-interaction-list"
NPCS = npc_artifact(
    "s1",
    [("npc-ornna", "Ornna", ["the blacksmith"]), ("npc-gustav", "Gustav Fletching", ["Gustav"])],
)


def test_the_npcs_reference_is_required_at_resolution() -> None:
    data: dict[str, Any] = yaml.safe_load(COMPLETE_PROFILE.read_text())
    lane = next(x for x in data["pipeline"]["lanes"] if x["id"] == "npc-interactions")
    del lane["references"]
    profile = parse_profile(data, profile_name="p.yaml")
    with pytest.raises(ProfileError) as info:
        resolve_pipeline(profile, profile_name="p.yaml", base_dir=REPO_ROOT, registry=registry())
    assert info.value.key_path.endswith("].references.npcs")


def test_the_prompt_lists_known_npc_names_only() -> None:
    doc = make_document([1, 2], texts=["Ornna nods.", "We thank her."])
    client = RecordingClient()
    npcs = npc_artifact("s1", [("npc-ornna", "Ornna", [])])
    npcs["npcs"][0]["description"] = "Secretive description text"
    run_one_lane(
        complete_pipeline().lane("npc-interactions"),
        doc,
        [make_chunk(doc, 0, doc.units)],
        {"npcs": npcs},
        client=client,
    )
    request = client.requests[0]
    assert request.instructions.endswith("Known NPCs: Ornna")
    assert "Secretive" not in request.user + request.instructions


def convert(doc: SourceDocument, items: list[dict[str, Any]]):
    binding = next(
        b
        for b in complete_pipeline().lane("npc-interactions").extract.references
        if b.slot == "npcs"
    )
    ctx = RunContext(
        session_id="s1",
        lane_id="npc-interactions",
        module_key="x",
        options={},
        references={"npcs": prepare_generated(binding, NPCS, registry().kinds())},
        client=None,
    )
    return answer_payload(
        "dnd.npc_interactions.extract",
        {"npc_interactions": items},
        ExtractRequest(doc, make_chunk(doc, 0, doc.units), ctx),
    )


def test_the_npc_is_grounded_by_name_or_alias(doc: SourceDocument) -> None:
    payload, warnings = convert(
        doc,
        [
            {
                "npc": "The Blacksmith",
                "participants": ["Beau", " "],
                "kind": "trade",
                "summary": " Buys a sword. ",
                "unit_ids": [1],
            },
            {
                "npc": "Stranger",
                "participants": [],
                "kind": "other",
                "summary": "",
                "unit_ids": [2],
            },
        ],
    )
    first, second = payload["npc_interactions"]
    assert (first["npc_id"], first["participants"], first["summary"]) == (
        "npc-ornna",
        ["Beau"],
        "Buys a sword.",
    )
    assert second["npc_id"] is None
    assert len(warnings) == 1 and "Stranger" not in warnings[0].message


def test_the_lane_runs_end_to_end_in_source_order() -> None:
    texts = [
        "Ornna hands you the blade.",
        "Thanks, Ornna.",
        "Gustav Fletching waves from the tent.",
    ]
    doc = make_document([3, 4, 5], texts=texts)
    result = run_one_lane(
        complete_pipeline().lane("npc-interactions"),
        doc,
        [make_chunk(doc, 0, doc.units[:2]), make_chunk(doc, 1, doc.units[1:])],
        {"npcs": NPCS},
    )
    assert result.status == "accepted" and result.rejections == ()
    items = result.payload["npc_interactions"]
    assert [(i["id"], i["npc"], i["npc_id"]) for i in items] == [
        ("interaction-0001", "Ornna", "npc-ornna"),
        ("interaction-0002", "Gustav Fletching", "npc-gustav"),
    ]
    # the overlapping chunks both saw the Ornna interaction: merged, citations unioned
    assert [(r["start_unit_id"], r["end_unit_id"]) for r in items[0]["source_refs"]] == [
        (3, 4),
        (4, 4),
    ]


def test_the_checked_in_schema_is_the_models() -> None:
    path = REPO_ROOT / "schemas" / "notarius.dnd.npc_interaction_list.json"
    assert json.loads(path.read_text()) == registry().kind(KIND).json_schema()
