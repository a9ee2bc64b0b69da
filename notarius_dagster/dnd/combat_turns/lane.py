"""The `combat-turns` lane: each turn taken in a fight, extracted only from chunks whose exact
scene record says combat (the required `scene_descriptions` slot), actors grounded to NPCs
(the optional `npcs` slot)."""

from __future__ import annotations

from pydantic import Field

from notarius_dagster.dnd.combat_turns.extract import (
    SCENE_KIND,
    SCENES_SLOT,
    SceneGatedCombatExtractor,
    outcome_record,
)
from notarius_dagster.dnd.combat_turns.merge import CombatTurnMerger
from notarius_dagster.dnd.combat_turns.model import CombatTurn, OutcomeAnswer
from notarius_dagster.dnd.event_lists import event_modules
from notarius_dagster.dnd.grounding import npcs_slot
from notarius_dagster.dnd.roster import roster_slot
from notarius_dagster.engine.lane_models import AnswerSpec
from notarius_dagster.engine.lanes import GoldMatch, LaneSpec, ReportColumn, ReportTable
from notarius_dagster.engine.models import ReferenceSlot

LANE = LaneSpec(
    lane_id="combat-turns",
    kind="dnd/combat-turn-list",
    record_model=CombatTurn,
    answer=AnswerSpec(
        "CombatAnswer",
        item_name="CombatTurnAnswerItem",
        doc="What the model is asked for: the turn and the unit ids (the `[n]` markers) it cites.",
        max_items=60,
        max_cited=20,  # citation budget (docs/lanes.md, "Citation budgets")
        omit=("actor_npc_id",),
        fields={"outcome": (OutcomeAnswer, Field(default_factory=OutcomeAnswer))},
    ),
    modules=event_modules(
        (("actor", "actor_npc_id"),),
        convert={"outcome": outcome_record},
        gate=SceneGatedCombatExtractor,
        name_lists=("targets",),
        merge=CombatTurnMerger,
    ),
    slots=(
        ReferenceSlot(name=SCENES_SLOT, required=True, accepted_kinds=(SCENE_KIND,)),
        npcs_slot(),
        roster_slot(),
    ),
    id_prefix="turn",
    support_fields=("actor",),
    # The actor is the one who speaks: a player's line (mapped by the roster) shows the turn.
    speaker_acts=True,
    preview_fields=("id", "actor", "round"),
    report=ReportTable(
        title="Combat",
        noun="combat turns",
        section_id="combat",
        layout="rounds",
        id_header="Turn",
        group=ReportColumn("Round", "round"),
        columns=(
            ReportColumn("Actor", "actor", link="actor_npc_id"),
            ("Action", "action"),
            ("Targets", "targets"),
            ReportColumn("Hit", "outcome.hit", labels=((True, "hit"), (False, "miss"))),
            ("Damage", "outcome.damage"),
            ("Effect", "outcome.effect"),
        ),
        order=30,
    ),
    # A turn by its actor, and its round when both say one.
    gold_match=GoldMatch(name="actor", also=("round",)),
)
