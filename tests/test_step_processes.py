"""The session job a parallel run's step processes load: built once per process and
pipeline (the forkserver builds it before its first fork), built afresh when the profile
changed since."""

from __future__ import annotations

import shutil
from pathlib import Path

from notarius_dagster.run.definitions import run_pipeline
from notarius_dagster.run.runner import run_settings, session_job

REPO = Path(__file__).resolve().parent.parent


def _arguments(profile: Path, tmp_path: Path) -> dict[str, object]:
    return {
        "profile": str(profile),
        "data_root": str(tmp_path / "data"),
        "bundles_root": str(tmp_path / "bundles"),
        "llm_profile": "test-double",
        "lanes": None,
    }


def _digest(profile: Path, tmp_path: Path) -> str:
    settings = run_settings(profile=profile, data_root=tmp_path / "data", llm_profile="test-double")
    return run_pipeline(settings).pipeline.digest


def test_a_step_reuses_the_job_built_for_its_pipeline_and_rebuilds_after_an_edit(
    tmp_path: Path,
) -> None:
    profile = tmp_path / "offline.yaml"
    shutil.copyfile(REPO / "configs" / "offline.yaml", profile)
    arguments = _arguments(profile, tmp_path)
    built = session_job(**arguments)  # what the forkserver does, without a digest
    digest = _digest(profile, tmp_path)
    assert session_job(**arguments, pipeline_digest=digest) is built

    text = profile.read_text(encoding="utf-8")
    assert "max_units: 40" in text
    profile.write_text(text.replace("max_units: 40", "max_units: 41", 1), encoding="utf-8")
    edited = _digest(profile, tmp_path)
    assert edited != digest
    rebuilt = session_job(**arguments, pipeline_digest=edited)
    assert rebuilt is not built
    assert session_job(**arguments, pipeline_digest=edited) is rebuilt
