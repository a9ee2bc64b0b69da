"""Registers the `scenes` chunk module (notarius_dagster/dnd/scenes_chunker.py). It lives with
the D&D lanes because its cues are D&D cues; this package exists so that `load_lanes()`, which
imports every subpackage of `dnd/`, registers it like any lane."""

from __future__ import annotations

from notarius_dagster.dnd import scenes_chunker  # noqa: F401  (registers chunk module `scenes`)
