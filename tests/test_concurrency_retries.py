"""Concurrency and retries: LLM calls inside a lane run concurrently up to the LLM profile's
limit and never above it; rate limits retry with backoff; permanent provider errors fail with
the provider's words and no prompt text, also through Dagster; lane steps are in pool `llm`
and the instance has a run queue limit.

Lanes run through `run_lane` with the real `LiteLLMClient`, so every call goes through
litellm's real call path into the in-process test double."""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from dagster import AssetKey, DagsterInstance

import notarius_dagster.llm.client as client_module
from notarius_dagster.engine.chunk_stage import run_chunk_stage
from notarius_dagster.engine.errors import LaneError
from notarius_dagster.engine.inputs import parse_transcript
from notarius_dagster.engine.lane_runner import LaneResult, run_lane
from notarius_dagster.engine.models import Chunk, SourceDocument
from notarius_dagster.engine.resolution import ResolvedLane, resolve_profile_file
from notarius_dagster.engine.transcripts import register_transcript
from notarius_dagster.llm.client import LiteLLMClient, TransientLLMError
from notarius_dagster.modules import registry
from notarius_dagster.run.runner import run_session
from tests.doubles import npc_answer, units_in
from tests.llm_double import (
    double_profile,
    provider_error_of,
    scripted_llm,
)
from tests.run_definitions import build_run_definitions

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "samples" / "crd3-c2e001-slice.jsonl"
PROFILE = REPO / "configs" / "offline.yaml"
Messages = list[dict[str, Any]]


@pytest.fixture(scope="module")
def npcs_lane() -> tuple[ResolvedLane, SourceDocument, tuple[Chunk, ...]]:
    pipeline = resolve_profile_file(PROFILE, llm_profile="test-double", registry=registry())
    document = parse_transcript(SAMPLE.read_bytes(), file_name=SAMPLE.name, source_id="s1")
    chunk_map = run_chunk_stage(
        pipeline.chunk, document, session_id="s1", registry=registry()
    ).chunk_map
    assert chunk_map is not None and len(chunk_map.chunks) >= 6
    return pipeline.lane("npcs"), document, tuple(chunk_map.chunks)


def run_npcs(
    lane_setup: tuple[ResolvedLane, SourceDocument, tuple[Chunk, ...]], client: LiteLLMClient
) -> LaneResult:
    lane, document, chunks = lane_setup
    return run_lane(
        lane,
        document=document,
        chunks=chunks,
        references={},
        client=client,
        session_id="s1",
        llm_fingerprint="test",
        max_concurrency=client.profile.max_concurrency,
        registry=registry(),
    )


class Overlap:
    """A responder that holds each call for a while and records the most calls in flight."""

    def __init__(self, hold_s: float = 0.25) -> None:
        self.hold_s = hold_s
        self.in_flight = 0
        self.peak = 0
        self._lock = threading.Lock()

    def __call__(self, messages: Messages, response_format: Any) -> str:
        with self._lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
        try:
            time.sleep(self.hold_s)
            return json.dumps(npc_answer(messages))
        finally:
            with self._lock:
                self.in_flight -= 1


# --- (a) concurrency inside a lane -----------------------------------------------------------


def test_lane_calls_run_concurrently_up_to_the_profile_limit_and_never_above(
    npcs_lane: Any,
) -> None:
    overlap = Overlap()
    client = LiteLLMClient(double_profile(max_concurrency=3), retry_backoff_s=0)
    with scripted_llm(overlap) as double:
        result = run_npcs(npcs_lane, client)
    assert result.status == "accepted"
    assert len(double.calls) == len(npcs_lane[2])
    assert overlap.peak == 3


def test_a_profile_limit_of_one_makes_the_calls_sequential(npcs_lane: Any) -> None:
    overlap = Overlap(hold_s=0.05)
    client = LiteLLMClient(double_profile(max_concurrency=1), retry_backoff_s=0)
    with scripted_llm(overlap):
        run_npcs(npcs_lane, client)
    assert overlap.peak == 1


def test_through_dagster_the_lane_uses_the_resolved_profiles_limit(tmp_path: Path) -> None:
    """The built-in `test-double` LLM profile allows 2 concurrent calls."""
    overlap = Overlap()
    register_transcript(tmp_path / "data" / "transcripts", "conc", SAMPLE)
    with DagsterInstance.ephemeral() as instance, scripted_llm(overlap) as double:
        outcome = run_session(
            session_id="conc",
            profile=PROFILE,
            data_root=tmp_path / "data",
            llm_profile="test-double",
            instance=instance,
            quiet=True,
        )
    assert outcome.success, outcome.error
    assert len(double.calls) >= 6 and overlap.peak == 2


# --- (b) rate limits retry with backoff ------------------------------------------------------


def test_a_rate_limited_call_retries_with_backoff_then_the_lane_succeeds(
    npcs_lane: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    pauses: list[float] = []
    monkeypatch.setattr(client_module, "time", SimpleNamespace(sleep=pauses.append))
    limited = {"left": 2}
    lock = threading.Lock()

    def responder(messages: Messages, response_format: Any) -> str:
        with lock:
            if limited["left"]:
                limited["left"] -= 1
                raise provider_error_of("rate_limit", "Rate limit reached; try again in 1s")
        return json.dumps(npc_answer(messages))

    client = LiteLLMClient(double_profile(retries=2, max_concurrency=1), retry_backoff_s=1.0)
    with scripted_llm(responder) as double:
        result = run_npcs(npcs_lane, client)
    chunks = len(npcs_lane[2])
    assert result.status == "accepted" and not result.rejections
    assert len(double.calls) == chunks + 2  # two refused, then every chunk answered
    assert result.stats.usage.calls == chunks  # refused calls are not answers
    assert len(pauses) == 2
    assert 1.0 <= pauses[0] <= 2.0 and 2.0 <= pauses[1] <= 3.0  # exponential, with jitter


def test_a_rate_limit_that_outlasts_the_retries_escapes_the_lane_as_transient(
    npcs_lane: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(client_module, "time", SimpleNamespace(sleep=lambda s: None))

    def always_limited(messages: Messages, response_format: Any) -> str:
        raise provider_error_of("rate_limit", "Rate limit reached")

    client = LiteLLMClient(double_profile(retries=1, max_concurrency=1), retry_backoff_s=0)
    with scripted_llm(always_limited), pytest.raises(TransientLLMError):
        run_npcs(npcs_lane, client)


# --- (c) permanent errors fail fast with the provider's words --------------------------------


def echoing(kind: Any) -> Any:
    """A provider that refuses and echoes the longest line of the prompt back."""

    def respond(messages: Messages, response_format: Any) -> str:
        user = next(m["content"] for m in reversed(messages) if m["role"] == "user")
        echoed = max(user.splitlines(), key=len)
        raise provider_error_of(kind, f"Invalid request (code 4711) near: {echoed}")

    return respond


def longest_prompt_lines(calls: Any) -> list[str]:
    return [max(c.messages[-1]["content"].splitlines(), key=len) for c in calls]


@pytest.mark.parametrize("kind", ["authentication", "bad_request"])
def test_a_permanent_error_fails_the_lane_with_the_providers_words_and_no_prompt(
    npcs_lane: Any, kind: str
) -> None:
    client = LiteLLMClient(double_profile(retries=3, max_concurrency=1), retry_backoff_s=0)
    with scripted_llm(echoing(kind)) as double, pytest.raises(LaneError) as info:
        run_npcs(npcs_lane, client)
    message = str(info.value)
    assert "Invalid request (code 4711)" in message
    assert "failed after 1 attempt:" in message  # the client did not retry it
    assert not any(line.strip() in message for line in longest_prompt_lines(double.calls))
    assert not any(
        text in message
        for _, _, text in units_in(list(double.calls[0].messages))
        if len(text) >= 20
    )


def test_a_permanent_error_stops_the_lane_at_the_first_call(npcs_lane: Any) -> None:
    client = LiteLLMClient(double_profile(retries=3, max_concurrency=1), retry_backoff_s=0)
    with scripted_llm(echoing("authentication")) as double, pytest.raises(LaneError):
        run_npcs(npcs_lane, client)
    assert len(double.calls) == 1


def test_through_dagster_the_step_failure_is_the_providers_message(tmp_path: Path) -> None:
    register_transcript(tmp_path / "data" / "transcripts", "denied", SAMPLE)
    with DagsterInstance.ephemeral() as instance, scripted_llm(echoing("authentication")) as double:
        outcome = run_session(
            session_id="denied",
            profile=PROFILE,
            data_root=tmp_path / "data",
            llm_profile="test-double",
            instance=instance,
            quiet=True,
        )
    assert not outcome.success and outcome.error is not None
    assert outcome.error.startswith("lane npcs: ")
    assert "AuthenticationError" in outcome.error and "Invalid request (code 4711)" in outcome.error
    assert "Traceback" not in outcome.error and 'File "' not in outcome.error
    assert not any(line.strip() in outcome.error for line in longest_prompt_lines(double.calls))
    assert not (tmp_path / "data" / "bundles" / "denied").exists()


# --- (d) the pool and the run queue ----------------------------------------------------------


def test_every_lane_asset_is_in_pool_llm_and_nothing_else_is(tmp_path: Path) -> None:
    defs = build_run_definitions(
        profile=REPO / "configs" / "dnd-complete.yaml",
        data_root=tmp_path,
        llm_profile="test-double",
    )
    graph = defs.resolve_asset_graph()
    lanes = {
        AssetKey(lane.replace("-", "_"))
        for lane in resolve_profile_file(
            REPO / "configs" / "dnd-complete.yaml", registry=registry()
        ).lane_ids()
    }
    pools = {
        key: graph.assets_def_for_key(key).op.pool
        for key in graph.get_all_asset_keys()
        if graph.get(key).is_executable
    }
    assert len(lanes) >= 5
    assert {k for k, pool in pools.items() if pool == "llm"} == lanes


def test_the_instance_config_sets_a_run_queue_limit_and_the_pool_default(tmp_path: Path) -> None:
    config = yaml.safe_load((REPO / "configs" / "dagster.yaml").read_text())
    max_runs = config["concurrency"]["runs"]["max_concurrent_runs"]
    pool_limit = config["concurrency"]["pools"]["default_limit"]
    assert isinstance(max_runs, int) and max_runs >= 1
    assert isinstance(pool_limit, int) and pool_limit >= 1
    shutil.copyfile(REPO / "configs" / "dagster.yaml", tmp_path / "dagster.yaml")
    with DagsterInstance.from_config(str(tmp_path)) as instance:
        concurrency = instance.get_concurrency_config()
        assert concurrency.run_queue_config is not None
        assert concurrency.run_queue_config.max_concurrent_runs == max_runs
        assert instance.global_op_concurrency_default_limit == pool_limit


def test_the_postgres_instance_config_keeps_the_same_limits() -> None:
    default = yaml.safe_load((REPO / "configs" / "dagster.yaml").read_text())
    postgres = yaml.safe_load((REPO / "configs" / "dagster-postgres.yaml").read_text())
    assert postgres["concurrency"] == default["concurrency"]
    assert postgres["storage"]["postgres"]["postgres_url"] == {"env": "NOTARIUS_PG_URL"}
