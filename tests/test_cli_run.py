"""`notarius run` as a person uses it: the installed console script in its own process, with
progress on stderr, a summary on stdout, and a clear message and non-zero exit on failure.
The model is the test double, reached from that process through litellm's OpenAI route: the
loopback server `lane_loopback` (tests/llm_double.py) named by a copy of configs/offline.yaml."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.llm_double import ResponderServer, loopback_environ, loopback_profile_file

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "samples" / "crd3-c2e001-slice.jsonl"
OFFLINE = REPO / "configs" / "offline.yaml"
NOTARIUS = Path(sys.executable).with_name("notarius")


def offline_answered_by(tmp_path: Path, server: ResponderServer) -> Path:
    """The file `run_args` names: configs/offline.yaml whose LLM profile `loopback` is the test
    double's server `server`."""
    return loopback_profile_file(OFFLINE, tmp_path / "profile", server)


@pytest.fixture(autouse=True)
def offline_with_the_double(tmp_path: Path, lane_loopback: ResponderServer) -> Path:
    return offline_answered_by(tmp_path, lane_loopback)


def notarius(
    tmp_path: Path, *args: str, environ: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NOTARIUS_", "DAGSTER_"))}
    env.update(
        {
            "DAGSTER_HOME": str(tmp_path / "home"),
            "PYTHONPATH": str(REPO),
            "COLUMNS": "160",
            **loopback_environ(),
            **(environ or {}),
        }
    )
    (tmp_path / "home").mkdir(exist_ok=True)
    return subprocess.run(
        [str(NOTARIUS), *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def run_args(tmp_path: Path, transcript: Path, *extra: str) -> list[str]:
    return [
        "run",
        str(transcript),
        "--config",
        str(tmp_path / "profile" / OFFLINE.name),
        "--out",
        str(tmp_path / "bundles"),
        "--data",
        str(tmp_path / "data"),
        "--llm-profile",
        "loopback",
        *extra,
    ]


def test_run_shows_progress_and_a_summary_and_publishes(tmp_path: Path) -> None:
    done = notarius(tmp_path, *run_args(tmp_path, SAMPLE, "--session-id", "demo"))
    assert done.returncode == 0, done.stderr
    assert "npcs: chunk 1/" in done.stderr and "npcs: normalized" in done.stderr
    assert "all 1 lane(s) accepted · rejections: 0" in done.stdout and "LLM calls:" in done.stdout
    assert "Warning" not in done.stderr  # e.g. Dagster's BetaWarning for Output(data_version=)
    index = json.loads((tmp_path / "bundles" / "demo" / "index.json").read_text())
    assert index["session_id"] == "demo" and index["lanes"][0]["lane_id"] == "npcs"


def test_run_fails_with_the_file_and_line_and_no_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "Broken Session.jsonl"
    bad.write_text('{"text": "fine"}\n{"speaker": "DM", "text": 7}\n')
    done = notarius(tmp_path, *run_args(tmp_path, bad))
    assert done.returncode == 1
    # the user's file, not the store's copy (`broken-session.jsonl`)
    assert "Broken Session.jsonl line 2" in done.stderr and "text" in done.stderr
    assert "broken-session.jsonl" not in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "bundles" / "broken-session").exists()


def test_run_refuses_a_bad_session_id_and_a_bad_profile(tmp_path: Path) -> None:
    done = notarius(tmp_path, *run_args(tmp_path, SAMPLE, "--session-id", "Not OK"))
    assert done.returncode == 2 and "session id" in done.stderr.lower()  # a usage error
    profile = tmp_path / "typo.yaml"
    profile.write_text(
        (REPO / "configs" / "offline.yaml")
        .read_text()
        .replace("llm_profile: offline", "llm_profile: offline\n  lanez: []")
    )
    done = notarius(
        tmp_path, "run", str(SAMPLE), "--config", str(profile), "--out", str(tmp_path / "b")
    )
    assert done.returncode == 1
    assert "typo.yaml" in done.stderr and "pipeline.lanez" in done.stderr
    assert "Traceback" not in done.stderr


def test_run_takes_the_profile_and_the_store_from_the_environment_like_backfill(
    tmp_path: Path,
) -> None:
    environ = {
        "NOTARIUS_PROFILE": str(tmp_path / "profile" / OFFLINE.name),
        "NOTARIUS_DATA": str(tmp_path / "data"),
        "NOTARIUS_LLM_PROFILE": "loopback",
    }
    done = notarius(tmp_path, "run", str(SAMPLE), "--session-id", "env", environ=environ)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "data" / "bundles" / "env" / "index.json").is_file()


def test_a_missing_profile_is_named_before_any_session_is(tmp_path: Path) -> None:
    done = notarius(tmp_path, "run", str(SAMPLE), "--config", "nope.yaml")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "error: profile 'nope.yaml' (--config) does not exist or is not a file"
    ]
    done = notarius(
        tmp_path, "run", str(SAMPLE), environ={"NOTARIUS_PROFILE": str(tmp_path / "gone.yaml")}
    )
    assert done.returncode == 2 and "(NOTARIUS_PROFILE)" in done.stderr
    assert "materializing" not in done.stderr


def test_version(tmp_path: Path) -> None:
    from notarius_dagster import __version__

    done = notarius(tmp_path, "--version")
    assert done.returncode == 0 and done.stdout.strip() == f"notarius {__version__}"


def test_a_bad_runtime_reference_is_refused_before_anything_runs(tmp_path: Path) -> None:
    done = notarius(tmp_path, *run_args(tmp_path, SAMPLE, "--reference", "nope=x.txt"))
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        "error: runtime references: profile 'offline.yaml': --reference nope: no selected "
        "target declares this slot"
    )
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "bundles").exists()


def test_an_empty_session_id_is_refused_not_ignored(tmp_path: Path) -> None:
    done = notarius(tmp_path, *run_args(tmp_path, SAMPLE, "--session-id", ""))
    assert done.returncode == 2
    assert "session id must match" in done.stderr and "got ''" in done.stderr
    assert not (tmp_path / "data" / "transcripts").exists()


def test_two_long_file_names_cut_to_one_session_id_are_refused(tmp_path: Path) -> None:
    stem = "critical-role-campaign-two-episode-one-curious-beginnings-full-session"
    first = tmp_path / f"{stem}-one-of-two.jsonl"
    second = tmp_path / f"{stem}-two-of-two.jsonl"
    for path in (first, second):
        path.write_text('{"speaker": "DM", "text": 7}\n')  # registered, then refused
    assert notarius(tmp_path, *run_args(tmp_path, first)).returncode == 1
    done = notarius(tmp_path, *run_args(tmp_path, second))
    assert done.returncode == 2
    assert first.name in done.stderr and second.name in done.stderr
    assert "--session-id" in done.stderr
    again = notarius(tmp_path, *run_args(tmp_path, first))  # the same file again is fine
    assert again.returncode == 1 and "both give session id" not in again.stderr


def test_several_transcripts_run_in_one_process_and_an_unchanged_rerun_is_up_to_date(
    tmp_path: Path,
) -> None:
    other = tmp_path / "Second Slice.jsonl"
    other.write_text(SAMPLE.read_text(encoding="utf-8"), encoding="utf-8")
    args = run_args(tmp_path, SAMPLE)
    args.insert(2, str(other))  # run A B --config ...
    done = notarius(tmp_path, *args)
    assert done.returncode == 0, done.stderr
    assert "session crd3-c2e001-slice: materializing" in done.stderr
    assert "session second-slice: materializing" in done.stderr
    assert done.stdout.count("all 1 lane(s) accepted · rejections: 0") == 2
    again = notarius(tmp_path, *args)
    assert again.returncode == 0, again.stderr
    assert again.stderr.count("up to date (nothing changed; no run)") == 2
    assert ": chunk " not in again.stderr


def test_several_sessions_at_once_one_failing_leaves_the_others_published(
    tmp_path: Path,
) -> None:
    broken = tmp_path / "Broken.jsonl"
    broken.write_text('{"speaker": "DM", "text": 7}\n')
    other = tmp_path / "Second Slice.jsonl"
    other.write_text(SAMPLE.read_text(encoding="utf-8"), encoding="utf-8")
    args = run_args(tmp_path, SAMPLE, "--jobs", "3")
    args[2:2] = [str(broken), str(other)]  # run A broken B --config ...
    done = notarius(tmp_path, *args)
    assert done.returncode == 1
    assert "Broken.jsonl line 1" in done.stderr and "Traceback" not in done.stderr
    assert done.stdout.count("all 1 lane(s) accepted · rejections: 0") == 2
    for session in ("crd3-c2e001-slice", "second-slice"):
        assert (tmp_path / "bundles" / session / "index.json").is_file()
    assert not (tmp_path / "bundles" / "broken").exists()
    assert ": chunk " not in done.stderr  # several at once: no interleaved progress lines


def test_two_transcripts_of_one_command_naming_one_session_are_refused_first(
    tmp_path: Path,
) -> None:
    (tmp_path / "a").mkdir()
    twin = tmp_path / "a" / SAMPLE.name
    twin.write_text(SAMPLE.read_text(encoding="utf-8"), encoding="utf-8")
    args = run_args(tmp_path, SAMPLE)
    args.insert(2, str(twin))
    done = notarius(tmp_path, *args)
    assert done.returncode == 2
    assert "both name session 'crd3-c2e001-slice'" in done.stderr
    assert str(tmp_path) not in done.stderr  # file names, not paths
    assert not (tmp_path / "data" / "transcripts").exists()  # nothing registered


def _processes_marked(mark: str) -> dict[int, str]:
    """Live processes whose environment carries `mark`, with their command lines (every
    descendant of a command inherits its environment; a zombie shows none)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if mark.encode() in environ:
            found[int(entry.name)] = cmdline
    return found


def _is_log_capture(cmdline: str) -> bool:
    """Dagster's compute-log capture of a step: `tail -F` of each stream and its watcher."""
    return cmdline.startswith("tail -F ") or "dagster/_core/execution/scripts/watch_orphans.py" in (
        cmdline
    )


def _run_marked(tmp_path: Path, mark: str) -> tuple[subprocess.Popen[bytes], dict[int, str], str]:
    """`notarius run` of the sample (one session), with every process of the command marked;
    returns it, the other marked processes seen while it ran, and its output."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NOTARIUS_", "DAGSTER_"))}
    env.update(
        {
            "DAGSTER_HOME": str(tmp_path / "home"),
            "PYTHONPATH": str(REPO),
            "NOTARIUS_TEST_PROCESS_MARK": mark,
            **loopback_environ(),
        }
    )
    (tmp_path / "home").mkdir(exist_ok=True)
    log = tmp_path / f"{mark}.log"
    with log.open("wb") as out:
        run = subprocess.Popen(
            [str(NOTARIUS), *run_args(tmp_path, SAMPLE, "--session-id", "demo")],
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        others: dict[int, str] = {}
        while run.poll() is None:
            seen = _processes_marked(f"NOTARIUS_TEST_PROCESS_MARK={mark}")
            others |= {pid: cmd for pid, cmd in seen.items() if pid != run.pid}
            time.sleep(0.05)
        run.wait(timeout=300)
    return run, others, log.read_text(errors="replace")


@pytest.mark.slow  # two runs of the sample: a minute on a loaded machine
def test_a_run_is_one_process_nothing_outlives_it_and_an_unchanged_rerun_starts_none(
    tmp_path: Path,
) -> None:
    """A session runs in the command's own process: no forkserver, no step process (it used to
    fork one per step from a forkserver), only Dagster's log capture of each step (`tail` and
    its watcher), and none of them outlives the command. An unchanged re-run, which launches no
    run, starts no other process at all."""
    first, others, output = _run_marked(tmp_path, "first")
    assert first.returncode == 0, output
    assert others, "the log capture of the run's steps was not seen"
    assert all(_is_log_capture(cmd) for cmd in others.values()), sorted(others.values())
    assert _processes_marked("NOTARIUS_TEST_PROCESS_MARK=first") == {}

    again, others, output = _run_marked(tmp_path, "again")
    assert again.returncode == 0, output
    assert "up to date" in output
    assert others == {}
    assert _processes_marked("NOTARIUS_TEST_PROCESS_MARK=again") == {}
