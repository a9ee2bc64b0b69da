"""The inbox sensor, tick by tick, on real files in tmp_path and a real ephemeral instance: run
requests, run keys, partitions and the tick's log. What the inbox takes and skips is tested
without Dagster in tests/test_inbox.py."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from dagster import (
    AddDynamicPartitionsRequest,
    DagsterInstance,
    DagsterRunStatus,
    DefaultSensorStatus,
    SensorDefinition,
    SensorResult,
    build_sensor_context,
)
from dagster._core.storage.tags import PARTITION_NAME_TAG, RUN_KEY_TAG, SENSOR_NAME_TAG
from dagster._core.test_utils import create_run_for_test

from assets.sensors import INBOX_SENSOR_NAME, build_inbox_sensor, build_sensors
from notarius_dagster.inbox import InboxLimits
from notarius_dagster.settings import store_paths
from notarius_dagster.store import StorePaths
from tests.test_inbox import drop, sha, unit_lines


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
            self.instance.add_dynamic_partitions(
                request.partitions_def_name, list(request.partition_keys or [])
            )
        return result

    def seen(self) -> dict[str, str]:
        return dict(json.loads(self.cursor or "{}").get("seen", {}))


@pytest.fixture
def store(tmp_path: Path) -> StorePaths:
    (tmp_path / "inbox").mkdir()
    return store_paths(data=tmp_path / "data", inbox=tmp_path / "inbox", environ={})


@pytest.fixture
def instance() -> Iterator[DagsterInstance]:
    with DagsterInstance.ephemeral() as instance:
        yield instance


def ticker_for(store: StorePaths, instance: DagsterInstance, **limits: float) -> Ticker:
    sensor = build_inbox_sensor(store, InboxLimits(**limits))  # type: ignore[arg-type]
    return Ticker(sensor, instance)


@pytest.fixture
def ticker(store: StorePaths, instance: DagsterInstance) -> Ticker:
    return ticker_for(store, instance)


def test_the_code_location_runs_the_inbox_sensor_without_clicking(store: StorePaths) -> None:
    [sensor] = build_sensors(store)
    assert sensor.name == INBOX_SENSOR_NAME
    assert sensor.default_status == DefaultSensorStatus.RUNNING
    assert sensor.job_name == "materialize_session"
    assert sensor.minimum_interval_seconds == 5


def test_a_new_transcript_adds_its_partition_and_requests_a_run(
    store: StorePaths, ticker: Ticker
) -> None:
    content = unit_lines("Gustav waves.", "Hello.")
    drop(store.inbox, "Session 042.jsonl", content)
    result = ticker.tick()
    [request] = result.run_requests or []
    assert request.partition_key == "session-042"
    assert request.run_key == f"session-042:{sha(content)}"
    [add] = result.dynamic_partitions_requests or []
    assert add.partitions_def_name == "sessions"
    assert list(add.partition_keys or []) == ["session-042"]
    assert (store.transcripts / "session-042.jsonl").read_text() == content
    assert ticker.seen() == {"session-042": sha(content)[:16]}


def test_an_unchanged_transcript_requests_nothing(store: StorePaths, ticker: Ticker) -> None:
    drop(store.inbox, "s1.jsonl", unit_lines("a"))
    assert ticker.tick().run_requests
    again = ticker.tick()
    assert not again.run_requests
    assert not again.dynamic_partitions_requests
    assert "1 unchanged" in skip_message(again)


def test_a_changed_transcript_requests_a_run_again(store: StorePaths, ticker: Ticker) -> None:
    drop(store.inbox, "s1.jsonl", unit_lines("a"))
    first = ticker.tick().run_requests or []
    edited = unit_lines("a, edited")
    drop(store.inbox, "s1.jsonl", edited)
    [second] = ticker.tick().run_requests or []
    assert second.partition_key == "s1"
    assert second.run_key == f"s1:{sha(edited)}" != first[0].run_key
    assert (store.transcripts / "s1.jsonl").read_text() == edited


def test_unusable_files_are_skipped_with_a_reason_while_the_others_proceed(
    store: StorePaths, ticker: Ticker, tmp_path: Path
) -> None:
    secret = "the dragon's true name"
    drop(store.inbox, "good.jsonl", unit_lines("fine"))
    drop(store.inbox, "!!!.jsonl", unit_lines(secret))
    drop(store.inbox, "notes.md", secret)
    drop(store.inbox, "latin1.txt", f"MATT: {secret} caf\xe9".encode("latin-1"))
    drop(store.inbox, "partial.jsonl", unit_lines(secret) + '{"unit_id": 9, "te')
    drop(store.inbox, "fresh.vtt", "WEBVTT\n", age=0)
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


def test_an_undone_edit_runs_again_under_a_fresh_run_key(
    store: StorePaths, ticker: Ticker, instance: DagsterInstance
) -> None:
    def launched(result: SensorResult) -> str:
        [request] = result.run_requests or []
        assert request.run_key is not None
        create_run_for_test(
            instance,
            status=DagsterRunStatus.SUCCESS,  # it ran: the file may change again
            tags={
                SENSOR_NAME_TAG: INBOX_SENSOR_NAME,
                RUN_KEY_TAG: request.run_key,
                PARTITION_NAME_TAG: "s1",
            },
        )
        return request.run_key

    original, edited = unit_lines("a"), unit_lines("b")
    drop(store.inbox, "s1.jsonl", original)
    assert launched(ticker.tick()) == f"s1:{sha(original)}"
    drop(store.inbox, "s1.jsonl", edited)
    assert launched(ticker.tick()) == f"s1:{sha(edited)}"
    drop(store.inbox, "s1.jsonl", original)
    assert launched(ticker.tick()) == f"s1:{sha(original)}:2"


def test_a_lost_cursor_requests_the_same_run_key_so_nothing_runs_twice(
    store: StorePaths, ticker: Ticker, instance: DagsterInstance
) -> None:
    content = unit_lines("a")
    drop(store.inbox, "s1.jsonl", content)
    [request] = ticker.tick().run_requests or []
    assert request.run_key is not None
    create_run_for_test(
        instance,
        status=DagsterRunStatus.SUCCESS,  # it ran: the file may change again
        tags={
            SENSOR_NAME_TAG: INBOX_SENSOR_NAME,
            RUN_KEY_TAG: request.run_key,
            PARTITION_NAME_TAG: "s1",
        },
    )
    ticker.cursor = "not json"
    [again] = ticker.tick().run_requests or []
    assert again.run_key == request.run_key  # the daemon drops it as already launched


def test_a_deleted_partition_is_added_again_while_its_file_stays(
    store: StorePaths, ticker: Ticker, instance: DagsterInstance
) -> None:
    content = unit_lines("a")
    drop(store.inbox, "s1.jsonl", content)
    [first] = ticker.tick().run_requests or []
    assert first.run_key is not None
    create_run_for_test(
        instance,
        status=DagsterRunStatus.SUCCESS,  # it ran: the file may change again
        tags={
            SENSOR_NAME_TAG: INBOX_SENSOR_NAME,
            RUN_KEY_TAG: first.run_key,
            PARTITION_NAME_TAG: "s1",
        },
    )
    assert not ticker.tick().run_requests
    instance.delete_dynamic_partition("sessions", "s1")  # the UI's "delete partition"
    result = ticker.tick()
    [again] = result.run_requests or []
    assert again.run_key == f"s1:{sha(content)}:2"
    assert [list(r.partition_keys or []) for r in result.dynamic_partitions_requests or []] == [
        ["s1"]
    ]
    assert any("its partition was deleted" in line for line in ticker.log)


def test_a_missing_inbox_is_reported_not_created(tmp_path: Path, instance: DagsterInstance) -> None:
    store = store_paths(data=tmp_path / "data", inbox=tmp_path / "nowhere", environ={})
    result = ticker_for(store, instance).tick()
    assert not result.run_requests
    assert "inbox folder" in skip_message(result)
    assert not store.inbox.exists()


def test_the_transcript_of_a_session_with_a_run_in_progress_is_not_replaced(
    store: StorePaths, ticker: Ticker, instance: DagsterInstance
) -> None:
    """Issue 23: while a run of the session is in progress (the state in which `notarius run`
    refuses), an edited file in the inbox waits: the run keeps reading the transcript it
    started with, and the edit is taken by the first tick after the run has ended."""
    first, edited = unit_lines("a"), unit_lines("b")
    drop(store.inbox, "s1.jsonl", first)
    [request] = ticker.tick().run_requests or []
    run = create_run_for_test(
        instance,
        status=DagsterRunStatus.STARTED,
        tags={
            SENSOR_NAME_TAG: INBOX_SENSOR_NAME,
            RUN_KEY_TAG: request.run_key or "",
            "notarius/session": "s1",
        },
    )
    drop(store.inbox, "s1.jsonl", edited)
    waiting = ticker.tick()
    assert not waiting.run_requests
    assert skip_message(waiting) == (
        "no transcripts taken (1 new or changed waiting, 0 unchanged: see the tick's log)"
    )
    assert (store.transcripts / "s1.jsonl").read_text() == first
    assert any("'s1.jsonl'" in line and "run queued or in progress" in line for line in ticker.log)
    instance.report_run_failed(run)
    [later] = ticker.tick().run_requests or []
    assert later.partition_key == "s1" and later.run_key == f"s1:{sha(edited)}"
    assert (store.transcripts / "s1.jsonl").read_text() == edited


def test_the_inbox_does_not_replace_a_transcript_while_another_command_holds_the_session(
    store: StorePaths, ticker: Ticker
) -> None:
    """A `notarius run` holds the session's lock from its busy check to its run's end; a
    tick in that window leaves the transcript alone."""
    from notarius_dagster.store import session_lock

    first = unit_lines("a")
    drop(store.inbox, "s1.jsonl", first)
    assert ticker.tick().run_requests
    drop(store.inbox, "s1.jsonl", unit_lines("b"))
    with session_lock(store, "s1", doing="start a run of it"):
        assert not ticker.tick().run_requests
    assert (store.transcripts / "s1.jsonl").read_text() == first
    assert ticker.tick().run_requests
