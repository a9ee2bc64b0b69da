"""The `item-events` lane: registers `dnd/item-event-list`, its modules (optional `npcs` slot
for grounding `from`/`to`) and its lane rules."""

from __future__ import annotations

from pydantic import BaseModel

from notarius_dagster.dnd.event_lists import ids_problems
from notarius_dagster.dnd.grounding import NPC_KIND, NPCS_SLOT, grounding_problems
from notarius_dagster.dnd.item_events.model import ITEMS, KIND, ItemEventList
from notarius_dagster.dnd.item_events.modules import (
    GROUNDED,
    build_extractor,
    build_merger,
    build_normalizer,
)
from notarius_dagster.engine.artifact_kinds import ArtifactKind, register_kind
from notarius_dagster.engine.catalog import CATALOG, ModuleSpec, ReferenceSlot
from notarius_dagster.engine.contracts import ModuleOutput
from notarius_dagster.engine.models import SourceRef
from notarius_dagster.engine.validators import ValidationContext, register_validator


def item_event_source_refs(artifact: BaseModel) -> list[SourceRef]:
    assert isinstance(artifact, ItemEventList)
    return [ref for event in artifact.item_events for ref in event.source_refs]


ITEM_EVENT_KIND = register_kind(ArtifactKind(
    kind=KIND, model=ItemEventList, schema_id="notarius.dnd.item_event_list",
    schema_name="dnd_item_event_list_v1", schema_version="v1", items_field=ITEMS,
    project_source_refs=item_event_source_refs,
))


@register_validator("dnd.item_events.npc_grounding")
def parties_grounded(ctx: ValidationContext, output: ModuleOutput) -> list[str]:
    """A `from` or `to` that names an NPC of the `npcs` reference carries that NPC's id."""
    return grounding_problems(ctx, output, ITEMS, GROUNDED)


@register_validator("dnd.item_events.ids")
def item_event_ids(ctx: ValidationContext, output: ModuleOutput) -> list[str]:
    return ids_problems(output, ITEMS)


CATALOG.register(ModuleSpec(
    key="dnd.item_events.extract", stage="extract", requires=("chunks",),
    provides=("item_events",), artifact_kind=KIND,
    default_validators=("dnd.item_events.npc_grounding",),
    slots=(ReferenceSlot(name=NPCS_SLOT, accepted_kinds=(NPC_KIND,)),)), build_extractor)
CATALOG.register(ModuleSpec(key="dnd.item_events.merge", stage="merge", requires=("chunks",),
                            artifact_kind=KIND), build_merger)
CATALOG.register(ModuleSpec(key="dnd.item_events.normalize", stage="normalize",
                            requires=("chunks",), artifact_kind=KIND,
                            default_validators=("dnd.item_events.ids",)), build_normalizer)
