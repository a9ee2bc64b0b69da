"""The `combat-turns` lane: `dnd/combat-turn-list`, its scene-gated extractor (the required
`scene_descriptions` slot and the optional `npcs` slot), merge, normalize and lane rules."""

from __future__ import annotations

from notarius_dagster.dnd.combat_turns.model import ITEMS, KIND, CombatTurnList
from notarius_dagster.dnd.combat_turns.modules import (
    GROUNDED,
    SCENE_KIND,
    SCENES_SLOT,
    build_extractor,
)
from notarius_dagster.dnd.event_lane import register_event_lane
from notarius_dagster.dnd.grounding import NPC_KIND, NPCS_SLOT
from notarius_dagster.engine.catalog import ReferenceSlot

COMBAT_KIND = register_event_lane(
    module_prefix="dnd.combat_turns", kind=KIND, model=CombatTurnList,
    schema_stem="combat_turn_list", items=ITEMS, grounded=GROUNDED,
    slots=(ReferenceSlot(name=SCENES_SLOT, required=True, accepted_kinds=(SCENE_KIND,)),
           ReferenceSlot(name=NPCS_SLOT, accepted_kinds=(NPC_KIND,))),
    extractor=build_extractor, id_prefix="turn")
