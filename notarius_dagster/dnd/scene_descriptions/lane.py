"""The `scene-descriptions` lane: one classified scene per accepted chunk. The model answers
only kind, title and summary; the scene's identity and range are the chunk's."""

from __future__ import annotations

from notarius_dagster.dnd.llm_extract import llm_extractor
from notarius_dagster.dnd.scene_descriptions.model import SceneDescription
from notarius_dagster.dnd.scene_descriptions.modules import (
    SceneMerger,
    SceneNormalizer,
    scene_payload,
)
from notarius_dagster.dnd.scene_descriptions.rules import RULES
from notarius_dagster.engine.lane_models import AnswerSpec
from notarius_dagster.engine.lanes import GoldMatch, LaneModules, LaneSpec, ReportTable

LANE = LaneSpec(
    lane_id="scene-descriptions",
    kind="dnd/scene-description-list",
    record_model=SceneDescription,
    answer=AnswerSpec(
        "SceneAnswer",
        doc="What the model is asked for: the classification and prose only.",
        omit=("source_id", "start_unit_id", "end_unit_id"),
        per_chunk=True,
    ),
    modules=LaneModules(
        extract=llm_extractor(scene_payload),
        merge=SceneMerger,
        normalize=SceneNormalizer,
        rules=RULES,
    ),
    id_field="scene_id",
    refs_field="source_ref",
    unique_fields=("scene_id",),
    preview_fields=("kind", "scene_id"),
    report=ReportTable(
        title="Scenes",
        noun="scenes",
        section_id="scenes",
        layout="scenes",
        columns=(("Kind", "kind"), ("Title", "title"), ("Summary", "summary")),
        order=10,
    ),
    # A scene by its kind over a unit range: a chunk's scene is right when it has the kind of a
    # gold scene it overlaps; several chunks may fall inside one gold scene.
    gold_match=GoldMatch(name="kind", many_to_one=True),
)
