"""`dnd/npc-list`: non-player characters, each with the transcript units that show them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from notarius_dagster.dnd.records import Record

KIND = "dnd/npc-list"
NPC_ID_PATTERN = r"^npc-[a-z0-9-]{1,60}$"


class Npc(Record):
    """A non-player character. `id` is assigned by normalization (stable across runs)."""

    id: str | None = Field(default=None, pattern=NPC_ID_PATTERN)
    name: str = Field(min_length=1, max_length=120)
    aliases: list[str] = Field(default_factory=list, max_length=20)
    description: str = Field(default="", max_length=600)


class NpcList(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["dnd/npc-list"] = "dnd/npc-list"
    schema_version: Literal["v1"] = "v1"
    source_id: str
    npcs: list[Npc]


class NpcAnswerItem(BaseModel):
    """What the model is asked for: names and the unit ids (the `[n]` markers) it cites."""

    name: str = Field(min_length=1, max_length=120)
    aliases: list[str] = Field(default_factory=list, max_length=20)
    description: str = Field(default="", max_length=600)
    unit_ids: list[int] = Field(min_length=1, max_length=50)


class NpcAnswer(BaseModel):
    npcs: list[NpcAnswerItem] = Field(max_length=40)
