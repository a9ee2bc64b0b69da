"""The `spells` lane: `dnd/spell-list`, its modules (optional `npcs` slot for grounding
casters) and its lane rules."""

from __future__ import annotations

from notarius_dagster.dnd.event_lane import register_event_lane
from notarius_dagster.dnd.grounding import NPC_KIND, NPCS_SLOT
from notarius_dagster.dnd.spells.model import ITEMS, KIND, SpellList
from notarius_dagster.dnd.spells.modules import (
    GROUNDED,
    build_extractor,
)
from notarius_dagster.engine.catalog import ReferenceSlot

SPELL_KIND = register_event_lane(
    module_prefix="dnd.spells", kind=KIND, model=SpellList, schema_stem="spell_list",
    items=ITEMS, grounded=GROUNDED,
    slots=(ReferenceSlot(name=NPCS_SLOT, accepted_kinds=(NPC_KIND,)),),
    extractor=build_extractor, id_prefix="spell")
