"""The composition root: `registry()` builds the one lane registry value of this deployment
(the engine's `generic` chunker, the D&D `scenes` chunker, lanes and roster kind, the LLM
layer's profiles) that resolution, the asset factory, the report and the codex are handed.
Nothing is registered by importing; a lane folder outside the package is added with
`registry(extra_folders)` or `LaneRegistry.with_lanes`."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from pathlib import Path

from notarius_dagster.engine.registry import LaneRegistry


def registry(extra_folders: Sequence[Path] = ()) -> LaneRegistry:
    """The D&D registry, plus the lane of each folder of `extra_folders` (a plug-in)."""
    base = _dnd_registry()
    if not extra_folders:
        return base
    from notarius_dagster.engine.lanes import load_lane_folder

    return base.with_lanes(*(load_lane_folder(folder) for folder in extra_folders))


@cache
def _dnd_registry() -> LaneRegistry:
    from notarius_dagster.dnd import lanes
    from notarius_dagster.dnd.grounding import npc_names
    from notarius_dagster.dnd.roster import ROSTER_ARTIFACT, speaker_names
    from notarius_dagster.dnd.scenes_chunker import SCENES_CHUNKER
    from notarius_dagster.engine.chunking import GENERIC_CHUNKER
    from notarius_dagster.llm.profiles import profile_catalog

    return LaneRegistry(
        lanes=lanes(),
        chunkers=(GENERIC_CHUNKER, SCENES_CHUNKER),
        reference_kinds=(ROSTER_ARTIFACT,),
        llm_profiles=profile_catalog(),
        speaker_names=(speaker_names,),
        known_names=(npc_names,),
    )
