"""Start-up stays cheap: `notarius --help` and loading the code location import neither litellm
(seconds of CPU) nor, for the CLI, Dagster's run machinery; only a lane that calls a model
pays for litellm. Checked in a fresh interpreter through `sys.modules`, not by timing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _loaded_after(code: str, tmp_path: Path) -> set[str]:
    probe = f"import contextlib, io, json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))\n"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NOTARIUS_", "DAGSTER_"))}
    env.update({"PYTHONPATH": str(REPO), "DAGSTER_HOME": str(tmp_path)})
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_help_imports_neither_litellm_nor_dagster(tmp_path: Path) -> None:
    code = (
        "from notarius_dagster.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    main(['--help'])\n"
    )
    loaded = _loaded_after(code, tmp_path)
    assert "notarius_dagster.cli" in loaded
    assert not {"litellm", "openai", "dagster"} & loaded


def test_validate_does_not_load_dagster(tmp_path: Path) -> None:
    code = (
        "from notarius_dagster.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main(['validate', {str(REPO / 'configs' / 'dnd-complete.yaml')!r}]) == 0\n"
    )
    loaded = _loaded_after(code, tmp_path)
    assert "notarius_dagster.engine.resolution" in loaded
    assert not {"litellm", "openai", "dagster"} & loaded


def test_loading_the_code_location_does_not_import_litellm(tmp_path: Path) -> None:
    code = (
        "from notarius_dagster.run.definitions import build_definitions\n"
        "defs = build_definitions()\n"
        "assert defs.resolve_job_def('materialize_session') is not None\n"
    )
    loaded = _loaded_after(code, tmp_path)
    assert "dagster" in loaded and "resources.llm" in loaded
    assert not {"litellm", "openai"} & loaded
