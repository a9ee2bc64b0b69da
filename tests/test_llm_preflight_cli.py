"""Before any work: a run whose model cannot be called registers nothing, copies nothing and
starts no run; `notarius validate` says what is missing; the inbox sensor takes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.test_cli_run import REPO, SAMPLE, notarius

KEY_VAR = "NOTARIUS_TEST_UNSET_PROVIDER_KEY"


def hosted_profile(tmp_path: Path) -> Path:
    """configs/offline.yaml pointed at a hosted model whose key variable is not set."""
    data = yaml.safe_load((REPO / "configs" / "offline.yaml").read_text())
    data["pipeline"]["llm_profile"] = "hosted"
    data["llm_profiles"] = {"hosted": {"model": "openai/gpt-4o-mini", "api_key_env": KEY_VAR}}
    path = tmp_path / "hosted.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def partitions(home: Path) -> list[str]:
    """The `sessions` partitions of the instance under `home` (none if it was never made)."""
    if not (home / "storage").exists():
        return []
    from dagster import DagsterInstance

    with DagsterInstance.from_config(str(home)) as instance:
        return list(instance.get_dynamic_partitions("sessions"))


def test_a_run_without_its_key_registers_nothing_and_names_the_variable(tmp_path: Path) -> None:
    profile = hosted_profile(tmp_path)
    done = notarius(
        tmp_path,
        "run",
        str(SAMPLE),
        "--config",
        str(profile),
        "--out",
        str(tmp_path / "bundles"),
        "--data",
        str(tmp_path / "data"),
        "--session-id",
        "demo",
    )
    assert done.returncode == 1, done.stderr
    assert KEY_VAR in done.stderr and "openai/gpt-4o-mini" in done.stderr
    assert "materializing" not in done.stderr  # no run started
    assert not (tmp_path / "data" / "transcripts").exists() or not any(
        (tmp_path / "data" / "transcripts").iterdir()
    )
    assert partitions(tmp_path / "home") == []
    assert not (tmp_path / "bundles" / "demo").exists()


def test_validate_names_the_missing_key_and_passes_with_it(tmp_path: Path) -> None:
    profile = hosted_profile(tmp_path)
    missing = notarius(tmp_path, "validate", str(profile))
    assert missing.returncode == 1
    assert KEY_VAR in missing.stderr
    ready = notarius(tmp_path, "validate", str(REPO / "configs" / "offline.yaml"))
    assert ready.returncode == 0, ready.stderr
    llm = json.loads(ready.stdout)["llm"]
    assert llm == {
        "model": "openai/smollm2-135m-instruct",
        "family": "llama-cpp",
        "structured_output": "json_object",
        "prices": "profile",
    }
