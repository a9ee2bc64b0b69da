"""`dnd/npc-interaction-list`: the party dealing with one NPC (talk, trade, threat, help,
combat, other), who took part, and what happened. `npc_id` comes from grounding against the
`npcs` lane, never from the model."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from notarius_dagster.dnd.npcs.model import NPC_ID_PATTERN
from notarius_dagster.dnd.records import OneLine, Record

InteractionKind = Literal["talk", "trade", "threat", "help", "combat", "other"]


class NpcInteraction(Record):
    """One interaction with one NPC. `id` is assigned by normalization
    (`interaction-0001` in source order)."""

    id: str | None = Field(default=None, pattern=r"^interaction-[0-9]{4,}$")
    npc: OneLine = Field(min_length=1, max_length=120)
    npc_id: str | None = Field(pattern=NPC_ID_PATTERN)
    participants: list[OneLine] = Field(max_length=20)
    kind: InteractionKind
    summary: str = Field(max_length=600)
