"""Asset checks on lanes and the bundle, and the lane preview table: what they find, and that
they run per session partition inside the session job. What the bundle check finds is tested
without Dagster in test_bundle_check.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from dagster import AssetCheckSeverity, AssetKey, DagsterInstance
from dagster._core.events import DagsterEventType

from assets.checks import (
    MAX_REJECTION_RATE_ENV,
    max_rejection_rate,
    refs_result,
    rejection_result,
    schema_result,
)
from assets.metadata import PREVIEW_CELL_CHARS, preview_table
from notarius_dagster.engine.errors import NotariusError
from notarius_dagster.engine.lane_runner import LaneResult, LaneStats
from notarius_dagster.engine.transcripts import register_transcript
from notarius_dagster.modules import registry
from notarius_dagster.run.runner import run_session
from tests.conftest import make_document
from tests.doubles import lane_responder
from tests.llm_double import scripted_llm

NPC_KIND = registry().kind("dnd/npc-list")
REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "samples" / "crd3-c2e001-slice.jsonl"
NPCS = AssetKey("npcs")


def npc_payload(refs: list[tuple[str, int, int]], **extra: Any) -> dict[str, Any]:
    return {
        "kind": "dnd/npc-list",
        "schema_version": "v1",
        "source_id": "s1",
        "npcs": [
            {
                "id": f"npc-{i}",
                "name": f"Npc {i}",
                "aliases": [],
                "description": "",
                "source_refs": [{"source_id": s, "start_unit_id": a, "end_unit_id": b}],
                **extra,
            }
            for i, (s, a, b) in enumerate(refs)
        ],
    }


def lane_result(payload: dict[str, Any] | None, chunks: int = 4, rejected: int = 0) -> LaneResult:
    return LaneResult(
        lane_id="npcs",
        kind="dnd/npc-list",
        status="accepted" if payload is not None else "rejected",
        payload=payload,
        stats=LaneStats(chunks=chunks, rejected=rejected),
    )


def evaluations(instance: DagsterInstance, run_id: str) -> dict[tuple[str, str], Any]:
    records = instance.get_records_for_run(
        run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION
    ).records
    out = {}
    for record in records:
        event = record.event_log_entry.dagster_event
        assert event is not None
        data: Any = event.event_specific_data
        out[(data.asset_key.to_user_string(), data.check_name)] = data
    return out


def offline_profile(tmp_path: Path, publish: str | None = None) -> Path:
    """configs/offline.yaml, with a `publish:` block (YAML flow mapping) when given."""
    profile = REPO / "configs" / "offline.yaml"
    if publish is None:
        return profile
    copy = tmp_path / "offline-publish.yaml"
    copy.write_text(
        profile.read_text().replace("  output:\n", f"  publish: {publish}\n  output:\n")
    )
    return copy


def materialize(
    tmp_path: Path,
    instance: DagsterInstance,
    session: str,
    responder: Any,
    profile: Path | None = None,
    succeed: bool = True,
) -> str:
    register_transcript(tmp_path / "data" / "transcripts", session, SAMPLE)
    with scripted_llm(responder):
        outcome = run_session(
            session_id=session,
            profile=profile or REPO / "configs" / "offline.yaml",
            data_root=tmp_path / "data",
            llm_profile="test-double",
            instance=instance,
            quiet=True,
        )
    assert outcome.success == succeed, outcome.error
    return outcome.run_id


# --- through Dagster -------------------------------------------------------------------------


def test_a_session_run_evaluates_every_check_for_its_partition(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    run_id = materialize(tmp_path, instance, "checked", lane_responder)
    found = evaluations(instance, run_id)
    assert set(found) == {
        ("npcs", "schema_valid"),
        ("npcs", "source_refs_in_document"),
        ("npcs", "rejection_rate"),
        ("session_bundle", "files_match_index"),
        ("session_bundle", "quality_vs_gold"),
        # unpartitioned, in a step of its own after the run's assets (tests/test_up_to_date.py)
        *((name, "up_to_date") for name in ("source_document", "chunk_map", "npcs")),
        *((name, "up_to_date") for name in ("session_bundle", "session_report")),
    }
    found = {k: e for k, e in found.items() if k[1] != "up_to_date"}
    assert all(e.passed for e in found.values()), {k: e.description for k, e in found.items()}
    assert {e.partition for e in found.values()} == {"checked"}
    assert found[("npcs", "source_refs_in_document")].metadata["references"].value > 0
    assert found[("npcs", "rejection_rate")].severity == AssetCheckSeverity.WARN


def test_checks_are_evaluated_in_the_step_of_their_asset(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    """No step of their own: each check's evaluation comes from the step that materialized
    its asset (a lane's is its level's step, `lanes_1`); the one step for checks is
    `up_to_date`'s, for every session asset at once (assets/up_to_date.py)."""
    run_id = materialize(tmp_path, instance, "in-step", lane_responder)
    records = instance.get_records_for_run(
        run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION
    ).records
    steps = {
        (r.event_log_entry.dagster_event.event_specific_data.check_name, r.event_log_entry.step_key)
        for r in records
        if r.event_log_entry.dagster_event is not None
    }
    assert steps == {
        ("schema_valid", "lanes_1"),
        ("source_refs_in_document", "lanes_1"),
        ("rejection_rate", "lanes_1"),
        ("files_match_index", "session_bundle"),
        ("quality_vs_gold", "session_bundle"),
        ("up_to_date", "up_to_date_checks"),  # every session asset's, one step (up_to_date.py)
    }
    starts = instance.get_records_for_run(run_id, of_type=DagsterEventType.STEP_START).records
    assert sorted(r.event_log_entry.step_key or "" for r in starts) == sorted(
        ["source_document", "chunk_map", "lanes_1", "session_bundle", "session_report"]
        + ["up_to_date_checks"]
    )


def test_a_mostly_rejected_lane_warns_but_the_run_succeeds(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    def cites_outside_the_chunk(messages: list[dict[str, Any]], response_format: Any) -> str:
        return json.dumps({"npcs": [{"name": "Ghost", "unit_ids": [987654]}]})

    # A profile that publishes whatever is accepted (the default policy would refuse the
    # bundle: test_publish_policy.py), so the run succeeds and only the check warns.
    profile = offline_profile(tmp_path, "{min_accepted_chunk_share: 0}")
    run_id = materialize(tmp_path, instance, "rejected", cites_outside_the_chunk, profile)
    check = evaluations(instance, run_id)[("npcs", "rejection_rate")]
    assert not check.passed and check.severity == AssetCheckSeverity.WARN
    assert check.metadata["rejection_rate"].value == 1.0
    assert "NOTARIUS_MAX_REJECTION_RATE" in (check.description or "")


def test_a_blocking_policy_check_stops_the_bundle(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    def answers_garbage(messages: list[dict[str, Any]], response_format: Any) -> str:
        return "not json"

    profile = offline_profile(tmp_path, "{blocking_checks: true}")
    run_id = materialize(tmp_path, instance, "blocked", answers_garbage, profile, succeed=False)
    check = evaluations(instance, run_id)[("npcs", "rejection_rate")]
    assert not check.passed and check.severity == AssetCheckSeverity.ERROR
    assert "lane 'npcs': 0 of 8 chunk(s) accepted" in (check.description or "")
    assert instance.get_latest_materialization_event(NPCS) is not None
    assert instance.get_latest_materialization_event(AssetKey("session_bundle")) is None


def test_lane_preview_in_metadata_has_names_but_no_prose(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    materialize(tmp_path, instance, "preview", lane_responder)
    event = instance.get_latest_materialization_event(NPCS)
    assert event is not None and event.asset_materialization is not None
    preview = str(event.asset_materialization.metadata["preview"].value)
    assert "Gustav" in preview
    assert "appears here" not in preview  # the double's description text
    texts = [json.loads(line)["text"] for line in SAMPLE.read_text().splitlines()]
    assert not any(t in preview for t in texts if len(t) > 20)


# --- lane checks -----------------------------------------------------------------------------


def test_schema_check_names_paths_of_an_invalid_payload_not_values() -> None:
    payload = npc_payload([("s1", 1, 2)])
    del payload["source_id"]
    payload["npcs"][0]["name"] = ""
    result = schema_result(NPCS, lane_result(payload), NPC_KIND)
    assert not result.passed
    problems: Any = result.metadata["first_problems"].value
    assert any("source_id" in p or "(root)" in p for p in problems)
    assert not any("Npc 0" in p for p in problems)


def test_schema_check_passes_a_valid_payload() -> None:
    assert schema_result(NPCS, lane_result(npc_payload([("s1", 1, 2)])), NPC_KIND).passed


def test_reference_check_flags_units_outside_the_document_and_other_sources() -> None:
    document = make_document(list(range(10)))
    payload = npc_payload([("s1", 2, 4), ("s1", 8, 42), ("other", 1, 1), ("s1", 6, 3)])
    result = refs_result(NPCS, lane_result(payload), document, NPC_KIND)
    assert not result.passed
    assert result.metadata["references"].value == 4
    assert result.metadata["problems"].value == 3


def test_reference_check_passes_ranges_inside_the_document() -> None:
    document = make_document([10, 3, 7, 8, 1])
    result = refs_result(
        NPCS, lane_result(npc_payload([("s1", 3, 8), ("s1", 1, 1)])), document, NPC_KIND
    )
    assert result.passed


def test_rejection_rate_above_the_threshold_fails_with_warn_severity() -> None:
    result = rejection_result(NPCS, lane_result(npc_payload([]), chunks=4, rejected=3), 0.5)
    assert not result.passed and result.severity == AssetCheckSeverity.WARN
    assert result.metadata["rejection_rate"].value == 0.75


def test_a_lane_without_an_accepted_payload_counts_as_fully_rejected() -> None:
    result = rejection_result(NPCS, lane_result(None, chunks=4, rejected=0), 0.5)
    assert not result.passed and result.metadata["rejection_rate"].value == 1.0


def test_the_threshold_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert max_rejection_rate() == 0.5
    monkeypatch.setenv(MAX_REJECTION_RATE_ENV, "0.8")
    threshold = max_rejection_rate()
    assert rejection_result(NPCS, lane_result(npc_payload([]), 4, 3), threshold).passed


@pytest.mark.parametrize("value", ["lots", "1.5", "-0.1"])
def test_a_bad_threshold_names_the_variable(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(MAX_REJECTION_RATE_ENV, value)
    with pytest.raises(NotariusError, match=MAX_REJECTION_RATE_ENV):
        max_rejection_rate()


# --- preview ---------------------------------------------------------------------------------


def test_preview_shows_allowlisted_fields_cut_short_and_never_prose() -> None:
    quote = "Gustav | says: " + "a very long line straight out of the transcript " * 2
    payload = npc_payload([("s1", 1, 1)])
    payload["npcs"][0].update(name=quote, description="SECRET DESCRIPTION TEXT")
    table = preview_table(lane_result(payload), NPC_KIND)
    assert [c.name for c in table.schema.columns] == list(NPC_KIND.preview_fields)
    [row] = [record.data for record in table.records]
    shown = " ".join(str(v) for v in row.values())
    assert "SECRET" not in shown and "source_refs" not in str(table)
    assert quote not in shown and "Gustav / says:" in shown
    assert len(row) == 2 and all(len(str(c)) <= PREVIEW_CELL_CHARS for c in row.values())
