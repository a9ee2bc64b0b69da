"""The `scene-descriptions` lane: registers `dnd/scene-description-list`, its modules and its
lane rules. Its accepted artifact is the gate of combat-turn extraction."""

from __future__ import annotations

from pydantic import BaseModel

from notarius_dagster.dnd.scene_descriptions import rules  # noqa: F401  (registers lane rules)
from notarius_dagster.dnd.scene_descriptions.model import (
    ITEMS,
    KIND,
    SceneDescriptionList,
)
from notarius_dagster.dnd.scene_descriptions.modules import (
    SceneMerger,
    SceneNormalizer,
    build_extractor,
)
from notarius_dagster.engine.artifact_kinds import ArtifactKind, register_kind
from notarius_dagster.engine.catalog import CATALOG, ModuleSpec
from notarius_dagster.engine.models import SourceRef


def scene_source_refs(artifact: BaseModel) -> list[SourceRef]:
    """Each scene's single piece of evidence, in record order."""
    assert isinstance(artifact, SceneDescriptionList)
    return [scene.source_ref for scene in artifact.scene_descriptions]


SCENE_KIND = register_kind(ArtifactKind(
    kind=KIND, model=SceneDescriptionList, schema_id="notarius.dnd.scene_description_list",
    schema_name="dnd_scene_description_list_v1", schema_version="v1", items_field=ITEMS,
    project_source_refs=scene_source_refs,
))

CATALOG.register(ModuleSpec(key="dnd.scene_descriptions.extract", stage="extract",
                            requires=("chunks",), provides=("scene_descriptions",),
                            artifact_kind=KIND,
                            default_validators=("dnd.scene_descriptions.one_per_chunk",)),
                 build_extractor)
CATALOG.register(ModuleSpec(key="dnd.scene_descriptions.merge", stage="merge",
                            requires=("chunks",), artifact_kind=KIND,
                            default_validators=("dnd.scene_descriptions.chunk_coverage",)),
                 SceneMerger)
CATALOG.register(ModuleSpec(key="dnd.scene_descriptions.normalize", stage="normalize",
                            requires=("chunks",), artifact_kind=KIND,
                            default_validators=("dnd.scene_descriptions.consistent",)),
                 SceneNormalizer)
