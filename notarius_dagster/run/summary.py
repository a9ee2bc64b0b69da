"""The summary `notarius run` prints after a successful run: one row per lane and a totals line,
read from the published `manifest.json` as its model (what the bundle says, not what the
process remembers)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from notarius_dagster.engine.bundle_documents import Manifest, read_manifest
from notarius_dagster.engine.outcome import manifest_outcome

COLUMNS = (
    "lane",
    "status",
    "records",
    "chunks",
    "model calls",
    "reused",
    "rejections",
    "warnings",
    "rungs",
)


def lane_table(manifest: Manifest) -> Table:
    """One row per lane: outcome, records, chunk accounting, calls, and structured-output
    rungs."""
    table = Table(*COLUMNS)
    for lane in manifest.artifact_lanes:
        table.add_row(
            escape(lane.lane_id),
            lane.status,
            str(lane.records),
            str(lane.chunks.total),
            str(lane.llm.calls),
            str(lane.chunks.reused),
            str(lane.rejections),
            str(lane.warnings),
            _rungs(lane.llm.structured_output_rungs, lane.llm.structured_output_stepdowns),
        )
    return table


def _rungs(rungs: dict[str, int], stepdowns: dict[str, int]) -> str:
    """`json_object:12 (json_schema refused)`: the rungs that answered, and any refused."""
    text = ", ".join(f"{k}:{v}" for k, v in rungs.items())
    refused = ", ".join(stepdowns)
    return f"{text} ({refused} refused)" if refused else text


def _cost(cost_usd: float | None, unpriced_calls: int) -> str:
    """A cost as a person reads it: never $0 for calls that could not be priced."""
    if cost_usd is None:
        return (
            f"unpriced ({unpriced_calls} call{'s' if unpriced_calls != 1 else ''} without a price)"
        )
    return f"${cost_usd:.4f}"


def totals_line(manifest: Manifest, wall: float) -> str:
    """The outcome as a person reads it (`engine/outcome.py`), rejections, warnings, calls,
    tokens, cost, and the wall time `wall` (in seconds, as the command measured it)."""
    t = manifest.totals
    return (
        f"{manifest_outcome(manifest).words} · rejections: {len(manifest.rejected)} · "
        f"warnings: {manifest.warnings} · LLM calls: {t.llm_calls} · tokens: "
        f"{t.prompt_tokens}+{t.completion_tokens} · cost: {_cost(t.cost_usd, t.unpriced_calls)} · "
        f"wall time: {wall:.1f}s"
    )


def print_summary(bundle_dir: Path, wall: float, console: Console | None = None) -> None:
    """Print the summary of the bundle published at `bundle_dir` to stdout (or `console`), in
    one write, so the summaries of sessions finishing at once in worker processes do not
    interleave."""
    manifest = read_manifest(bundle_dir)
    console = console or Console(stderr=False, width=120)
    with console.capture() as captured:
        console.print(f"[bold]bundle[/bold] {escape(str(bundle_dir))}")
        console.print(lane_table(manifest))
        console.print(totals_line(manifest, wall))
    console.file.write(captured.get())
    console.file.flush()
