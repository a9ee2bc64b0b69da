"""`notarius eval BUNDLE|SESSION [--gold GOLD] [--json] [--scorer v1|v2]`: score a published bundle
against a gold file, per lane (precision, recall and F1 by name and grounded, citation
precision), as a table or as JSON for scripts. docs/evaluation.md says how each number is
computed; `--scorer v1` reproduces figures recorded before the v2 matching rules."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from notarius_dagster.cli.common import (
    EXIT_OK,
    EXIT_USAGE,
    CommandError,
    add_command,
    add_store_options,
    plain,
)
from notarius_dagster.settings import store_paths

if TYPE_CHECKING:
    from notarius_dagster.cli.common import Subcommands
    from notarius_dagster.engine.evaluation import EvaluationReport, LaneScore, Totals


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def print_report(report: EvaluationReport) -> None:
    """The report as a rich table: one row per lane, then the micro-averaged totals."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(width=140)
    console.print(
        f"[bold]session[/bold] {escape(report.session_id)} against gold "
        f"{escape(report.gold_session_id)}, scorer {escape(report.scorer)}"
        + ("" if report.source_checked else " (source digest not checked: the gold has none)")
    )
    table = Table(
        "lane",
        "status",
        "pred",
        "gold",
        "P",
        "R",
        "F1",
        "gP",
        "gR",
        "gF1",
        "cite P",
        "cited",
        caption="P/R/F1: matched by name; gP/gR/gF1: grounded (v2: at least half of a match's "
        "cited units are its gold record's; v1: one); cite P: share of the matches' cited "
        "units that ground them",
    )
    status_text = {
        "scored": "scored",
        "missing_from_bundle": "MISSING",
        "missing_from_gold": "not in gold",
    }
    rows: list[tuple[str, str, LaneScore | Totals]] = [
        (
            lane.lane_id,
            status_text[lane.status]
            + (
                f" ({lane.bundle_status})"
                if lane.status == "missing_from_bundle" and lane.bundle_status
                else ""
            ),
            lane,
        )
        for lane in report.lanes
    ]
    rows.append(("total (micro)", f"{len(report.totals.lanes)} gold lane(s)", report.totals))
    for index, (name, status, row) in enumerate(rows):
        table.add_row(
            plain(name),  # a lane id from the gold file
            status,
            str(row.predicted),
            str(row.gold),
            _pct(row.by_name.precision),
            _pct(row.by_name.recall),
            _pct(row.by_name.f1),
            _pct(row.grounded.precision),
            _pct(row.grounded.recall),
            _pct(row.grounded.f1),
            _pct(row.citation.precision),
            str(row.citation.cited_units),
            end_section=index == len(rows) - 2,
        )
    console.print(table)


def _bundle_and_gold(args: argparse.Namespace) -> tuple[Path, Path]:
    """BUNDLE is a bundle folder (then --gold is needed), or a session id: its bundle in the
    store's bundle root and its gold at `<store>/gold/<session>.json` (or --gold). What does not
    exist is named."""
    from notarius_dagster.engine.errors import SessionIdError
    from notarius_dagster.engine.session_ids import validate_session_id

    target = Path(args.bundle)
    if target.is_dir():
        if not args.gold:
            raise CommandError(
                f"bundle folder {target.name!r}: give its gold file with --gold "
                "(or name the session, whose gold the store keeps)",
                EXIT_USAGE,
            )
        return target, Path(args.gold)
    try:
        session_id = validate_session_id(args.bundle)
    except SessionIdError:
        raise CommandError(
            f"{target.name!r} is neither a bundle folder nor a session id (give a published "
            "bundle, e.g. BUNDLES/<session-id>, or a session id)",
            EXIT_USAGE,
        ) from None
    store = store_paths(data=args.data, bundles=args.bundles)
    bundle = store.bundles / session_id
    if not bundle.is_dir():
        raise CommandError(
            f"session {session_id!r} has no published bundle under {store.bundles} "
            "(`notarius sessions list` lists the sessions)"
        )
    gold = Path(args.gold) if args.gold else store.gold(session_id)
    if not args.gold and not gold.is_file():
        raise CommandError(
            f"session {session_id!r} has no gold file at {gold}; give one with --gold "
            "(data/gold/ holds the hand-made ones)"
        )
    return bundle, gold


def cmd_eval(args: argparse.Namespace) -> int:
    """Per lane: precision, recall and F1 of the records by name (gold aliases accepted), the
    same counting only records whose citations are mostly their gold record's units, and
    citation precision. See docs/evaluation.md."""
    from notarius_dagster.engine.errors import NotariusError
    from notarius_dagster.engine.evaluation import evaluate
    from notarius_dagster.engine.reading import path_problem
    from notarius_dagster.modules import registry

    bundle, gold = _bundle_and_gold(args)
    problem = path_problem(gold)  # a folder, a FIFO or /dev/zero is said as such
    if problem is not None:
        raise CommandError(f"gold: {problem}", EXIT_USAGE)
    try:
        # each lane declares what the evaluation matches its records on
        report = evaluate(bundle, gold, registry().match_fields(), scorer=args.scorer)
    except NotariusError as exc:
        raise CommandError(exc) from None
    if args.json:
        print(report.model_dump_json(indent=2))
    else:
        print_report(report)
    return EXIT_OK


def add_eval_parser(sub: Subcommands) -> None:
    from notarius_dagster.engine.evaluation import DEFAULT_SCORER, SCORERS

    parser = add_command(sub, "eval", cmd_eval, help="score a published bundle against a gold file")
    parser.add_argument(
        "bundle",
        metavar="BUNDLE|SESSION",
        help="a published bundle folder, or a session id (its bundle and gold in the store)",
    )
    parser.add_argument(
        "--gold", help="the gold file (JSON; default for a session: <store>/gold/SESSION.json)"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--scorer",
        choices=SCORERS,
        default=DEFAULT_SCORER,
        help=f"matching rules (default {DEFAULT_SCORER}; v1: the previous rules, to reproduce "
        "earlier figures, kept for one release)",
    )
    add_store_options(parser)
