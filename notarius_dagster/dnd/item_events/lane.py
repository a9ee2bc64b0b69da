"""The `item-events` lane: an item acquired, given, lost, used, bought, sold or destroyed,
`from` and `to` grounded to NPCs when the optional `npcs` slot is bound."""

from __future__ import annotations

from notarius_dagster.dnd.event_lists import event_modules
from notarius_dagster.dnd.grounding import npcs_slot
from notarius_dagster.dnd.item_events.model import ItemEvent
from notarius_dagster.dnd.roster import roster_slot
from notarius_dagster.engine.lane_models import AnswerSpec
from notarius_dagster.engine.lanes import GoldMatch, LaneSpec, ReportColumn, ReportTable

LANE = LaneSpec(
    lane_id="item-events",
    kind="dnd/item-event-list",
    record_model=ItemEvent,
    answer=AnswerSpec(
        "ItemEventAnswer",
        omit=("from_npc_id", "to_npc_id"),
        max_cited=8,  # citation budget (docs/lanes.md, "Citation budgets")
    ),
    modules=event_modules((("from", "from_npc_id"), ("to", "to_npc_id"))),
    slots=(npcs_slot(), roster_slot()),
    id_prefix="item-event",
    support_fields=("item",),
    preview_fields=("id", "item", "event"),
    report=ReportTable(
        title="Items changing hands",
        noun="item events",
        section_id="items",
        id_header="Event",
        columns=(
            ("Item", "item"),
            ("What", "event"),
            ("Quantity", "quantity"),
            ReportColumn("From", "from", link="from_npc_id"),
            ReportColumn("To", "to", link="to_npc_id"),
        ),
        order=50,
    ),
    # An item event by the item, and what happened to it.
    gold_match=GoldMatch(name="item", also=("event",)),
)
