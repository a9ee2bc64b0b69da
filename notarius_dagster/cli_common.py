"""What every `notarius` command shares: exit codes, the Dagster home and opening its
instance."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

from notarius_dagster.store import REPO_ROOT

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def ensure_dagster_home() -> Path:
    """Use DAGSTER_HOME, or ./var/dagster-home with the repository's dagster.yaml."""
    home = Path(os.environ.get("DAGSTER_HOME") or REPO_ROOT / "var" / "dagster-home").resolve()
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "dagster.yaml").exists() and (REPO_ROOT / "dagster.yaml").exists():
        shutil.copyfile(REPO_ROOT / "dagster.yaml", home / "dagster.yaml")
    os.environ["DAGSTER_HOME"] = str(home)
    return home


def open_instance() -> Any:
    """The Dagster instance under DAGSTER_HOME, or None after printing why it cannot open."""
    from dagster import DagsterInstance

    home = ensure_dagster_home()
    try:
        return DagsterInstance.get()
    except Exception as exc:  # a broken dagster.yaml or an unreachable database
        first_line = (str(exc).strip().splitlines() or [""])[0][:300]
        hint = (
            f"check {home / 'dagster.yaml'} (and for PostgreSQL that the server is up "
            "and NOTARIUS_PG_URL is set)"
        )
        if "psycopg" in first_line:
            hint = (
                "name the driver in the PostgreSQL URL: postgresql+psycopg2://... "
                "(a bare postgresql:// asks SQLAlchemy for psycopg 3, not installed)"
            )
        print(
            f"error: cannot open the Dagster instance at DAGSTER_HOME={home}: "
            f"{type(exc).__name__}: {first_line}\nhint: {hint}",
            file=sys.stderr,
        )
        return None
