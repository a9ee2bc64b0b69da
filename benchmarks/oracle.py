"""The oracle: an OpenAI-compatible chat-completions server on loopback that answers every
extraction request with exactly the gold records that fall in the request's chunk — names,
fields and citations as the gold file has them — optionally with realistic mistakes injected
(`benchmarks/oracle_injection.py`).

Why it exists: only a tiny model runs on this machine, so extraction quality is measured where
the product itself decides it. Run through the real client (litellm, the structured-output
ladder) and the whole pipeline (`notarius_dagster.run.runner.run_session`, what `notarius run`
calls), a perfect model's answers are scored against the same gold: what is lost is lost by the
pipeline (records split at chunk borders, merges, support-check rejections, normalization).
`benchmarks/bench_quality.py --oracle` runs it; docs/evaluation.md reports the figures.

What the oracle reads from a request, nothing else (so it works whatever the prompt says):
- the lane: from the answer schema (`benchmarks/latency_server.py: lane_of`: the required array
  property names the list lanes, the title `SceneAnswer` the scene lane);
- the chunk: the `enum` of unit ids the schema allows for every citation (each request's schema
  is constrained to its chunk), else the `[id] ` unit markers of the user messages (the scene
  lane's answer has no citations);
- the text of the cited lines, only to pick which of the gold's accepted spellings of a name
  they say (below); records come from the gold file.

For each gold record of the lane with at least one unit in the chunk, one answer item: the
lane's match field and every other answer field the gold record sets (a list of accepted
spellings gives its first; `aliases` from the gold `aliases`; in the lanes whose prompt asks
a name "as used in the excerpt" (`NAMED_AS_USED`), the match name is the first accepted
spelling, name or alias, that the record's cited lines in the chunk say — read from
the request's `[id]` lines, the only transcript text the oracle reads), fields the gold does
not set at their schema minimum, and `unit_ids` = the record's gold units inside the chunk,
in chunk order, at most the schema's limit. The scene lane answers the kind and title of the
gold scene that holds most of the chunk. A re-ask (the same request with the answer and the
problems appended) gets the same answer: the oracle does not learn.

Standard library plus the engine's gold model. `serve(session)` starts one on a free port."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from benchmarks.latency_server import _resolve, items_field, lane_of, minimal_instance
from benchmarks.latency_server import schema_of_request as schema_of_request
from notarius_dagster.engine.gold import GoldFile, GoldRecord
from notarius_dagster.engine.support import mentions, tokens
from notarius_dagster.modules import registry

UNIT_MARKER = re.compile(r"^\[(\d+)\] ", re.MULTILINE)
CITATIONS = "unit_ids"
NAMED_AS_USED = ("combat-turns", "item-events")
"""The lanes whose prompt asks for the record's name "as used in the excerpt" (the actor, the
item): only there does the oracle name a record as its cited lines do. The spells prompt asks
"the spell's name" and the interactions prompt the known NPC's name, so there the gold's own
name is answered (`tests/test_oracle.py` checks the prompts still say so)."""
SCENE_LANE = "scene-descriptions"


# --- reading a request -------------------------------------------------------------------------


def citation_enum(schema: Mapping[str, Any]) -> list[int] | None:
    """The unit ids every citation of the answer may take (the chunk's units, in chunk order),
    or None when the answer has no citations."""
    nodes = [schema, *(schema.get("$defs") or {}).values()]
    for node in nodes:
        prop = (node.get("properties") or {}).get(CITATIONS) if isinstance(node, dict) else None
        if isinstance(prop, dict):
            items = prop.get("items")
            if isinstance(items, dict) and isinstance(items.get("enum"), list):
                return [int(u) for u in items["enum"]]
    return None


def marked_units(body: Mapping[str, Any]) -> list[int]:
    """The `[id] ` unit markers of the user messages, in order, without repeats."""
    seen: dict[int, None] = {}
    for message in body.get("messages") or ():
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            text = content if isinstance(content, str) else json.dumps(content)
            seen.update(dict.fromkeys(int(m) for m in UNIT_MARKER.findall(text)))
    return list(seen)


def unit_texts(body: Mapping[str, Any]) -> dict[int, str]:
    """Unit id -> what its `[id] SPEAKER: text` line in the user messages says (the text,
    without the speaker's label: a label is who speaks, not a name used in the excerpt)."""
    texts: dict[int, str] = {}
    for message in body.get("messages") or ():
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            for line in (content if isinstance(content, str) else "").splitlines():
                found = UNIT_MARKER.match(line)
                if found:
                    said = line[found.end() :]
                    texts.setdefault(int(found.group(1)), said.partition(": ")[2] or said)
    return texts


def spelling_in(record: GoldRecord, name_field: str, cited: Sequence[str]) -> str | None:
    """The first of the gold record's accepted spellings of its name (the name field's
    values, then its aliases) that one of the `cited` lines says, or None when none does:
    how a reader who names a thing "as used in the excerpt" (what the prompts ask) names it
    where the answer cannot carry aliases."""
    value = record.value(name_field)
    names = [*(value if isinstance(value, list) else [value]), *record.aliases]
    lines = [tokens(text) for text in cited]
    for name in names:
        if isinstance(name, str) and any(mentions(tokens(name), line) for line in lines):
            return name
    return None


def chunk_of_request(body: Mapping[str, Any], schema: Mapping[str, Any] | None) -> list[int]:
    """The unit ids of the chunk a request asks about (see the module docstring)."""
    enum = citation_enum(schema) if schema is not None else None
    return enum if enum else marked_units(body)


def item_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The schema of one answer item of a list lane."""
    name = items_field(schema)
    prop = _resolve((schema.get("properties") or {}).get(name) or {}, schema)
    return dict(_resolve(prop.get("items") or {}, schema))


# --- writing an answer -------------------------------------------------------------------------


def _options(prop: Mapping[str, Any], root: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    node = _resolve(prop, root)
    options = node.get("anyOf") or node.get("oneOf")
    return [_resolve(o, root) for o in options] if options else [node]


_MISSING = object()


def coerce(value: Any, prop: Mapping[str, Any], root: Mapping[str, Any]) -> Any:
    """A gold value as the answer field `prop` accepts it, or `_MISSING`: a list of accepted
    spellings gives its first fitting value; strings are cut to the field's maxLength."""
    values = value if isinstance(value, list) else [value]
    for option in _options(prop, root):
        # OpenAI's strict form says "may be null" as a list of types (["array", "null"])
        declared = option.get("type")
        kinds = set(declared) if isinstance(declared, list) else {declared}
        if "enum" in option:
            for v in values:
                if v in option["enum"]:
                    return v
        elif "string" in kinds:
            for v in values:
                if isinstance(v, str) and v.strip():
                    return v[: int(option.get("maxLength", len(v)))]
        elif "integer" in kinds:
            for v in values:
                if isinstance(v, int) and not isinstance(v, bool):
                    return v
        elif "array" in kinds:
            strings = [v for v in values if isinstance(v, str) and v.strip()]
            if strings:
                return strings[: int(option.get("maxItems", len(strings)))]
    return _MISSING


def answer_item(
    record: GoldRecord,
    schema_item: Mapping[str, Any],
    root: Mapping[str, Any],
    cited: Sequence[int],
) -> dict[str, Any]:
    """One answer item for a gold record: its fields as the item schema takes them."""
    item = minimal_instance(schema_item, root)
    properties = schema_item.get("properties") or {}
    for key, prop in properties.items():
        if key == CITATIONS:
            limit = int(_resolve(prop, root).get("maxItems", len(cited)))
            item[key] = list(cited)[:limit]
            continue
        value: Any = record.aliases if key == "aliases" else record.value(key)
        if value is None or value == []:
            continue
        coerced = coerce(value, prop, root)
        if coerced is not _MISSING:
            item[key] = coerced
    return item


@dataclass(frozen=True)
class OracleSession:
    """What the oracle answers from: one session's gold file (lane id -> records)."""

    gold: GoldFile

    def records_in(
        self, lane: str, chunk: Sequence[int]
    ) -> list[tuple[int, GoldRecord, list[int]]]:
        """(gold index, record, its units inside the chunk in chunk order) for every gold
        record of `lane` with a unit in the chunk."""
        inside = {u: i for i, u in enumerate(chunk)}
        out = []
        for index, record in enumerate(self.gold.lanes.get(lane, [])):
            units = sorted((u for u in set(record.unit_ids) if u in inside), key=inside.__getitem__)
            if units:
                out.append((index, record, units))
        return out

    def scene_for(self, chunk: Sequence[int]) -> tuple[int, GoldRecord] | None:
        """(gold index, record) of the gold scene holding most of the chunk's units (ties: the
        earlier)."""
        best: tuple[int, int, GoldRecord] | None = None
        for index, record, units in self.records_in(SCENE_LANE, chunk):
            if best is None or len(units) > best[0]:
                best = (len(units), index, record)
        return (best[1], best[2]) if best else None


def oracle_answer(
    session: OracleSession, body: Mapping[str, Any]
) -> tuple[str, list[int], dict[str, Any], list[int]]:
    """(lane, chunk unit ids, answer object, gold index of each answer item) for a request.
    The scene lane's answer is one object: the index of the gold scene it gives."""
    schema = schema_of_request(body) or {}
    lane = lane_of(schema)
    chunk = chunk_of_request(body, schema)
    answer = minimal_instance(schema, schema) if schema else {}
    if not isinstance(answer, dict):
        answer = {}
    name = items_field(schema)
    if name is None:  # a per-chunk answer: the scene
        found = session.scene_for(chunk) if lane == SCENE_LANE else None
        if found is None:
            return lane, chunk, answer, []
        index, scene = found
        for key, prop in (schema.get("properties") or {}).items():
            value = scene.value(key)
            coerced = coerce(value, prop, schema) if value is not None else _MISSING
            if coerced is not _MISSING:
                answer[key] = coerced
        return lane, chunk, answer, [index]
    template = item_schema(schema)
    limit = int(
        _resolve((schema.get("properties") or {}).get(name) or {}, schema).get("maxItems", 10**6)
    )
    inside = session.records_in(lane, chunk)[:limit]
    name_field = next((s.gold_match.name for s in registry().lanes if s.lane_id == lane), None)
    if lane not in NAMED_AS_USED:
        name_field = None
    texts = unit_texts(body)
    items = []
    for _, record, units in inside:
        item = answer_item(record, template, schema, units)
        if name_field in item and "aliases" not in (template.get("properties") or {}):
            spelt = spelling_in(record, name_field, [texts.get(u, "") for u in units])
            value = coerce(spelt, template["properties"][name_field], schema) if spelt else None
            if value is not None and value is not _MISSING:
                item[name_field] = value
        items.append(item)
    answer[name] = items
    return lane, chunk, answer, [index for index, _, _ in inside]


# --- the server --------------------------------------------------------------------------------


def completion(model: str, content: str, prompt_chars: int, finish_reason: str) -> dict[str, Any]:
    """An OpenAI chat.completion object (rough usage: 4 characters a token)."""
    prompt_tokens = max(1, prompt_chars // 4)
    completion_tokens = max(1, len(content) // 4)
    return {
        "id": f"chatcmpl-oracle-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


Responder = Any
"""`(body) -> (lane, chunk, content, finish_reason)`: what the server answers a request with."""


@dataclass
class Calls:
    """Requests answered, per lane (shared by the handler threads)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    by_lane: dict[str, int] = field(default_factory=dict)

    def add(self, lane: str) -> None:
        with self.lock:
            self.by_lane[lane] = self.by_lane.get(lane, 0) + 1


class OracleServer(ThreadingHTTPServer):
    """Answers `POST /v1/chat/completions` with `respond(body)`."""

    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], respond: Responder) -> None:
        super().__init__(address, _Handler)
        self.respond = respond
        self.calls = Calls()

    @property
    def api_base(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: OracleServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Quiet: a line per request would drown the benchmark's output."""

    def _send(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            self._send(200, {"object": "list", "data": [{"id": "oracle", "object": "model"}]})
        else:
            self._send(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._send(404, {"error": {"message": "not found", "type": "invalid_request_error"}})
            return
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._send(400, {"error": {"message": "body is not JSON", "type": "invalid_request"}})
            return
        lane, _, content, finish = self.server.respond(body)
        self.server.calls.add(lane)
        chars = sum(len(str(m.get("content") or "")) for m in body.get("messages") or ())
        self._send(200, completion(str(body.get("model") or "oracle"), content, chars, finish))


Answered = dict[tuple[str, tuple[int, ...]], list[int]]
"""(lane, chunk unit ids) -> the gold index of each item the oracle answered, in answer order."""


def clean_responder(session: OracleSession, answered: Answered | None = None) -> Responder:
    """The oracle without mistakes; `answered`, when given, is filled with what it answered."""
    lock = threading.Lock()

    def respond(body: Mapping[str, Any]) -> tuple[str, list[int], str, str]:
        lane, chunk, answer, indexes = oracle_answer(session, body)
        if answered is not None:
            with lock:
                answered[(lane, tuple(chunk))] = indexes
        return lane, chunk, json.dumps(answer), "stop"

    return respond


def serve(respond: Responder, port: int = 0) -> OracleServer:
    """A started server on 127.0.0.1 (port 0: a free one) serving on a daemon thread; `stop()`
    ends it."""
    server = OracleServer(("127.0.0.1", port), respond)
    threading.Thread(target=server.serve_forever, name="oracle", daemon=True).start()
    return server
