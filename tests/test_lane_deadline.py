"""A lane's total deadline (LLM profile `lane_deadline_s`) against a provider on loopback that
accepts requests and never answers: the lane fails at the deadline naming it, rather than after
timeout x client retries x step retries, and Dagster's step retries share the deadline."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from dagster import DagsterEventType, DagsterInstance

from notarius_dagster.engine.transcripts import register_transcript
from notarius_dagster.run.runner import run_session
from tests.fake_provider import KEY_ENV, FakeProvider, profile_for

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "samples" / "crd3-c2e001-slice.jsonl"


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProvider]:
    """A provider that accepts every request and never answers."""
    monkeypatch.setenv(KEY_ENV, "sk-test-not-a-key")
    with FakeProvider(mode="hang") as fake:
        yield fake


def run_hanging(
    tmp_path: Path, instance: DagsterInstance, api_base: str, *, timeout_s: float, deadline_s: float
) -> tuple[str, str | None, float]:
    cfg = profile_for(
        REPO / "configs" / "offline.yaml",
        tmp_path,
        api_base,
        name="hang",
        timeout_s=timeout_s,
        lane_deadline_s=deadline_s,
        max_concurrency=1,
    )
    register_transcript(tmp_path / "data" / "transcripts", "s1", SAMPLE)
    started = time.monotonic()
    outcome = run_session(
        session_id="s1", profile=cfg, data_root=tmp_path / "data", instance=instance, quiet=True
    )
    assert not outcome.success
    return outcome.run_id, outcome.error, time.monotonic() - started


@pytest.mark.timeout(120)
def test_a_hanging_provider_fails_the_lane_at_its_deadline(
    tmp_path: Path, instance: DagsterInstance, provider: FakeProvider
) -> None:
    run_id, error, elapsed = run_hanging(
        tmp_path, instance, provider.api_base, timeout_s=60, deadline_s=2
    )
    assert error is not None and error.startswith("lane npcs: ")
    assert "stopped at its deadline of 2 s (LLM profile lane_deadline_s)" in error
    assert re.search(r"with 0 of \d+ chunks done", error)
    assert elapsed < 30  # not the 60 s call timeout, let alone three step tries of it
    tries = instance.all_logs(
        run_id, of_type={DagsterEventType.STEP_START, DagsterEventType.STEP_RESTARTED}
    )
    assert [e.step_key for e in tries].count("lanes_1") == 1  # no step retry at the deadline


@pytest.mark.timeout(120)
def test_step_retries_share_the_lane_deadline(
    tmp_path: Path, instance: DagsterInstance, provider: FakeProvider
) -> None:
    """Each call times out after 1 s (a transient error): the first try asks for a step
    retry (14 s remain), the second try's timeout leaves less than the retry wait, so the lane
    fails naming the deadline: two tries, not three."""
    run_id, error, _ = run_hanging(
        tmp_path, instance, provider.api_base, timeout_s=1, deadline_s=15
    )
    assert error is not None and "deadline of 15 s" in error
    tries = instance.all_logs(
        run_id, of_type={DagsterEventType.STEP_START, DagsterEventType.STEP_RESTARTED}
    )
    assert [e.step_key for e in tries].count("lanes_1") == 2
    assert len(provider.requests) == 2


@pytest.mark.timeout(400)
def test_a_trickling_provider_cannot_keep_the_command_alive_past_the_deadline(
    tmp_path: Path,
) -> None:
    """Issue 23: a provider that sends its answer one byte every 0.2 s never trips the
    per-read timeout (10 s here). At the lane's deadline (3 s) the step fails; the call it
    abandoned must not keep the step process, the run or `notarius run` alive: the command
    exits 1 naming the deadline, and the run is recorded failed, not left STARTED."""
    import os
    import shutil
    import subprocess
    import sys

    from dagster import DagsterRunStatus

    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(REPO / "configs" / "dagster.yaml", home / "dagster.yaml")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NOTARIUS_", "DAGSTER_"))}
    env |= {"DAGSTER_HOME": str(home), "PYTHONPATH": str(REPO), KEY_ENV: "sk-test-not-a-key"}
    with FakeProvider(mode="trickle", trickle_s=0.2) as fake:
        cfg = profile_for(
            REPO / "configs" / "offline.yaml",
            tmp_path,
            fake.api_base,
            name="trickle",
            timeout_s=10,
            lane_deadline_s=3,
            max_concurrency=1,
        )
        started = time.monotonic()
        done = subprocess.run(
            [
                str(Path(sys.executable).with_name("notarius")),
                "run",
                str(SAMPLE),
                "--config",
                str(cfg),
                "--session-id",
                "s1",
                "--data",
                str(tmp_path / "data"),
                "--out",
                str(tmp_path / "bundles"),
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,  # today's code never exits: subprocess kills it and the test fails
            check=False,
        )
        elapsed = time.monotonic() - started
        assert fake.requests
    assert done.returncode == 1, done.stderr
    assert "stopped at its deadline of 3 s" in done.stderr and "Traceback" not in done.stderr
    assert elapsed < 200
    with DagsterInstance.from_config(str(home)) as instance:
        assert [r.status for r in instance.get_runs()] == [DagsterRunStatus.FAILURE]
