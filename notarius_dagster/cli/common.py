"""What every `notarius` command shares: exit codes, how a command stops on an error, how a
(sub)command and its store options are declared, the Dagster home and opening its instance."""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from notarius_dagster.engine.files import write_atomically
from notarius_dagster.settings import DAGSTER_HOME_ENV, load_settings, store_paths
from notarius_dagster.store import REPO_ROOT

if TYPE_CHECKING:
    from dagster import DagsterInstance
    from rich.text import Text

    Subcommands: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]
    """What `add_subparsers()` returns: where a (sub)command is declared."""

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class CommandError(Exception):
    """Stops a command: `main` prints `error: MESSAGE` on stderr and exits with `status`
    (EXIT_USAGE for a wrong argument, EXIT_FAILED for what went wrong). A helper deep in a
    command raises it instead of handing a status back up through every caller, and every
    command words its errors the same way."""

    def __init__(self, message: object, status: int = EXIT_FAILED) -> None:
        super().__init__(str(message))
        self.status = status


def add_command(
    sub: Subcommands,
    name: str,
    run: Callable[[argparse.Namespace], int],
    *,
    help: str,
) -> argparse.ArgumentParser:
    """Declare one (sub)command of `sub` (an argparse subparsers action) and the function that
    runs it (`main` calls `args.func(args)`); the caller adds its arguments. The function's
    docstring is the command's `--help` description (argparse folds its white space), so what
    a command does is written once, where it is done."""
    parser: argparse.ArgumentParser = sub.add_parser(name, help=help, description=run.__doc__)
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


INSTANCE_READY = ".notarius-instance-ready"
"""Written in DAGSTER_HOME once the instance's storage exists (see `create_instance_once`)."""


def ensure_dagster_home() -> Path:
    """Use DAGSTER_HOME, or ./var/dagster-home with the repository's configs/dagster.yaml; the
    instance is created there once, safely, by whichever command comes first."""
    home = Path(load_settings().dagster_home or REPO_ROOT / "var" / "dagster-home").resolve()
    home.mkdir(parents=True, exist_ok=True)
    template = REPO_ROOT / "configs" / "dagster.yaml"
    if not (home / "dagster.yaml").exists() and template.exists():
        with _home_lock(home):  # two first commands must not both write it
            if not (home / "dagster.yaml").exists():
                write_atomically(home / "dagster.yaml", template.read_bytes())
    os.environ[DAGSTER_HOME_ENV] = str(home)  # for Dagster and the processes it starts
    create_instance_once(home)
    return home


@contextlib.contextmanager
def _home_lock(home: Path) -> Iterator[None]:
    """An exclusive lock on DAGSTER_HOME, waited for (creating an instance takes a second)."""
    fd = os.open(home / ".notarius-home.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def create_instance_once(home: Path) -> None:
    """Create the instance's storage (its tables) once, under a lock on DAGSTER_HOME: three
    first commands started at once on a fresh home otherwise race to create the SQLite tables
    and one dies with `table runs already exists`. Later commands see the marker and skip
    this. If the instance cannot be opened, nothing is marked: the command's own open says
    why (`open_instance`)."""
    if (home / INSTANCE_READY).exists():
        return
    with _home_lock(home):
        if (home / INSTANCE_READY).exists():
            return
        from dagster import DagsterInstance

        try:
            DagsterInstance.get().dispose()
        except Exception:  # a broken dagster.yaml or an unreachable database: said later
            return
        write_atomically(home / INSTANCE_READY, b"the Dagster instance here was created\n")


def open_instance() -> DagsterInstance:
    """The Dagster instance under DAGSTER_HOME; CommandError says why it cannot open."""
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
        raise CommandError(
            f"cannot open the Dagster instance at DAGSTER_HOME={home}: "
            f"{type(exc).__name__}: {first_line}\nhint: {hint}"
        ) from None


def plain(value: object) -> Text:
    """`value` as rich text that is printed as written: never read as markup (a name such as
    `[link=http://...]` or a stray `[/b]` is text, not a hyperlink or a crash) and with every
    control character shown as U+FFFD (no escape sequence reaches the terminal). For anything
    printed through rich that did not come from this program's own strings: names from the
    transcript or a model, file names, paths, keys of a user's file."""
    from rich.text import Text

    text = str(value)
    return Text("".join(ch if ch.isprintable() or ch == " " else "\ufffd" for ch in text))
