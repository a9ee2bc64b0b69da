"""The pipeline benchmark's daemon-start figure reads a run's timeline from the instance's event
log (`benchmarks/daemon_start.py`): RUN_START to the first STEP_START is issue 22's "done when"
figure, so the reading must find those events in a real run's log. Dagster stores RUN_START
under its legacy value `PIPELINE_START`: a reader matching stored values finds no RUN_START and
reports no figure at all (the benchmark's first version did)."""

from __future__ import annotations

import os
from pathlib import Path

from dagster import DagsterInstance, asset, materialize

from benchmarks.daemon_start import run_events, timeline


@asset
def one() -> int:
    return 1


@asset
def two(one: int) -> int:
    return one + 1


def test_a_real_runs_timeline_is_read_from_its_event_log(tmp_path: Path) -> None:
    home = tmp_path / "dagster-home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with DagsterInstance.from_config(str(home)) as instance:
        result = materialize([one, two], instance=instance)
    assert result.success
    env = {**os.environ, "DAGSTER_HOME": str(home)}

    events = run_events(env, [result.run_id])[result.run_id]
    kinds = [kind for _, kind, _ in events]
    assert "RUN_START" in kinds and "RUN_SUCCESS" in kinds
    start = min(t for t, kind, _ in events if kind == "RUN_START")
    figures = timeline(events, submitted_at=start - 1.0, first_call_at=None)

    assert figures["steps"] == 2  # one STEP_START per step key
    assert figures["events"] == len(events)
    assert figures["run_start_to_first_step_s"] is not None
    assert figures["run_start_to_first_step_s"] >= 0
    assert figures["run_start_to_end_s"] >= figures["run_start_to_first_step_s"]
    assert figures["run_start_to_first_call_s"] is None  # no model call: none is reported
    # `materialize` runs in process: no queue, so no RUN_STARTING and no figure for it
    assert figures["launch_to_run_starting_s"] is None


def test_a_timeline_orders_events_by_time_and_takes_the_first_of_each() -> None:
    events = [
        [105.0, "STEP_START", "b"],
        [100.0, "RUN_STARTING", None],
        [103.0, "STEP_START", "a"],
        [102.0, "RUN_START", None],
        [110.0, "RUN_SUCCESS", None],
    ]
    figures = timeline(events, submitted_at=99.0, first_call_at=104.5)
    assert figures == {
        "launch_to_run_starting_s": 1.0,
        "run_starting_to_run_start_s": 2.0,
        "run_start_to_first_step_s": 1.0,
        "run_start_to_first_call_s": 2.5,
        "run_start_to_end_s": 8.0,
        "launch_to_end_s": 11.0,
        "steps": 2,
        "events": 5,
    }
