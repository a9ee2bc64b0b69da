"""The inbox: a folder people drop session transcripts into. This module decides, without
Dagster, what one look at it finds and copies the usable transcripts into the transcript store;
`assets/sensors.py` turns the result into runs.

Each look lists the inbox and looks at the transcript files in it:

- a file whose content was not seen before gets its session id from its name and is copied into
  the transcript store;
- a file whose content changed is copied again (new hash);
- an unchanged file is left alone, unless its session's partition is gone (deleted in the UI or
  with `notarius sessions delete` while the file stayed): then it counts as new again
  (`readded`), since the inbox is where sessions come from;
- a file that cannot be used yet (still being written, bad name, unknown extension, unreadable,
  not UTF-8, two files for one session) is skipped with a reason, naming the file by its name
  only; the others go on, and a later look picks it up once it is usable.

The cursor remembers, per session, the first 16 hex digits of the content hash that was last
taken (and, when a look stopped early, where the next one resumes), so it grows with the inbox,
not with history: a file removed from the inbox drops out. Each look reads no more than
`max_scan` files and takes no more than `max_runs` transcripts; the rest wait for the next look,
which resumes after the last file looked at. The checks are cheap (a hash, a UTF-8 check and,
for JSON Lines, the last line): a transcript that is whole but malformed is the run's to reject,
with the line that is wrong, in the run's log.

Environment (read when the code location loads):
    NOTARIUS_INBOX_INTERVAL        seconds between sensor ticks (default 5)
    NOTARIUS_INBOX_MAX_SCAN        files looked at per tick (default 200)
    NOTARIUS_INBOX_MAX_RUNS        runs requested per tick (default 10)
    NOTARIUS_INBOX_SETTLE_SECONDS  a file modified more recently than this is left for later
                                   (default 2)
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import hashlib
import json
import os
import stat
import time
from collections.abc import Callable, Collection, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from notarius_dagster.engine.errors import SessionIdError, StoreError
from notarius_dagster.engine.inputs import EXTENSION_FORMATS
from notarius_dagster.engine.limits import DEFAULT_INPUT_LIMITS
from notarius_dagster.engine.session_ids import session_id_from_filename
from notarius_dagster.engine.transcripts import store_transcript
from notarius_dagster.settings import (
    INBOX_INTERVAL_ENV,
    INBOX_MAX_RUNS_ENV,
    INBOX_MAX_SCAN_ENV,
    INBOX_SETTLE_SECONDS_ENV,
)
from notarius_dagster.store import SessionBusyError

HASH_PREFIX = 16
"""Hex digits of the content hash kept in the cursor: enough to tell versions of one file apart."""

_TEMP_PREFIXES = (".", "~", "#")
_TEMP_SUFFIXES = (
    "~",
    ".tmp",
    ".temp",
    ".part",
    ".partial",
    ".crdownload",
    ".download",
    ".swp",
    ".swx",
    ".lock",
)
_SHOWN_NAME = 80
_UTF8_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class InboxLimits:
    """How often the sensor ticks and how much one tick may do."""

    interval_s: int = 5
    max_scan: int = 200
    max_runs: int = 10
    settle_s: float = 2.0
    max_transcript_bytes: int = DEFAULT_INPUT_LIMITS.max_transcript_bytes
    """A bigger file is skipped, not copied: its run would be refused (engine/limits.py)."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> InboxLimits:
        """The limits from the NOTARIUS_INBOX_* variables in `environ` (`Settings.inbox_limits`
        in the sensor); a value that is not a number, or too small, is an error naming it."""

        def number(name: str, default: float, minimum: float) -> float:
            raw = environ.get(name, "").strip()
            if not raw:
                return default
            try:
                value = float(raw)
            except ValueError:
                raise ValueError(f"{name} must be a number, got {raw!r}") from None
            if value < minimum:
                raise ValueError(f"{name} must be at least {minimum:g}, got {raw!r}")
            return value

        return cls(
            interval_s=int(number(INBOX_INTERVAL_ENV, cls.interval_s, 1)),
            max_scan=int(number(INBOX_MAX_SCAN_ENV, cls.max_scan, 1)),
            max_runs=int(number(INBOX_MAX_RUNS_ENV, cls.max_runs, 1)),
            settle_s=number(INBOX_SETTLE_SECONDS_ENV, cls.settle_s, 0),
        )


@dataclass(frozen=True)
class InboxCursor:
    """`seen`: session id -> hash prefix of the content that was last taken.
    `resume_after`: the file name the last look stopped at, when it stopped early."""

    seen: Mapping[str, str] = field(default_factory=dict)
    resume_after: str | None = None

    def to_json(self) -> str:
        data: dict[str, object] = {"seen": dict(sorted(self.seen.items()))}
        if self.resume_after is not None:
            data["resume_after"] = self.resume_after
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | None) -> InboxCursor:
        """An absent or unreadable cursor is an empty one (every file looks new; the sensor's
        run keys keep already-run content from running twice)."""
        try:
            data = json.loads(text) if text else {}
            seen = data.get("seen", {})
            resume = data.get("resume_after")
            if isinstance(seen, dict) and all(isinstance(v, str) for v in seen.values()):
                return cls(
                    seen=dict(seen), resume_after=resume if isinstance(resume, str) else None
                )
        except (ValueError, AttributeError):
            pass
        return cls()


@dataclass(frozen=True)
class InboxTranscript:
    """A whole, readable transcript file in the inbox."""

    name: str
    session_id: str
    content: bytes
    sha256: str

    @property
    def extension(self) -> str:
        return Path(self.name).suffix.lower()


@dataclass(frozen=True)
class Skipped:
    """A file left alone this time. `later`: it may become usable by itself (still being
    written); otherwise someone has to fix it."""

    name: str
    reason: str
    later: bool = False


@dataclass(frozen=True)
class InboxScan:
    """What one look found: new or changed transcripts (at most `max_runs`), among them those
    unchanged but whose partition is gone (`readded`), files skipped, how many were unchanged,
    and the cursor to store."""

    changed: tuple[InboxTranscript, ...]
    readded: frozenset[str]
    skipped: tuple[Skipped, ...]
    unchanged: int
    cursor: InboxCursor


@dataclass(frozen=True)
class LogLine:
    """A line for the tick's log; it names files by their name only, never their content."""

    level: Literal["info", "warning"]
    message: str


@dataclass(frozen=True)
class InboxIntake:
    """One look at the inbox once the new and changed transcripts are in the transcript store:
    `taken`, in order, each to be run (`readded`: those whose partition must be added again),
    the log lines, the cursor to store, and when nothing was taken, why (`summary`)."""

    taken: tuple[InboxTranscript, ...]
    readded: frozenset[str]
    log: tuple[LogLine, ...]
    cursor: InboxCursor
    summary: str


_LINK_REASON = (
    "is a symbolic link; the inbox never follows links: copy or move the file itself here"
)


def shown(name: str) -> str:
    """A file name as a log shows it: quoted, control characters visible, truncated."""
    return repr(name) if len(name) <= _SHOWN_NAME else repr(name[:_SHOWN_NAME]) + "..."


def is_ignored(name: str) -> bool:
    """Dotfiles and the temporary files editors, browsers and copy tools leave behind."""
    lower = name.lower()
    return lower.startswith(_TEMP_PREFIXES) or lower.endswith(_TEMP_SUFFIXES)


def inbox_files(inbox: Path) -> list[str]:
    """Names of the entries in the inbox that are not folders and not ignored, sorted (one cheap
    listing; nothing is read, no link is followed). Links and other non-regular entries are
    listed so that `read_whole` can skip them with a reason rather than silently."""
    names = []
    with os.scandir(inbox) as entries:
        for entry in entries:
            if is_ignored(entry.name):
                continue
            try:
                if not entry.is_dir(follow_symlinks=False):
                    names.append(entry.name)
            except OSError:
                continue
    return sorted(names)


def session_of(name: str) -> str | Skipped:
    """The session id a file name gives, or why the name cannot be used."""
    extension = Path(name).suffix.lower()
    if extension not in EXTENSION_FORMATS:
        known = ", ".join(sorted(EXTENSION_FORMATS))
        shown_ext = repr(extension) if extension else "no extension"
        return Skipped(name, f"unknown transcript format ({shown_ext}; known: {known})")
    try:
        return session_id_from_filename(name)
    except SessionIdError:
        return Skipped(
            name, "no session id can be derived from the file name (it needs letters or digits)"
        )


def read_whole(
    path: Path, session_id: str, *, settle_s: float, now: float, max_bytes: int | None = None
) -> InboxTranscript | Skipped:
    """The file's content if it looks whole: settled (not modified in the last `settle_s`
    seconds), the same size before and after reading, UTF-8, and for JSON Lines a last line
    that parses. Reasons name the file, never its content or path."""
    name = path.name
    try:
        before = path.lstat()
        if stat.S_ISLNK(before.st_mode):
            return Skipped(name, _LINK_REASON)
        if not stat.S_ISREG(before.st_mode):
            return Skipped(name, "is not a regular file (a device, FIFO or socket); not read")
        age = now - before.st_mtime
        if age < settle_s:
            return Skipped(
                name, f"modified {max(age, 0):.1f}s ago; waiting for it to settle", later=True
            )
        if max_bytes is not None and before.st_size > max_bytes:
            return Skipped(name, f"is {before.st_size} bytes; transcripts may have {max_bytes}")
        # O_NOFOLLOW: a link swapped in after the lstat is refused (ELOOP), never followed;
        # O_NONBLOCK: a FIFO swapped in cannot block the tick.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as handle:
            after = os.fstat(handle.fileno())
            if not stat.S_ISREG(after.st_mode):
                return Skipped(name, "is not a regular file (a device, FIFO or socket); not read")
            os.set_blocking(fd, True)
            content = handle.read() if max_bytes is None else handle.read(max_bytes + 1)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return Skipped(name, _LINK_REASON)
        return Skipped(name, f"cannot be read ({exc.strerror or type(exc).__name__})")
    if (before.st_size, before.st_mtime_ns) != (after.st_size, after.st_mtime_ns) or len(
        content
    ) != after.st_size:
        return Skipped(name, "changed while being read; still being written", later=True)
    if not content.strip():
        return Skipped(name, "is empty; still being written?", later=True)
    body = content[len(_UTF8_BOM) :] if content.startswith(_UTF8_BOM) else content
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = body.count(b"\n", 0, exc.start) + 1
        return Skipped(name, f"is not UTF-8 (line {line}); transcripts must be UTF-8")
    if EXTENSION_FORMATS[path.suffix.lower()] == "jsonl" and not _last_line_is_whole(text):
        return Skipped(
            name, "its last line is not a whole JSON object; still being written?", later=True
        )
    return InboxTranscript(
        name=name,
        session_id=session_id,
        content=content,
        sha256=hashlib.sha256(content).hexdigest(),
    )


def _last_line_is_whole(text: str) -> bool:
    last = next((line for line in reversed(text.splitlines()) if line.strip()), "")
    try:
        return isinstance(json.loads(last), dict)
    except ValueError:
        return False


def _rotated(names: list[str], resume_after: str | None) -> list[str]:
    """The names in order, starting after `resume_after` and wrapping around."""
    if resume_after is None:
        return names
    start = bisect.bisect_right(names, resume_after)
    return names[start:] + names[:start]


def scan_inbox(
    inbox: Path,
    cursor: InboxCursor,
    limits: InboxLimits,
    now: float | None = None,
    partitions: Collection[str] | None = None,
) -> InboxScan:
    """One look at the inbox, without side effects: which transcripts are new or changed
    (compared with `cursor`) or lack their partition (when `partitions`, the existing session
    partitions, is given), which files are skipped and why, and the next cursor."""
    now = time.time() if now is None else now
    names = inbox_files(inbox)
    sessions: dict[str, str | Skipped] = {name: session_of(name) for name in names}
    by_session: dict[str, list[str]] = {}
    for name, session in sessions.items():
        if isinstance(session, str):
            by_session.setdefault(session, []).append(name)

    seen = {s: h for s, h in cursor.seen.items() if s in by_session}  # removed files drop out
    changed: list[InboxTranscript] = []
    readded: set[str] = set()
    skipped: list[Skipped] = []
    unchanged = 0
    looked = 0
    resume_after: str | None = None
    order = _rotated(names, cursor.resume_after)
    for position, name in enumerate(order):
        if looked >= limits.max_scan or len(changed) >= limits.max_runs:
            resume_after = order[position - 1]
            break
        looked += 1
        session = sessions[name]
        if isinstance(session, Skipped):
            skipped.append(session)
            continue
        if len(by_session[session]) > 1:
            others = ", ".join(shown(n) for n in by_session[session] if n != name)
            skipped.append(
                Skipped(
                    name,
                    f"gives session id {session!r}, as does {others}; keep one file per session",
                )
            )
            continue
        found = read_whole(
            inbox / name,
            session,
            settle_s=limits.settle_s,
            now=now,
            max_bytes=limits.max_transcript_bytes,
        )
        if isinstance(found, Skipped):
            skipped.append(found)
            continue
        prefix = found.sha256[:HASH_PREFIX]
        if seen.get(session) == prefix:
            if partitions is None or session in partitions:
                unchanged += 1
                continue
            readded.add(session)
        changed.append(found)
        seen[session] = prefix
    return InboxScan(
        changed=tuple(changed),
        readded=frozenset(readded),
        skipped=tuple(skipped),
        unchanged=unchanged,
        cursor=InboxCursor(seen=seen, resume_after=resume_after),
    )


def register_content(store: Path, transcript: InboxTranscript) -> None:
    """Store exactly the bytes that were hashed as the session's transcript (the file in the
    inbox may change again meanwhile; its next version is the next look's business)."""
    store_transcript(
        store,
        transcript.session_id,
        transcript.content,
        extension=transcript.extension,
        name=transcript.name,
    )


def take_inbox(
    inbox: Path,
    transcripts: Path,
    cursor: InboxCursor,
    limits: InboxLimits,
    *,
    partitions: Collection[str] | None = None,
    now: float | None = None,
    busy: Collection[str] = (),
    lock: Callable[[str], AbstractContextManager[None]] | None = None,
) -> InboxIntake:
    """Scan the inbox and copy each new or changed transcript into the transcript store
    (`transcripts`). A transcript that cannot be copied is not taken, and the cursor keeps its
    previous hash so a later look tries again. So is one whose session is `busy` (a run of it
    is queued or in progress) or whose session `lock` (`store.py: session_lock`) another
    command holds: the transcript a run is reading is never replaced under it. A missing inbox
    is reported, not created."""
    if not inbox.is_dir():
        return InboxIntake(
            taken=(),
            readded=frozenset(),
            log=(),
            cursor=cursor,
            summary=f"the inbox folder {inbox} does not exist (set NOTARIUS_INBOX or create it)",
        )
    scan = scan_inbox(inbox, cursor, limits, now=now, partitions=partitions)
    log = [
        LogLine("info" if skip.later else "warning", f"skipped {shown(skip.name)}: {skip.reason}")
        for skip in scan.skipped
    ]
    taken: list[InboxTranscript] = []
    seen = dict(scan.cursor.seen)
    for transcript in scan.changed:
        session = transcript.session_id
        refused = None
        if session in busy:
            refused = LogLine("info", f"skipped {shown(transcript.name)}: {_busy(session)}")
        else:
            try:
                with lock(session) if lock is not None else contextlib.nullcontext():
                    register_content(transcripts, transcript)
            except SessionBusyError:
                refused = LogLine("info", f"skipped {shown(transcript.name)}: {_busy(session)}")
            except StoreError as exc:
                refused = LogLine(
                    "warning",
                    f"skipped {shown(transcript.name)}: cannot copy it into the transcript "
                    f"store ({exc.cause})",
                )
        if refused is not None:  # not taken: the cursor keeps the previous hash, to try again
            log.append(refused)
            previous = cursor.seen.get(session)
            if previous is None:
                seen.pop(session, None)
            else:
                seen[session] = previous
            continue
        readded = session in scan.readded
        log.append(
            LogLine(
                "info",
                f"{shown(transcript.name)} -> session {session!r} "
                f"(content sha256 {transcript.sha256[:HASH_PREFIX]}...)"
                + ("; its partition was deleted, adding it again" if readded else ""),
            )
        )
        taken.append(transcript)
    return InboxIntake(
        taken=tuple(taken),
        readded=scan.readded & {t.session_id for t in taken},
        log=tuple(log),
        cursor=InboxCursor(seen=seen, resume_after=scan.cursor.resume_after),
        summary=_summary(scan, waiting=len(scan.changed) - len(taken)),
    )


def _busy(session: str) -> str:
    return (
        f"session {session!r} has a run queued or in progress (or another command holds it); "
        "its transcript is replaced when a later look finds it free"
    )


def _summary(scan: InboxScan, waiting: int = 0) -> str:
    """Why nothing was taken; `waiting`: new or changed transcripts not taken this time (their
    session busy, or the store not writable), each with its reason in the tick's log."""
    if waiting:
        parts = [f"no transcripts taken ({waiting} new or changed waiting, {scan.unchanged} "]
        parts.append("unchanged")
    else:
        parts = [f"no new or changed transcripts ({scan.unchanged} unchanged"]
    if scan.skipped:
        parts.append(f", {len(scan.skipped)} skipped")
    if waiting or scan.skipped:
        parts.append(": see the tick's log")
    return "".join(parts) + ")"
