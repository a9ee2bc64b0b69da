"""`dnd/scene-description-list`: one classified scene per accepted chunk. The scene's identity
and range are the chunk's (runner-owned, never the model's); the model only answers what kind
of scene it is, a title and a summary. Combat extraction uses the kind as its gate. Scene ids
are unique within an artifact (`unique_fields` of the lane): an artifact with two records for
one scene is malformed, and a bound reference like that is an error, never "unbound"."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from notarius_dagster.dnd.records import OneLine
from notarius_dagster.engine.models import SourceRef

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
    title: OneLine = Field(min_length=1, max_length=120)
    summary: str = Field(default="", max_length=800)
    source_ref: SourceRef

    @model_validator(mode="after")
    def _evidence_is_the_range(self) -> SceneDescription:
        ref = self.source_ref
        if (ref.source_id, ref.start_unit_id, ref.end_unit_id) != (
            self.source_id,
            self.start_unit_id,
            self.end_unit_id,
        ):
            raise ValueError("source_ref must equal the scene's own range")
        return self
