"""The store layout (notarius_dagster/store.py): computed once from options, the environment
and defaults, and used by every layer (the code location's resources and IO manager, the inbox
sensor, the runner)."""

from __future__ import annotations

from pathlib import Path

import pytest

from notarius_dagster.settings import load_settings, store_paths
from notarius_dagster.store import REPO_ROOT


def test_defaults_are_under_var_in_the_repository() -> None:
    paths = store_paths(environ={})
    assert paths.root == REPO_ROOT / "var" / "data"
    assert paths.bundles == REPO_ROOT / "var" / "data" / "bundles"
    assert paths.inbox == REPO_ROOT / "var" / "inbox"
    assert (paths.transcripts, paths.asset_values, paths.checkpoints) == (
        paths.root / "transcripts",
        paths.root / "assets",
        paths.root / "checkpoints",
    )
    assert paths.session_values("s1") == paths.root / "assets" / "s1"


def test_the_environment_overrides_the_defaults_and_empty_counts_as_unset(tmp_path: Path) -> None:
    env = {"NOTARIUS_DATA": str(tmp_path / "d"), "NOTARIUS_INBOX": str(tmp_path / "in")}
    paths = store_paths(environ=env)
    assert (paths.root, paths.bundles, paths.inbox) == (
        tmp_path / "d",
        tmp_path / "d" / "bundles",
        tmp_path / "in",
    )
    assert store_paths(environ={**env, "NOTARIUS_BUNDLES": str(tmp_path / "b")}).bundles == (
        tmp_path / "b"
    )
    assert store_paths(environ={"NOTARIUS_DATA": "", "NOTARIUS_INBOX": ""}) == store_paths(
        environ={}
    )


def test_options_override_the_environment_and_bundles_follow_the_chosen_root(
    tmp_path: Path,
) -> None:
    env = {"NOTARIUS_DATA": str(tmp_path / "env")}
    paths = store_paths(data=tmp_path / "opt", environ=env)
    assert (paths.root, paths.bundles) == (tmp_path / "opt", tmp_path / "opt" / "bundles")
    assert store_paths(
        data=tmp_path / "opt",
        bundles=tmp_path / "b",
        environ={**env, "NOTARIUS_BUNDLES": str(tmp_path / "x")},
    ).bundles == (tmp_path / "b")


def test_relative_paths_are_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    paths = store_paths(data="rel", environ={"NOTARIUS_INBOX": "drop"})
    assert (paths.root, paths.inbox) == (tmp_path / "rel", tmp_path / "drop")


def test_the_code_location_uses_the_one_layout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from notarius_dagster.run.definitions import build_definitions

    for name, folder in (
        ("NOTARIUS_DATA", "d"),
        ("NOTARIUS_BUNDLES", "b"),
        ("NOTARIUS_INBOX", "i"),
    ):
        monkeypatch.setenv(name, str(tmp_path / folder))
    monkeypatch.setenv("NOTARIUS_LLM_PROFILE", "test-double")
    settings = load_settings()
    assert settings.store == store_paths()
    defs = build_definitions(settings)
    store = defs.resources["store"]
    assert store.paths == settings.store
    assert Path(defs.resources["io_manager"].root) == settings.store.asset_values
