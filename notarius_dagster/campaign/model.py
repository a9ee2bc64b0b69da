"""`codex.json`: the campaign codex, one document per campaign (docs/campaign.md). This model
is its single schema source (`schemas/notarius.campaign.codex.json`).

Everything in it comes from published lane artifacts of the campaign's sessions and from the
roster: names, ids, kinds, counts, titles and source references. No transcript text, no
prompts, no descriptions or summaries, no paths, no run ids or clocks (the same lane files give
the same codex, byte for byte)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from notarius_dagster.engine.models import SourceRef

CODEX_SCHEMA_ID = "notarius.campaign.codex"
CODEX_SCHEMA_NAME = "notarius_campaign_codex_v1"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CodexPartyMember(_Strict):
    """A player character of the roster: never an NPC of the codex. `labels` are the
    transcript's labels for its player."""

    character: str
    aliases: list[str]
    labels: list[str]


class CodexSession(_Strict):
    """A session of the campaign, in campaign order (`position` 1, 2, ...). `published` is
    false for a session the roster lists but whose bundle does not exist (not run yet, or
    deleted); it then contributes nothing. `lanes_digest` covers the lane files read."""

    id: str
    position: int = Field(ge=1)
    number: int | None = None
    date: str | None = None
    title: str | None = None
    published: bool
    lanes: list[str] = Field(description="the lane kinds read from its bundle")
    lanes_digest: str | None = None


class Appearance(_Strict):
    """One NPC record of one session's `npcs` artifact."""

    session: str
    npc_id: str = Field(description="the record's id in that session's npcs artifact")
    name: str
    aliases: list[str]
    source_refs: list[SourceRef]


MergeReason = Literal["same_name", "declared_alias", "roster_npc"]


class Merge(_Strict):
    """One link that joined two appearances into one entry: the later appearance (campaign
    order), the one it was linked to, the signal and the normalized name that carries it."""

    session: str
    npc_id: str
    to_session: str
    to_npc_id: str
    reason: MergeReason
    key: str = Field(
        description="the normalized name the signal is about (for `roster_npc`, the known "
        "NPC's name)"
    )


class CodexNpc(_Strict):
    """One character across sessions."""

    id: str = Field(pattern=r"^npc-[a-z0-9-]{1,60}$")
    name: str
    aliases: list[str]
    known: bool = Field(description="the roster lists this NPC")
    first_session: str
    last_session: str
    sessions: list[str]
    appearances: list[Appearance]
    merges: list[Merge]


PossiblyReason = Literal["shared_alias", "name_within_name", "merge_would_join_one_session"]


class PossiblySame(_Strict):
    """Two entries that may be one character: listed, never merged."""

    a: str
    b: str
    reason: PossiblyReason
    key: str


class ItemEvent(_Strict):
    """One event of the ledger, in campaign order (`position` 1, 2, ...)."""

    position: int = Field(ge=1)
    session: str
    event_id: str
    item: str
    item_key: str
    event: str
    from_: str | None = Field(alias="from")
    to: str | None
    quantity: int | None
    source_refs: list[SourceRef]

    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, serialize_by_alias=True
    )


HolderStatus = Literal["held", "lost", "destroyed", "unknown"]


class ItemHolder(_Strict):
    """An item's state after the last event that says who has it: `holder` (null when the
    events say it was lost or destroyed, or never say who took it) and the event that says so."""

    item: str
    item_key: str
    status: HolderStatus
    holder: str | None
    session: str
    event_id: str
    events: int = Field(ge=1)


class CasterSpells(_Strict):
    caster: str
    caster_key: str
    spell: str
    spell_key: str
    count: int = Field(ge=1)
    sessions: list[str]


class SpellTotal(_Strict):
    spell: str
    spell_key: str
    count: int = Field(ge=1)
    casters: list[str]
    sessions: list[str]


class CodexScene(_Strict):
    session: str
    scene_id: str
    kind: str
    title: str
    start_unit_id: int
    end_unit_id: int


class Codex(_Strict):
    """`codex.json`."""

    kind: Literal["notarius/campaign-codex"] = "notarius/campaign-codex"
    schema_version: Literal["v1"] = "v1"
    campaign: str
    title: str | None = None
    roster_digest: str
    party: list[CodexPartyMember] = Field(
        default_factory=list, description="the roster's player characters (never NPCs)"
    )
    dm: list[str] = Field(
        default_factory=list, description="the roster's labels for the DM (never a character)"
    )
    sessions: list[CodexSession]
    npcs: list[CodexNpc]
    possibly_same: list[PossiblySame]
    item_events: list[ItemEvent]
    item_holders: list[ItemHolder]
    spells_by_caster: list[CasterSpells]
    spells: list[SpellTotal]
    scenes: list[CodexScene]


class CampaignEntry(_Strict):
    """One campaign in `index.json`: where its codex and page are (relative to the index)."""

    campaign: str
    title: str | None = None
    codex: str
    page: str
    sessions: list[str] = Field(description="its sessions in campaign order (published or not)")
    published: list[str]
    digest: str = Field(description="digest of the codex document")


class CampaignIndex(_Strict):
    """`<bundles>/.campaigns/index.json`: every campaign with a codex."""

    kind: Literal["notarius/campaign-index"] = "notarius/campaign-index"
    schema_version: Literal["v1"] = "v1"
    campaigns: list[CampaignEntry]


def codex_schemas() -> dict[str, dict[str, object]]:
    """The JSON Schemas of the campaign documents, by schema id."""
    out: dict[str, dict[str, object]] = {}
    for model, schema_id, name in (
        (Codex, CODEX_SCHEMA_ID, CODEX_SCHEMA_NAME),
        (CampaignIndex, "notarius.campaign.index", "notarius_campaign_index_v1"),
    ):
        schema = model.model_json_schema(by_alias=True)
        schema["$id"] = schema_id
        schema["title"] = name
        out[schema_id] = schema
    return out
