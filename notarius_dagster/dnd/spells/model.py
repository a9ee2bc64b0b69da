"""`dnd/spell-list`: a spell cast, by whom, at what level, on whom, with what result.
`caster_npc_id` comes from NPC grounding, never from the model."""

from __future__ import annotations

from pydantic import Field

from notarius_dagster.dnd.npcs.model import NPC_ID_PATTERN
from notarius_dagster.dnd.records import OneLine, Record


class SpellCast(Record):
    """One casting. `level` is the slot level (0 for a cantrip), null when not said; `id` is
    assigned by normalization (`spell-0001` in source order)."""

    id: str | None = Field(default=None, pattern=r"^spell-[0-9]{4,}$")
    caster: OneLine = Field(min_length=1, max_length=120)
    caster_npc_id: str | None = Field(pattern=NPC_ID_PATTERN)
    spell: OneLine = Field(min_length=1, max_length=120)
    level: int | None = Field(ge=0, le=9)
    targets: list[OneLine] = Field(max_length=20)
    outcome: str | None = Field(max_length=300)
