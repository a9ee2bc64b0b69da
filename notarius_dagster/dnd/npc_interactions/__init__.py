"""The `npc-interactions` lane: registers `dnd/npc-interaction-list`, its modules (the
required `npcs` slot: an interaction is about a known NPC) and its lane rules."""

from __future__ import annotations

from pydantic import BaseModel

from notarius_dagster.dnd.event_lists import ids_problems
from notarius_dagster.dnd.grounding import NPC_KIND, NPCS_SLOT, grounding_problems
from notarius_dagster.dnd.npc_interactions.model import ITEMS, KIND, NpcInteractionList
from notarius_dagster.dnd.npc_interactions.modules import (
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


def interaction_source_refs(artifact: BaseModel) -> list[SourceRef]:
    assert isinstance(artifact, NpcInteractionList)
    return [ref for item in artifact.npc_interactions for ref in item.source_refs]


INTERACTION_KIND = register_kind(ArtifactKind(
    kind=KIND, model=NpcInteractionList, schema_id="notarius.dnd.npc_interaction_list",
    schema_name="dnd_npc_interaction_list_v1", schema_version="v1", items_field=ITEMS,
    project_source_refs=interaction_source_refs,
))


@register_validator("dnd.npc_interactions.npc_grounding")
def npcs_grounded(ctx: ValidationContext, output: ModuleOutput) -> list[str]:
    """An interaction whose `npc` names an NPC of the `npcs` reference carries its id."""
    return grounding_problems(ctx, output, ITEMS, GROUNDED)


@register_validator("dnd.npc_interactions.ids")
def interaction_ids(ctx: ValidationContext, output: ModuleOutput) -> list[str]:
    return ids_problems(output, ITEMS)


CATALOG.register(ModuleSpec(
    key="dnd.npc_interactions.extract", stage="extract", requires=("chunks",),
    provides=("npc_interactions",), artifact_kind=KIND,
    default_validators=("dnd.npc_interactions.npc_grounding",),
    slots=(ReferenceSlot(name=NPCS_SLOT, required=True, accepted_kinds=(NPC_KIND,)),)),
    build_extractor)
CATALOG.register(ModuleSpec(key="dnd.npc_interactions.merge", stage="merge",
                            requires=("chunks",), artifact_kind=KIND), build_merger)
CATALOG.register(ModuleSpec(key="dnd.npc_interactions.normalize", stage="normalize",
                            requires=("chunks",), artifact_kind=KIND,
                            default_validators=("dnd.npc_interactions.ids",)), build_normalizer)
