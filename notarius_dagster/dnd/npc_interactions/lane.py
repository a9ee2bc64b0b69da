"""The `npc-interactions` lane: the party dealing with one known NPC (the required `npcs`
slot); the prompt's `{context}` lists the NPCs' names so the model uses the names grounding
matches."""

from __future__ import annotations

from notarius_dagster.dnd.event_lists import event_modules
from notarius_dagster.dnd.grounding import known_npcs, npcs_slot
from notarius_dagster.dnd.npc_interactions.model import NpcInteraction
from notarius_dagster.dnd.roster import roster_slot
from notarius_dagster.engine.lane_models import AnswerSpec
from notarius_dagster.engine.lanes import GoldMatch, LaneSpec, ReportColumn, ReportTable

LANE = LaneSpec(
    lane_id="npc-interactions",
    kind="dnd/npc-interaction-list",
    record_model=NpcInteraction,
    answer=AnswerSpec(
        "InteractionAnswer",
        omit=("npc_id",),
        defaults={"kind": "other", "summary": ""},
        max_cited=20,  # citation budget (docs/lanes.md, "Citation budgets")
    ),
    # The NPC side is never a party member (dropped and counted, like PCs in `npcs`).
    modules=event_modules(
        (("npc", "npc_id"),), context=known_npcs, name_lists=("participants",), npc_side="npc"
    ),
    slots=(npcs_slot(required=True), roster_slot()),
    id_prefix="interaction",
    support_fields=("npc",),
    preview_fields=("id", "kind", "npc", "npc_id"),
    report=ReportTable(
        title="NPC interactions",
        noun="NPC interactions",
        section_id="interactions",
        id_header="Interaction",
        columns=(
            ReportColumn("NPC", "npc", link="npc_id"),
            ("Kind", "kind"),
            ("Participants", "participants"),
            ("Summary", "summary"),
        ),
        order=60,
    ),
    # An interaction by the NPC it is with. Chunked extraction reports a long dealing once per
    # chunk it spans (the merge folds only identical records), and each report is right: so
    # several predictions may match one gold interaction, which recall counts once.
    gold_match=GoldMatch(name="npc", many_to_one=True),
    # 2: with a roster bound, an interaction whose NPC is a party member is dropped (stored
    # extractions of version 1 kept them).
    version="2",
)
