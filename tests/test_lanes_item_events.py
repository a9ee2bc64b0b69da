"""The `item-events` lane: the published key is `from` (not the Python field `from_`), events
are one of seven kinds, `from`/`to` are grounded to NPC ids when the optional `npcs` reference
is bound, and ids follow source order."""

from __future__ import annotations

import json
from typing import Any

import pytest

from notarius_dagster.dnd.item_events.lane import LANE
from notarius_dagster.engine.chunking import make_chunk
from notarius_dagster.engine.contracts import ExtractRequest, RunContext
from notarius_dagster.engine.models import SourceDocument
from notarius_dagster.engine.references import prepare_generated
from notarius_dagster.engine.validators import schema_problems
from notarius_dagster.modules import registry
from notarius_dagster.settings import REPO_ROOT
from tests.conftest import make_document
from tests.lane_doubles import (
    RecordingClient,
    answer_payload,
    complete_pipeline,
    npc_artifact,
    run_one_lane,
)

KIND = "dnd/item-event-list"
ItemEventAnswer = LANE.answer_model
NPCS = npc_artifact("s1", [("npc-gustav", "Gustav", ["the ringmaster"])])


def event(item: str, kind: str, units: list[int], **kw: Any) -> dict[str, Any]:
    return {
        "item": item,
        "event": kind,
        "from": kw.get("from"),
        "to": kw.get("to"),
        "quantity": kw.get("quantity"),
        "unit_ids": units,
    }


def convert(doc: SourceDocument, events: list[dict[str, Any]], npcs: bool = True):
    binding = next(
        b for b in complete_pipeline().lane("item-events").extract.references if b.slot == "npcs"
    )
    refs = {"npcs": prepare_generated(binding, NPCS, registry().kinds())} if npcs else {}
    ctx = RunContext(
        session_id="s1",
        lane_id="item-events",
        module_key="x",
        options={},
        references=refs,
        client=None,
    )
    answer = ItemEventAnswer.model_validate({"item_events": events})
    return answer_payload(
        "dnd.item_events.extract",
        answer.model_dump(mode="json"),
        ExtractRequest(doc, make_chunk(doc, 0, doc.units), ctx),
    )


def test_the_schema_and_the_payload_use_the_key_from() -> None:
    schema = registry().kind(KIND).json_schema()
    props = schema["$defs"]["ItemEvent"]["properties"]
    assert "from" in props and "from_" not in props
    assert (
        "from" in ItemEventAnswer.model_json_schema()["$defs"]["ItemEventAnswerItem"]["properties"]
    )
    text = (REPO_ROOT / "schemas" / "notarius.dnd.item_event_list.json").read_text()
    assert '"from_"' not in text


def test_a_payload_with_from_underscore_is_a_schema_problem(doc: SourceDocument) -> None:
    payload, _ = convert(doc, [event("dagger", "given", [1], **{"from": "Beau"})], npcs=False)
    assert schema_problems(registry().kind(KIND), payload) == []
    payload["item_events"][0]["from_"] = payload["item_events"][0].pop("from")
    assert schema_problems(registry().kind(KIND), payload)


def test_from_and_to_are_grounded_and_unmatched_parties_counted(doc: SourceDocument) -> None:
    payload, warnings = convert(
        doc,
        [
            event(
                "gold pieces",
                "given",
                [1, 2],
                quantity=5,
                **{"from": "The Ringmaster", "to": "Beau"},
            ),
            event("lute", "bought", [4], **{"from": "Gustav", "to": None}),
        ],
    )
    first, second = payload["item_events"]
    assert (first["from"], first["from_npc_id"], first["to_npc_id"]) == (
        "The Ringmaster",
        "npc-gustav",
        None,
    )
    assert second["from_npc_id"] == "npc-gustav" and second["to"] is None
    assert first["quantity"] == 5
    assert len(warnings) == 1 and warnings[0].message.startswith("1 name(s)")


def test_an_event_outside_the_seven_kinds_is_refused_by_the_answer_schema() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        ItemEventAnswer.model_validate({"item_events": [event("sword", "borrowed", [1])]})


def test_the_lane_runs_end_to_end_in_source_order() -> None:
    texts = [
        "Gustav gives Beau a lute.",
        "I sell the dagger to Gustav.",
        "We each got 10 gold pieces.",
    ]
    doc = make_document([7, 8, 9], texts=texts)
    client = RecordingClient()
    result = run_one_lane(
        complete_pipeline().lane("item-events"),
        doc,
        [make_chunk(doc, 0, doc.units)],
        {"npcs": NPCS},
        client=client,
    )
    assert result.status == "accepted" and result.rejections == ()
    events = result.payload["item_events"]
    assert [(e["id"], e["event"], e["item"]) for e in events] == [
        ("item-event-0001", "given", "lute"),
        ("item-event-0002", "sold", "dagger"),
        ("item-event-0003", "acquired", "gold pieces"),
    ]
    assert events[1]["to_npc_id"] == "npc-gustav" and events[2]["quantity"] == 10
    assert '"from"' in json.dumps(result.payload)


def test_the_checked_in_schema_is_the_models() -> None:
    path = REPO_ROOT / "schemas" / "notarius.dnd.item_event_list.json"
    assert json.loads(path.read_text()) == registry().kind(KIND).json_schema()
