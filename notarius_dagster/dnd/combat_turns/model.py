"""`dnd/combat-turn-list`: one actor's turn in a fight, with its outcome and the units that
show it. `actor_npc_id` comes from NPC grounding, never from the model."""

from __future__ import annotations

from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from notarius_dagster.dnd.npcs.model import NPC_ID_PATTERN
from notarius_dagster.dnd.records import Record

KIND: Final = "dnd/combat-turn-list"
ITEMS = "combat_turns"
TURN_ID_PATTERN = r"^turn-[0-9]{4,}$"


class CombatOutcome(BaseModel):
    """What the turn did: `hit` is null when the transcript does not say (or no attack)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    hit: bool | None
    damage: str | None = Field(max_length=80)
    effect: str | None = Field(max_length=300)


class CombatTurn(Record):
    """One actor's turn. `id` is assigned by normalization (`turn-0001` in source order)."""

    id: str | None = Field(default=None, pattern=TURN_ID_PATTERN)
    round: int | None = Field(ge=0, le=10_000)
    actor: str = Field(min_length=1, max_length=120)
    actor_npc_id: str | None = Field(pattern=NPC_ID_PATTERN)
    action: str = Field(min_length=1, max_length=300)
    targets: list[str] = Field(max_length=20)
    outcome: CombatOutcome


class CombatTurnList(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["dnd/combat-turn-list"] = KIND
    schema_version: Literal["v1"] = "v1"
    source_id: str
    combat_turns: list[CombatTurn]


class OutcomeAnswer(BaseModel):
    hit: bool | None = None
    damage: str | int | None = None
    effect: str | None = None


class CombatTurnAnswerItem(BaseModel):
    """What the model is asked for: the turn and the unit ids (the `[n]` markers) it cites."""

    round: int | None = Field(default=None, ge=0, le=10_000)
    actor: str = Field(min_length=1, max_length=120)
    action: str = Field(min_length=1, max_length=300)
    targets: list[str] = Field(default_factory=list, max_length=20)
    outcome: OutcomeAnswer = Field(default_factory=OutcomeAnswer)
    unit_ids: list[int] = Field(min_length=1, max_length=50)


class CombatAnswer(BaseModel):
    combat_turns: list[CombatTurnAnswerItem] = Field(max_length=60)
