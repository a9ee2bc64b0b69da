"""`notarius run` as a person uses it: the installed console script in its own process, with
progress on stderr, a summary on stdout, and a clear message and non-zero exit on failure.
The model is the test double, loaded in that process through NOTARIUS_TEST_DOUBLE_RESPONDER."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "samples" / "crd3-c2e001-slice.jsonl"
NOTARIUS = Path(sys.executable).with_name("notarius")


def notarius(tmp_path: Path, *args: str,
             responder: str = "tests.doubles:lane_responder") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NOTARIUS_", "DAGSTER_"))}
    env.update({"DAGSTER_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO),
                "NOTARIUS_TEST_DOUBLE_RESPONDER": responder,
                "COLUMNS": "160"})
    (tmp_path / "home").mkdir(exist_ok=True)
    return subprocess.run([str(NOTARIUS), *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300, check=False)


def run_args(tmp_path: Path, transcript: Path, *extra: str) -> list[str]:
    return ["run", str(transcript), "--config", str(REPO / "configs" / "offline.yaml"),
            "--out", str(tmp_path / "bundles"), "--data", str(tmp_path / "data"),
            "--llm-profile", "test-double", *extra]


def test_run_shows_progress_and_a_summary_and_publishes(tmp_path: Path) -> None:
    done = notarius(tmp_path, *run_args(tmp_path, SAMPLE, "--session-id", "demo"))
    assert done.returncode == 0, done.stderr
    assert "npcs: chunk 1/" in done.stderr and "npcs: normalized" in done.stderr
    assert "validation: approved" in done.stdout and "LLM calls:" in done.stdout
    index = json.loads((tmp_path / "bundles" / "demo" / "index.json").read_text())
    assert index["session_id"] == "demo" and index["lanes"][0]["lane_id"] == "npcs"


def test_run_fails_with_the_file_and_line_and_no_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "Broken Session.jsonl"
    bad.write_text('{"text": "fine"}\n{"speaker": "DM", "text": 7}\n')
    done = notarius(tmp_path, *run_args(tmp_path, bad))
    assert done.returncode == 1
    assert "broken-session.jsonl line 2" in done.stderr and "text" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "bundles" / "broken-session").exists()


def test_run_refuses_a_bad_session_id_and_a_bad_profile(tmp_path: Path) -> None:
    done = notarius(tmp_path, *run_args(tmp_path, SAMPLE, "--session-id", "Not OK"))
    assert done.returncode == 1 and "session id" in done.stderr.lower()
    profile = tmp_path / "typo.yaml"
    profile.write_text((REPO / "configs" / "offline.yaml").read_text().replace(
        "llm_profile: offline", "llm_profile: offline\n  lanez: []"))
    done = notarius(tmp_path, "run", str(SAMPLE), "--config", str(profile), "--out",
                    str(tmp_path / "b"))
    assert done.returncode == 1
    assert "typo.yaml" in done.stderr and "pipeline.lanez" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_bad_runtime_reference_is_refused_before_anything_runs(tmp_path: Path) -> None:
    done = notarius(tmp_path, *run_args(tmp_path, SAMPLE, "--reference", "nope=x.txt"))
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        "error: runtime references: profile 'offline.yaml': --reference nope: no selected "
        "target declares this slot")
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "bundles").exists()
