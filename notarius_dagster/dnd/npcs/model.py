"""`dnd/npc-list`: non-player characters, each with the transcript units that show them."""

from __future__ import annotations

from pydantic import Field

from notarius_dagster.dnd.records import OneLine, Record

NPC_ID_PATTERN = r"^npc-[a-z0-9-]{1,60}$"


class Npc(Record):
    """A non-player character. `id` is assigned by normalization (stable across runs)."""

    id: str | None = Field(default=None, pattern=NPC_ID_PATTERN)
    name: OneLine = Field(min_length=1, max_length=120)
    aliases: list[OneLine] = Field(default_factory=list, max_length=20)
    description: str = Field(default="", max_length=600)
