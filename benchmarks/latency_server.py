"""An OpenAI-compatible chat-completions stub on loopback that answers after a fixed latency.

Why it exists: the pipeline benchmark must measure Notarius itself (orchestration, start-up,
re-runs), not a model. Every POST to `/v1/chat/completions` sleeps `--latency` seconds and
then answers the smallest JSON object that validates against the JSON Schema the request
carries (for a list lane that is `{"<items field>": []}`), with usage token counts. Concurrent
requests sleep concurrently (one thread per connection), so the stub behaves like a provider
with unlimited parallelism and a fixed per-call latency: the critical-path ideal of a run is
then exactly computable from the calls it made.

The lane of a request is recognised from its schema: the required array property names the
items field (`npcs`, `combat_turns`, ...; the lane id is that name with `-` for `_`); a schema
without one is named by its title (`SceneAnswer` is the `scene-descriptions` lane). The schema is
read from `response_format` (`json_schema.schema` or the `schema` that rides along with
`json_object`), else from the system prompt ("It must satisfy this JSON Schema: ...").

`--script FILE` makes chosen lanes answer scripted records instead: a JSON object mapping a
lane id to a list of records (list lanes) or to an object merged over the minimal answer
(object lanes such as scene-descriptions). A record whose `unit_ids` is missing or is the string
`"first"` cites the first unit id the request's user prompt shows (units are rendered as
`[<id>] Speaker: text`), so the record passes the pipeline's grounding validators; with
`"mentioning"` it cites the first unit whose line names the record's `name` (and the record is
left out of a chunk where none does), so it also passes the record-level support check.

`GET /stats` returns JSON counters: requests, per-lane counts, first and last request times
(Unix seconds, `time.time()`), the most requests seen in flight at once and per-lane first/last
times (to see which lanes overlapped). With `--unit-block N` it also counts per lane and block
of unit ids (`first unit id // N`): a benchmark that numbers each session's units from its own
block can then tell the sessions of one concurrent backfill apart. `POST /reset` zeroes the
counters. `GET /health` answers `ok`.

Standard library only. Run: `python benchmarks/latency_server.py --latency 1 --port 0`; the
first line on stdout is `listening on http://127.0.0.1:<port>`."""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

SCHEMA_MARKER = "It must satisfy this JSON Schema:"
UNIT_MARKER = re.compile(r"^\[(\d+)\] ", re.MULTILINE)
# Object lanes (no items list): the schema title names the lane, or (where the schema sent
# carries no titles) its properties do.
TITLE_LANES = {"SceneAnswer": "scene-descriptions"}
PROPERTY_LANES = {frozenset({"kind", "title", "summary"}): "scene-descriptions"}


# --- answers ---------------------------------------------------------------------------------


def schema_of_request(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """The JSON Schema a chat-completions request asks the answer to satisfy, if any."""
    response_format = body.get("response_format")
    if isinstance(response_format, dict):
        wrapped = response_format.get("json_schema")
        if isinstance(wrapped, dict) and isinstance(wrapped.get("schema"), dict):
            return wrapped["schema"]
        if isinstance(response_format.get("schema"), dict):
            return response_format["schema"]
    for message in body.get("messages") or ():
        if not isinstance(message, dict) or message.get("role") not in ("system", "user"):
            continue
        content = message.get("content")
        if isinstance(content, str) and SCHEMA_MARKER in content:
            try:
                value = json.loads(content.split(SCHEMA_MARKER, 1)[1])
            except json.JSONDecodeError:
                return None
            return value if isinstance(value, dict) else None
    return None


def items_field(schema: Mapping[str, Any]) -> str | None:
    """The first required property whose schema is an array (`npcs`, `spells`, ...)."""
    properties = schema.get("properties") or {}
    for name in schema.get("required") or ():
        prop = _resolve(properties.get(name) or {}, schema)
        if prop.get("type") == "array":
            return str(name)
    return None


def lane_of(schema: Mapping[str, Any] | None) -> str:
    """The lane id a request belongs to, from its answer schema."""
    if schema is None:
        return "unknown"
    field_name = items_field(schema)
    if field_name is not None:
        return field_name.replace("_", "-")
    title = str(schema.get("title") or "")
    if title:
        return TITLE_LANES.get(title, title)
    return PROPERTY_LANES.get(frozenset(schema.get("properties") or {}), "unknown")


def _resolve(node: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    """Follow local `$ref`s (`#/$defs/Name`) until a concrete schema node."""
    seen = 0
    while "$ref" in node and seen < 32:
        target: Any = root
        for part in str(node["$ref"]).lstrip("#/").split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        node, seen = target, seen + 1
    return node


def minimal_instance(node: Mapping[str, Any], root: Mapping[str, Any]) -> Any:
    """The smallest value that validates against `node` for the schemas pydantic generates:
    required properties only, empty arrays where allowed, the first enum value."""
    node = _resolve(node, root)
    if "const" in node:
        return node["const"]
    if "enum" in node:
        return node["enum"][0]
    if "default" in node:
        return node["default"]
    for key in ("anyOf", "oneOf"):
        if key in node:
            options = [_resolve(o, root) for o in node[key]]
            nullable = [o for o in options if o.get("type") == "null"]
            return None if nullable else minimal_instance(options[0], root)
    if "allOf" in node and node["allOf"]:
        return minimal_instance(node["allOf"][0], root)
    kind = node.get("type")
    if isinstance(kind, list):
        kind = "null" if "null" in kind else kind[0]
    if kind == "object" or "properties" in node:
        properties = node.get("properties") or {}
        return {
            name: minimal_instance(properties.get(name) or {}, root)
            for name in node.get("required") or ()
        }
    if kind == "array":
        count = int(node.get("minItems", 0))
        return [minimal_instance(node.get("items") or {}, root) for _ in range(count)]
    if kind == "string":
        length = max(int(node.get("minLength", 0)), 4)
        return ("stub" * length)[: min(length, int(node.get("maxLength", length)))]
    if kind in ("integer", "number"):
        return node.get("minimum", 0)
    if kind == "boolean":
        return False
    return None


def first_unit_id(body: Mapping[str, Any]) -> int | None:
    """The first `[<id>] ` unit marker in the last user message (the chunk being asked)."""
    for message in reversed(body.get("messages") or ()):
        if isinstance(message, dict) and message.get("role") == "user":
            match = UNIT_MARKER.search(str(message.get("content") or ""))
            if match:
                return int(match.group(1))
    return None


def unit_mentioning(body: Mapping[str, Any], name: str) -> int | None:
    """The first unit of the last user message whose line mentions `name` (case-insensitive),
    so a scripted record cites a unit that supports it; None when no unit does."""
    for message in reversed(body.get("messages") or ()):
        if isinstance(message, dict) and message.get("role") == "user":
            for line in str(message.get("content") or "").splitlines():
                match = UNIT_MARKER.search(line)
                if match and name.casefold() in line.casefold():
                    return int(match.group(1))
            return None
    return None


def answer_for(
    body: Mapping[str, Any],
    script: Mapping[str, Any],
    *,
    scene_kind: str | None = None,
) -> tuple[str, dict[str, Any]]:
    """(lane, answer object) for one request: scripted records if the script names the lane,
    otherwise the minimal valid instance of the request's schema."""
    schema = schema_of_request(body)
    lane = lane_of(schema)
    answer = minimal_instance(schema, schema) if schema is not None else {}
    if not isinstance(answer, dict):
        answer = {}
    if scene_kind is not None and lane == "scene-descriptions":
        answer["kind"] = scene_kind
    scripted = script.get(lane)
    if isinstance(scripted, list) and schema is not None:
        unit = first_unit_id(body)
        records = []
        for record in scripted:
            record = dict(record)
            if record.get("unit_ids") == "mentioning":
                cited = unit_mentioning(body, str(record.get("name", "")))
                if cited is None:
                    continue  # no unit of this chunk names it: not extracted here
                record["unit_ids"] = [cited]
            elif record.get("unit_ids", "first") == "first":
                record["unit_ids"] = [] if unit is None else [unit]
            records.append(record)
        answer[items_field(schema) or lane.replace("-", "_")] = records
    elif isinstance(scripted, dict):
        answer.update(scripted)
    return lane, answer


def completion(model: str, content: str, prompt_chars: int) -> dict[str, Any]:
    """An OpenAI chat.completion object with rough (4 characters a token) usage counts."""
    prompt_tokens = max(1, prompt_chars // 4)
    completion_tokens = max(1, len(content) // 4)
    return {
        "id": f"chatcmpl-stub-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


# --- counters --------------------------------------------------------------------------------


@dataclass
class Stats:
    """Request counters, shared by all handler threads."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    requests: int = 0
    lanes: dict[str, int] = field(default_factory=dict)
    lane_first: dict[str, float] = field(default_factory=dict)
    lane_last: dict[str, float] = field(default_factory=dict)
    first_request_at: float | None = None
    last_request_at: float | None = None
    in_flight: int = 0
    max_in_flight: int = 0
    unit_blocks: dict[int, dict[str, int]] = field(default_factory=dict)

    def started(self, lane: str, at: float, block: int | None = None) -> None:
        with self.lock:
            self.requests += 1
            self.lanes[lane] = self.lanes.get(lane, 0) + 1
            if block is not None:
                lanes = self.unit_blocks.setdefault(block, {})
                lanes[lane] = lanes.get(lane, 0) + 1
            self.lane_first.setdefault(lane, at)
            self.lane_last[lane] = at
            if self.first_request_at is None:
                self.first_request_at = at
            self.last_request_at = at
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def finished(self) -> None:
        with self.lock:
            self.in_flight -= 1

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {
                "requests": self.requests,
                "lanes": dict(sorted(self.lanes.items())),
                "first_request_at": self.first_request_at,
                "last_request_at": self.last_request_at,
                "lane_first_request_at": dict(sorted(self.lane_first.items())),
                "lane_last_request_at": dict(sorted(self.lane_last.items())),
                "in_flight": self.in_flight,
                "max_in_flight": self.max_in_flight,
                "unit_blocks": {
                    str(block): dict(sorted(lanes.items()))
                    for block, lanes in sorted(self.unit_blocks.items())
                },
            }

    def reset(self) -> None:
        with self.lock:
            self.requests, self.in_flight, self.max_in_flight = 0, 0, 0
            self.first_request_at = self.last_request_at = None
            self.lanes.clear()
            self.unit_blocks.clear()
            self.lane_first.clear()
            self.lane_last.clear()


# --- the server ------------------------------------------------------------------------------


class StubServer(ThreadingHTTPServer):
    """Holds the configuration and counters the handlers share."""

    daemon_threads = True
    request_queue_size = 128

    def __init__(
        self,
        address: tuple[str, int],
        *,
        latency: float = 0.0,
        script: Mapping[str, Any] | None = None,
        scene_kind: str | None = None,
        unit_block: int | None = None,
    ) -> None:
        super().__init__(address, StubHandler)
        self.latency = latency
        self.script = dict(script or {})
        self.scene_kind = scene_kind
        self.unit_block = unit_block
        self.stats = Stats()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


class StubHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as a real provider would
    server: StubServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Quiet: one line per request would drown the benchmark's own output."""

    def _send(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        if self.path == "/stats":
            self._send(200, self.server.stats.snapshot())
        elif self.path == "/health":
            self._send(200, "ok")
        elif self.path.rstrip("/") in ("/v1/models", "/models"):
            self._send(200, {"object": "list", "data": [{"id": "stub", "object": "model"}]})
        else:
            self._send(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.path == "/reset":
            self.server.stats.reset()
            self._send(200, "ok")
            return
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._send(404, {"error": {"message": "not found"}})
            return
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._send(400, {"error": {"message": "request body is not JSON"}})
            return
        lane, answer = answer_for(body, self.server.script, scene_kind=self.server.scene_kind)
        stats = self.server.stats
        block = None
        if self.server.unit_block:
            unit = first_unit_id(body)
            block = None if unit is None else unit // self.server.unit_block
        stats.started(lane, time.time(), block)
        try:
            if self.server.latency > 0:
                time.sleep(self.server.latency)
            content = json.dumps(answer)
            prompt_chars = sum(len(str(m.get("content") or "")) for m in body.get("messages") or ())
            self._send(200, completion(str(body.get("model") or "stub"), content, prompt_chars))
        finally:
            stats.finished()


def serve(
    port: int = 0,
    *,
    latency: float = 0.0,
    script: Mapping[str, Any] | None = None,
    scene_kind: str | None = None,
    unit_block: int | None = None,
) -> StubServer:
    """A started stub on 127.0.0.1 (port 0: any free port), serving on a daemon thread; call
    `shutdown()` and `server_close()` to stop it. Used by the tests."""
    server = StubServer(
        ("127.0.0.1", port),
        latency=latency,
        script=script,
        scene_kind=scene_kind,
        unit_block=unit_block,
    )
    threading.Thread(target=server.serve_forever, name="latency-stub", daemon=True).start()
    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0, help="0: any free port (printed)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--script", type=Path, help="JSON: lane id -> scripted records")
    parser.add_argument(
        "--scene-kind",
        help="kind answered by the scene-descriptions lane (default: the schema's first, combat)",
    )
    parser.add_argument(
        "--unit-block", type=int, help="also count requests per block of N unit ids"
    )
    args = parser.parse_args(argv)
    script = json.loads(args.script.read_text()) if args.script else {}
    server = StubServer(
        ("127.0.0.1", args.port),
        latency=args.latency,
        script=script,
        scene_kind=args.scene_kind,
        unit_block=args.unit_block,
    )
    print(f"listening on {server.url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
