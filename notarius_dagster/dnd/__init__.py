"""The D&D lanes. Every subpackage of `dnd/` is one lane folder (`lane.py` with
`LANE = LaneSpec(...)`, `model.py`, `prompt.md`, and code of its own only where the lane
differs); `load_lanes()` registers them all. Shared by several lanes: `records.py`,
`llm_extract.py`, `grounding.py`, `event_lists.py`. `scenes_chunker.py` is a chunk module, not
a lane: `notarius_dagster.modules.load_modules()` registers it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from notarius_dagster.engine.lanes import load_lane_folder, load_lane_packages


def load_lanes(extra_folders: Sequence[Path] = ()) -> list[str]:
    """Register every lane folder of `dnd/` (adding a lane = adding a folder here), then each
    of `extra_folders` (lane folders outside the package, e.g. a plug-in); the lane ids."""
    lanes = load_lane_packages(__name__, __path__)
    lanes += [load_lane_folder(folder) for folder in extra_folders]
    return [lane.lane_id for lane in lanes]
