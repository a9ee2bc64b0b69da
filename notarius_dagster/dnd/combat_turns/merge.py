"""The `combat-turns` lane's merge: the event merge, plus the rule of the game that a creature
takes one turn per round."""

from __future__ import annotations

from typing import Any

from notarius_dagster.dnd.event_lists import EventMerger


class CombatTurnMerger(EventMerger):
    """A turn told in two chunks that are not neighbours at its border (a line further on says
    more of it, "the imps' stings land") is one turn when the two records agree in every
    field and name the round: a creature takes one turn per round. Records without a round
    fold only as every event does (`EventMerger`). An actor grounded to an NPC is compared by
    its NPC id, not its spelling."""

    def identity(self, record: dict[str, Any]) -> dict[str, Any]:
        """An actor grounded to an NPC is that NPC however the chunk spelt it ("imps" and
        "imp", both `npc-imps`)."""
        same = super().identity(record)
        if same.get("actor_npc_id"):
            same.pop("actor", None)
        return same

    def one_event(self, record: dict[str, Any]) -> bool:
        return record.get("round") is not None
