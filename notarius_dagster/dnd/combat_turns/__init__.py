"""The `combat-turns` lane: registers `dnd/combat-turn-list`, its scene-gated extractor (the
required `scene_descriptions` slot and the optional `npcs` slot), merge, normalize and lane
rules."""

from __future__ import annotations

from pydantic import BaseModel

from notarius_dagster.dnd.combat_turns.model import ITEMS, KIND, CombatTurnList
from notarius_dagster.dnd.combat_turns.modules import (
    GROUNDED,
    SCENE_KIND,
    SCENES_SLOT,
    build_extractor,
    build_merger,
    build_normalizer,
)
from notarius_dagster.dnd.event_lists import ids_problems
from notarius_dagster.dnd.grounding import NPC_KIND, NPCS_SLOT, grounding_problems
from notarius_dagster.engine.artifact_kinds import ArtifactKind, register_kind
from notarius_dagster.engine.catalog import CATALOG, ModuleSpec, ReferenceSlot
from notarius_dagster.engine.contracts import ModuleOutput
from notarius_dagster.engine.models import SourceRef
from notarius_dagster.engine.validators import ValidationContext, register_validator


def combat_source_refs(artifact: BaseModel) -> list[SourceRef]:
    assert isinstance(artifact, CombatTurnList)
    return [ref for turn in artifact.combat_turns for ref in turn.source_refs]


COMBAT_KIND = register_kind(ArtifactKind(
    kind=KIND, model=CombatTurnList, schema_id="notarius.dnd.combat_turn_list",
    schema_name="dnd_combat_turn_list_v1", schema_version="v1", items_field=ITEMS,
    project_source_refs=combat_source_refs,
))


@register_validator("dnd.combat_turns.npc_grounding")
def actors_grounded(ctx: ValidationContext, output: ModuleOutput) -> list[str]:
    """An actor that names an NPC of the `npcs` reference carries that NPC's id."""
    return grounding_problems(ctx, output, ITEMS, GROUNDED)


@register_validator("dnd.combat_turns.ids")
def turn_ids(ctx: ValidationContext, output: ModuleOutput) -> list[str]:
    return ids_problems(output, ITEMS)


CATALOG.register(ModuleSpec(
    key="dnd.combat_turns.extract", stage="extract", requires=("chunks",),
    provides=("combat_turns",), artifact_kind=KIND,
    default_validators=("dnd.combat_turns.npc_grounding",),
    slots=(ReferenceSlot(name=SCENES_SLOT, required=True, accepted_kinds=(SCENE_KIND,)),
           ReferenceSlot(name=NPCS_SLOT, accepted_kinds=(NPC_KIND,)))), build_extractor)
CATALOG.register(ModuleSpec(key="dnd.combat_turns.merge", stage="merge", requires=("chunks",),
                            artifact_kind=KIND), build_merger)
CATALOG.register(ModuleSpec(key="dnd.combat_turns.normalize", stage="normalize",
                            requires=("chunks",), artifact_kind=KIND,
                            default_validators=("dnd.combat_turns.ids",)), build_normalizer)
