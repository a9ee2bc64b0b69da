"""The `up_to_date` check (assets/up_to_date.py): what makes a session asset stale is reported
on the asset itself, for every session at once, so the lineage shows it (Dagster 1.13 shows a
partitioned asset unsynced only on one partition's page, dagster-io/dagster#22553).

Two sessions are materialized in process (the offline profile, the LLM test double); then the
`npcs` prompt is edited (a copy, tests/lane_doubles.py: `use_prompt`), and the code location
built again, as a reload does."""

from __future__ import annotations

from pathlib import Path

import pytest
from dagster import (
    AssetCheckEvaluation,
    AssetCheckKey,
    AssetKey,
    AssetSelection,
    DagsterEventType,
    DagsterInstance,
    Definitions,
    SensorResult,
    build_sensor_context,
    define_asset_job,
)

from assets.up_to_date import STALENESS_SENSOR_NAME, UP_TO_DATE_CHECK
from notarius_dagster.dnd.npcs.lane import LANE as NPCS
from notarius_dagster.engine.transcripts import register_transcript
from notarius_dagster.run.runner import run_session
from tests.doubles import lane_responder
from tests.llm_double import scripted_llm
from tests.run_definitions import build_run_definitions

lane_doubles = pytest.importorskip("tests.lane_doubles")

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "samples" / "crd3-c2e001-slice.jsonl"
PROFILE = REPO / "configs" / "offline.yaml"
SESSIONS = {"one": (0, 40), "two": (40, 80)}
DOWNSTREAM_OF_NPCS = ("npcs", "session_bundle", "session_report")


def materialize(tmp_path: Path, instance: DagsterInstance, session: str) -> str:
    with scripted_llm(lane_responder):
        outcome = run_session(
            session_id=session,
            profile=PROFILE,
            data_root=tmp_path / "data",
            llm_profile="test-double",
            instance=instance,
            quiet=True,
        )
    assert outcome.success and outcome.run_id is not None, outcome.error
    return outcome.run_id


def definitions(tmp_path: Path) -> Definitions:
    return build_run_definitions(
        profile=PROFILE, data_root=tmp_path / "data", llm_profile="test-double"
    )


def look(
    defs: Definitions, instance: DagsterInstance, cursor: str | None
) -> tuple[dict[str, AssetCheckEvaluation], str | None]:
    """One evaluation of the staleness sensor: the results it reports, by asset, and its cursor."""
    sensor = defs.resolve_sensor_def(STALENESS_SENSOR_NAME)
    result = sensor(build_sensor_context(instance=instance, cursor=cursor))
    assert isinstance(result, SensorResult)
    reported = {}
    for event in result.asset_events or ():
        assert isinstance(event, AssetCheckEvaluation)
        assert event.check_name == UP_TO_DATE_CHECK
        reported[event.asset_key.to_user_string()] = event
    return reported, result.cursor


@pytest.fixture
def two_sessions(tmp_path: Path, instance: DagsterInstance) -> DagsterInstance:
    lines = SAMPLE.read_text().splitlines()
    for session, (a, b) in SESSIONS.items():
        path = tmp_path / f"{session}.jsonl"
        path.write_text("\n".join(lines[a:b]) + "\n")
        register_transcript(tmp_path / "data" / "transcripts", session, path)
        materialize(tmp_path, instance, session)
    return instance


def test_a_prompt_edit_shows_as_a_failed_up_to_date_check_per_asset_naming_sessions(
    tmp_path: Path, two_sessions: DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    instance = two_sessions
    reported, cursor = look(definitions(tmp_path), instance, None)
    assert set(reported) == {
        "source_document",
        "chunk_map",
        "npcs",
        "session_bundle",
        "session_report",
    }
    assert all(r.passed for r in reported.values()), reported
    assert reported["npcs"].description == "up to date in all 2 materialized session(s)"
    # Nothing changed: nothing is reported again (no duplicate results in the check's history).
    again, cursor = look(definitions(tmp_path), instance, cursor)
    assert again == {}

    prompt = tmp_path / "npcs-prompt.md"
    prompt.write_text(NPCS.prompt.read_text() + "\nPrefer full names.\n")
    lane_doubles.use_prompt(monkeypatch, NPCS.kind, prompt)
    edited = definitions(tmp_path)  # the reloaded code location
    reported, cursor = look(edited, instance, cursor)
    assert set(reported) == set(DOWNSTREAM_OF_NPCS)
    npcs = reported["npcs"]
    assert not npcs.passed and npcs.severity.value == "WARN"
    assert npcs.description == (
        "stale in 2 of 2 materialized session(s): one (code version changed), "
        "two (code version changed)"
    )
    assert npcs.metadata["stale_sessions"].value == 2
    bundle = reported["session_bundle"]
    assert not bundle.passed and "one (upstream npcs is stale)" in str(bundle.description)

    # One session re-run does not hide the other: the answer covers every session.
    materialize(tmp_path, instance, "one")
    reported, cursor = look(edited, instance, cursor)
    assert reported["npcs"].description == (
        "stale in 1 of 2 materialized session(s): two (code version changed)"
    )
    assert not reported["npcs"].passed
    materialize(tmp_path, instance, "two")
    reported, cursor = look(edited, instance, cursor)
    assert set(DOWNSTREAM_OF_NPCS) <= set(reported)  # with what the run re-materialized
    assert all(r.passed for r in reported.values()), reported
    assert reported["npcs"].description == "up to date in all 2 materialized session(s)"


def test_the_check_runs_alone_without_a_partition_and_in_every_session_run(
    tmp_path: Path, two_sessions: DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    instance = two_sessions
    prompt = tmp_path / "npcs-prompt.md"
    prompt.write_text(NPCS.prompt.read_text() + "\nPrefer full names.\n")
    lane_doubles.use_prompt(monkeypatch, NPCS.kind, prompt)
    defs = definitions(tmp_path)
    key = AssetCheckKey(AssetKey("npcs"), UP_TO_DATE_CHECK)
    # What "Execute" on the Checks tab launches: the check's step alone, no partition.
    alone = Definitions.merge(
        defs, Definitions(jobs=[define_asset_job("check_alone", AssetSelection.checks(key))])
    ).resolve_job_def("check_alone")
    result = alone.execute_in_process(instance=instance, raise_on_error=False)
    assert result.success
    [evaluation] = result.get_asset_check_evaluations()
    assert evaluation.asset_check_key == key and not evaluation.passed
    assert str(evaluation.description).startswith("stale in 2 of 2 materialized session(s)")

    # A session run evaluates it after its assets: the re-run ends with a fresh answer, which
    # still names the session this run did not touch.
    run_id = materialize(tmp_path, instance, "one")
    evaluations = {
        e.asset_check_key.asset_key.to_user_string(): e
        for e in (
            log.dagster_event.event_specific_data
            for log in instance.all_logs(run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION)
            if log.dagster_event is not None
        )
        if isinstance(e, AssetCheckEvaluation) and e.check_name == UP_TO_DATE_CHECK
    }
    assert set(DOWNSTREAM_OF_NPCS) <= set(evaluations)
    assert evaluations["npcs"].description == (
        "stale in 1 of 2 materialized session(s): two (code version changed)"
    )
