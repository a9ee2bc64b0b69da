"""The typed inputs of the report: a reader's view of the published bundle documents.

These are the consumer-side shapes of the files bundle.md describes (lane files of schema
version v1, the evidence context, warnings, rejections, the parts of the index and manifest the
page shows), not the producers' models (a warning, whose fields are all the report shows, is the
engine's model read leniently): the report reads what was published and ignores keys it does
not use, as bundle.md asks of every consumer. Every string here is untrusted text to the
renderer, whatever file it came from."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from notarius_dagster.engine.models import RunWarning


class View(BaseModel):
    """Frozen, and blind to keys the report does not use (newer manifests add keys)."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)


class Ref(View):
    """A citation: an inclusive range of units, resolved by document position."""

    source_id: str
    start_unit_id: int
    end_unit_id: int


class Scene(View):
    id: str = Field(alias="scene_id")  # every record of the report is known by its `id`
    kind: str
    title: str
    summary: str
    source_ref: Ref


class Npc(View):
    id: str
    name: str
    aliases: tuple[str, ...] = ()
    description: str = ""
    source_refs: tuple[Ref, ...]


class Outcome(View):
    hit: bool | None = None
    damage: str | None = None
    effect: str | None = None


class CombatTurn(View):
    id: str
    round: int | None = None
    actor: str
    actor_npc_id: str | None = None
    action: str
    targets: tuple[str, ...] = ()
    outcome: Outcome = Outcome()
    source_refs: tuple[Ref, ...]


class Spell(View):
    id: str
    caster: str
    caster_npc_id: str | None = None
    spell: str
    level: int | None = None
    targets: tuple[str, ...] = ()
    outcome: str | None = None
    source_refs: tuple[Ref, ...]


class ItemEvent(View):
    id: str
    item: str
    event: str
    from_: str | None = Field(default=None, alias="from")
    to: str | None = None
    from_npc_id: str | None = None
    to_npc_id: str | None = None
    quantity: int | None = None
    source_refs: tuple[Ref, ...]


class Interaction(View):
    id: str
    npc: str
    npc_id: str | None = None
    participants: tuple[str, ...] = ()
    kind: str
    summary: str = ""
    source_refs: tuple[Ref, ...]


# A lane file is one list of records under its kind's key; each view reads that key as
# `records`, so the renderer walks any lane's records the same way.
class SceneList(View):
    records: tuple[Scene, ...] = Field(alias="scene_descriptions")


class NpcList(View):
    records: tuple[Npc, ...] = Field(alias="npcs")


class CombatTurnList(View):
    records: tuple[CombatTurn, ...] = Field(alias="combat_turns")


class SpellList(View):
    records: tuple[Spell, ...] = Field(alias="spells")


class ItemEventList(View):
    records: tuple[ItemEvent, ...] = Field(alias="item_events")


class InteractionList(View):
    records: tuple[Interaction, ...] = Field(alias="npc_interactions")


Cell = str | int | float | bool | None


class TableRecord(View):
    """A record of a lane the report has no section of its own for, as its `LaneSpec` says to
    show it (`report_table`): its id, the declared columns' values and its citations."""

    id: str
    cells: tuple[Cell, ...]
    source_refs: tuple[Ref, ...]


class TableList(View):
    """Such a lane's records, with the section title, the noun and the column headers its
    `LaneSpec` declares (read with the lane's own record model, `loader.py`)."""

    title: str
    noun: str
    headers: tuple[str, ...]
    records: tuple[TableRecord, ...]


LaneDocument = (
    SceneList | NpcList | CombatTurnList | SpellList | ItemEventList | InteractionList | TableList
)

# The D&D artifact kinds the report renders (schema version v1), with their reader's view.
KNOWN_KINDS: dict[str, type[LaneDocument]] = {
    "dnd/scene-description-list": SceneList,
    "dnd/npc-list": NpcList,
    "dnd/combat-turn-list": CombatTurnList,
    "dnd/spell-list": SpellList,
    "dnd/item-event-list": ItemEventList,
    "dnd/npc-interaction-list": InteractionList,
}
SUPPORTED_SCHEMA_VERSION = "v1"


class EvidenceUnit(View):
    unit_id: int
    kind: str = "utterance"
    text: str
    metadata: dict[str, Any] = {}


class EvidenceReference(View):
    source_ref: Ref
    lanes: tuple[str, ...]


class EvidenceWindow(View):
    start_unit_id: int
    end_unit_id: int
    references: tuple[EvidenceReference, ...]
    units: tuple[EvidenceUnit, ...]


class Evidence(View):
    window_units: int
    lanes: tuple[str, ...]
    contexts: tuple[EvidenceWindow, ...]


class WarningEntry(RunWarning):
    """The engine's warning (`RunWarning`: code, message, lane, chunk) as a reader takes it:
    blind to keys added later, and any stage name, not only the stages this version knows."""

    model_config = View.model_config
    stage: str  # type: ignore[assignment]  # wider than the engine's Literal, on purpose


class RejectionEntry(View):
    stage: str
    lane: str | None = None
    module: str | None = None
    chunk_id: str | None = None
    validator: str
    message: str
    attempts: int | None = None


class LaneSummary(View):
    """One configured lane as the manifest records it (accepted or not)."""

    lane_id: str
    kind: str
    status: str
    records: int = 0
    warnings: int = 0
    rejections: int = 0


class LaneOutput(View):
    """One accepted lane file: `document` is its typed view when the report knows the kind and
    schema version, else None (the page lists it without rendering its records)."""

    lane_id: str
    kind: str
    schema_version: str
    records: int
    document: LaneDocument | None = None


class ReportInputs(View):
    """Everything the page shows, read from one bundle version."""

    session_id: str
    run_id: str
    pipeline_id: str
    profile: str
    pipeline_digest: str
    status: str
    validation_status: str
    source_units: int
    chunks: int
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    lanes: tuple[LaneSummary, ...] = ()
    outputs: tuple[LaneOutput, ...] = ()
    unit_order: tuple[int, ...] = ()
    evidence: Evidence | None = None
    warnings: tuple[WarningEntry, ...] = ()
    rejections: tuple[RejectionEntry, ...] = ()
