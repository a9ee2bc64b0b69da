"""A lane's total deadline (LLM profile `lane_deadline_s`) against a provider on loopback that
accepts requests and never answers: the lane fails at the deadline naming it, rather than after
timeout x client retries x step retries, and Dagster's step retries share the deadline."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from dagster import DagsterEventType, DagsterInstance

from notarius_dagster.engine.transcripts import register_transcript
from notarius_dagster.runner import run_session

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "samples" / "crd3-c2e001-slice.jsonl"


class HangingProvider(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Hang)
        self.hits = 0
        self.release = threading.Event()


class _Hang(BaseHTTPRequestHandler):
    server: HangingProvider

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        self.server.hits += 1
        self.server.release.wait(120)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[HangingProvider]:
    monkeypatch.setenv("NOTARIUS_FAKE_KEY", "sk-test-not-a-key")
    server = HangingProvider()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.release.set()
    server.shutdown()


def run_hanging(
    tmp_path: Path, instance: DagsterInstance, port: int, *, timeout_s: float, deadline_s: float
) -> tuple[str, str | None, float]:
    text = (
        (REPO / "configs" / "offline.yaml")
        .read_text()
        .replace("llm_profile: offline", "llm_profile: hang")
    )
    text += (
        f"llm_profiles:\n  hang: {{model: openai/hang, api_base: 'http://127.0.0.1:{port}/v1',"
        f" api_key_env: NOTARIUS_FAKE_KEY, timeout_s: {timeout_s}, retries: 0,"
        f" lane_deadline_s: {deadline_s}}}\n"
    )
    cfg = tmp_path / "hang.yaml"
    cfg.write_text(text)
    register_transcript(tmp_path / "data" / "transcripts", "s1", SAMPLE)
    started = time.monotonic()
    outcome = run_session(
        session_id="s1", profile=cfg, data_root=tmp_path / "data", instance=instance, quiet=True
    )
    assert not outcome.success
    return outcome.run_id, outcome.error, time.monotonic() - started


@pytest.mark.timeout(120)
def test_a_hanging_provider_fails_the_lane_at_its_deadline(
    tmp_path: Path, instance: DagsterInstance, provider: HangingProvider
) -> None:
    run_id, error, elapsed = run_hanging(
        tmp_path, instance, provider.server_address[1], timeout_s=60, deadline_s=2
    )
    assert error is not None and error.startswith("npcs: ")
    assert "stopped at its deadline of 2 s (LLM profile lane_deadline_s)" in error
    assert re.search(r"with 0 of \d+ chunks done", error)
    assert elapsed < 30  # not the 60 s call timeout, let alone three step tries of it
    tries = instance.all_logs(
        run_id, of_type={DagsterEventType.STEP_START, DagsterEventType.STEP_RESTARTED}
    )
    assert [e.step_key for e in tries].count("npcs") == 1  # no step retry at the deadline


@pytest.mark.timeout(120)
def test_step_retries_share_the_lane_deadline(
    tmp_path: Path, instance: DagsterInstance, provider: HangingProvider
) -> None:
    """Each call times out after 1 s (a transient error): the first try asks for a step
    retry (14 s remain), the second try's timeout leaves less than the retry wait, so the lane
    fails naming the deadline: two tries, not three."""
    run_id, error, _ = run_hanging(
        tmp_path, instance, provider.server_address[1], timeout_s=1, deadline_s=15
    )
    assert error is not None and "deadline of 15 s" in error
    tries = instance.all_logs(
        run_id, of_type={DagsterEventType.STEP_START, DagsterEventType.STEP_RESTARTED}
    )
    assert [e.step_key for e in tries].count("npcs") == 2
    assert provider.hits == 2
