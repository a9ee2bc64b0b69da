"""`notarius sessions add PATH [--session-id ID]` registers a session without running it, and a
partition with no transcript fails at `source_document` saying how to add one."""

from __future__ import annotations

from pathlib import Path

import pytest
from dagster import AssetKey, DagsterInstance

from assets.factory import missing_transcript_message
from assets.jobs import SESSION_JOB_NAME
from notarius_dagster.cli.main import ensure_dagster_home, main
from tests.doubles import lane_responder
from tests.llm_double import scripted_llm
from tests.run_definitions import build_run_definitions

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "samples" / "crd3-c2e001-slice.jsonl"


def test_sessions_add_stores_the_transcript_and_adds_the_partition_without_a_run(
    isolated_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sessions", "add", str(SAMPLE), "--session-id", "later"]) == 0
    out = capsys.readouterr().out
    assert "session later added" in out and "Nothing ran" in out
    assert (
        isolated_env / "data" / "transcripts" / "later.jsonl"
    ).read_bytes() == SAMPLE.read_bytes()
    ensure_dagster_home()
    with DagsterInstance.get() as instance:
        assert instance.get_dynamic_partitions("sessions") == ["later"]
        assert instance.get_runs() == []
        assert instance.get_materialized_partitions(AssetKey("transcript")) == {"later"}

    assert main(["sessions", "add", str(SAMPLE), "--session-id", "later"]) == 0
    assert "session later unchanged" in capsys.readouterr().out
    assert main(["sessions", "list", "--json"]) == 0
    assert '"later"' in capsys.readouterr().out


def test_sessions_add_derives_the_id_and_refuses_bad_input(
    isolated_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    named = tmp_path / "Session 7.jsonl"
    named.write_bytes(SAMPLE.read_bytes())
    assert main(["sessions", "add", str(named)]) == 0
    assert "session session-7 added" in capsys.readouterr().out
    assert main(["sessions", "add", str(tmp_path / "absent.jsonl")]) == 2
    assert "not found" in capsys.readouterr().err
    assert main(["sessions", "add", str(named), "--session-id", "Bad Id"]) == 2
    assert main(["sessions", "add", str(named.with_suffix(".pdf"))]) == 2
    wrong = tmp_path / "notes.pdf"
    wrong.write_text("x")
    assert main(["sessions", "add", str(wrong), "--session-id", "notes"]) == 1
    assert "unknown transcript extension" in capsys.readouterr().err


def test_a_partition_without_a_transcript_fails_at_source_document_saying_how_to_add_one(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    instance.add_dynamic_partitions("sessions", ["empty"])
    defs = build_run_definitions(
        profile=REPO / "configs" / "offline.yaml",
        data_root=tmp_path / "data",
        llm_profile="test-double",
    )
    with scripted_llm(lane_responder) as double:
        result = defs.resolve_job_def(SESSION_JOB_NAME).execute_in_process(
            instance=instance, partition_key="empty", raise_on_error=False
        )
    assert not result.success and double.calls == []
    [failure] = [e for e in result.all_events if e.is_step_failure]
    assert failure.step_key == "source_document"
    assert failure.step_failure_data is not None and failure.step_failure_data.user_failure_data
    message = failure.step_failure_data.user_failure_data.description or ""
    assert message == missing_transcript_message("empty")
    assert "notarius sessions add PATH --session-id empty" in message and "inbox" in message
