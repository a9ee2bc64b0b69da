"""`dnd/combat-turn-list`: one actor's turn in a fight, with its outcome and the units that
show it. `actor_npc_id` comes from NPC grounding, never from the model."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from notarius_dagster.dnd.npcs.model import NPC_ID_PATTERN
from notarius_dagster.dnd.records import OneLine, Record

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
    actor: OneLine = Field(min_length=1, max_length=120)
    actor_npc_id: str | None = Field(pattern=NPC_ID_PATTERN)
    action: str = Field(min_length=1, max_length=300)
    targets: list[OneLine] = Field(max_length=20)
    outcome: CombatOutcome


class OutcomeAnswer(BaseModel):
    # The answer's outcome (it replaces CombatOutcome in the answer model) is looser than the
    # record's: damage may come as a number, and lengths are the record's to check. A comment,
    # not a docstring: a docstring would enter the answer schema the model sees.
    hit: bool | None = None
    damage: str | int | None = None
    effect: str | None = None
