"""What every `notarius` command shares: exit codes and the Dagster home."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from notarius_dagster.settings import REPO_ROOT

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def ensure_dagster_home() -> Path:
    """Use DAGSTER_HOME, or ./var/dagster-home with the repository's dagster.yaml."""
    home = Path(os.environ.get("DAGSTER_HOME") or REPO_ROOT / "var" / "dagster-home").resolve()
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "dagster.yaml").exists() and (REPO_ROOT / "dagster.yaml").exists():
        shutil.copyfile(REPO_ROOT / "dagster.yaml", home / "dagster.yaml")
    os.environ["DAGSTER_HOME"] = str(home)
    return home
