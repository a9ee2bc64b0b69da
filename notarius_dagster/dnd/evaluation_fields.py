"""What the scorer matches each D&D lane's records on (see `engine/evaluation.py` and
docs/evaluation.md): the artifact kind's list field, the name compared by alias-aware
normalized matching, the secondary fields that must agree when both sides set them, and where
the citations are. Kinds are spelled out rather than imported so this table does not depend
on how the lane packages are laid out."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from notarius_dagster.engine.evaluation import MatchFields

DND_MATCH_FIELDS: Mapping[str, MatchFields] = MappingProxyType(
    {
        # An NPC by its name or any alias, on either side.
        "dnd/npc-list": MatchFields(items="npcs", name="name", aliases="aliases"),
        # A scene by its kind over a unit range: a chunk's scene is right when it has the kind of
        # a gold scene it overlaps; several chunks may fall inside one gold scene.
        "dnd/scene-description-list": MatchFields(
            items="scene_descriptions", name="kind", refs="source_ref", many_to_one=True
        ),
        # A turn by its actor, and its round when both say one.
        "dnd/combat-turn-list": MatchFields(items="combat_turns", name="actor", also=("round",)),
        # A casting by the spell's name, and its caster.
        "dnd/spell-list": MatchFields(items="spells", name="spell", also=("caster",)),
        # An item event by the item, and what happened to it.
        "dnd/item-event-list": MatchFields(items="item_events", name="item", also=("event",)),
        # An interaction by the NPC it is with. Chunked extraction reports a long dealing once per
        # chunk it spans (the merge folds only identical records), and each report is right: so
        # several predictions may match one gold interaction, which recall counts once.
        "dnd/npc-interaction-list": MatchFields(
            items="npc_interactions", name="npc", many_to_one=True
        ),
    }
)
