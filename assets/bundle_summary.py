"""The `session_bundle` asset's metadata: where the bundle is, a Markdown summary a person reads
in the UI, and totals that count this run only.

Content safety: the summary holds lane ids, counts, validator names, warning codes, chunk ids
and the engine's bounded, content-safe warning messages (cut again to
`WARNING_MESSAGE_CHARS`), never transcript text, prompts or model output. The bundle's path and
URL are the asset's contract (like the report's): they say where to read the published files.

Totals: a lane that was not re-executed in this run keeps the stats of the run that made it, so
the manifest's totals are the artifact's totals. `this_run_*` counts only the lanes
materialized by this run (`assets/staleness.py: lanes_materialized_in_run`), which is what the run
cost. Cost is a number only when every call was priced (by litellm's price map or the
profile's own prices); otherwise it is "unpriced" (never 0, which reads as free), as the
manifest's `cost_usd` is null with `unpriced_calls` counting the calls without a price."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from dagster import MetadataValue

from notarius_dagster.engine.bundle_documents import Manifest
from notarius_dagster.engine.lane_runner import LaneResult
from notarius_dagster.engine.llm_contract import LLMUsage
from notarius_dagster.engine.models import RunWarning
from notarius_dagster.engine.outcome import manifest_outcome
from notarius_dagster.settings import load_settings

WARNING_MESSAGE_CHARS = 160
MAX_LISTED_WARNINGS = 20
UNPRICED = "unpriced"


def usage_of(results: Iterable[LaneResult]) -> LLMUsage:
    """The usage of `results` summed (`priced_cost_usd` None when any call was unpriced)."""
    return LLMUsage.total(r.stats.usage for r in results)


def _cell(text: str, limit: int = WARNING_MESSAGE_CHARS) -> str:
    """One line, no table syntax, bounded."""
    flat = " ".join(text.replace("|", "/").replace("`", "'").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _cost(cost: float | None) -> str:
    return UNPRICED if cost is None else f"{cost:.6f}"


def summary_markdown(
    manifest: Manifest,
    results: Sequence[LaneResult],
    this_run: LLMUsage,
    total: LLMUsage,
    lanes_run: Sequence[str],
) -> str:
    """The Markdown summary of a published bundle (see the module docstring for what it may
    hold)."""
    lines = [
        f"**Session** `{manifest.session_id}`: {manifest_outcome(manifest).words}; "
        f"{len(manifest.outputs)} lane file(s), {len(manifest.rejected)} rejection(s), "
        f"{manifest.warnings} warning(s) (manifest `validation_status`: "
        f"{manifest.validation_status}).",
        "",
        "| lane | status | records | chunks | called model | reused | rejections | warnings |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for lane in manifest.artifact_lanes:
        lines.append(
            f"| {lane.lane_id} | {lane.status} | {lane.records} | {lane.chunks.total} | "
            f"{lane.chunks.called_model} | {lane.chunks.reused} | {lane.rejections} | "
            f"{lane.warnings} |"
        )
    by_validator: dict[tuple[str, str], int] = {}
    for rejection in manifest.rejected:
        slot = (rejection.lane or "-", rejection.validator)
        by_validator[slot] = by_validator.get(slot, 0) + 1
    lines += ["", "**Rejections by validator**", ""]
    if by_validator:
        lines += ["| lane | validator | rejections |", "|---|---|---|"]
        lines += [
            f"| {lane} | {_cell(v, 80)} | {n} |" for (lane, v), n in sorted(by_validator.items())
        ]
    else:
        lines.append("none")
    warnings: list[RunWarning] = [w for r in results for w in r.warnings]
    lines += ["", "**Warnings**", ""]
    if warnings:
        lines += ["| code | lane | chunk | message |", "|---|---|---|---|"]
        for warning in warnings[:MAX_LISTED_WARNINGS]:
            lines.append(
                f"| {_cell(warning.code, 60)} | {warning.lane or '-'} | "
                f"{warning.chunk_id or '-'} | {_cell(warning.message)} |"
            )
        if len(warnings) > MAX_LISTED_WARNINGS:
            lines.append(f"\n…and {len(warnings) - MAX_LISTED_WARNINGS} more in warnings.json")
    else:
        lines.append("none")
    lines += [
        "",
        "**LLM usage**",
        "",
        "| | lanes | calls | prompt tokens | completion tokens | cost (USD) |",
        "|---|---|---|---|---|---|",
        f"| this run | {len(lanes_run)} | {this_run.calls} | {this_run.prompt_tokens} | "
        f"{this_run.completion_tokens} | {_cost(this_run.priced_cost_usd)} |",
        f"| bundle total | {len(results)} | {total.calls} | {total.prompt_tokens} | "
        f"{total.completion_tokens} | {_cost(total.priced_cost_usd)} |",
    ]
    return "\n".join(lines)


def _metadata_cost(usage: LLMUsage) -> float | str:
    cost = usage.priced_cost_usd
    return UNPRICED if cost is None else cost


def bundle_url(base_url: str, session_id: str) -> str:
    return f"{base_url.rstrip('/')}/{session_id}/"


def bundle_metadata(
    *,
    manifest: Manifest,
    files: int,
    path: Path,
    results: Sequence[LaneResult],
    ran_in_run: set[str],
    report_path: Path,
    report_url: str | None = None,
) -> dict[str, Any]:
    """Everything the bundle asset records (counts, path, URL, summary, totals)."""
    total = usage_of(results)
    lanes_run = [r.lane_id for r in results if r.lane_id in ran_in_run]
    this_run = usage_of(r for r in results if r.lane_id in ran_in_run)
    metadata: dict[str, Any] = {
        "session_id": manifest.session_id,
        "path": MetadataValue.path(str(path)),
        "files": files,
        "outcome": manifest_outcome(manifest).words,
        "validation_status": manifest.validation_status,
        "lanes": len(manifest.outputs),
        "rejections": len(manifest.rejected),
        "warnings": manifest.warnings,
        "summary": MetadataValue.md(
            summary_markdown(manifest, results, this_run, total, lanes_run)
        ),
        # This run only (lanes materialized by it); a run that reused everything made 0 calls.
        "llm_calls": this_run.calls,
        "prompt_tokens": this_run.prompt_tokens,
        "completion_tokens": this_run.completion_tokens,
        "cost_usd": _metadata_cost(this_run),
        "lanes_run": MetadataValue.json(sorted(lanes_run)),
        # The artifact's totals (what the manifest's totals say).
        "bundle_llm_calls": total.calls,
        "bundle_prompt_tokens": total.prompt_tokens,
        "bundle_completion_tokens": total.completion_tokens,
        "bundle_cost_usd": _metadata_cost(total),
        "wall_time_s": manifest.timing.wall_time_s,
    }
    base = load_settings().bundle_base_url
    if base:
        metadata["url"] = MetadataValue.url(bundle_url(base, manifest.session_id))
    # The session report (assets/report.py) is rendered from this bundle right after it; its
    # page lives at a fixed place beside the bundles.
    metadata["report_path"] = MetadataValue.path(str(report_path))
    if report_url:
        metadata["report_url"] = MetadataValue.url(report_url)
    return metadata
