"""The `item-events` lane: `dnd/item-event-list`, its modules (optional `npcs` slot for
grounding `from`/`to`) and its lane rules."""

from __future__ import annotations

from notarius_dagster.dnd.event_lane import register_event_lane
from notarius_dagster.dnd.grounding import NPC_KIND, NPCS_SLOT
from notarius_dagster.dnd.item_events.model import ITEMS, KIND, ItemEventList
from notarius_dagster.dnd.item_events.modules import (
    GROUNDED,
    build_extractor,
)
from notarius_dagster.engine.catalog import ReferenceSlot

ITEM_EVENT_KIND = register_event_lane(
    module_prefix="dnd.item_events", kind=KIND, model=ItemEventList,
    schema_stem="item_event_list", items=ITEMS, grounded=GROUNDED,
    slots=(ReferenceSlot(name=NPCS_SLOT, accepted_kinds=(NPC_KIND,)),),
    extractor=build_extractor, id_prefix="item-event")
