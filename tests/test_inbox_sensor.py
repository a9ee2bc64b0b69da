"""The inbox sensor, tick by tick, on real files in tmp_path and a real ephemeral instance."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from dagster import (
    AddDynamicPartitionsRequest,
    DagsterInstance,
    DefaultSensorStatus,
    SensorDefinition,
    SensorResult,
    build_sensor_context,
)
from dagster._core.storage.tags import PARTITION_NAME_TAG, RUN_KEY_TAG, SENSOR_NAME_TAG
from dagster._core.test_utils import create_run_for_test

from assets.sensors import INBOX_SENSOR_NAME, InboxLimits, build_inbox_sensor, build_sensors
from notarius_dagster.settings import Settings

SETTLED = 60.0  # seconds: files written by the tests are dated this far back unless stated


def unit_lines(*texts: str) -> str:
    return "".join(json.dumps({"unit_id": i, "speaker": "MATT", "text": t}) + "\n"
                   for i, t in enumerate(texts))


def drop(inbox: Path, name: str, content: str | bytes, age: float = SETTLED) -> Path:
    path = inbox / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    stamp = time.time() - age
    os.utime(path, (stamp, stamp))
    return path


def sha(content: str | bytes) -> str:
    return hashlib.sha256(content.encode() if isinstance(content, str) else content).hexdigest()


def requested(result: SensorResult) -> list[str]:
    """The partitions a tick requested runs for, in order."""
    return [r.partition_key or "" for r in result.run_requests or []]


def skip_message(result: SensorResult) -> str:
    assert result.skip_reason is not None
    return result.skip_reason.skip_message or ""


class TickLog(logging.Handler):
    """Collects what a tick writes to `context.log` (the log Dagster keeps with the tick)."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


class Ticker:
    """Runs the sensor tick after tick as the daemon would: carries the cursor, adds the
    partitions the tick asks for, and keeps each tick's log lines."""

    def __init__(self, sensor: SensorDefinition, instance: DagsterInstance) -> None:
        self.sensor = sensor
        self.instance = instance
        self.cursor: str | None = None
        self.log: list[str] = []

    def tick(self) -> SensorResult:
        context = build_sensor_context(instance=self.instance, cursor=self.cursor)
        captured = TickLog()
        context.log.addHandler(captured)
        result = self.sensor(context)
        assert isinstance(result, SensorResult)
        self.log = captured.lines
        self.cursor = result.cursor
        for request in result.dynamic_partitions_requests or []:
            assert isinstance(request, AddDynamicPartitionsRequest)
            self.instance.add_dynamic_partitions(request.partitions_def_name,
                                                 list(request.partition_keys or []))
        return result

    def seen(self) -> dict[str, str]:
        return dict(json.loads(self.cursor or "{}").get("seen", {}))


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    (tmp_path / "inbox").mkdir()
    return Settings(profile=Path("configs/offline.yaml"), data_root=tmp_path / "data",
                    inbox=tmp_path / "inbox", llm_profile="test-double")


@pytest.fixture
def instance() -> Iterator[DagsterInstance]:
    with DagsterInstance.ephemeral() as instance:
        yield instance


def ticker_for(settings: Settings, instance: DagsterInstance, **limits: float) -> Ticker:
    sensor = build_inbox_sensor(settings, InboxLimits(**limits))  # type: ignore[arg-type]
    return Ticker(sensor, instance)


@pytest.fixture
def ticker(settings: Settings, instance: DagsterInstance) -> Ticker:
    return ticker_for(settings, instance)


def test_the_code_location_runs_the_inbox_sensor_without_clicking(settings: Settings) -> None:
    [sensor] = build_sensors(settings)
    assert sensor.name == INBOX_SENSOR_NAME
    assert sensor.default_status == DefaultSensorStatus.RUNNING
    assert sensor.job_name == "materialize_session"
    assert sensor.minimum_interval_seconds == 5


def test_limits_come_from_the_environment() -> None:
    limits = InboxLimits.from_env({"NOTARIUS_INBOX_INTERVAL": "1", "NOTARIUS_INBOX_MAX_SCAN": "7",
                                   "NOTARIUS_INBOX_MAX_RUNS": "3",
                                   "NOTARIUS_INBOX_SETTLE_SECONDS": "0.5"})
    assert limits == InboxLimits(interval_s=1, max_scan=7, max_runs=3, settle_s=0.5)
    assert InboxLimits.from_env({}) == InboxLimits(interval_s=5, max_scan=200, max_runs=10,
                                                   settle_s=2.0)
    with pytest.raises(ValueError, match="NOTARIUS_INBOX_MAX_RUNS"):
        InboxLimits.from_env({"NOTARIUS_INBOX_MAX_RUNS": "0"})


def test_a_new_transcript_adds_its_partition_and_requests_a_run(settings: Settings,
                                                                ticker: Ticker) -> None:
    content = unit_lines("Gustav waves.", "Hello.")
    drop(settings.inbox, "Session 042.jsonl", content)
    result = ticker.tick()
    [request] = result.run_requests or []
    assert request.partition_key == "session-042"
    assert request.run_key == f"session-042:{sha(content)}"
    [add] = result.dynamic_partitions_requests or []
    assert add.partitions_def_name == "sessions"
    assert list(add.partition_keys or []) == ["session-042"]
    assert (settings.transcripts / "session-042.jsonl").read_text() == content
    assert ticker.seen() == {"session-042": sha(content)[:16]}


def test_an_unchanged_transcript_requests_nothing(settings: Settings, ticker: Ticker) -> None:
    drop(settings.inbox, "s1.jsonl", unit_lines("a"))
    assert ticker.tick().run_requests
    again = ticker.tick()
    assert not again.run_requests
    assert not again.dynamic_partitions_requests
    assert "1 unchanged" in skip_message(again)


def test_a_changed_transcript_requests_a_run_again(settings: Settings, ticker: Ticker) -> None:
    drop(settings.inbox, "s1.jsonl", unit_lines("a"))
    first = ticker.tick().run_requests or []
    edited = unit_lines("a, edited")
    drop(settings.inbox, "s1.jsonl", edited)
    [second] = ticker.tick().run_requests or []
    assert second.partition_key == "s1"
    assert second.run_key == f"s1:{sha(edited)}" != first[0].run_key
    assert (settings.transcripts / "s1.jsonl").read_text() == edited


def test_unusable_files_are_skipped_with_a_reason_while_the_others_proceed(
        settings: Settings, ticker: Ticker, tmp_path: Path) -> None:
    secret = "the dragon's true name"
    drop(settings.inbox, "good.jsonl", unit_lines("fine"))
    drop(settings.inbox, "!!!.jsonl", unit_lines(secret))
    drop(settings.inbox, "notes.md", secret)
    drop(settings.inbox, "latin1.txt", f"MATT: {secret} caf\xe9".encode("latin-1"))
    drop(settings.inbox, "partial.jsonl", unit_lines(secret) + '{"unit_id": 9, "te')
    drop(settings.inbox, "fresh.vtt", "WEBVTT\n", age=0)
    result = ticker.tick()
    assert requested(result) == ["good"]
    log = "\n".join(ticker.log)
    assert "'!!!.jsonl': no session id can be derived" in log
    assert "'notes.md': unknown transcript format ('.md'; known: .jsonl, .srt, .txt, .vtt)" in log
    assert "'latin1.txt': is not UTF-8 (line 1)" in log
    assert "'partial.jsonl': its last line is not a whole JSON object" in log
    assert "'fresh.vtt': modified" in log and "settle" in log
    assert secret not in log and "caf" not in log
    assert str(tmp_path) not in log
    assert ticker.seen() == {"good": sha(unit_lines("fine"))[:16]}


def test_a_half_written_file_is_picked_up_by_a_later_tick_once_whole(settings: Settings,
                                                                     ticker: Ticker) -> None:
    whole = unit_lines("first", "second")
    drop(settings.inbox, "s2.jsonl", whole[:-10])
    assert not ticker.tick().run_requests
    assert "s2" not in ticker.seen()
    drop(settings.inbox, "s2.jsonl", whole)
    [request] = ticker.tick().run_requests or []
    assert request.run_key == f"s2:{sha(whole)}"


def test_a_file_modified_moments_ago_waits_until_it_settles(settings: Settings,
                                                            ticker: Ticker) -> None:
    path = drop(settings.inbox, "s3.txt", "MATT: Hello.\n", age=0)
    assert not ticker.tick().run_requests
    assert any("'s3.txt': modified" in line for line in ticker.log)
    stamp = time.time() - SETTLED
    os.utime(path, (stamp, stamp))
    assert requested(ticker.tick()) == ["s3"]


def test_dotfiles_and_temporary_files_are_ignored_silently(settings: Settings,
                                                           ticker: Ticker) -> None:
    for name in (".hidden.jsonl", "s4.jsonl.part", "s5.jsonl.tmp", "~s6.txt", "s7.txt~",
                 "s8.srt.crdownload"):
        drop(settings.inbox, name, unit_lines("x"))
    (settings.inbox / "folder.jsonl").mkdir()
    result = ticker.tick()
    assert not result.run_requests
    assert ticker.log == []
    assert ticker.seen() == {}


def test_two_files_for_one_session_are_both_skipped(settings: Settings, ticker: Ticker) -> None:
    drop(settings.inbox, "Session-9.jsonl", unit_lines("a"))
    drop(settings.inbox, "session 9.txt", "MATT: a\n")
    assert not ticker.tick().run_requests
    assert sum("gives session id 'session-9'" in line for line in ticker.log) == 2


def test_a_tick_requests_at_most_max_runs_and_the_rest_wait(
        settings: Settings, instance: DagsterInstance) -> None:
    ticker = ticker_for(settings, instance, max_runs=2)
    for n in range(5):
        drop(settings.inbox, f"s{n}.jsonl", unit_lines(f"text {n}"))
    per_tick = [requested(ticker.tick()) for _ in range(4)]
    assert [len(keys) for keys in per_tick] == [2, 2, 1, 0]
    assert sorted(k for keys in per_tick for k in keys) == [f"s{n}" for n in range(5)]


def test_a_tick_looks_at_most_max_scan_files_and_the_next_resumes_after_them(
        settings: Settings, instance: DagsterInstance) -> None:
    ticker = ticker_for(settings, instance, max_scan=2)
    for n in range(3):
        drop(settings.inbox, f"s{n}.jsonl", unit_lines(f"text {n}"))
    drop(settings.inbox, "zz.md", "not a transcript")
    runs: list[str] = []
    for _ in range(3):
        runs += requested(ticker.tick())
        assert len(ticker.log) <= 2  # one line per file looked at, at most
    assert sorted(runs) == ["s0", "s1", "s2"]
    drop(settings.inbox, "a-late.jsonl", unit_lines("late"))  # sorts before every other file
    later = [requested(ticker.tick()) for _ in range(3)]
    assert sum(keys.count("a-late") for keys in later) == 1


def test_the_cursor_stays_compact_and_removed_files_drop_out(settings: Settings,
                                                             ticker: Ticker) -> None:
    for n in range(40):
        drop(settings.inbox, f"session-{n:03}.jsonl", unit_lines(f"text {n}" * 50))
    for _ in range(4):
        ticker.tick()
    assert len(ticker.seen()) == 40
    assert all(len(prefix) == 16 for prefix in ticker.seen().values())
    assert len(ticker.cursor or "") < 40 * 40
    for n in range(30):
        (settings.inbox / f"session-{n:03}.jsonl").unlink()
    ticker.tick()
    assert sorted(ticker.seen()) == [f"session-{n:03}" for n in range(30, 40)]


def test_an_undone_edit_runs_again_under_a_fresh_run_key(settings: Settings, ticker: Ticker,
                                                         instance: DagsterInstance) -> None:
    def launched(result: SensorResult) -> str:
        [request] = result.run_requests or []
        assert request.run_key is not None
        create_run_for_test(instance, tags={SENSOR_NAME_TAG: INBOX_SENSOR_NAME,
                                            RUN_KEY_TAG: request.run_key,
                                            PARTITION_NAME_TAG: "s1"})
        return request.run_key

    original, edited = unit_lines("a"), unit_lines("b")
    drop(settings.inbox, "s1.jsonl", original)
    assert launched(ticker.tick()) == f"s1:{sha(original)}"
    drop(settings.inbox, "s1.jsonl", edited)
    assert launched(ticker.tick()) == f"s1:{sha(edited)}"
    drop(settings.inbox, "s1.jsonl", original)
    assert launched(ticker.tick()) == f"s1:{sha(original)}:2"


def test_a_lost_cursor_requests_the_same_run_key_so_nothing_runs_twice(
        settings: Settings, ticker: Ticker, instance: DagsterInstance) -> None:
    content = unit_lines("a")
    drop(settings.inbox, "s1.jsonl", content)
    [request] = ticker.tick().run_requests or []
    assert request.run_key is not None
    create_run_for_test(instance, tags={SENSOR_NAME_TAG: INBOX_SENSOR_NAME,
                                        RUN_KEY_TAG: request.run_key, PARTITION_NAME_TAG: "s1"})
    ticker.cursor = "not json"
    [again] = ticker.tick().run_requests or []
    assert again.run_key == request.run_key  # the daemon drops it as already launched


def test_a_deleted_partition_is_added_again_while_its_file_stays(
        settings: Settings, ticker: Ticker, instance: DagsterInstance) -> None:
    content = unit_lines("a")
    drop(settings.inbox, "s1.jsonl", content)
    [first] = ticker.tick().run_requests or []
    assert first.run_key is not None
    create_run_for_test(instance, tags={SENSOR_NAME_TAG: INBOX_SENSOR_NAME,
                                        RUN_KEY_TAG: first.run_key, PARTITION_NAME_TAG: "s1"})
    assert not ticker.tick().run_requests
    instance.delete_dynamic_partition("sessions", "s1")  # the UI's "delete partition"
    result = ticker.tick()
    [again] = result.run_requests or []
    assert again.run_key == f"s1:{sha(content)}:2"
    assert [list(r.partition_keys or []) for r in result.dynamic_partitions_requests or []] \
        == [["s1"]]
    assert any("its partition was deleted" in line for line in ticker.log)


def test_a_missing_inbox_is_reported_not_created(tmp_path: Path,
                                                 instance: DagsterInstance) -> None:
    settings = Settings(profile=Path("configs/offline.yaml"), data_root=tmp_path / "data",
                        inbox=tmp_path / "nowhere", llm_profile=None)
    result = ticker_for(settings, instance).tick()
    assert not result.run_requests
    assert "inbox folder" in skip_message(result)
    assert not settings.inbox.exists()
