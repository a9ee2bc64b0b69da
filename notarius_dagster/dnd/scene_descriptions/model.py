"""`dnd/scene-description-list`: one classified scene per accepted chunk. The scene's identity
and range are the chunk's (runner-owned, never the model's); the model only answers what kind
of scene it is, a title and a summary. Combat extraction uses the kind as its gate."""

from __future__ import annotations

from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from notarius_dagster.engine.models import SourceRef

KIND: Final = "dnd/scene-description-list"
ITEMS = "scene_descriptions"
SceneKind = Literal["combat", "narrative", "recap", "meta"]


class SceneDescription(BaseModel):
    """A chunk classified as a scene. `scene_id` is the chunk id; `source_id`, `start_unit_id`
    and `end_unit_id` are the chunk's inclusive range; `source_ref` is the same range as the
    record's single piece of evidence (a scene is cited as a whole, not line by line)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    scene_id: str = Field(min_length=1, max_length=120)
    source_id: str = Field(min_length=1)
    start_unit_id: int
    end_unit_id: int
    kind: SceneKind
    title: str = Field(min_length=1, max_length=120)
    summary: str = Field(default="", max_length=800)
    source_ref: SourceRef


class SceneDescriptionList(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["dnd/scene-description-list"] = KIND
    schema_version: Literal["v1"] = "v1"
    source_id: str
    scene_descriptions: list[SceneDescription]


class SceneAnswer(BaseModel):
    """What the model is asked for: the classification and prose only."""

    kind: SceneKind
    title: str = Field(min_length=1, max_length=120)
    summary: str = Field(default="", max_length=800)
