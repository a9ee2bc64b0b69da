"""Failures that say why (issue 10): a run that fails because the provider keeps answering 500,
hangs or resets the connection, because the disk is full at publication or because a lane
module runs out of memory ends with its cause in the CLI's error line (`RunOutcome.error`) and
in the Dagster step failure's description, content-safe. Real Dagster instance, in process;
the provider is a fake on loopback (tests/fake_provider.py)."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dagster import DagsterInstance

import assets.factory as factory
import notarius_dagster.engine.bundle as bundle_module
from notarius_dagster.dnd.npcs.modules import NpcMerger
from notarius_dagster.engine.transcripts import register_transcript
from notarius_dagster.run.runner import RunOutcome, run_session
from tests.doubles import lane_responder
from tests.fake_provider import KEY_ENV, FakeProvider, profile_for
from tests.llm_double import scripted_llm

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "samples" / "crd3-c2e001-slice.jsonl"
OFFLINE = REPO / "configs" / "offline.yaml"
KEY = "sk-fake-9f8e7d6c5b4a3f2e1d0c"


@pytest.fixture(autouse=True)
def quick_step_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(factory, "STEP_RETRY_WAIT_S", 0)
    monkeypatch.setenv(KEY_ENV, KEY)


@pytest.fixture
def instance() -> Iterator[DagsterInstance]:
    with DagsterInstance.ephemeral() as inst:
        yield inst


def step_failures(instance: DagsterInstance, run_id: str) -> list[str]:
    """The description of every step failure of the run, as the UI shows it."""
    out = []
    for record in instance.all_logs(run_id):
        event = record.dagster_event
        if event is not None and event.is_step_failure:
            data = event.step_failure_data
            user = data.user_failure_data if data else None
            out.append(
                user.description
                if user and user.description
                else (data.error.message if data and data.error else "")
            )
    return out


def run(
    tmp_path: Path, instance: DagsterInstance, profile: Path, llm_profile: str | None = None
) -> RunOutcome:
    register_transcript(tmp_path / "data" / "transcripts", "why", SAMPLE)
    return run_session(
        session_id="why",
        profile=profile,
        data_root=tmp_path / "data",
        llm_profile=llm_profile,
        instance=instance,
        quiet=True,
    )


def against(mode: str, tmp_path: Path, instance: DagsterInstance, **llm: Any) -> RunOutcome:
    with FakeProvider(mode, status=500) as fake:
        profile = profile_for(OFFLINE, tmp_path / "profile", fake.api_base, **llm)
        return run(tmp_path, instance, profile)


def assert_says(outcome: RunOutcome, instance: DagsterInstance, *expected: str) -> None:
    assert not outcome.success
    assert outcome.error is not None
    for text in expected:
        assert text in outcome.error
    assert "Exceeded max_retries" not in outcome.error
    assert "Error occurred while executing" not in outcome.error
    assert KEY not in outcome.error
    descriptions = step_failures(instance, outcome.run_id)
    assert descriptions and all(text in descriptions[-1] for text in expected), descriptions


def test_persistent_500s_end_with_the_status(tmp_path: Path, instance: DagsterInstance) -> None:
    outcome = against("status", tmp_path, instance)
    assert_says(outcome, instance, "npcs", "HTTP 500", "InternalServerError", "3 step attempts")


def test_a_hanging_provider_ends_with_the_timeout(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    outcome = against("hang", tmp_path, instance, timeout_s=1)
    assert_says(outcome, instance, "npcs", "Timeout", "no answer within 1 s")


def test_reset_connections_end_with_the_reset(tmp_path: Path, instance: DagsterInstance) -> None:
    outcome = against("reset", tmp_path, instance)
    assert_says(outcome, instance, "npcs", "connection reset by the provider")


def test_a_full_disk_at_publication_names_the_stage_and_the_file(
    tmp_path: Path, instance: DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    class FullDisk:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def __enter__(self) -> FullDisk:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def write(self, data: bytes) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(bundle_module, "open", FullDisk, raising=False)
    with scripted_llm(lane_responder):
        outcome = run(tmp_path, instance, OFFLINE, llm_profile="test-double")
    assert_says(
        outcome,
        instance,
        "session_bundle",
        "publish: cannot write ",
        "no space left on device (ENOSPC)",
    )
    assert ".json" in (outcome.error or "")
    assert str(tmp_path) not in (outcome.error or "")
    assert not (tmp_path / "data" / "bundles" / "why").exists()


def test_a_lane_module_out_of_memory_says_so(
    tmp_path: Path, instance: DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    def exhausted(self: NpcMerger, request: Any) -> Any:
        raise MemoryError

    monkeypatch.setattr(NpcMerger, "merge", exhausted)
    with scripted_llm(lane_responder):
        outcome = run(tmp_path, instance, OFFLINE, llm_profile="test-double")
    assert_says(outcome, instance, "npcs", "out of memory")


def test_a_full_disk_where_no_asset_catches_it_still_names_the_cause(
    tmp_path: Path, instance: DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    from resources.io_managers import JsonAssetIOManager

    def full(self: Any, context: Any, obj: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", "/private/store/value.json")

    monkeypatch.setattr(JsonAssetIOManager, "handle_output", full)
    with scripted_llm(lane_responder):
        outcome = run(tmp_path, instance, OFFLINE, llm_profile="test-double")
    assert not outcome.success and outcome.error is not None
    assert outcome.error.startswith("source_document: ")
    assert "OSError: no space left on device (ENOSPC)" in outcome.error
    assert "/private/store" not in outcome.error
