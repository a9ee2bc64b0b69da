"""The graph as the UI shows it: three groups in flow order, an owner, kinds and a description
on every asset, lane descriptions from the lane registry, the job over the three groups, and
the code location named `notarius`."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from assets.graph_style import OWNER_ENV, owners
from assets.jobs import SESSION_JOB_NAME
from notarius_dagster.engine.errors import NotariusError
from tests.run_definitions import build_run_definitions

REPO = Path(__file__).resolve().parent.parent
COMPLETE = REPO / "configs" / "dnd-complete.yaml"
LANES = {"npcs", "scene_descriptions", "combat_turns", "spells", "item_events", "npc_interactions"}


def test_every_asset_has_its_group_an_owner_kinds_and_a_description(tmp_path: Path) -> None:
    defs = build_run_definitions(profile=COMPLETE, data_root=tmp_path, llm_profile="test-double")
    specs = {s.key.to_user_string(): s for s in defs.resolve_all_asset_specs()}
    groups: dict[str, set[str]] = {}
    for name, spec in specs.items():
        groups.setdefault(spec.group_name or "", set()).add(name)
        assert spec.owners == ["team:notarius"], name
        assert spec.kinds, name
        assert spec.description, name
    publish = {"session_bundle", "session_report"} | ({"evidence_context"} & set(specs))
    assert groups == {
        "ingest": {"transcript", "source_document", "chunk_map"},
        "lanes": LANES,
        "publish": publish,
    }
    spells = specs["spells"].description or ""
    assert "One record: One casting." in spells and "`npcs`" in spells
    assert "Depends on: source_document, chunk_map" in (specs["npcs"].description or "")
    job = defs.resolve_job_def(SESSION_JOB_NAME)
    assert {k.to_user_string() for k in job.asset_layer.selected_asset_keys} == set(specs) - {
        "transcript"
    }


def test_the_owner_comes_from_the_environment_and_is_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(OWNER_ENV, "gm@example.org")
    assert owners() == ["gm@example.org"]
    monkeypatch.setenv(OWNER_ENV, "the gm")
    with pytest.raises(NotariusError, match=OWNER_ENV):
        owners()


def test_the_code_location_is_named_notarius() -> None:
    workspace = yaml.safe_load((REPO / "workspace.yaml").read_text())
    [entry] = workspace["load_from"]
    assert entry["python_module"]["location_name"] == "notarius"
    assert entry["python_module"]["module_name"] == "notarius_dagster.run.definitions"
