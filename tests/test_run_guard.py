"""One writer per session through the CLI, on a real instance (SQLite under DAGSTER_HOME): a
second `notarius run` of a session whose run is in progress is refused naming that run; a
`notarius run` killed with -9 leaves a STARTED run that the next command marks failed with a
reason, and the next run proceeds. The daemon's side is configuration (dagster.yaml)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from dagster import DagsterEventType, DagsterInstance, DagsterRunStatus

from notarius_dagster.run_guard import CLI_HOST_TAG, CLI_PID_TAG, SESSION_TAG
from tests.fake_provider import KEY_ENV, FakeProvider, profile_for
from tests.llm_double import ResponderServer, loopback_environ, loopback_profile_file

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "samples" / "crd3-c2e001-slice.jsonl"
NOTARIUS = Path(sys.executable).with_name("notarius")


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    """A provider that accepts every request and never answers."""
    with FakeProvider(mode="hang") as fake:
        yield fake


def env_for(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NOTARIUS_", "DAGSTER_"))}
    env.update(
        {
            "DAGSTER_HOME": str(tmp_path / "home"),
            "PYTHONPATH": str(REPO),
            KEY_ENV: "sk-test-not-a-key",
            **loopback_environ(),
            "COLUMNS": "160",
        }
    )
    return env


def run_args(tmp_path: Path, config: Path, *extra: str) -> list[str]:
    return [
        str(NOTARIUS),
        "run",
        str(SAMPLE),
        "--config",
        str(config),
        "--session-id",
        "s1",
        "--out",
        str(tmp_path / "bundles"),
        "--data",
        str(tmp_path / "data"),
        *extra,
    ]


def run_with_the_double(
    tmp_path: Path, cfg: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """`notarius run` of session s1 to its end, answered by the test double (the LLM profile
    `loopback`, which `cfg` must define: `loopback_profile_file`)."""
    return subprocess.run(
        run_args(tmp_path, cfg, "--llm-profile", "loopback"),
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def hanging_profile(tmp_path: Path, api_base: str, timeout_s: int = 90) -> Path:
    return profile_for(
        REPO / "configs" / "offline.yaml",
        tmp_path,
        api_base,
        name="hang",
        timeout_s=timeout_s,
        max_concurrency=1,
    )


@pytest.mark.timeout(400)
def test_a_second_cli_run_is_refused_and_a_killed_one_is_failed_by_the_next(
    tmp_path: Path, provider: FakeProvider, lane_loopback: ResponderServer
) -> None:
    (tmp_path / "home").mkdir()
    shutil.copy(REPO / "configs" / "dagster.yaml", tmp_path / "home" / "dagster.yaml")
    env = env_for(tmp_path)
    cfg = hanging_profile(tmp_path, provider.api_base)
    loopback_profile_file(cfg, cfg.parent, lane_loopback, select=False)
    first = subprocess.Popen(
        run_args(tmp_path, cfg),
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 240
        while not provider.requests and time.monotonic() < deadline and first.poll() is None:
            time.sleep(0.5)
        assert provider.requests, "the first run never called the provider"

        with DagsterInstance.from_config(str(tmp_path / "home")) as instance:
            (hung,) = instance.get_runs()
            assert hung.status == DagsterRunStatus.STARTED
            assert hung.tags[SESSION_TAG] == "s1" and hung.tags[CLI_PID_TAG] == str(first.pid)
            assert CLI_HOST_TAG in hung.tags

        second = run_with_the_double(tmp_path, cfg, env)
        assert second.returncode == 1
        assert "has a run queued or in progress" in second.stderr
        assert hung.run_id in second.stderr and "Traceback" not in second.stderr

        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()

    third = run_with_the_double(tmp_path, cfg, env)
    assert third.returncode == 0, third.stderr
    with DagsterInstance.from_config(str(tmp_path / "home")) as instance:
        old = instance.get_run_by_id(hung.run_id)
        assert old is not None and old.status == DagsterRunStatus.FAILURE
        failures = instance.all_logs(hung.run_id, of_type=DagsterEventType.RUN_FAILURE)
        assert any(
            f"pid {first.pid}" in (e.message or "") and "killed or crashed" in (e.message or "")
            for e in failures
        )
        statuses = sorted(r.status.value for r in instance.get_runs())
        assert statuses == ["FAILURE", "SUCCESS"]


@pytest.mark.timeout(300)
def test_sigterm_stops_every_session_of_a_command_and_records_their_runs_ended(
    tmp_path: Path, provider: FakeProvider
) -> None:
    """`kill` (SIGTERM) of a `notarius run` of several sessions is Ctrl-C for all of them: the
    worker processes stop their runs (a step waiting on the model ends when its call times
    out, the profile's timeout_s), the runs are recorded as ended, not left STARTED, and no
    worker is left calling the model."""
    (tmp_path / "home").mkdir()
    shutil.copy(REPO / "configs" / "dagster.yaml", tmp_path / "home" / "dagster.yaml")
    cfg = hanging_profile(tmp_path, provider.api_base, timeout_s=5)
    other = tmp_path / "other.jsonl"
    shutil.copy(SAMPLE, other)
    args = [a for a in run_args(tmp_path, cfg) if a not in ("--session-id", "s1")]
    args[3:3] = [str(other)]  # notarius run SAMPLE other --config ...
    run = subprocess.Popen(
        [*args, "--jobs", "2"],
        cwd=tmp_path,
        env=env_for(tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 240
        while len(provider.requests) < 2 and time.monotonic() < deadline and run.poll() is None:
            time.sleep(0.5)
        assert len(provider.requests) >= 2, "both sessions should be calling the provider"
        run.send_signal(signal.SIGTERM)
        _, stderr = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode != 0 and "Traceback" not in stderr
    time.sleep(2)  # the workers' own exit
    with DagsterInstance.from_config(str(tmp_path / "home")) as instance:
        runs = instance.get_runs()
        assert len(runs) == 2
        assert all(r.status != DagsterRunStatus.STARTED for r in runs)
        workers = {int(r.tags[CLI_PID_TAG]) for r in runs}
    assert run.pid not in workers  # the sessions ran in worker processes
    for pid in workers:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_the_instance_config_limits_one_run_per_session_and_monitors_runs(
    tmp_path: Path,
) -> None:
    for source in (REPO / "configs" / "dagster.yaml", REPO / "configs" / "dagster-postgres.yaml"):
        home = tmp_path / source.stem
        home.mkdir()
        text = source.read_text()
        if "postgres" in source.name:  # only the queue and monitoring matter here
            text = text.split("storage:")[0] + "concurrency:" + text.split("concurrency:")[1]
        (home / "dagster.yaml").write_text(text)
        with DagsterInstance.from_config(str(home)) as instance:
            limits = instance.get_concurrency_config().run_queue_config.tag_concurrency_limits
            assert {
                "key": "notarius/session",
                "value": {"applyLimitPerUniqueValue": True},
                "limit": 1,
            } in limits
            assert {
                "key": "dagster/partition",
                "value": {"applyLimitPerUniqueValue": True},
                "limit": 1,
            } in limits
            assert instance.run_monitoring_enabled


def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_sessions_list_fails_orphaned_cli_runs_of_this_host_only(tmp_path: Path) -> None:
    """A run tagged with a pid of this host that is gone is reported failed with the reason;
    a live pid's run and another host's run are left alone."""
    import socket

    from dagster import job, op

    @op
    def nothing() -> None:
        pass

    @job
    def tagged() -> None:
        nothing()

    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(REPO / "configs" / "dagster.yaml", home / "dagster.yaml")
    host = socket.gethostname()
    with DagsterInstance.from_config(str(home)) as instance:
        runs = {
            name: instance.create_run_for_job(
                tagged, tags={CLI_HOST_TAG: h, CLI_PID_TAG: str(pid), SESSION_TAG: "s1"}
            ).run_id
            for name, h, pid in [
                ("dead", host, _dead_pid()),
                ("alive", host, os.getpid()),
                ("elsewhere", "another-host", _dead_pid()),
            ]
        }
    env = env_for(tmp_path)
    listed = subprocess.run(
        [str(NOTARIUS), "sessions", "list", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    with DagsterInstance.from_config(str(home)) as instance:
        status = {
            name: instance.get_run_by_id(run_id).status  # type: ignore[union-attr]
            for name, run_id in runs.items()
        }
        assert status == {
            "dead": DagsterRunStatus.FAILURE,
            "alive": DagsterRunStatus.NOT_STARTED,
            "elsewhere": DagsterRunStatus.NOT_STARTED,
        }
        (failure,) = instance.all_logs(runs["dead"], of_type=DagsterEventType.RUN_FAILURE)
        assert "ended without finishing it (killed or crashed)" in (failure.message or "")
