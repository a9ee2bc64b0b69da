"""The `npcs` lane: the session's non-player characters, deduplicated by name and alias; the
other lanes ground character names against its artifact."""

from __future__ import annotations

from notarius_dagster.dnd.llm_extract import llm_extractor
from notarius_dagster.dnd.npcs.model import Npc
from notarius_dagster.dnd.npcs.modules import NpcMerger, NpcNormalizer, party_filtered_payload
from notarius_dagster.dnd.records import ids_rule
from notarius_dagster.dnd.roster import roster_slot
from notarius_dagster.engine.lane_models import AnswerSpec
from notarius_dagster.engine.lanes import GoldMatch, LaneModules, LaneSpec, ReportTable

LANE = LaneSpec(
    lane_id="npcs",
    kind="dnd/npc-list",
    record_model=Npc,
    answer=AnswerSpec(
        "NpcAnswer",
        doc="What the model is asked for: names and the unit ids (the `[n]` markers) it cites.",
        max_cited=20,  # citation budget (docs/lanes.md, "Citation budgets")
    ),
    modules=LaneModules(
        extract=llm_extractor(party_filtered_payload),
        merge=NpcMerger,
        normalize=NpcNormalizer,
        rules=(ids_rule(not_unique="npc ids are not unique"),),
    ),
    slots=(roster_slot(),),
    id_prefix="npc",
    support_fields=("name", "aliases"),
    preview_fields=("id", "name"),
    report=ReportTable(
        title="NPCs",
        noun="NPCs",
        section_id="npcs",
        layout="cards",
        columns=(("Name", "name"), ("Also called", "aliases"), ("Description", "description")),
        order=20,
    ),
    # An NPC by its name or any alias, on either side.
    gold_match=GoldMatch(name="name", aliases="aliases"),
)
