"""One transaction per session start (issue 23): the busy check, the transcript registration and
the run's creation happen under the session's lock (`store.py: session_lock`), so two starts of
one session give one run and one clear refusal; `sessions add` (like the inbox, see
tests/test_inbox_sensor.py) refuses to replace a transcript under a running session; the
instance is created once, safely, by whichever first command comes; `--session-id ""` is no
id. Commands run as a person runs them, the installed console script in its own process, the
model a fake OpenAI-compatible provider on loopback (tests/fake_provider.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dagster import DagsterInstance, DagsterRunStatus
from dagster._core.test_utils import create_run_for_test

from notarius_dagster.engine.inputs import parse_transcript
from notarius_dagster.sessions import add_session
from notarius_dagster.settings import store_paths
from tests.fake_provider import KEY_ENV, FakeProvider, profile_for
from tests.llm_double import ResponderServer, loopback_environ, loopback_profile_file

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "samples" / "crd3-c2e001-slice.jsonl"
OFFLINE = REPO / "configs" / "offline.yaml"
NOTARIUS = Path(sys.executable).with_name("notarius")


def env_for(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NOTARIUS_", "DAGSTER_"))}
    env |= {
        "DAGSTER_HOME": str(tmp_path / "home"),
        "PYTHONPATH": str(REPO),
        KEY_ENV: "sk-test-not-a-key",
        **loopback_environ(),
        "COLUMNS": "200",
    }
    return env


def start(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(NOTARIUS), *args],
        cwd=tmp_path,
        env=env_for(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(process: subprocess.Popen[str]) -> tuple[int, str]:
    _, stderr = process.communicate(timeout=400)
    return process.returncode, stderr


def units(path: Path, count: int) -> Path:
    path.write_text("\n".join(SAMPLE.read_text().splitlines()[:count]) + "\n")
    return path


def created_instance(tmp_path: Path) -> Path:
    """DAGSTER_HOME with the project's dagster.yaml and its storage created."""
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(REPO / "configs" / "dagster.yaml", home / "dagster.yaml")
    DagsterInstance.from_config(str(home)).dispose()
    return home


def test_sessions_add_refuses_an_empty_session_id(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(NOTARIUS), "sessions", "add", str(SAMPLE), "--session-id", "", "--data", "data"],
        cwd=tmp_path,
        env=env_for(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "session id" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "data" / "transcripts").exists()


@pytest.mark.timeout(600)
def test_two_starts_of_one_session_give_one_run_and_one_refusal(tmp_path: Path) -> None:
    """`notarius run a.jsonl --session-id c` and, 0.3 s later, `notarius run b.jsonl
    --session-id c`: one runs and publishes its own transcript, the other is refused at once
    naming why; never two runs, never a's command publishing b's content."""
    home = created_instance(tmp_path)
    a, b = units(tmp_path / "a.jsonl", 40), units(tmp_path / "b.jsonl", 60)
    with FakeProvider("ok", delay_s=3) as fake:  # each model call takes 3 s
        profile = profile_for(OFFLINE, tmp_path / "profile", fake.api_base, timeout_s=30)

        def run(path: Path) -> subprocess.Popen[str]:
            data = str(tmp_path / "data")
            return start(
                tmp_path, "run", str(path), "--config", str(profile), "--session-id", "c",
                "--data", data, "--out", f"{data}/bundles",
            )  # fmt: skip

        first = run(a)
        time.sleep(0.3)
        second = run(b)
        outcomes = {"a": finish(first), "b": finish(second)}
    statuses = sorted(status for status, _ in outcomes.values())
    assert statuses == [0, 1], outcomes
    winner = next(name for name, (status, _) in outcomes.items() if status == 0)
    _, refusal = next(o for o in outcomes.values() if o[0] == 1)
    assert "session 'c'" in refusal and "Traceback" not in refusal
    assert "held by another notarius command" in refusal or "in progress" in refusal
    published = json.loads((tmp_path / "data" / "bundles" / "c" / "index.json").read_text())
    given = a if winner == "a" else b
    document = parse_transcript(given.read_bytes(), file_name=given.name, source_id="c")
    assert published["source_digest"] == document.digest  # the winner's own content
    assert (tmp_path / "data" / "transcripts" / "c.jsonl").read_bytes() == given.read_bytes()
    with DagsterInstance.from_config(str(home)) as instance:
        assert [r.status for r in instance.get_runs()] == [DagsterRunStatus.SUCCESS]


@pytest.mark.timeout(600)
def test_first_commands_at_once_on_a_fresh_instance_all_succeed(
    tmp_path: Path, lane_loopback: ResponderServer
) -> None:
    """Three `notarius run` of different sessions and a `sessions list`, all started at once
    on a DAGSTER_HOME that holds nothing yet: the instance is created once, under a lock, by
    whichever comes first (not `table runs already exists` for the others)."""
    (tmp_path / "home").mkdir()
    data = str(tmp_path / "data")
    config = loopback_profile_file(OFFLINE, tmp_path / "profile", lane_loopback)
    runs = [
        start(
            tmp_path,
            "run",
            str(units(tmp_path / f"s{n}.jsonl", 20)),
            "--config",
            str(config),
            "--data",
            data,
            "--out",
            f"{data}/bundles",
        )  # fmt: skip
        for n in range(3)
    ]
    listing = start(tmp_path, "sessions", "list", "--json", "--data", data)
    outcomes = [finish(p) for p in [*runs, listing]]
    assert [status for status, _ in outcomes] == [0, 0, 0, 0], outcomes
    assert not [err for _, err in outcomes if "already exists" in err or "Traceback" in err]


def test_sessions_add_refuses_to_replace_the_transcript_of_a_running_session(
    tmp_path: Path,
) -> None:
    """While a run of the session is in progress, `notarius run` refuses; `sessions add` used
    to replace the transcript that very run is reading."""
    store = store_paths(data=tmp_path / "data", environ={})
    first, second = units(tmp_path / "s1.jsonl", 20), units(tmp_path / "later.jsonl", 30)
    with DagsterInstance.ephemeral() as instance:
        add_session(instance, "s1", first, store)
        create_run_for_test(
            instance, status=DagsterRunStatus.STARTED, tags={"notarius/session": "s1"}
        )
        with pytest.raises(Exception, match="session 's1' has a run queued or in progress"):
            add_session(instance, "s1", second, store)
    assert (store.transcripts / "s1.jsonl").read_bytes() == first.read_bytes()


def test_sessions_add_refuses_while_another_command_holds_the_session(tmp_path: Path) -> None:
    from notarius_dagster.store import SessionBusyError, session_lock

    store = store_paths(data=tmp_path / "data", environ={})
    first, second = units(tmp_path / "s1.jsonl", 20), units(tmp_path / "later.jsonl", 30)
    with DagsterInstance.ephemeral() as instance:
        add_session(instance, "s1", first, store)
        with (
            session_lock(store, "s1", doing="start a run of it"),
            pytest.raises(SessionBusyError, match=rf"pid {os.getpid()} on"),
        ):
            add_session(instance, "s1", second, store)
        add_session(instance, "s1", second, store)  # free again once released
    assert (store.transcripts / "s1.jsonl").read_bytes() == second.read_bytes()
