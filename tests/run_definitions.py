"""The code location of one run, built from a profile and a store, for tests that materialize
assets directly (`dagster.materialize`) or inspect the Definitions: what `notarius run` builds
(`notarius_dagster/run/runner.py: run_settings`, `run/definitions.py: build_definitions`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from dagster import Definitions

from notarius_dagster.run.definitions import build_definitions
from notarius_dagster.run.runner import run_settings


def build_run_definitions(
    *,
    profile: Path,
    data_root: Path | None = None,
    bundles_root: Path | None = None,
    llm_profile: str | None = None,
    lanes: Sequence[str] | None = None,
) -> Definitions:
    settings = run_settings(
        profile=profile, data_root=data_root, bundles_root=bundles_root, llm_profile=llm_profile
    )
    return build_definitions(settings, lanes=lanes)
