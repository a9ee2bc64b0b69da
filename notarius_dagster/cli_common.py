"""What every `notarius` command shares: exit codes, how a command reports an error, how a
(sub)command and its store options are declared, the Dagster home and opening its instance."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from notarius_dagster.store import REPO_ROOT, store_paths

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def fail(message: object, status: int = EXIT_FAILED) -> int:
    """Print `error: MESSAGE` on stderr and return `status`, so that a command ends with
    `return fail(...)`: every command words its errors the same way."""
    print(f"error: {message}", file=sys.stderr)
    return status


def add_command(
    sub: Any,
    name: str,
    run: Callable[[argparse.Namespace], int],
    *,
    help: str,
    description: str | None = None,
) -> argparse.ArgumentParser:
    """Declare one (sub)command of `sub` (an argparse subparsers action) and the function that
    runs it (`main` calls `args.func(args)`); the caller adds its arguments."""
    parser: argparse.ArgumentParser = sub.add_parser(name, help=help, description=description)
    parser.set_defaults(func=run)
    return parser


def add_store_options(parser: argparse.ArgumentParser) -> None:
    """--data and --bundles, worded alike on every command that reads the store (add them last:
    `--help` lists options in the order they were added)."""
    parser.add_argument("--data", help="store root (default NOTARIUS_DATA or ./var/data)")
    parser.add_argument("--bundles", help="bundle root (default NOTARIUS_BUNDLES or DATA/bundles)")


def bundles_root(args: argparse.Namespace) -> Path:
    """--bundles, else the root the code location publishes to (NOTARIUS_BUNDLES, else
    <--data or NOTARIUS_DATA>/bundles): the store layout's one rule (`store_paths`)."""
    return store_paths(data=args.data, bundles=args.bundles).bundles


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
