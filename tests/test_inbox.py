"""The inbox, look after look, without Dagster: which files are taken into the transcript store,
which are skipped and why, the limits per look, and the cursor (notarius_dagster/inbox.py)."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import pytest

from notarius_dagster.inbox import InboxCursor, InboxIntake, InboxLimits, take_inbox

SETTLED = 60.0  # seconds: files written by the tests are dated this far back unless stated


def unit_lines(*texts: str) -> str:
    return "".join(
        json.dumps({"unit_id": i, "speaker": "MATT", "text": t}) + "\n" for i, t in enumerate(texts)
    )


def drop(inbox: Path, name: str, content: str | bytes, age: float = SETTLED) -> Path:
    path = inbox / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    stamp = time.time() - age
    os.utime(path, (stamp, stamp))
    return path


def sha(content: str | bytes) -> str:
    return hashlib.sha256(content.encode() if isinstance(content, str) else content).hexdigest()


class Looker:
    """Looks at the inbox again and again as the sensor does: carries the cursor as JSON and
    the partitions that exist (every session taken gets one)."""

    def __init__(self, inbox: Path, transcripts: Path, **limits: float) -> None:
        self.inbox = inbox
        self.transcripts = transcripts
        self.limits = InboxLimits(**limits)  # type: ignore[arg-type]
        self.cursor: str | None = None
        self.partitions: set[str] = set()
        self.intake: InboxIntake | None = None

    def look(self) -> list[str]:
        """The sessions this look took, in order."""
        self.intake = take_inbox(
            self.inbox,
            self.transcripts,
            InboxCursor.from_json(self.cursor),
            self.limits,
            partitions=self.partitions,
        )
        self.cursor = self.intake.cursor.to_json()
        taken = [t.session_id for t in self.intake.taken]
        self.partitions |= set(taken)
        return taken

    @property
    def log(self) -> list[str]:
        return [line.message for line in self.intake.log] if self.intake else []

    def seen(self) -> dict[str, str]:
        return dict(json.loads(self.cursor or "{}").get("seen", {}))


@pytest.fixture
def inbox(tmp_path: Path) -> Path:
    (tmp_path / "inbox").mkdir()
    return tmp_path / "inbox"


@pytest.fixture
def looker(inbox: Path, tmp_path: Path) -> Looker:
    return Looker(inbox, tmp_path / "data" / "transcripts")


def test_limits_come_from_the_environment() -> None:
    limits = InboxLimits.from_env(
        {
            "NOTARIUS_INBOX_INTERVAL": "1",
            "NOTARIUS_INBOX_MAX_SCAN": "7",
            "NOTARIUS_INBOX_MAX_RUNS": "3",
            "NOTARIUS_INBOX_SETTLE_SECONDS": "0.5",
        }
    )
    assert limits == InboxLimits(interval_s=1, max_scan=7, max_runs=3, settle_s=0.5)
    assert InboxLimits.from_env({}) == InboxLimits(
        interval_s=5, max_scan=200, max_runs=10, settle_s=2.0
    )
    with pytest.raises(ValueError, match="NOTARIUS_INBOX_MAX_RUNS"):
        InboxLimits.from_env({"NOTARIUS_INBOX_MAX_RUNS": "0"})


def test_a_new_transcript_is_copied_into_the_store_byte_for_byte(
    looker: Looker, inbox: Path
) -> None:
    content = unit_lines("Gustav waves.", "Hello.")
    drop(inbox, "Session 042.jsonl", content)
    assert looker.look() == ["session-042"]
    assert (looker.transcripts / "session-042.jsonl").read_text() == content
    assert looker.intake is not None and looker.intake.taken[0].sha256 == sha(content)
    assert looker.seen() == {"session-042": sha(content)[:16]}
    assert looker.look() == []
    assert looker.intake.summary == "no new or changed transcripts (1 unchanged)"


def test_files_that_wait_are_info_and_files_to_fix_are_warnings(
    looker: Looker, inbox: Path
) -> None:
    drop(inbox, "notes.md", "x")
    drop(inbox, "fresh.vtt", "WEBVTT\n", age=0)
    looker.look()
    assert looker.intake is not None
    levels = {line.message.split(":")[0]: line.level for line in looker.intake.log}
    assert levels == {"skipped 'fresh.vtt'": "info", "skipped 'notes.md'": "warning"}
    assert looker.intake.summary == (
        "no new or changed transcripts (0 unchanged, 2 skipped: see the tick's log)"
    )


def test_a_half_written_file_is_picked_up_by_a_later_look_once_whole(
    looker: Looker, inbox: Path
) -> None:
    whole = unit_lines("first", "second")
    drop(inbox, "s2.jsonl", whole[:-10])
    assert looker.look() == []
    assert "s2" not in looker.seen()
    drop(inbox, "s2.jsonl", whole)
    assert looker.look() == ["s2"]
    assert looker.seen()["s2"] == sha(whole)[:16]


def test_a_file_modified_moments_ago_waits_until_it_settles(looker: Looker, inbox: Path) -> None:
    path = drop(inbox, "s3.txt", "MATT: Hello.\n", age=0)
    assert looker.look() == []
    assert any("'s3.txt': modified" in line for line in looker.log)
    stamp = time.time() - SETTLED
    os.utime(path, (stamp, stamp))
    assert looker.look() == ["s3"]


def test_dotfiles_and_temporary_files_are_ignored_silently(looker: Looker, inbox: Path) -> None:
    for name in (
        ".hidden.jsonl",
        "s4.jsonl.part",
        "s5.jsonl.tmp",
        "~s6.txt",
        "s7.txt~",
        "s8.srt.crdownload",
    ):
        drop(inbox, name, unit_lines("x"))
    (inbox / "folder.jsonl").mkdir()
    assert looker.look() == []
    assert looker.log == []
    assert looker.seen() == {}


def test_two_files_for_one_session_are_both_skipped(looker: Looker, inbox: Path) -> None:
    drop(inbox, "Session-9.jsonl", unit_lines("a"))
    drop(inbox, "session 9.txt", "MATT: a\n")
    assert looker.look() == []
    assert sum("gives session id 'session-9'" in line for line in looker.log) == 2


def test_a_look_takes_at_most_max_runs_and_the_rest_wait(inbox: Path, tmp_path: Path) -> None:
    looker = Looker(inbox, tmp_path / "transcripts", max_runs=2)
    for n in range(5):
        drop(inbox, f"s{n}.jsonl", unit_lines(f"text {n}"))
    per_look = [looker.look() for _ in range(4)]
    assert [len(keys) for keys in per_look] == [2, 2, 1, 0]
    assert sorted(k for keys in per_look for k in keys) == [f"s{n}" for n in range(5)]


def test_a_look_reads_at_most_max_scan_files_and_the_next_resumes_after_them(
    inbox: Path, tmp_path: Path
) -> None:
    looker = Looker(inbox, tmp_path / "transcripts", max_scan=2)
    for n in range(3):
        drop(inbox, f"s{n}.jsonl", unit_lines(f"text {n}"))
    drop(inbox, "zz.md", "not a transcript")
    taken: list[str] = []
    for _ in range(3):
        taken += looker.look()
        assert len(looker.log) <= 2  # one line per file looked at, at most
    assert sorted(taken) == ["s0", "s1", "s2"]
    drop(inbox, "a-late.jsonl", unit_lines("late"))  # sorts before every other file
    later = [looker.look() for _ in range(3)]
    assert sum(keys.count("a-late") for keys in later) == 1


def test_the_cursor_stays_compact_and_removed_files_drop_out(looker: Looker, inbox: Path) -> None:
    for n in range(40):
        drop(inbox, f"session-{n:03}.jsonl", unit_lines(f"text {n}" * 50))
    for _ in range(4):
        looker.look()
    assert len(looker.seen()) == 40
    assert all(len(prefix) == 16 for prefix in looker.seen().values())
    assert len(looker.cursor or "") < 40 * 40
    for n in range(30):
        (inbox / f"session-{n:03}.jsonl").unlink()
    looker.look()
    assert sorted(looker.seen()) == [f"session-{n:03}" for n in range(30, 40)]


def test_an_unchanged_file_whose_partition_is_gone_is_taken_again(
    looker: Looker, inbox: Path
) -> None:
    drop(inbox, "s1.jsonl", unit_lines("a"))
    assert looker.look() == ["s1"]
    assert looker.look() == []
    looker.partitions.clear()  # the partition was deleted, the file stayed
    assert looker.look() == ["s1"]
    assert looker.intake is not None and looker.intake.readded == {"s1"}
    assert any("its partition was deleted" in line for line in looker.log)


def test_a_transcript_that_cannot_be_copied_is_not_taken_and_tried_again(
    inbox: Path, tmp_path: Path
) -> None:
    blocked = tmp_path / "blocked"
    looker = Looker(inbox, blocked / "transcripts")
    first = unit_lines("a")
    drop(inbox, "s1.jsonl", first)
    assert looker.look() == ["s1"]
    drop(inbox, "s1.jsonl", unit_lines("b"))
    (blocked / "transcripts").rename(tmp_path / "kept")
    (blocked / "transcripts").write_text("")  # a file where the store folder should be
    assert looker.look() == []
    assert any(
        "'s1.jsonl': cannot copy it into the transcript store" in line for line in looker.log
    )
    assert str(tmp_path) not in "\n".join(looker.log)
    assert looker.seen() == {"s1": sha(first)[:16]}  # the edit still counts as new
    (blocked / "transcripts").unlink()
    assert looker.look() == ["s1"]
    assert (blocked / "transcripts" / "s1.jsonl").read_text() == unit_lines("b")


def test_a_missing_inbox_is_reported_not_created(tmp_path: Path) -> None:
    looker = Looker(tmp_path / "nowhere", tmp_path / "transcripts")
    assert looker.look() == []
    assert looker.intake is not None and "inbox folder" in looker.intake.summary
    assert not (tmp_path / "nowhere").exists()
