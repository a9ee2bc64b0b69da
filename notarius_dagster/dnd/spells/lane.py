"""The `spells` lane: each actual casting (caster, spell, slot level, targets, outcome), the
caster grounded to an NPC when the optional `npcs` slot is bound."""

from __future__ import annotations

from notarius_dagster.dnd.event_lists import event_modules
from notarius_dagster.dnd.grounding import npcs_slot
from notarius_dagster.dnd.roster import roster_slot
from notarius_dagster.dnd.spells.model import SpellCast
from notarius_dagster.engine.lane_models import AnswerSpec
from notarius_dagster.engine.lanes import GoldMatch, LaneSpec, ReportColumn, ReportTable

LANE = LaneSpec(
    lane_id="spells",
    kind="dnd/spell-list",
    record_model=SpellCast,
    answer=AnswerSpec(
        "SpellAnswer",
        omit=("caster_npc_id",),
        max_cited=12,  # citation budget (docs/lanes.md, "Citation budgets")
    ),
    modules=event_modules((("caster", "caster_npc_id"),), name_lists=("targets",)),
    slots=(npcs_slot(), roster_slot()),
    id_prefix="spell",
    support_fields=("spell",),
    preview_fields=("id", "caster", "spell", "level"),
    report=ReportTable(
        title="Spells cast",
        noun="spells",
        section_id="spells",
        id_header="Cast",
        columns=(
            ("Spell", "spell"),
            ReportColumn("Level", "level", labels=((0, "cantrip"),), template="level {}"),
            ReportColumn("Caster", "caster", link="caster_npc_id"),
            ("Targets", "targets"),
            ("Outcome", "outcome"),
        ),
        order=40,
    ),
    # A casting by the spell's name, and its caster.
    gold_match=GoldMatch(name="spell", also=("caster",)),
)
