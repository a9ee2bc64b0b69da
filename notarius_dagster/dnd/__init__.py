"""The D&D lanes. Every subpackage of `dnd/` is one lane folder (`lane.py` with
`LANE = LaneSpec(...)`, `model.py`, `prompt.md`, and code of its own only where the lane
differs); `lanes()` returns them all. Shared by several lanes: `records.py`,
`llm_extract.py`, `grounding.py`, `event_lists.py`. `scenes_chunker.py` is a chunker, not a
lane. `notarius_dagster.modules.registry()` puts them in the lane registry value."""

from __future__ import annotations

from notarius_dagster.engine.lanes import LaneSpec, load_lane_packages


def lanes() -> tuple[LaneSpec, ...]:
    """The lane of every lane folder of `dnd/` (adding a lane = adding a folder here)."""
    return tuple(load_lane_packages(__name__, __path__))
