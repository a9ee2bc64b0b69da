"""`dnd/item-event-list`: an item changing hands or state (acquired, given, lost, used,
bought, sold, destroyed), with who it came from and went to. The JSON key is `from` (a Python
keyword, hence the field `from_` with that alias); NPC ids come from grounding."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from notarius_dagster.dnd.npcs.model import NPC_ID_PATTERN
from notarius_dagster.dnd.records import OneLine, Record

ItemEventKind = Literal["acquired", "given", "lost", "used", "bought", "sold", "destroyed"]


class ItemEvent(Record):
    """One event of one item. `quantity` is null when not said; `id` is assigned by
    normalization (`item-event-0001` in source order)."""

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)
    id: str | None = Field(default=None, pattern=r"^item-event-[0-9]{4,}$")
    item: OneLine = Field(min_length=1, max_length=120)
    event: ItemEventKind
    from_: OneLine | None = Field(alias="from", max_length=120)
    to: OneLine | None = Field(max_length=120)
    from_npc_id: str | None = Field(pattern=NPC_ID_PATTERN)
    to_npc_id: str | None = Field(pattern=NPC_ID_PATTERN)
    quantity: int | None = Field(ge=0, le=1_000_000_000)
