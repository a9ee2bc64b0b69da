"""The `npcs` lane: registers `dnd/npc-list`, its modules and its lane rules."""

from __future__ import annotations

from notarius_dagster.dnd.npcs.model import KIND, NpcList
from notarius_dagster.dnd.npcs.modules import NpcMerger, NpcNormalizer, build_extractor
from notarius_dagster.engine.artifact_kinds import ArtifactKind, register_kind
from notarius_dagster.engine.catalog import CATALOG, ModuleSpec
from notarius_dagster.engine.contracts import ModuleOutput
from notarius_dagster.engine.validators import ValidationContext, register_validator

NPC_KIND = register_kind(
    ArtifactKind(
        kind=KIND,
        model=NpcList,
        schema_id="notarius.dnd.npc_list",
        schema_name="dnd_npc_list_v1",
        schema_version="v1",
        items_field="npcs",
        project_source_refs=lambda artifact: [
            r
            for npc in artifact.npcs  # type: ignore[attr-defined]
            for r in npc.source_refs
        ],
    )
)


@register_validator("dnd.npcs.ids")
def npc_ids_unique_and_set(ctx: ValidationContext, output: ModuleOutput) -> list[str]:
    """After normalization every NPC has an id and ids are unique."""
    npcs = (output.payload or {}).get("npcs", [])
    ids = [n.get("id") for n in npcs]
    problems = [f"npcs[{i}]: missing id" for i, v in enumerate(ids) if not v]
    if len(set(ids)) != len(ids):
        problems.append("npc ids are not unique")
    return problems


CATALOG.register(
    ModuleSpec(
        key="dnd.npcs.extract",
        stage="extract",
        requires=("chunks",),
        provides=("npcs",),
        artifact_kind=KIND,
        version="1",
    ),
    build_extractor,
)
CATALOG.register(
    ModuleSpec(key="dnd.npcs.merge", stage="merge", requires=("chunks",), artifact_kind=KIND),
    NpcMerger,
)
CATALOG.register(
    ModuleSpec(
        key="dnd.npcs.normalize",
        stage="normalize",
        requires=("chunks",),
        artifact_kind=KIND,
        default_validators=("dnd.npcs.ids",),
    ),
    NpcNormalizer,
)
