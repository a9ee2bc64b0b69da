"""The `npc-interactions` lane: `dnd/npc-interaction-list`, its modules (the required `npcs`
slot: interactions are with known NPCs) and its lane rules."""

from __future__ import annotations

from notarius_dagster.dnd.event_lane import register_event_lane
from notarius_dagster.dnd.grounding import NPC_KIND, NPCS_SLOT
from notarius_dagster.dnd.npc_interactions.model import ITEMS, KIND, NpcInteractionList
from notarius_dagster.dnd.npc_interactions.modules import (
    GROUNDED,
    build_extractor,
)
from notarius_dagster.engine.catalog import ReferenceSlot

INTERACTION_KIND = register_event_lane(
    module_prefix="dnd.npc_interactions", kind=KIND, model=NpcInteractionList,
    schema_stem="npc_interaction_list", items=ITEMS, grounded=GROUNDED,
    slots=(ReferenceSlot(name=NPCS_SLOT, required=True, accepted_kinds=(NPC_KIND,)),),
    extractor=build_extractor, id_prefix="interaction")
