"""Honest run records: every run of a session carries `notarius/session`, the profile and its
digest, and the model, however it was launched, on a real instance. Also pins the Dagster tag
keys Notarius spells itself (assets/dagster_tags.py) to Dagster's."""

from __future__ import annotations

from pathlib import Path

import pytest
from dagster import (
    AssetKey,
    AutomationConditionSensorDefinition,
    DagsterInstance,
    build_sensor_context,
)

from assets import dagster_tags
from assets.jobs import SESSION_JOB_NAME
from assets.run_tags import MODEL_TAG, PROFILE_DIGEST_TAG, PROFILE_TAG, SESSION_TAG
from assets.sensors import INBOX_SENSOR_NAME
from notarius_dagster.engine.transcripts import register_transcript
from notarius_dagster.modules import registry
from notarius_dagster.run.definitions import resolve_settings_pipeline
from notarius_dagster.run.runner import run_session, run_settings
from tests.doubles import lane_responder
from tests.llm_double import scripted_llm
from tests.run_definitions import build_run_definitions

REPO = Path(__file__).resolve().parent.parent
OFFLINE = REPO / "configs" / "offline.yaml"
SAMPLE = REPO / "samples" / "crd3-c2e001-slice.jsonl"


def expected_tags(tmp_path: Path, session: str) -> dict[str, str]:
    settings = run_settings(profile=OFFLINE, data_root=tmp_path / "data", llm_profile="test-double")
    pipeline = resolve_settings_pipeline(settings, registry())
    assert pipeline.digest and pipeline.digest.startswith("sha256:")
    return {
        SESSION_TAG: session,
        PROFILE_TAG: pipeline.pipeline_id,
        PROFILE_DIGEST_TAG: pipeline.digest,
        MODEL_TAG: pipeline.llm_profile["model"],
    }


def ours(tags: dict[str, str]) -> dict[str, str]:
    return {
        k: v
        for k, v in tags.items()
        if k in {SESSION_TAG, PROFILE_TAG, PROFILE_DIGEST_TAG, MODEL_TAG}
    }


def test_a_run_launched_without_our_tags_gets_them_from_its_first_step(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    """What a click in the UI launches: the job (or the implicit asset job) with no tags."""
    data = tmp_path / "data"
    register_transcript(data / "transcripts", "clicked", SAMPLE)
    instance.add_dynamic_partitions("sessions", ["clicked"])
    defs = build_run_definitions(profile=OFFLINE, data_root=data, llm_profile="test-double")
    job = defs.resolve_job_def(SESSION_JOB_NAME)
    with scripted_llm(lane_responder):
        result = job.execute_in_process(instance=instance, partition_key="clicked")
    assert result.success
    run = instance.get_run_by_id(result.run_id)
    assert run is not None
    assert ours(dict(run.tags)) == expected_tags(tmp_path, "clicked")
    assert run.tags[dagster_tags.PARTITION_NAME_TAG] == "clicked"


def test_a_cli_run_and_a_partial_rerun_carry_the_tags(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    data = tmp_path / "data"
    register_transcript(data / "transcripts", "cli", SAMPLE)
    with scripted_llm(lane_responder):
        outcome = run_session(
            session_id="cli",
            profile=OFFLINE,
            data_root=data,
            llm_profile="test-double",
            instance=instance,
            quiet=True,
        )
        assert outcome.success, outcome.error
        defs = build_run_definitions(profile=OFFLINE, data_root=data, llm_profile="test-double")
        # A run of the report alone (the last asset) still gets them.
        partial = defs.resolve_job_def(SESSION_JOB_NAME).execute_in_process(
            instance=instance, partition_key="cli", asset_selection=[AssetKey("session_report")]
        )
    assert partial.success
    for run_id in (outcome.run_id, partial.run_id):
        run = instance.get_run_by_id(run_id)
        assert run is not None and ours(dict(run.tags)) == expected_tags(tmp_path, "cli")


def test_sensor_run_requests_carry_the_tags(
    tmp_path: Path, instance: DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    monkeypatch.setenv("NOTARIUS_INBOX", str(inbox))
    monkeypatch.setenv("NOTARIUS_INBOX_SETTLE_SECONDS", "0")
    defs = build_run_definitions(
        profile=OFFLINE, data_root=tmp_path / "data", llm_profile="test-double"
    )
    sensors = {s.name: s for s in defs.sensors or []}
    (inbox / "dropped.jsonl").write_bytes(SAMPLE.read_bytes())
    inbox_sensor = sensors[INBOX_SENSOR_NAME]
    result = inbox_sensor(build_sensor_context(instance=instance))
    [request] = result.run_requests or []  # type: ignore[union-attr]
    assert ours(dict(request.tags)) == expected_tags(tmp_path, "dropped")

    [automation] = [
        s for s in sensors.values() if isinstance(s, AutomationConditionSensorDefinition)
    ]
    wanted = expected_tags(tmp_path, "x")
    del wanted[SESSION_TAG]  # per session: added by the run's first step
    assert automation.run_tags == wanted
    assert automation.emit_backfills is False


def test_the_dagster_tag_keys_we_spell_are_dagsters() -> None:
    from dagster._core.definitions.data_version import (
        CODE_VERSION_TAG,
        DATA_VERSION_TAG,
        INPUT_DATA_VERSION_TAG_PREFIX,
    )
    from dagster._core.storage.tags import PARTITION_NAME_TAG, RUN_KEY_TAG, SENSOR_NAME_TAG

    assert dagster_tags.PARTITION_NAME_TAG == PARTITION_NAME_TAG
    assert dagster_tags.RUN_KEY_TAG == RUN_KEY_TAG
    assert dagster_tags.SENSOR_NAME_TAG == SENSOR_NAME_TAG
    assert dagster_tags.CODE_VERSION_TAG == CODE_VERSION_TAG
    assert dagster_tags.DATA_VERSION_TAG == DATA_VERSION_TAG
    assert dagster_tags.INPUT_DATA_VERSION_TAG == INPUT_DATA_VERSION_TAG_PREFIX + "/"
