"""Declarative automation on a real instance, evaluated by Dagster's own evaluator (what the
automation sensor runs each tick): after a prompt edit only the edited lane and its dependants
are requested, in the sessions materialized before; a session added with `notarius sessions
add` is requested from `source_document` on; a partition without a transcript never is."""

from __future__ import annotations

from pathlib import Path

import pytest
from dagster import (
    AssetKey,
    AutomationConditionSensorDefinition,
    DagsterInstance,
    DefaultSensorStatus,
    evaluate_automation_conditions,
)

from assets.automation import (
    AUTOMATION_ENV,
    AUTOMATION_SENSOR_NAME,
    automation_default_status,
)
from notarius_dagster.dnd.npcs.lane import LANE as NPCS
from notarius_dagster.engine.errors import NotariusError
from notarius_dagster.engine.transcripts import register_transcript
from notarius_dagster.run.runner import run_session
from notarius_dagster.sessions import add_session
from notarius_dagster.settings import store_paths
from tests.llm_double import scripted_llm
from tests.run_definitions import build_run_definitions

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "samples" / "crd3-c2e001-slice.jsonl"
COMPLETE = REPO / "configs" / "dnd-complete.yaml"
NPC_DEPENDANTS = {"combat_turns", "spells", "item_events", "npc_interactions"}

lane_doubles = pytest.importorskip("tests.lane_doubles")


def slice_of(tmp_path: Path, name: str, a: int, b: int) -> Path:
    path = tmp_path / f"{name}.jsonl"
    path.write_text("\n".join(SAMPLE.read_text().splitlines()[a:b]) + "\n")
    return path


def requested(result: object) -> dict[str, set[str]]:
    """Asset name -> the partitions requested on this evaluation."""
    out: dict[str, set[str]] = {}
    for request in result.results:  # type: ignore[attr-defined]
        key = request.key
        if not isinstance(key, AssetKey):
            continue
        partitions = set(request.true_subset.expensively_compute_partition_keys())
        if partitions:
            out[key.to_user_string()] = partitions
    return out


def materialize(session: str, data: Path, instance: DagsterInstance) -> None:
    """One run of the session's whole graph with the complete profile and the test double."""
    with scripted_llm(lane_doubles.complete_responder):
        outcome = run_session(
            session_id=session,
            profile=COMPLETE,
            data_root=data,
            llm_profile="test-double",
            instance=instance,
            quiet=True,
        )
    assert outcome.success, outcome.error


def test_every_session_asset_carries_a_condition_and_one_sensor_evaluates_them(
    tmp_path: Path,
) -> None:
    defs = build_run_definitions(profile=COMPLETE, data_root=tmp_path, llm_profile="test-double")
    specs = {s.key.to_user_string(): s for s in defs.resolve_all_asset_specs()}
    materializable = set(specs) - {"transcript"}
    assert {k for k, s in specs.items() if s.automation_condition is not None} == materializable
    sensors = [s for s in defs.sensors or [] if isinstance(s, AutomationConditionSensorDefinition)]
    assert [s.name for s in sensors] == [AUTOMATION_SENSOR_NAME]
    assert sensors[0].default_status == DefaultSensorStatus.RUNNING
    assert "stale_lanes_sensor" not in {s.name for s in defs.sensors or []}


def test_the_sensor_runs_unless_the_environment_says_stopped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(AUTOMATION_ENV, raising=False)
    assert automation_default_status() == DefaultSensorStatus.RUNNING
    monkeypatch.setenv(AUTOMATION_ENV, "stopped")
    assert automation_default_status() == DefaultSensorStatus.STOPPED
    monkeypatch.setenv(AUTOMATION_ENV, "running")
    assert automation_default_status() == DefaultSensorStatus.RUNNING
    monkeypatch.setenv(AUTOMATION_ENV, "yes")
    with pytest.raises(NotariusError, match=AUTOMATION_ENV):
        automation_default_status()


def test_a_prompt_edit_requests_only_that_lane_and_its_dependants(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, instance: DagsterInstance
) -> None:
    data = tmp_path / "data"
    sessions = {"one": slice_of(tmp_path, "one", 0, 40), "two": slice_of(tmp_path, "two", 40, 80)}
    for session, path in sessions.items():
        register_transcript(data / "transcripts", session, path)
        materialize(session, data, instance)
    instance.add_dynamic_partitions("sessions", ["bare"])  # no transcript: never requested

    defs = build_run_definitions(profile=COMPLETE, data_root=data, llm_profile="test-double")
    first = evaluate_automation_conditions(defs=defs, instance=instance)
    assert requested(first) == {}  # everything is up to date; the bare partition waits

    prompt = tmp_path / "npcs-prompt.md"
    prompt.write_text(NPCS.prompt.read_text() + "\nPrefer full names.\n")
    lane_doubles.use_prompt(monkeypatch, NPCS.kind, prompt)
    edited = build_run_definitions(profile=COMPLETE, data_root=data, llm_profile="test-double")
    # Why the sensor runs by default: a sensor whose first evaluation comes after the edit has
    # no baseline, so Dagster's `code_version_changed()` sees no change and nothing re-runs.
    switched_on_late = evaluate_automation_conditions(defs=edited, instance=instance)
    assert requested(switched_on_late) == {}
    second = evaluate_automation_conditions(defs=edited, instance=instance, cursor=first.cursor)
    wanted = {"npcs", *NPC_DEPENDANTS, "session_bundle", "session_report"}
    specs = {s.key.to_user_string() for s in edited.resolve_all_asset_specs()}
    if "evidence_context" in specs:
        wanted.add("evidence_context")
    assert requested(second) == {name: {"one", "two"} for name in wanted}

    third = evaluate_automation_conditions(defs=edited, instance=instance, cursor=second.cursor)
    assert requested(third) == {}, "a handled code version change is not requested again"


def test_sessions_add_is_requested_from_source_document_and_nothing_runs_without_a_transcript(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    data = tmp_path / "data"
    defs = build_run_definitions(
        profile=REPO / "configs" / "offline.yaml", data_root=data, llm_profile="test-double"
    )
    instance.add_dynamic_partitions("sessions", ["bare"])
    first = evaluate_automation_conditions(defs=defs, instance=instance)
    assert requested(first) == {}

    store = store_paths(data=data, environ={})
    added = add_session(instance, "fresh", slice_of(tmp_path, "fresh", 0, 20), store)
    assert added.new_partition and added.transcript_changed
    assert instance.get_dynamic_partitions("sessions") == ["bare", "fresh"]
    assert list(store.transcripts.glob("fresh.*"))
    assert instance.get_runs() == [], "sessions add runs nothing"
    second = evaluate_automation_conditions(defs=defs, instance=instance, cursor=first.cursor)
    assert requested(second) == {
        "source_document": {"fresh"},
        "chunk_map": {"fresh"},
        "npcs": {"fresh"},
        "session_bundle": {"fresh"},
        "session_report": {"fresh"},
    }

    again = add_session(instance, "fresh", store.transcripts / "fresh.jsonl", store)
    assert not again.new_partition and not again.transcript_changed


def test_an_edit_seen_on_the_tick_that_sees_the_old_codes_last_run_is_still_re_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, instance: DagsterInstance
) -> None:
    """The sensor looks, a run made by the old code ends, the prompt is edited and the code
    location reloaded, all before the sensor's next look: that look sees the materialization
    and the new code version together, and the session must still be re-run. (With Dagster's
    `since_last_handled()` the materialization reset the change and the edit was lost; the
    end-to-end test, tests/test_e2e_automation.py, missed its re-run 2 times in 6.)"""
    data = tmp_path / "data"
    register_transcript(data / "transcripts", "one", slice_of(tmp_path, "one", 0, 40))
    defs = build_run_definitions(profile=COMPLETE, data_root=data, llm_profile="test-double")
    instance.add_dynamic_partitions("sessions", ["one"])
    before_the_run = evaluate_automation_conditions(defs=defs, instance=instance)
    materialize("one", data, instance)

    prompt = tmp_path / "npcs-prompt.md"
    prompt.write_text(NPCS.prompt.read_text() + "\nPrefer full names.\n")
    lane_doubles.use_prompt(monkeypatch, NPCS.kind, prompt)
    edited = build_run_definitions(profile=COMPLETE, data_root=data, llm_profile="test-double")
    seen_together = evaluate_automation_conditions(
        defs=edited, instance=instance, cursor=before_the_run.cursor
    )
    assert requested(seen_together).get("npcs") == {"one"}
    after = evaluate_automation_conditions(
        defs=edited, instance=instance, cursor=seen_together.cursor
    )
    assert "npcs" not in requested(after), "a requested change is not requested again"
