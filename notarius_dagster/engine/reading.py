"""One reader for every file a user hands the product (transcripts, profiles, rosters, gold
files, reference files), so each is refused the same way before anything is parsed or copied.

Reading (`read_bounded`): a regular file only (a FIFO would block, `/dev/zero` never ends, a
folder is no file), opened with O_NONBLOCK and checked with fstat on the open descriptor (a
link is followed; a link to a device is refused like the device), at most `limit` bytes (a file
that grows after the check cannot make the read unbounded), and messages that state the real
size and the limit.

Parsing (`load_json`, `load_yaml`): nesting capped at `MAX_NESTING` levels (checked before the
recursive parsers run, so a file nested 100,000 deep is a message, not a RecursionError), and a
key repeated in one object or mapping refused (silently keeping the last value hides a typo).
Every message names the file and, where the parser knows it, the line; never content."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

import yaml

from notarius_dagster.engine.errors import NotariusError
from notarius_dagster.engine.failure_causes import cause_of

MAX_NESTING = 64
"""Levels of arrays and objects a file may nest. Every document the product reads is a few
levels deep; hundreds of levels are an accident or an attack on a recursive parser (or on
whatever serializes the value later)."""


class FileRefused(NotariusError):
    """A file was not read: the message says why (`file 'x' is 30000000 bytes; ...`). Callers
    prefix it with what the file is for and re-raise their own error type."""


class ParseRefused(NotariusError):
    """A file was read but is not a document the product accepts (invalid, too deeply nested,
    a repeated key); the message names the line when known, never content. `problem` and
    `line` are the parts, for callers that place them in their own message."""

    def __init__(self, message: str, *, problem: str | None = None, line: int | None = None):
        super().__init__(message)
        self.problem = problem or message
        self.line = line


def read_bounded(path: Path, limit: int, *, name: str | None = None, allowed: str = "") -> bytes:
    """The bytes of the regular file `path`, at most `limit` of them; FileRefused otherwise,
    without reading it. `name` is how messages name the file (default: its base name, never
    its path); `allowed` says where the limit comes from (default `the limit is <limit>`)."""
    shown = name if name is not None else Path(path).name
    allowed = allowed or f"the limit is {limit}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise FileRefused(f"file {shown!r} not found") from None
    except IsADirectoryError:
        raise FileRefused(f"{shown!r} is a folder, not a file") from None
    except OSError as exc:
        raise FileRefused(f"file {shown!r} unreadable ({cause_of(exc)})") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise FileRefused(f"{shown!r} is a folder, not a file")
        if not stat.S_ISREG(info.st_mode):
            raise FileRefused(
                f"{shown!r} is not a regular file (a device, FIFO or socket); only regular "
                "files are read"
            )
        if info.st_size > limit:
            raise FileRefused(f"file {shown!r} is {info.st_size} bytes; {allowed}")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as handle:
            raw = handle.read(limit + 1)
    except OSError as exc:
        raise FileRefused(f"file {shown!r} unreadable ({cause_of(exc)})") from None
    finally:
        os.close(fd)
    if len(raw) > limit:
        raise FileRefused(
            f"file {shown!r} is over {limit} bytes (it grew while it was read); {allowed}"
        )
    return raw


def path_problem(path: Path, name: str | None = None) -> str | None:
    """What `read_bounded` would refuse `path` for before reading it (not found, a folder, not
    a regular file), said in the same words, or None: for a command to check its arguments
    up front (a usage error) without opening anything (stat never blocks on a FIFO)."""
    shown = name if name is not None else Path(path).name
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return f"file {shown!r} not found"
    except OSError as exc:
        return f"file {shown!r} unreadable ({cause_of(exc, name=False)})"
    if stat.S_ISDIR(mode):
        return f"{shown!r} is a folder, not a file"
    if not stat.S_ISREG(mode):
        return (
            f"{shown!r} is not a regular file (a device, FIFO or socket); only regular files "
            "are read"
        )
    return None


def decode_utf8(raw: bytes, name: str) -> str:
    """UTF-8 text (a leading BOM dropped); ParseRefused names the line of the first bad byte."""
    body = raw[3:] if raw.startswith(b"\xef\xbb\xbf") else raw
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = body.count(b"\n", 0, exc.start) + 1
        raise ParseRefused(f"{name!r} is not UTF-8 (line {line})") from None


# --- nesting ----------------------------------------------------------------------------------

_JSON_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_BRACKETS = re.compile(r"[\[\]{}\n]")


def json_nesting(text: str, limit: int = MAX_NESTING) -> int | None:
    """The line at which JSON `text` first nests deeper than `limit`, or None. Strings are cut
    out first, so only the brackets of the document count; a scan of the brackets, never a
    recursion, so any depth is measured safely."""
    depth = 0
    line = 1
    for match in _BRACKETS.finditer(_JSON_STRING.sub('""', text)):
        char = match.group(0)
        if char == "\n":
            line += 1
        elif char in "[{":
            depth += 1
            if depth > limit:
                return line
        else:
            depth -= 1
    return None


# --- JSON -------------------------------------------------------------------------------------


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, object]:
    result: dict[str, object] = {}
    for key, value in pairs:
        if key in result:
            shown = key if len(key) <= 40 else key[:40] + "..."
            raise ParseRefused(f"key {shown!r} appears twice in one object")
        result[key] = value
    return result


def _no_constant(name: str) -> Any:
    raise ParseRefused(f"{name} is not valid JSON")


def load_json(text: str, name: str) -> Any:
    """A JSON document: nesting capped, repeated keys and NaN/Infinity refused. ParseRefused
    says what and where (`'gold.json': not valid JSON (Expecting value at line 3 column 1)`)."""
    deep = json_nesting(text)
    if deep is not None:
        problem = f"nested deeper than {MAX_NESTING} levels"
        raise ParseRefused(f"{name!r} line {deep}: {problem}", problem=problem, line=deep)
    try:
        return json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except ParseRefused as exc:
        raise ParseRefused(f"{name!r}: {exc}", problem=exc.problem) from None
    except json.JSONDecodeError as exc:
        problem = f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        raise ParseRefused(f"{name!r}: {problem}", problem=problem, line=exc.lineno) from None
    except (ValueError, RecursionError):
        raise ParseRefused(f"{name!r}: not valid JSON") from None


# --- YAML -------------------------------------------------------------------------------------


class StrictYamlLoader(yaml.SafeLoader):
    """PyYAML's safe loader with the two refusals: nesting deeper than `MAX_NESTING` (counted
    while composing, before the recursive constructor runs) and a key repeated in one mapping
    (merge keys `<<` keep their meaning: an explicit key may override a merged one)."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_NESTING:
                line = self.peek_event().start_mark.line + 1  # type: ignore[no-untyped-call]
                problem = f"nested deeper than {MAX_NESTING} levels"
                raise ParseRefused(f"line {line}: {problem}", problem=problem, line=line)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: set[tuple[str, str]] = set()
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag.endswith(":merge"):
                    continue
                key = (key_node.tag, key_node.value)
                if key in seen:
                    line = key_node.start_mark.line + 1
                    problem = f"key {key_node.value[:40]!r} appears twice in one mapping"
                    raise ParseRefused(f"line {line}: {problem}", problem=problem, line=line)
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


class PlainYamlLoader(StrictYamlLoader):
    """`StrictYamlLoader` without implicit timestamps: a date stays the string the file wrote,
    so the decoded document is JSON (what a schema validates and a digest covers)."""


PlainYamlLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def load_yaml(text: str, name: str, *, loader: type[StrictYamlLoader] = StrictYamlLoader) -> Any:
    """A YAML document through `loader`: nesting capped, repeated keys refused. ParseRefused
    says what and where (`'roster.yaml': line 4: key 'players' appears twice ...`)."""
    try:
        return yaml.load(text, Loader=loader)  # noqa: S506 - a SafeLoader subclass
    except ParseRefused as exc:
        raise ParseRefused(f"{name!r}: {exc}", problem=exc.problem, line=exc.line) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        where = f" (line {line})" if line is not None else ""
        raise ParseRefused(
            f"{name!r}: not valid YAML{where}", problem="not valid YAML", line=line
        ) from None
    except RecursionError:  # cannot happen below MAX_NESTING; said plainly if it ever does
        raise ParseRefused(f"{name!r}: nested too deeply", problem="nested too deeply") from None
