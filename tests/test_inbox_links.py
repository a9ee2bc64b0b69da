"""The inbox never follows a link and never opens what is not a regular file: a link named
`passwd.txt` must not put another file into the store (and in front of the model), and a FIFO
must not hang the sensor. Both are skipped with a reason naming the file, never read."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from notarius_dagster.inbox import InboxCursor, InboxLimits, take_inbox

LINE = '{"unit_id": 0, "speaker": "MATT", "text": "hello"}\n'


def settled(path: Path) -> None:
    stamp = time.time() - 60
    os.utime(path, (stamp, stamp), follow_symlinks=False)


def look(inbox: Path, transcripts: Path) -> tuple[list[str], list[str]]:
    intake = take_inbox(inbox, transcripts, InboxCursor(), InboxLimits(), partitions=set())
    return [t.session_id for t in intake.taken], [line.message for line in intake.log]


@pytest.mark.timeout(20)
def test_a_link_is_skipped_with_a_reason_and_nothing_reaches_the_store(tmp_path: Path) -> None:
    inbox, transcripts = tmp_path / "inbox", tmp_path / "data" / "transcripts"
    inbox.mkdir()
    secret = tmp_path / "secret.jsonl"
    secret.write_text(LINE)
    settled(secret)
    (inbox / "passwd.jsonl").symlink_to(secret)
    settled(inbox / "passwd.jsonl")
    (inbox / "real.jsonl").write_text(LINE)
    settled(inbox / "real.jsonl")
    taken, log = look(inbox, transcripts)
    assert taken == ["real"]
    assert any("'passwd.jsonl'" in m and "symbolic link" in m for m in log), log
    assert not (transcripts / "passwd.jsonl").exists()
    assert all(str(tmp_path) not in m for m in log)


@pytest.mark.timeout(20)
def test_a_fifo_is_skipped_without_hanging(tmp_path: Path) -> None:
    inbox, transcripts = tmp_path / "inbox", tmp_path / "data" / "transcripts"
    inbox.mkdir()
    os.mkfifo(inbox / "pipe.jsonl")
    settled(inbox / "pipe.jsonl")
    taken, log = look(inbox, transcripts)
    assert taken == []
    assert any("'pipe.jsonl'" in m and "not a regular file" in m for m in log), log


@pytest.mark.timeout(20)
def test_a_link_to_a_fifo_is_skipped_as_a_link(tmp_path: Path) -> None:
    inbox, transcripts = tmp_path / "inbox", tmp_path / "data" / "transcripts"
    inbox.mkdir()
    os.mkfifo(tmp_path / "pipe")
    (inbox / "pipe.jsonl").symlink_to(tmp_path / "pipe")
    taken, log = look(inbox, transcripts)
    assert taken == []
    assert any("'pipe.jsonl'" in m and "symbolic link" in m for m in log), log
