"""Loads every module and artifact kind into the catalog: the engine's generic modules, the
`scenes` chunker and the D&D lanes. Call `load_modules()` before resolving a profile."""

from __future__ import annotations

from functools import cache


@cache
def load_modules() -> list[str]:
    """Register everything once; the ids of the registered lanes."""
    import notarius_dagster.dnd.scenes_chunker  # noqa: F401  (registers chunk module `scenes`)
    import notarius_dagster.engine.chunking  # noqa: F401  (registers `generic`)
    import notarius_dagster.engine.stages  # noqa: F401  (registers appendorder, noop, json)
    from notarius_dagster.dnd import load_lanes
    from notarius_dagster.engine.llm_profiles import LLM_PROFILES
    from notarius_dagster.llm.profiles import register_profiles

    register_profiles(LLM_PROFILES)  # the built-in LLM profiles and their validator

    return load_lanes()
