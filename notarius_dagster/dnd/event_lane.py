"""Registration shared by the four grounded event lanes (combat turns, spells, item events,
NPC interactions): the artifact kind with its typed source-reference projection, the NPC
grounding and id rules, and the extract/merge/normalize specs. Each lane's `__init__.py` calls
`register_event_lane` once with what is its own."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel

from notarius_dagster.dnd.event_lists import EventMerger, EventNormalizer, ids_problems
from notarius_dagster.dnd.grounding import grounding_problems
from notarius_dagster.engine.artifact_kinds import ArtifactKind, register_kind
from notarius_dagster.engine.catalog import CATALOG, ModuleSpec, ReferenceSlot
from notarius_dagster.engine.contracts import ModuleOutput
from notarius_dagster.engine.models import SourceRef
from notarius_dagster.engine.validators import ValidationContext, register_validator

Factory = Callable[[dict[str, Any]], Any]


def register_event_lane(
    *,
    module_prefix: str,
    kind: str,
    model: type[BaseModel],
    schema_stem: str,
    items: str,
    grounded: Sequence[tuple[str, str]],
    slots: tuple[ReferenceSlot, ...],
    extractor: Factory,
    id_prefix: str,
) -> ArtifactKind:
    """Register one event lane. `grounded` lists the (name field, id field) pairs that NPC
    grounding fills and the `<prefix>.npc_grounding` rule checks; normalized records are
    numbered `<id_prefix>-0001`, ... in source order."""

    def merger(options: dict[str, Any]) -> EventMerger:
        return EventMerger(kind=kind, items_field=items, options=options)

    def normalizer(options: dict[str, Any]) -> EventNormalizer:
        return EventNormalizer(kind=kind, items_field=items, id_prefix=id_prefix, options=options)

    def project_source_refs(artifact: BaseModel) -> list[SourceRef]:
        assert isinstance(artifact, model)
        return [ref for record in getattr(artifact, items) for ref in record.source_refs]

    artifact_kind = register_kind(ArtifactKind(
        kind=kind, model=model, schema_id=f"notarius.dnd.{schema_stem}",
        schema_name=f"dnd_{schema_stem}_v1", schema_version="v1", items_field=items,
        project_source_refs=project_source_refs))

    @register_validator(f"{module_prefix}.npc_grounding")
    def names_grounded(ctx: ValidationContext, output: ModuleOutput) -> list[str]:
        """A name that matches an NPC of the `npcs` reference carries that NPC's id."""
        return grounding_problems(ctx, output, items, grounded)

    @register_validator(f"{module_prefix}.ids")
    def record_ids(ctx: ValidationContext, output: ModuleOutput) -> list[str]:
        return ids_problems(output, items)

    CATALOG.register(ModuleSpec(
        key=f"{module_prefix}.extract", stage="extract", requires=("chunks",),
        provides=(items,), artifact_kind=kind,
        default_validators=(f"{module_prefix}.npc_grounding",), slots=slots), extractor)
    CATALOG.register(ModuleSpec(key=f"{module_prefix}.merge", stage="merge",
                                requires=("chunks",), artifact_kind=kind), merger)
    CATALOG.register(ModuleSpec(key=f"{module_prefix}.normalize", stage="normalize",
                                requires=("chunks",), artifact_kind=kind,
                                default_validators=(f"{module_prefix}.ids",)), normalizer)
    return artifact_kind
