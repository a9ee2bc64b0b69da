"""The lanes of one dependency level run in one step, at the same time, and stay separate assets
(assets/factory.py: `build_lane_level_asset`; engine/session_steps.py: `lane_levels`,
`run_lane_level`): what a user relies on is that independent lanes overlap, that one lane's
failure does not lose the others' work, and that one lane can be materialized alone."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from dagster import AssetKey, DagsterEventType, DagsterInstance

from notarius_dagster.engine.resolution import resolve_profile_file
from notarius_dagster.engine.session_steps import lane_levels
from notarius_dagster.engine.transcripts import register_transcript
from notarius_dagster.modules import registry
from notarius_dagster.run.runner import run_session
from tests.doubles import system_of
from tests.lane_doubles import complete_responder
from tests.llm_double import provider_error_of, scripted_llm

REPO = Path(__file__).resolve().parent.parent
COMPLETE = REPO / "configs" / "dnd-complete.yaml"
SAMPLE = REPO / "samples" / "crd3-c2e001-slice.jsonl"
LEVEL_1 = ("You extract non-player characters", "You classify one scene")


def materialized(instance: DagsterInstance, run_id: str) -> set[str]:
    records = instance.get_records_for_run(
        run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION
    ).records
    return {
        r.event_log_entry.dagster_event.asset_key.to_user_string()
        for r in records
        if r.event_log_entry.dagster_event and r.event_log_entry.dagster_event.asset_key
    }


def run_complete(tmp_path: Path, instance: DagsterInstance, session: str, **kwargs: Any) -> Any:
    register_transcript(tmp_path / "data" / "transcripts", session, SAMPLE)
    return run_session(
        session_id=session,
        profile=COMPLETE,
        data_root=tmp_path / "data",
        llm_profile="test-double",
        instance=instance,
        quiet=True,
        **kwargs,
    )


def test_lane_levels_are_the_depths_of_the_lanes_references() -> None:
    pipeline = resolve_profile_file(COMPLETE, registry=registry())
    levels = [[lane.id for lane in level] for level in lane_levels(pipeline)]
    assert [sorted(level) for level in levels] == [
        ["npcs", "scene-descriptions"],
        ["combat-turns", "item-events", "npc-interactions", "spells"],
    ]
    order = pipeline.lane_ids()
    assert all(level == sorted(level, key=order.index) for level in levels)


def test_the_lanes_of_a_level_call_the_model_at_the_same_time(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    """The npcs and scene-descriptions lanes each hold their first call until the other lane
    has called too. Run one after another, the first lane's call would wait for a call that
    never comes and time out (the barrier's 60 s), and the run would fail."""
    meeting = threading.Barrier(2, timeout=60)
    met: set[str] = set()
    lock = threading.Lock()

    def responder(messages: list[dict[str, Any]], response_format: Any) -> str:
        system = system_of(messages)
        first = next((p for p in LEVEL_1 if system.startswith(p)), None)
        with lock:
            waits = first is not None and first not in met
            if waits:
                met.add(first)
        if waits:
            meeting.wait()
        return complete_responder(messages, response_format)

    with scripted_llm(responder):
        outcome = run_complete(tmp_path, instance, "together")
    assert outcome.success, outcome.error
    assert met == set(LEVEL_1)
    starts = instance.get_records_for_run(
        outcome.run_id, of_type=DagsterEventType.STEP_START
    ).records
    steps = [r.event_log_entry.step_key for r in starts]
    assert steps.count("lanes_1") == 1 and steps.count("lanes_2") == 1
    assert "npcs" not in steps and "spells" not in steps  # no step per lane


def test_a_failed_lane_keeps_the_other_lanes_of_its_level_and_stops_the_next_level(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    """scene-descriptions is refused by the provider (a permanent error); npcs, in the same
    step, still records its value and checks, and the step fails naming the refused lane."""

    def responder(messages: list[dict[str, Any]], response_format: Any) -> str:
        if system_of(messages).startswith("You classify one scene"):
            raise provider_error_of("authentication", "Incorrect API key provided")
        return complete_responder(messages, response_format)

    with scripted_llm(responder):
        outcome = run_complete(tmp_path, instance, "half")
    assert not outcome.success and outcome.error is not None
    assert outcome.error.startswith("lane scene-descriptions: ")
    assert "lane npcs" not in outcome.error
    assert materialized(instance, outcome.run_id) >= {"npcs"}
    assert not materialized(instance, outcome.run_id) & {
        "scene_descriptions",
        "spells",
        "session_bundle",
    }
    checks = instance.get_records_for_run(
        outcome.run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION
    ).records
    checked = {
        r.event_log_entry.dagster_event.event_specific_data.asset_key
        for r in checks
        if r.event_log_entry.dagster_event is not None
    }
    assert checked == {AssetKey("npcs")}
    assert not (tmp_path / "data" / "bundles" / "half").exists()


def test_one_lane_is_materialized_with_its_level_mates_from_their_checkpoints(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    """Asking for `spells` alone (what `notarius run` and the backfill send after only its
    prompt changed) materializes its level with it: the level is one step, not subsettable, so
    the UI cannot run a lane's checks without the lane. Nothing calls the model: every chunk of
    every lane comes from its checkpoint, and the level-mates keep their data versions."""
    from assets.jobs import with_execution_sets
    from notarius_dagster.run.definitions import definitions_for, run_pipeline
    from notarius_dagster.run.runner import run_settings

    with scripted_llm(complete_responder) as double:
        first = run_complete(tmp_path, instance, "alone")
        assert first.success, first.error
        calls_before = len(double.calls)
        versions_before = data_versions(instance, "alone")
        settings = run_settings(
            profile=COMPLETE, data_root=tmp_path / "data", llm_profile="test-double"
        )
        defs = definitions_for(settings, run_pipeline(settings))
        selection = with_execution_sets(defs, [AssetKey("spells")])
        result = defs.resolve_job_def("materialize_session").execute_in_process(
            instance=instance, partition_key="alone", asset_selection=selection
        )
    level_2 = {"combat_turns", "item_events", "npc_interactions", "spells"}
    assert {k.to_user_string() for k in selection} == level_2
    assert result.success
    assert materialized(instance, result.run_id) == level_2
    assert len(double.calls) == calls_before  # every chunk reused from its checkpoint
    assert data_versions(instance, "alone") == versions_before


def data_versions(instance: DagsterInstance, session: str) -> dict[str, str | None]:
    """Each lane's latest data version in `session` (Dagster's `dagster/data_version` tag)."""
    found = {}
    for name in ("combat_turns", "item_events", "npc_interactions", "spells"):
        event = instance.get_latest_materialization_event(AssetKey(name))
        assert event is not None and event.asset_materialization is not None
        assert event.asset_materialization.partition == session
        found[name] = (event.asset_materialization.tags or {}).get("dagster/data_version")
        assert found[name] is not None
    return found
