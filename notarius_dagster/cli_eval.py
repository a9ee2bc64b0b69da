"""`notarius eval BUNDLE --gold GOLD [--json] [--scorer v1|v2]`: score a published bundle
against a gold file, per lane (precision, recall and F1 by name and grounded, citation
precision), as a table or as JSON for scripts. docs/evaluation.md says how each number is
computed; `--scorer v1` reproduces figures recorded before the v2 matching rules."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from notarius_dagster.cli_common import EXIT_OK, EXIT_USAGE, CommandError, add_command, plain


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def print_report(report: Any) -> None:
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
    rows = [
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


def cmd_eval(args: argparse.Namespace) -> int:
    """Per lane: precision, recall and F1 of the records by name (gold aliases accepted), the
    same counting only records whose citations are mostly their gold record's units, and
    citation precision. See docs/evaluation.md."""
    from notarius_dagster.engine.errors import NotariusError
    from notarius_dagster.engine.evaluation import evaluate
    from notarius_dagster.engine.reading import path_problem
    from notarius_dagster.modules import registry

    bundle, gold = Path(args.bundle), Path(args.gold)
    if not bundle.is_dir():
        raise CommandError(
            f"bundle {bundle.name!r} is not a folder (give a published bundle, "
            "e.g. BUNDLES/<session-id>)",
            EXIT_USAGE,
        )
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


def add_eval_parser(sub: Any) -> None:
    from notarius_dagster.engine.evaluation import DEFAULT_SCORER, SCORERS

    parser = add_command(sub, "eval", cmd_eval, help="score a published bundle against a gold file")
    parser.add_argument("bundle", metavar="BUNDLE", help="a published bundle folder")
    parser.add_argument("--gold", required=True, help="the session's gold file (JSON)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--scorer",
        choices=SCORERS,
        default=DEFAULT_SCORER,
        help=f"matching rules (default {DEFAULT_SCORER}; v1: the previous rules, to reproduce "
        "earlier figures, kept for one release)",
    )
