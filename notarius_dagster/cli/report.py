"""`notarius report SESSION [--open]`: print where the session's HTML report is (and open it
in the default browser), or say how to build it when there is none yet.

The report is the `session_report` asset's output, at `<bundles root>/.reports/<session>.html`
(docs/report.md); this command only finds it, it never renders one, so what it shows is always
what the asset wrote."""

from __future__ import annotations

import argparse
import json
import sys
import webbrowser
from pathlib import Path
from typing import TYPE_CHECKING

from notarius_dagster.cli.common import (
    EXIT_OK,
    EXIT_USAGE,
    CommandError,
    add_command,
    add_store_options,
)
from notarius_dagster.settings import store_paths
from notarius_dagster.store import StorePaths

if TYPE_CHECKING:
    from notarius_dagster.cli.common import Subcommands


def _bundle_run_id(bundles: Path, session_id: str) -> str | None:
    try:
        index = json.loads((bundles / session_id / "index.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    run_id = index.get("run_id") if isinstance(index, dict) else None
    return run_id if isinstance(run_id, str) else None


def _known_session(store: StorePaths, session_id: str) -> bool:
    """A session this store knows: it has a published bundle or a registered transcript."""
    from notarius_dagster.engine.errors import InputError
    from notarius_dagster.engine.transcripts import stored_transcript

    if (store.bundles / session_id).is_dir():
        return True
    try:
        stored_transcript(store.transcripts, session_id)
    except InputError:
        return False
    return True


def cmd_report(args: argparse.Namespace) -> int:
    """Print where the session's HTML report is (the `session_report` asset writes it beside
    the bundles, at BUNDLES/.reports/SESSION.html). Exits 1 with how to build it when there is
    none yet."""
    from notarius_dagster.engine.errors import SessionIdError
    from notarius_dagster.report import report_path, report_run_id

    store = store_paths(data=args.data, bundles=args.bundles)
    bundles = store.bundles
    try:
        path = report_path(bundles, args.session_id)
    except SessionIdError as exc:
        raise CommandError(exc, EXIT_USAGE) from None
    session_id = args.session_id
    if not path.is_file():
        if not _known_session(store, session_id):
            raise CommandError(
                f"no session {session_id!r} in this store (no bundle under {bundles}, no "
                "registered transcript); `notarius sessions list` lists the sessions"
            )
        raise CommandError(
            f"session {session_id!r} has no report yet. Build it by materializing "
            f"`session_report` for partition {session_id!r} in the Dagster UI (it runs with "
            "the whole session), or with `notarius run TRANSCRIPT --session-id " + session_id + "`"
        )
    published = _bundle_run_id(bundles, session_id)
    rendered = report_run_id(path)
    if published is not None and rendered != published:
        print(
            f"warning: the report shows run {str(rendered)[:8]} but the published bundle is "
            f"from run {published[:8]}: materialize `session_report` for {session_id!r} to "
            "refresh it",
            file=sys.stderr,
        )
    print(path)
    if args.open and not webbrowser.open(path.resolve().as_uri()):
        print("warning: no browser could be opened here; open the path above", file=sys.stderr)
    return EXIT_OK


def add_report_parser(sub: Subcommands) -> None:
    parser = add_command(
        sub,
        "report",
        cmd_report,
        help="print the path of a session's HTML report (--open: open it)",
    )
    parser.add_argument("session_id", metavar="SESSION", help="the session id")
    parser.add_argument("--open", action="store_true", help="open it in the default browser")
    add_store_options(parser)
