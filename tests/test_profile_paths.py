"""A path written in a profile stays inside the profile's folder (after resolving symbolic
links) unless it is absolute; `--reference` paths are the user's and relative to the working
directory. A refusal names the profile and the key path, never the path's target."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from notarius_dagster.engine.errors import ProfileError
from notarius_dagster.engine.resolution import RuntimeBinding, resolve_profile_file
from notarius_dagster.modules import registry


def write_profile(folder: Path, path: str, *, where: str = "lane") -> Path:
    binding = {"npcs": {"path": path}}
    data: dict[str, Any] = {
        "version": 1,
        "pipeline": {
            "id": "paths",
            "llm_profile": "test-double",
            "references": binding if where == "pipeline" else {},
            "lanes": [{"id": "spells", "references": binding if where == "lane" else {}}],
        },
    }
    folder.mkdir(parents=True, exist_ok=True)
    cfg = folder / "p.yaml"
    cfg.write_text(json.dumps(data))
    return cfg


def glossary_path(resolved: Any) -> str:
    (binding,) = [b for b in resolved.lane("spells").extract.references if b.slot == "npcs"]
    return str(binding.path)


@pytest.mark.parametrize("where", ["lane", "pipeline"])
def test_a_relative_path_that_climbs_out_of_the_profile_folder_is_refused(
    tmp_path: Path, where: str
) -> None:
    cfg = write_profile(tmp_path / "cfg", "../../../etc/passwd", where=where)
    key = (
        "pipeline.lanes[0].references.npcs.path"
        if where == "lane"
        else "pipeline.references.npcs.path"
    )
    with pytest.raises(ProfileError) as caught:
        resolve_profile_file(cfg, registry=registry())
    message = str(caught.value)
    assert "'p.yaml'" in message and key in message
    assert "outside the profile's folder" in message and "passwd" not in message


def test_a_link_inside_the_folder_that_points_outside_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("x")
    folder = tmp_path / "cfg"
    folder.mkdir()
    (folder / "glossary.txt").symlink_to(outside)
    cfg = write_profile(folder, "glossary.txt")
    with pytest.raises(ProfileError, match="outside the profile's folder"):
        resolve_profile_file(cfg, registry=registry())


def test_paths_inside_the_folder_and_absolute_paths_are_accepted(tmp_path: Path) -> None:
    folder = tmp_path / "cfg"
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "g.txt").write_text("x")
    inside = resolve_profile_file(write_profile(folder, "refs/./g.txt"), registry=registry())
    assert glossary_path(inside) == str((folder / "refs" / "g.txt").resolve())
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("x")
    absolute = resolve_profile_file(write_profile(folder, str(elsewhere)), registry=registry())
    assert glossary_path(absolute) == str(elsewhere.resolve())


def test_runtime_paths_stay_relative_to_the_working_directory(tmp_path: Path) -> None:
    folder = tmp_path / "a" / "cfg"
    (tmp_path / "g.txt").write_text("x")
    cfg = write_profile(folder, "inside.txt")
    resolved = resolve_profile_file(
        cfg,
        registry=registry(),
        runtime_references=[RuntimeBinding(selector="npcs", path="../g.txt")],
        cwd=tmp_path / "a",
    )
    assert glossary_path(resolved) == str((tmp_path / "g.txt").resolve())
