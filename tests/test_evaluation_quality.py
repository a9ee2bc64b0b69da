"""The quality check on `session_bundle`, through real session runs on an ephemeral Dagster
instance: with a gold file in the store it records the scores as numeric metadata for the
partition, and the bundle's materialization of that partition carries the same figures
(`quality.*`: what Dagster plots per partition); without one it passes saying "no gold"; a gold
file it cannot use is a WARN failure that does not fail the run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from dagster import AssetCheckSeverity, AssetKey, AssetRecordsFilter, DagsterInstance
from dagster._core.events import DagsterEventType

from assets.quality import CHECK_NAME, NO_GOLD, quality_check_spec, quality_metadata
from notarius_dagster.engine.evaluation import evaluate
from notarius_dagster.engine.transcripts import register_transcript
from notarius_dagster.modules import registry
from notarius_dagster.run.runner import run_session
from notarius_dagster.store import gold_file
from tests.conftest import DATA, REPO
from tests.lane_doubles import complete_responder
from tests.llm_double import scripted_llm

MATCH_FIELDS = registry().match_fields()
"""What the scorer matches each D&D lane on: the `gold_match` every lane declares."""

SAMPLE = REPO / "samples" / "crd3-c2e001-slice.jsonl"
GOLD = DATA / "gold" / "crd3-c2e001-slice.json"
LANES = ("npcs", "scene-descriptions", "combat-turns", "spells", "item-events", "npc-interactions")


def run(tmp_path: Path, instance: DagsterInstance, session: str) -> Any:
    """Materialize the sample as `session`; returns the quality check's evaluation."""
    data = tmp_path / "data"
    register_transcript(data / "transcripts", session, SAMPLE)
    with scripted_llm(complete_responder):
        outcome = run_session(
            session_id=session,
            profile=REPO / "configs" / "dnd-complete.yaml",
            data_root=data,
            llm_profile="test-double",
            instance=instance,
            quiet=True,
        )
    assert outcome.success, outcome.error
    records = instance.get_records_for_run(
        outcome.run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION
    ).records
    found = [
        r.event_log_entry.dagster_event.event_specific_data
        for r in records
        if r.event_log_entry.dagster_event is not None
    ]
    quality = [e for e in found if e.check_name == CHECK_NAME]
    assert len(quality) == 1 and quality[0].asset_key.to_user_string() == "session_bundle"
    assert quality[0].partition == session
    return quality[0]


def bundle_metadata_of(instance: DagsterInstance, session: str) -> dict[str, Any]:
    """The metadata of the latest `session_bundle` materialization of partition `session`."""
    records = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=AssetKey("session_bundle"), asset_partitions=[session]),
        limit=1,
    ).records
    assert len(records) == 1
    materialization = records[0].asset_materialization
    assert materialization is not None and materialization.partition == session
    return {key: value.value for key, value in materialization.metadata.items()}


def quality_figures(metadata: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in metadata.items() if key.startswith("quality.")}


def test_with_gold_the_check_records_the_scores_per_lane(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    target = gold_file(tmp_path / "data", "graded")
    target.parent.mkdir(parents=True)
    shutil.copyfile(GOLD, target)
    check = run(tmp_path, instance, "graded")
    assert check.passed and check.severity == AssetCheckSeverity.WARN
    metadata = {key: value.value for key, value in check.metadata.items()}
    expected = evaluate(tmp_path / "data" / "bundles" / "graded", target, MATCH_FIELDS)
    assert metadata == quality_metadata(expected)
    for lane in LANES:
        assert isinstance(metadata[f"{lane}.f1"], float)
        assert isinstance(metadata[f"{lane}.grounded_f1"], float)
    assert metadata["spells.grounded_f1"] == 1.0  # the double's two castings are the gold's
    assert metadata["gold"] is True and metadata["lanes_missing_from_bundle"] == 0
    assert "total.f1" in metadata and "by name" in (check.description or "")
    texts = [json.loads(line)["text"] for line in SAMPLE.read_text().splitlines()]
    assert not any(t in json.dumps(metadata) for t in texts if len(t) > 20)

    # The bundle's materialization carries the same scores, prefixed.
    scores = {
        f"quality.{key}": value
        for key, value in metadata.items()
        if key.endswith((".f1", ".grounded_f1", ".citation_precision"))
    }
    assert len(scores) >= 3 * len(LANES)
    assert quality_figures(bundle_metadata_of(instance, "graded")) == scores

    # A second run of the same partition adds a second point to the same series.
    again = run(tmp_path, instance, "graded")
    assert {k: v.value for k, v in again.metadata.items()} == metadata


def test_each_sessions_bundle_materialization_carries_only_its_own_scores(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    """Two sessions scored against different gold: each partition's `session_bundle`
    materialization holds that session's figures and no other's, so Dagster's plot of the
    asset by partition shows each session its own (the check's executions, plotted by time,
    interleave the sessions)."""
    data = tmp_path / "data"
    full = gold_file(data, "full-gold")
    full.parent.mkdir(parents=True)
    shutil.copyfile(GOLD, full)
    gold = json.loads(GOLD.read_text())
    gold["lanes"]["npcs"] = gold["lanes"]["npcs"][:1]  # a gold that knows one NPC
    fewer = gold_file(data, "fewer-npcs")
    fewer.write_text(json.dumps(gold))
    run(tmp_path, instance, "full-gold")
    run(tmp_path, instance, "fewer-npcs")

    figures = {}
    for session, target in (("full-gold", full), ("fewer-npcs", fewer)):
        report = evaluate(data / "bundles" / session, target, MATCH_FIELDS)
        expected = {
            f"quality.{key}": value
            for key, value in quality_metadata(report).items()
            if key.endswith((".f1", ".grounded_f1", ".citation_precision"))
        }
        figures[session] = quality_figures(bundle_metadata_of(instance, session))
        assert figures[session] == expected, session
    assert figures["full-gold"]["quality.npcs.f1"] != figures["fewer-npcs"]["quality.npcs.f1"]
    assert figures["full-gold"]["quality.total.f1"] != figures["fewer-npcs"]["quality.total.f1"]


def test_the_checks_description_renders_as_markdown_without_html() -> None:
    """The UI renders a check's description as Markdown: an angle-bracketed placeholder is
    taken for an HTML tag and disappears ("gold file (/gold/.json)")."""
    description = quality_check_spec().description or ""
    assert "<" not in description and ">" not in description
    assert "gold/SESSION-ID.json" in description


def test_without_gold_the_check_passes_and_says_so(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    check = run(tmp_path, instance, "ungraded")
    assert check.passed and check.description == NO_GOLD
    assert {k: v.value for k, v in check.metadata.items()} == {"gold": False}
    assert quality_figures(bundle_metadata_of(instance, "ungraded")) == {}


def test_an_unusable_gold_warns_without_failing_the_run(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    target = gold_file(tmp_path / "data", "mismatched")
    target.parent.mkdir(parents=True)
    shutil.copyfile(DATA / "gold" / "fireball-sea-hag.json", target)  # another transcript
    check = run(tmp_path, instance, "mismatched")
    assert not check.passed and check.severity == AssetCheckSeverity.WARN
    assert "another transcript" in (check.description or "")
    assert str(tmp_path) not in (check.description or "")
