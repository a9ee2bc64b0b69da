"""The `spells` lane: registers `dnd/spell-list`, its modules (optional `npcs` slot for
grounding casters) and its lane rules."""

from __future__ import annotations

from pydantic import BaseModel

from notarius_dagster.dnd.event_lists import ids_problems
from notarius_dagster.dnd.grounding import NPC_KIND, NPCS_SLOT, grounding_problems
from notarius_dagster.dnd.spells.model import ITEMS, KIND, SpellList
from notarius_dagster.dnd.spells.modules import (
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


def spell_source_refs(artifact: BaseModel) -> list[SourceRef]:
    assert isinstance(artifact, SpellList)
    return [ref for spell in artifact.spells for ref in spell.source_refs]


SPELL_KIND = register_kind(ArtifactKind(
    kind=KIND, model=SpellList, schema_id="notarius.dnd.spell_list",
    schema_name="dnd_spell_list_v1", schema_version="v1", items_field=ITEMS,
    project_source_refs=spell_source_refs,
))


@register_validator("dnd.spells.npc_grounding")
def casters_grounded(ctx: ValidationContext, output: ModuleOutput) -> list[str]:
    """A caster that names an NPC of the `npcs` reference carries that NPC's id."""
    return grounding_problems(ctx, output, ITEMS, GROUNDED)


@register_validator("dnd.spells.ids")
def spell_ids(ctx: ValidationContext, output: ModuleOutput) -> list[str]:
    return ids_problems(output, ITEMS)


CATALOG.register(ModuleSpec(
    key="dnd.spells.extract", stage="extract", requires=("chunks",), provides=("spells",),
    artifact_kind=KIND, default_validators=("dnd.spells.npc_grounding",),
    slots=(ReferenceSlot(name=NPCS_SLOT, accepted_kinds=(NPC_KIND,)),)), build_extractor)
CATALOG.register(ModuleSpec(key="dnd.spells.merge", stage="merge", requires=("chunks",),
                            artifact_kind=KIND), build_merger)
CATALOG.register(ModuleSpec(key="dnd.spells.normalize", stage="normalize", requires=("chunks",),
                            artifact_kind=KIND, default_validators=("dnd.spells.ids",)),
                 build_normalizer)
