"""A fake OpenAI-compatible provider on loopback, for tests that need the real network path
(litellm -> the OpenAI SDK -> httpx -> a socket): it answers every chat completion the way
its `mode` says.

Modes:
- `ok`: a valid JSON answer (`{"npcs": [], ...}` for whatever schema was asked: an empty
  object of the schema's required arrays), so a run publishes;
- `status`: HTTP `status` with an OpenAI-shaped error body;
- `echo`: HTTP `status` (default 400) whose error message quotes everything received: the
  request line, the headers (with the API key) and the body, JSON-escaped inside the JSON
  error, plus the key again in the words of a real provider;
- `echo-ok`: like `ok`, but each answer's content also carries the whole request (valid JSON
  still, so the run publishes, and lane files may quote what was sent);
- `hang`: accept the request and never answer (until the server stops);
- `reset`: read the request, then close the socket with a TCP reset;
- `trickle`: answer 200 with a content-length, then send the body one byte every
  `trickle_s` seconds (so a per-read timeout longer than that never fires), a body padded
  with a megabyte of blanks so that it never ends while a test waits;
- `empty-choices`: a well-formed HTTP 200 chat completion whose `choices` list is empty;
- `script`: 200 with the content `responder(request, headers)` returns (a dict, sent as JSON
  text): the test decides what the "model" answers, from what it received.

`delay_s` waits that long before each answer (`ok`, `script`), so a run takes a while.

Run it as a context manager: `with FakeProvider(mode="echo") as fake: fake.api_base`; from
another process, `python -m tests.fake_provider MODE [STATUS]` prints the api_base on stdout and
serves until killed."""

from __future__ import annotations

import json
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

MODES = ("ok", "status", "echo", "echo-ok", "hang", "reset", "trickle", "empty-choices", "script")
Responder = Callable[[dict[str, Any], dict[str, str]], dict[str, Any]]


def empty_answer(request: dict[str, Any]) -> dict[str, Any]:
    """An answer that satisfies the schema the request carries: every required array empty,
    every other required field its type's zero."""
    schema = schema_of(request)
    zero: dict[str, Any] = {
        "array": [],
        "string": "",
        "integer": 0,
        "number": 0,
        "boolean": False,
        "object": {},
    }
    answer: dict[str, Any] = {}
    props = schema.get("properties", {}) if isinstance(schema, dict) else {}
    for name in schema.get("required", []) if isinstance(schema, dict) else []:
        kind = props.get(name, {}).get("type", "array")
        answer[name] = zero.get(kind if isinstance(kind, str) else "array", [])
    return answer


SCHEMA_MARKER = "It must satisfy this JSON Schema:\n"


def schema_of(request: dict[str, Any]) -> dict[str, Any]:
    """The schema asked for: in the response format (json_schema rung, or json_object with a
    schema), else spelled out at the end of the system prompt (json_object rung)."""
    fmt = request.get("response_format") or {}
    if isinstance(fmt, dict):
        inner = fmt.get("json_schema")
        if isinstance(inner, dict) and isinstance(inner.get("schema"), dict):
            return dict(inner["schema"])
        if isinstance(fmt.get("schema"), dict):
            return dict(fmt["schema"])
    for message in request.get("messages", []):
        content = str(message.get("content") or "")
        if SCHEMA_MARKER in content:
            try:
                found = json.loads(content.split(SCHEMA_MARKER, 1)[1])
            except ValueError:
                return {}
            return found if isinstance(found, dict) else {}
    return {}


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        return

    def do_GET(self) -> None:
        self._send(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length)
        fake = self.server.fake
        fake.record(self, body)
        mode = fake.mode
        if mode == "hang":
            fake.stopping.wait()
            self.close_connection = True
            return
        if mode == "reset":
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()
            return
        request = json.loads(body or b"{}")
        if mode == "trickle":
            self._trickle(completion(json.dumps(empty_answer(request))))
            return
        if mode == "empty-choices":
            self._send(200, {**completion(""), "choices": []})
            return
        if mode in ("ok", "echo-ok", "script"):
            if fake.delay_s:
                fake.stopping.wait(fake.delay_s)
            if mode == "script":
                assert fake.responder is not None
                answer = fake.responder(request, {k.lower(): v for k, v in self.headers.items()})
            else:
                answer = empty_answer(request)
            if mode == "echo-ok":  # valid JSON; schema-invalid where extra keys are refused
                answer["echo"] = body.decode("utf-8")
            self._send(200, completion(json.dumps(answer)))
            return
        if mode == "echo":
            self._send(
                fake.status,
                {
                    "error": {
                        "message": "Incorrect API key provided: "
                        f"{self.headers.get('authorization')}. "
                        f"You sent {self.requestline!r} with headers "
                        f"{dict(self.headers.items())!r} and body {body.decode('utf-8')}",
                        "type": "invalid_request_error",
                        "param": None,
                        "code": "echoed_request",
                    }
                },
            )
            return
        self._send(
            fake.status,
            {
                "error": {
                    "message": "The server had an error while processing your request "
                    f"({fake.status})",
                    "type": "server_error",
                    "param": None,
                    "code": None,
                }
            },
        )

    def _trickle(self, payload: dict[str, Any]) -> None:
        # The JSON, then a megabyte of blanks (still valid JSON): at one byte per `trickle_s`
        # the body never ends within any test's patience.
        data = json.dumps(payload).encode() + b" " * 1_000_000
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.close_connection = True
        try:
            for i in range(len(data)):
                self.wfile.write(data[i : i + 1])
                self.wfile.flush()
                if self.server.fake.stopping.wait(self.server.fake.trickle_s):
                    return
        except OSError:  # the client gave up
            return

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def completion(content: str) -> dict[str, Any]:
    """An OpenAI chat completion object answering `content`, shaped as the API reference
    documents it (https://platform.openai.com/docs/api-reference/chat/object)."""
    return {
        "id": "fake-1",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "fake",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": content},
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeProvider


class FakeProvider:
    """The server, its mode and what it received (`requests`: the JSON bodies, `headers`)."""

    def __init__(
        self,
        mode: str = "ok",
        *,
        status: int = 500,
        responder: Responder | None = None,
        delay_s: float = 0.0,
        trickle_s: float = 0.5,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        if (mode == "script") != (responder is not None):
            raise ValueError("mode 'script' and a responder go together")
        self.mode = mode
        self.status = status
        self.responder = responder
        self.delay_s = delay_s
        self.trickle_s = trickle_s
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def record(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        with self._lock:
            self.headers.append({k.lower(): v for k, v in handler.headers.items()})
            try:
                self.requests.append(json.loads(body or b"{}"))
            except ValueError:
                self.requests.append({})

    def start(self) -> FakeProvider:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeProvider:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


KEY_ENV = "NOTARIUS_FAKE_PROVIDER_KEY"
"""The environment variable profiles written by `profile_for` read the API key from."""


def profile_for(
    base: Path,
    folder: Path,
    api_base: str,
    *,
    name: str = "fake",
    publish: dict[str, Any] | None = None,
    **llm: Any,
) -> Path:
    """A copy of pipeline profile `base` in `folder` whose LLM profile is the fake provider at
    `api_base` (model `openai/fake`, key from `KEY_ENV`; `llm` overrides timeout, retries...);
    `publish` replaces the pipeline's publish policy."""
    config = yaml.safe_load(base.read_text())
    config["pipeline"]["llm_profile"] = name
    if publish is not None:
        config["pipeline"]["publish"] = publish
    config.setdefault("llm_profiles", {})[name] = {
        "model": "openai/fake",
        "api_base": api_base,
        "api_key_env": KEY_ENV,
        "timeout_s": 2,
        "retries": 0,
        "max_concurrency": 2,
        **llm,
    }
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / base.name
    target.write_text(yaml.safe_dump(config, sort_keys=False))
    return target


def main(argv: list[str]) -> None:
    mode = argv[0] if argv else "ok"
    status = int(argv[1]) if len(argv) > 1 else 500
    fake = FakeProvider(mode, status=status).start()
    print(fake.api_base, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        fake.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
