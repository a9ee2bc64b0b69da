"""The `session_bundle` asset's metadata as the UI shows it, on a real instance: the bundle's
path (and URL when configured), the report's path, a content-safe Markdown summary, totals of
this run only, and cost "unpriced" when a call had no price (never $0)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest
from dagster import AssetKey, DagsterInstance

from assets.bundle_summary import (
    UNPRICED,
    WARNING_MESSAGE_CHARS,
    summary_markdown,
    usage_of,
)
from assets.jobs import SESSION_JOB_NAME
from notarius_dagster.engine.bundle_documents import Manifest
from notarius_dagster.engine.lane_runner import LaneResult
from notarius_dagster.engine.llm_contract import LLMUsage
from notarius_dagster.engine.models import RunWarning
from notarius_dagster.engine.outcome import manifest_outcome
from notarius_dagster.settings import BUNDLE_BASE_URL_ENV
from tests.bundle_doubles import rejection
from tests.doubles import lane_responder
from tests.llm_double import scripted_llm
from tests.run_definitions import build_run_definitions
from tests.test_dagster_materialization import REPO, SAMPLE, materialize

BUNDLE = AssetKey("session_bundle")


def bundle_meta(instance: DagsterInstance) -> dict:
    event = instance.get_latest_materialization_event(BUNDLE)
    assert event is not None and event.asset_materialization is not None
    return dict(event.asset_materialization.metadata)


def test_the_bundle_metadata_links_the_bundle_and_the_report_and_counts_this_run_only(
    tmp_path: Path, instance: DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(BUNDLE_BASE_URL_ENV, "https://bundles.example/notarius/")
    monkeypatch.setenv("NOTARIUS_REPORT_BASE_URL", "https://bundles.example/reports")
    with scripted_llm(lane_responder) as double:
        bundle = materialize(tmp_path, instance)
    meta = bundle_meta(instance)
    assert Path(meta["path"].value) == bundle and (bundle / "index.json").is_file()
    assert meta["url"].value == "https://bundles.example/notarius/sample/"
    report = Path(meta["report_path"].value)
    assert report == tmp_path / "data" / "bundles" / ".reports" / "sample.html"
    assert report.is_file()
    assert meta["report_url"].value == "https://bundles.example/reports/sample.html"
    calls = len(double.calls)
    assert calls > 0
    assert meta["llm_calls"].value == meta["bundle_llm_calls"].value == calls
    # The test double's profile prices its calls at $0 (it costs nothing); an unpriced call
    # is shown as "unpriced" (test_a_lane_with_an_unpriced_call_makes_the_cost_unpriced).
    assert meta["cost_usd"].value == meta["bundle_cost_usd"].value == 0.0
    assert meta["lanes_run"].value == ["npcs"]
    assert meta["outcome"].value.startswith("all 1 lane(s) accepted")
    summary = meta["summary"].value
    assert "| npcs | accepted |" in summary and "**Rejections by validator**" in summary
    assert "| this run | 1 | " + str(calls) in summary and "| 0.000000 |" in summary
    texts = [json.loads(line)["text"] for line in SAMPLE.read_text().splitlines()]
    assert not any(t in summary for t in texts if len(t) > 40)
    assert str(tmp_path) not in summary

    # A run that re-publishes the bundle alone reuses the stored lane: this run made no call,
    # while the artifact's totals still count the calls that made it.
    defs = build_run_definitions(
        profile=REPO / "configs" / "offline.yaml",
        data_root=tmp_path / "data",
        llm_profile="test-double",
    )
    with scripted_llm(lane_responder) as again:
        result = defs.resolve_job_def(SESSION_JOB_NAME).execute_in_process(
            instance=instance, partition_key="sample", asset_selection=[BUNDLE]
        )
    assert result.success and again.calls == []
    meta = bundle_meta(instance)
    assert meta["llm_calls"].value == 0 and meta["lanes_run"].value == []
    assert meta["bundle_llm_calls"].value == calls
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["totals"]["llm_calls"] == calls  # the manifest keeps the artifact's totals


def test_the_summary_lists_warnings_content_safe_and_bounded(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    with scripted_llm(lane_responder):
        bundle = materialize(tmp_path, instance)
    manifest = Manifest.model_validate_json((bundle / "manifest.json").read_text())
    long = "answer was cut | retried `twice` " * 20
    result = LaneResult(
        lane_id="npcs",
        kind="dnd/npc-list",
        status="accepted",
        payload=None,
        warnings=(
            RunWarning(
                stage="extract",
                code="truncated_answer",
                message=long,
                lane="npcs",
                chunk_id="chunk-0003",
            ),
        ),
    )
    usage = LLMUsage(calls=2, prompt_tokens=10, completion_tokens=5, cost_usd=0.00012)
    text = summary_markdown(manifest, [result], usage, usage, ["npcs"])
    [row] = [line for line in text.splitlines() if line.startswith("| truncated_answer")]
    assert "| npcs | chunk-0003 |" in row
    message = row.split("|")[4].strip()
    assert len(message) <= WARNING_MESSAGE_CHARS and message.endswith("…")
    assert "`" not in message
    assert "| 0.000120 |" in text


def test_a_lane_with_an_unpriced_call_makes_the_cost_unpriced() -> None:
    def lane(lane_id: str, usage: LLMUsage) -> LaneResult:
        return cast(
            LaneResult, SimpleNamespace(lane_id=lane_id, stats=SimpleNamespace(usage=usage))
        )

    priced = lane("npcs", LLMUsage(calls=2, cost_usd=0.5))
    unpriced = lane("spells", LLMUsage(calls=1, unpriced_calls=1))
    assert usage_of([priced]).priced_cost_usd == 0.5
    assert usage_of([priced, unpriced]).priced_cost_usd is None
    assert usage_of([]).priced_cost_usd == 0.0
    assert UNPRICED == "unpriced"


def test_a_session_whose_lanes_were_all_accepted_is_not_shown_as_rejected(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    """The manifest's `validation_status` is `rejected` as soon as one chunk is (a contract
    value, docs/bundle.md); the UI's summary and metadata lead with what happened instead."""
    with scripted_llm(lane_responder):
        bundle = materialize(tmp_path, instance)
    published = Manifest.model_validate_json((bundle / "manifest.json").read_text())
    assert [lane.status for lane in published.artifact_lanes] == ["accepted"]
    manifest = published.model_copy(
        update={"validation_status": "rejected", "rejected": (rejection(),)}
    )
    usage = LLMUsage()
    headline = summary_markdown(manifest, [], usage, usage, []).splitlines()[0]
    assert "all 1 lane(s) accepted, 1 chunk rejection(s)" in headline
    assert headline.index("accepted") < headline.index("validation_status")
    assert manifest_outcome(manifest).level == "warn"
    assert manifest_outcome(published.model_copy(update={"rejected": ()})).words == (
        "all 1 lane(s) accepted"
    )
