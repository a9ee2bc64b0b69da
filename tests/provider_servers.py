"""Loopback servers that speak four LLM providers' wire formats as litellm 1.110.2 calls them:
OpenAI chat completions (also standing for Azure OpenAI, vLLM, LM Studio and llama.cpp's
server, one `flavour` each), Anthropic messages, Gemini generateContent and Ollama /api/chat.

A test double, not a model. Each server:
- records every request it receives (`requests`: path, lower-cased headers, JSON body, time);
- checks the structured-output rules its provider documents on what arrives (each rule below
  cites the page it comes from) and answers a request that breaks one with that provider's
  real 400 error shape;
- answers the others with a deterministic double: a JSON object generated from the schema the
  request carries, citations picked from the schema's `enum` of unit ids (else from the
  transcript lines `[id] SPEAKER: text` of the request itself), names taken from those lines,
  in the provider's response shape, with usage figures (and, where the provider reports them,
  cached prompt tokens from a small emulation of its documented prompt cache);
- can be scripted to answer with the provider's real error shapes instead (`script`,
  `always`, `refuse_schema`): 400 schema refusal, 401 (Gemini: its 400 `API_KEY_INVALID`), 404
  unknown model, 429 with `Retry-After` (Gemini: `RetryInfo.retryDelay` in `error.details`),
  500, overloaded (Anthropic 529 `overloaded_error`, Gemini 503 `UNAVAILABLE`, OpenAI 503,
  Ollama 503).

Whether the provider enforces the schema is part of the emulation: on a request the provider
enforces (OpenAI `strict: true`, Anthropic `output_format`, Gemini `response_json_schema`
within its subset, Ollama `format` carrying a schema, vLLM/LM Studio `json_schema`, llama.cpp
`json_object` with a schema) the answer is generated from the schema the provider received,
so a value outside an `enum` cannot come out. `tempt=True` makes the double's own intention
cite one unit outside the chunk (the id after the chunk's last one): on an enforced request
the enum stops it, on any other it reaches the client, as a real model's slip would.

Error bodies have each provider's documented shape (cited at each); their message texts are
the provider's own where its documentation, its SDK or a public bug report quotes them (cited),
else a plain description. Token counts are estimates (4 bytes a token), never a tokenizer's.

Use as a context manager: `with OpenAIServer() as server: server.api_base`."""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, ClassVar, Literal
from urllib.parse import parse_qs, urlsplit

# ---- the documentation every rule below is taken from

OPENAI_STRUCTURED_OUTPUTS = (
    "https://platform.openai.com/docs/guides/structured-outputs#supported-schemas"
)
OPENAI_JSON_MODE = "https://platform.openai.com/docs/guides/structured-outputs#json-mode"
OPENAI_CHAT_API = "https://platform.openai.com/docs/api-reference/chat/create"
OPENAI_ERRORS = "https://platform.openai.com/docs/guides/error-codes#api-errors"
OPENAI_RATE_LIMITS = "https://platform.openai.com/docs/guides/rate-limits"
OPENAI_PROMPT_CACHING = "https://platform.openai.com/docs/guides/prompt-caching"
AZURE_STRUCTURED_OUTPUTS = (
    "https://learn.microsoft.com/en-us/azure/ai-foundry/openai/how-to/structured-outputs"
)
AZURE_QUOTA = "https://learn.microsoft.com/en-us/azure/ai-foundry/openai/how-to/quota"
VLLM_STRUCTURED_OUTPUTS = "https://docs.vllm.ai/en/latest/features/structured_outputs/"
VLLM_PROTOCOL = "https://github.com/vllm-project/vllm/blob/main/vllm/entrypoints/openai/protocol.py"
LMSTUDIO_STRUCTURED_OUTPUT = "https://lmstudio.ai/docs/api/structured-output"
LMSTUDIO_JSON_OBJECT_REFUSED = "https://github.com/lmstudio-ai/lmstudio-bug-tracker/issues/189"
"""LM Studio's maintainers' tracker: its 400 for `json_object` is `{"error": "<a string>"}`."""
LLAMACPP_SERVER = "https://github.com/ggml-org/llama.cpp/blob/master/tools/server/README.md"
ANTHROPIC_STRUCTURED_OUTPUTS = (
    "https://platform.claude.com/docs/en/build-with-claude/structured-outputs"
)
ANTHROPIC_ERRORS = "https://docs.claude.com/en/api/errors"
ANTHROPIC_RATE_LIMITS = "https://docs.claude.com/en/api/rate-limits"
ANTHROPIC_PROMPT_CACHING = "https://docs.claude.com/en/docs/build-with-claude/prompt-caching"
ANTHROPIC_MESSAGES_API = "https://docs.claude.com/en/api/messages"
GEMINI_STRUCTURED_OUTPUT = "https://ai.google.dev/gemini-api/docs/structured-output"
GEMINI_GENERATION_CONFIG = "https://ai.google.dev/api/generate-content#v1beta.GenerationConfig"
GEMINI_ERRORS = "https://ai.google.dev/gemini-api/docs/troubleshooting#error-codes"
GEMINI_RATE_LIMITS = "https://ai.google.dev/gemini-api/docs/rate-limits"
GEMINI_CACHING = "https://ai.google.dev/gemini-api/docs/caching#implicit-caching"
GOOGLE_RETRY_INFO = "https://cloud.google.com/apis/design/errors#error_details"
OLLAMA_CHAT_API = "https://docs.ollama.com/api/chat"
OLLAMA_STRUCTURED_OUTPUTS = "https://docs.ollama.com/capabilities/structured-outputs"
OLLAMA_ERRORS = "https://docs.ollama.com/api/errors"
OLLAMA_CONTEXT = "https://docs.ollama.com/faq#how-can-i-specify-the-context-window-size"
OLLAMA_QUEUE = "https://docs.ollama.com/faq#how-does-ollama-handle-concurrent-requests"
HTTP_RETRY_AFTER = "https://www.rfc-editor.org/rfc/rfc9110#field.retry-after"

# ---- what a request carries

UNIT_LINE = re.compile(r"^\[(-?\d+)\] (?:([^:\n]{1,40}): )?(.*)$", re.MULTILINE)
"""A transcript line as the lanes render it: `[id] SPEAKER: text` (the speaker is optional)."""

_NAME = re.compile(r"\b[A-Z][a-z]{2,}\b")
_SENTENCE_START = re.compile(r"(?:^|[.!?:\"\u201c]\s*|--\s*)$")
_SENTENCE_WORDS = (
    "The And But You Your What That This There Then Okay Yeah Yes All Well Just Now Alright "
    "When Where Who Why How Are Can Does Did Not Its It's For With From Into Our They She "
    "His Her Him Let Let's Also Any One Two Three Some Oh Hey Uh Um Sure Right Hello Hi "
    "Thanks Thank Good Great Nice Maybe Please Wait Look Come Yep Nope Cool Awesome Everyone "
    "Everybody Nobody Someone Something Both Have Had Has Was Were Will Would Could Should"
)
_NOT_NAMES = frozenset(_SENTENCE_WORDS.split())
"""Capitalised words that open sentences rather than name anyone."""


@dataclass(frozen=True)
class Line:
    """One transcript line found in a request."""

    unit_id: int
    speaker: str
    text: str

    @property
    def name(self) -> str | None:
        """A capitalised word of the line that looks like a name: one inside a sentence first
        (`... and Gustav waves`), else one opening it, never a common sentence word."""
        found = [m for m in _NAME.finditer(self.text) if m.group(0) not in _NOT_NAMES]
        inside = [m for m in found if not _SENTENCE_START.search(self.text[: m.start()])]
        chosen = inside or found
        return chosen[0].group(0) if chosen else None


def transcript_lines(texts: Iterable[str]) -> list[Line]:
    """Every `[id] SPEAKER: text` line in `texts`, first occurrence of each id, in order."""
    seen: dict[int, Line] = {}
    for text in texts:
        for unit, speaker, body in UNIT_LINE.findall(text):
            seen.setdefault(int(unit), Line(int(unit), (speaker or "").strip(), body))
    return list(seen.values())


def estimate_tokens(text: str) -> int:
    """A deterministic token estimate: 4 bytes a token (never zero for non-empty text)."""
    size = len(text.encode("utf-8"))
    return (size + 3) // 4


def embedded_schema(texts: Iterable[str]) -> dict[str, Any] | None:
    """A JSON Schema written into the prompt (the json_object rung spells it out there): the
    first JSON object in the texts that has `properties`."""
    decoder = json.JSONDecoder()
    for text in texts:
        start = text.find("{")
        while start != -1:
            try:
                found, _ = decoder.raw_decode(text, start)
            except ValueError:
                found = None
            if isinstance(found, dict) and isinstance(found.get("properties"), dict):
                return found
            start = text.find("{", start + 1)
    return None


# ---- JSON Schema walking

Path = tuple[str, ...]


def resolve(root: Mapping[str, Any], node: Mapping[str, Any]) -> Mapping[str, Any]:
    """`node` with local `$ref`s (`#/$defs/X`, `#/definitions/X`) followed."""
    seen = 0
    while isinstance(node, Mapping) and isinstance(node.get("$ref"), str) and seen < 32:
        pointer = node["$ref"]
        if not pointer.startswith("#/"):
            return node
        target: Any = root
        for part in pointer[2:].split("/"):
            target = target.get(part.replace("~1", "/").replace("~0", "~"), {})
        node = target
        seen += 1
    return node


def schema_nodes(schema: Mapping[str, Any], path: Path = ()) -> Iterator[tuple[Path, Any]]:
    """Every subschema of `schema` with its key path from the root (refs not followed)."""
    yield path, schema
    if not isinstance(schema, Mapping):
        return
    for key in ("properties", "$defs", "definitions", "patternProperties"):
        children = schema.get(key)
        if isinstance(children, Mapping):
            for name, child in children.items():
                yield from schema_nodes(child, (*path, key, str(name)))
    for key in ("items", "additionalProperties", "not", "if", "then", "else", "contains"):
        child = schema.get(key)
        if isinstance(child, Mapping):
            yield from schema_nodes(child, (*path, key))
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        children = schema.get(key)
        if isinstance(children, list):
            for i, child in enumerate(children):
                yield from schema_nodes(child, (*path, key, str(i)))


def types_of(node: Mapping[str, Any]) -> list[str]:
    declared = node.get("type")
    if isinstance(declared, str):
        return [declared]
    if isinstance(declared, list):
        return [t for t in declared if isinstance(t, str)]
    return []


def is_object(node: Any) -> bool:
    return isinstance(node, Mapping) and (
        "object" in types_of(node) or ("type" not in node and "properties" in node)
    )


def citation_enum(root: Mapping[str, Any]) -> list[int] | None:
    """The unit ids the schema lets an answer cite: the integer `enum` of an array's items."""
    for _, node in schema_nodes(root):
        if isinstance(node, Mapping) and "array" in types_of(node):
            items = resolve(root, node.get("items") or {})
            values = items.get("enum") if isinstance(items, Mapping) else None
            if isinstance(values, list) and values and all(type(v) is int for v in values):
                return list(values)
    return None


# ---- the deterministic double


class AnswerDouble:
    """Generates the answer to one request from a schema and the request's transcript lines.

    Every value satisfies the schema: properties all filled, the first non-null branch of a
    union, enums a `prefer`red member when they offer one (else one chosen by a seed of the
    chunk), strings a name read from the cited line (trimmed to `maxLength`, padded to
    `minLength`), numbers at their minimum, arrays of records one record per named line (at
    most `records`), each citing its own line. Only the temptation (`tempt`, not `enforced`)
    breaks it: one citation outside the chunk."""

    def __init__(
        self,
        schema: Mapping[str, Any],
        lines: Sequence[Line],
        *,
        enforced: bool,
        tempt: bool = False,
        records: int = 2,
        prefer: Iterable[Any] = (),
    ) -> None:
        self.root = schema
        self.prefer = list(prefer)
        self.lines = list(lines)
        self.by_id = {line.unit_id: line for line in self.lines}
        self.enforced = enforced
        self.tempt = tempt
        self.records = records
        allowed = citation_enum(schema)
        self.citable = allowed if allowed is not None else [line.unit_id for line in lines]
        known = [*self.citable, *self.by_id]
        self.outside = (max(known) + 1) if known else 1
        self.seed = sum(line.unit_id for line in self.lines) if self.lines else 0

    def answer(self) -> Any:
        return self.value(self.root, (), self._units(1)[0] if self.citable else None)

    def _units(self, count: int) -> list[int | None]:
        """Up to `count` citable units, those whose line has a name first (document order)."""
        named = [u for u in self.citable if (line := self.by_id.get(u)) and line.name]
        rest = [u for u in self.citable if u not in named]
        chosen: list[int | None] = [*named, *rest][: max(count, 0)]
        return chosen or [None]

    def name_for(self, unit: int | None) -> str:
        line = self.by_id.get(unit) if unit is not None else None
        if line is None and self.lines:
            line = self.lines[0]
        if line is None:
            return "Someone"
        return line.name or (line.speaker.title() if line.speaker else "Someone")

    def value(self, node: Any, path: Path, unit: int | None) -> Any:
        node = resolve(self.root, node) if isinstance(node, Mapping) else {}
        if "const" in node:
            return node["const"]
        for union in ("anyOf", "oneOf"):
            branches = node.get(union)
            if isinstance(branches, list) and branches:
                usable = [
                    b
                    for b in branches
                    if types_of(resolve(self.root, b)) != ["null"] or len(branches) == 1
                ]
                return self.value((usable or branches)[0], path, unit)
        if isinstance(node.get("allOf"), list) and node["allOf"]:
            return self.value(node["allOf"][0], path, unit)
        enum = node.get("enum")
        if isinstance(enum, list) and enum:
            preferred = [v for v in enum if v in self.prefer]
            return preferred[0] if preferred else enum[self.seed % len(enum)]
        kinds = [t for t in types_of(node) if t != "null"] or types_of(node)
        kind = kinds[0] if kinds else ("object" if "properties" in node else "string")
        if kind == "object":
            properties = node.get("properties") or {}
            return {name: self.value(sub, (*path, name), unit) for name, sub in properties.items()}
        if kind == "array":
            return self.array(node, path, unit)
        if kind == "string":
            return self.string(node, unit)
        if kind in ("integer", "number"):
            low = node.get("minimum", node.get("exclusiveMinimum", 0))
            value = low + 1 if "exclusiveMinimum" in node else max(low, 1)
            high = node.get("maximum")
            value = min(value, high) if isinstance(high, int | float) else value
            return int(value) if kind == "integer" else float(value)
        if kind == "boolean":
            return True
        return None

    def array(self, node: Mapping[str, Any], path: Path, unit: int | None) -> list[Any]:
        items = resolve(self.root, node.get("items") or {})
        low = int(node.get("minItems", 0) or 0)
        high = node.get("maxItems")
        kinds = types_of(items) if isinstance(items, Mapping) else []
        citations = ("integer" in kinds and isinstance(items.get("enum"), list)) or (
            path and path[-1] == "unit_ids"
        )
        if citations:
            cited = [unit] if unit is not None else []
            for extra in self.citable:
                if len(cited) >= max(low, 1):
                    break
                if extra not in cited:
                    cited.append(extra)
            if self.tempt and not self.enforced:
                cited.append(self.outside)  # the slip only enforcement prevents
            return cited
        if is_object(items):
            count = max(low, min(self.records, high if isinstance(high, int) else self.records))
            return [self.value(items, path, u) for u in self._units(count)]
        return [self.value(items, path, unit) for _ in range(low)]

    def string(self, node: Mapping[str, Any], unit: int | None) -> str:
        fmt = node.get("format")
        if fmt == "date-time":
            return "2024-01-01T00:00:00Z"
        if fmt == "date":
            return "2024-01-01"
        text = self.name_for(unit)
        low = int(node.get("minLength", 0) or 0)
        high = node.get("maxLength")
        while len(text) < low:
            text = f"{text} {text}"
        return text[:high] if isinstance(high, int) and high >= 0 else text


# ---- prompt caches (an emulation of each provider's documented rule)


def common_prefix(a: str, b: str) -> int:
    """Length of the common prefix of two strings (binary search over slice comparisons)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


class PromptCache:
    """Prefixes seen by one server. `hit(text)`: the tokens of `text`'s longest prefix shared
    with an earlier request, counted as the provider counts a cache hit (`minimum` tokens at
    least, in `step`-token increments past the minimum); then remembers `text`."""

    def __init__(self, minimum: int, step: int = 1, keep: int = 512) -> None:
        self.minimum = minimum
        self.step = step
        self._seen: deque[str] = deque(maxlen=keep)
        self._lock = threading.Lock()

    def hit(self, text: str) -> int:
        with self._lock:
            best = max((common_prefix(text, old) for old in self._seen), default=0)
            self._seen.append(text)
        tokens = len(text[:best].encode("utf-8")) // 4
        if tokens < self.minimum:
            return 0
        return self.minimum + ((tokens - self.minimum) // self.step) * self.step

    def breakpoint_hit(self, prefix: str) -> bool:
        """Anthropic's rule: a prefix up to a `cache_control` breakpoint is read when exactly that
        prefix was written before; otherwise it is written now."""
        with self._lock:
            found = prefix in self._seen
            if not found:
                self._seen.append(prefix)
        return found


# ---- scripted faults

FaultKind = Literal[
    "schema_refusal", "auth", "forbidden", "not_found", "rate_limit", "server_error", "overloaded"
]


@dataclass(frozen=True)
class Fault:
    """A scripted error answer. `retry_after_s`: for `rate_limit`, the `Retry-After` header
    (Gemini: `RetryInfo.retryDelay` in the body, which is where Gemini says it)."""

    kind: FaultKind
    retry_after_s: float | None = None


@dataclass
class Reply:
    status: int
    payload: Any
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"


@dataclass
class Exchange:
    """One request the server received and what it answered.

    `form` is how the request asked for structure, in the provider's own terms (e.g.
    `json_schema strict`, `output_format`, `response_json_schema`, `format schema`,
    `json_object`, `text`); `schema` the schema found in the slot the provider enforces
    (None when there is none); `enforced` whether the answer was generated under that
    enforcement; `problems` the documented rules the request broke (each answered with a 400);
    `ignored_keywords` the schema keywords the provider accepts but does not enforce."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    received_at: float
    status: int = 0
    form: str = "text"
    schema: dict[str, Any] | None = None
    enforced: bool = False
    problems: tuple[str, ...] = ()
    ignored_keywords: tuple[str, ...] = ()
    fault: str | None = None
    answer: Any = None
    texts: tuple[str, ...] = ()
    prompt_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    completion_tokens: int = 0
    prompt_truncated: bool = False

    @property
    def lines(self) -> list[Line]:
        return transcript_lines(self.texts)

    @property
    def unit_ids(self) -> list[int]:
        """The ids of the transcript lines this request showed the model."""
        return [line.unit_id for line in self.lines]


@dataclass
class Inspection:
    """What a family's parser found in a request body."""

    model: str
    texts: list[str]
    form: str = "text"
    schema: dict[str, Any] | None = None
    enforced: bool = False
    problems: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    max_tokens: int | None = None
    cache_text: str = ""
    breakpoints: list[int] = field(default_factory=list)
    carries_schema: bool = False  # the schema sits in the provider's structured-output slot
    tool: str | None = None  # a forced tool (Anthropic tool_use, OpenAI tool_calls)
    context_tokens: int | None = None  # Ollama: num_ctx


# ---- the server machinery


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        return

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def _serve(self, method: str) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        reply = self.server.provider.handle(method, self.path, headers, raw)
        if isinstance(reply.payload, bytes | str):
            data = reply.payload if isinstance(reply.payload, bytes) else reply.payload.encode()
        else:
            data = json.dumps(reply.payload).encode()
        self.send_response(reply.status)
        self.send_header("content-type", reply.content_type)
        self.send_header("content-length", str(len(data)))
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    provider: ProviderServer


class ProviderServer:
    """What the four families share: the HTTP server, the record, faults, the double, usage.

    `model_names`: when given, a request for any other model gets the provider's 404.
    `api_key`: when given, a request carrying another key gets the provider's auth error.
    `tempt`: the double's intention cites one unit outside the chunk (see the module doc).
    `refuse_schema`: every request that carries the schema in the provider's structured-output
    slot gets the provider's schema refusal (a model or deployment without that support).
    `latency_s`: seconds each answer waits (for concurrency tests).
    `records`: how many records the double puts in a list answer (at most, one a named line).
    `prefer`: enum members the double picks whenever an enum offers them (e.g. `combat`, so
    that every scene is a combat scene and the combat lane is called)."""

    family: ClassVar[str] = ""
    api_path: ClassVar[str] = ""

    def __init__(
        self,
        *,
        model_names: Iterable[str] | None = None,
        api_key: str | None = None,
        tempt: bool = False,
        refuse_schema: bool = False,
        latency_s: float = 0.0,
        records: int = 2,
        prefer: Iterable[Any] = (),
    ) -> None:
        self.prefer = tuple(prefer)
        self.model_names = set(model_names) if model_names is not None else None
        self.api_key = api_key
        self.tempt = tempt
        self.refuse_schema = refuse_schema
        self.latency_s = latency_s
        self.records = records
        self.requests: list[Exchange] = []
        self._faults: deque[Fault] = deque()
        self._always: Fault | None = None
        self._lock = threading.Lock()
        self._http = _HTTPServer(("127.0.0.1", 0), _Handler)
        self._http.provider = self
        self._thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    # -- scripting --

    def script(self, *faults: Fault | FaultKind) -> ProviderServer:
        """The next requests (one each, in order) get these faults; later ones are answered."""
        with self._lock:
            self._faults.extend(f if isinstance(f, Fault) else Fault(f) for f in faults)
        return self

    def always(self, fault: Fault | FaultKind | None) -> ProviderServer:
        """Every request gets this fault (None: stop)."""
        self._always = Fault(fault) if isinstance(fault, str) else fault
        return self

    def _next_fault(self) -> Fault | None:
        with self._lock:
            if self._faults:
                return self._faults.popleft()
        return self._always

    # -- lifecycle --

    @property
    def port(self) -> int:
        return int(self._http.server_address[1])

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_base(self) -> str:
        """What an LLM profile's `api_base` is for this server."""
        return f"{self.root}{self.api_path}"

    def start(self) -> ProviderServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()

    def __enter__(self) -> ProviderServer:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- what was received --

    @property
    def answered(self) -> list[Exchange]:
        """The requests answered with 200."""
        return [r for r in self.requests if r.status == 200]

    # -- the request path --

    def handle(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Reply:
        if method == "GET" or not self.is_api_path(urlsplit(path).path):
            return self.other(method, path, headers, raw)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = None
        exchange = Exchange(path, headers, body if isinstance(body, dict) else {}, time.monotonic())
        with self._lock:
            self.requests.append(exchange)
        reply = self._answer(exchange, path, headers, body)
        exchange.status = reply.status
        return reply

    def _answer(self, ex: Exchange, path: str, headers: dict[str, str], body: Any) -> Reply:
        if not isinstance(body, dict):
            return self.malformed()
        key = self.key_of(path, headers)
        if self.api_key is not None and key != self.api_key:
            ex.fault = "auth"
            return self.fault_reply(Fault("auth"), body, key)
        inspection = self.inspect(path, headers, body)
        ex.texts = tuple(inspection.texts)
        ex.form, ex.schema, ex.enforced = inspection.form, inspection.schema, inspection.enforced
        ex.problems, ex.ignored_keywords = tuple(inspection.problems), tuple(inspection.ignored)
        if self.model_names is not None and inspection.model not in self.model_names:
            ex.fault = "not_found"
            return self.fault_reply(Fault("not_found"), body, key)
        fault = self._next_fault()
        if fault is not None:
            ex.fault = fault.kind
            return self.fault_reply(fault, body, key)
        if inspection.problems:
            return self.refusal(inspection.problems[0], body)
        if self.refuse_schema and inspection.carries_schema:
            ex.fault = "schema_refusal"
            return self.fault_reply(Fault("schema_refusal"), body, key)
        if self.latency_s:
            time.sleep(self.latency_s)
        text = self.answer_text(ex, inspection, body)
        ex.completion_tokens = estimate_tokens(text)
        truncated = (
            inspection.max_tokens is not None and ex.completion_tokens > inspection.max_tokens
        )
        if truncated:
            assert inspection.max_tokens is not None
            text = text[: inspection.max_tokens * 4]
            ex.completion_tokens = inspection.max_tokens
        ex.prompt_tokens = estimate_tokens(inspection.cache_text)
        self.count_cache(ex, inspection)
        return self.success(ex, inspection, text, truncated)

    def answer_text(self, ex: Exchange, inspection: Inspection, body: Mapping[str, Any]) -> str:
        """The answer's text (also kept as `ex.answer`). The double follows the schema it was
        given (the enforcing slot, else one the provider ignores but the model reads, as
        OpenAI's non-strict mode; else the prompt)."""
        schema = inspection.schema or embedded_schema(inspection.texts)
        lines = transcript_lines(inspection.texts)
        if inspection.context_tokens is not None:
            lines, ex.prompt_truncated = self._within_context(inspection, lines)
        answer: Any = {}
        if schema is not None:
            double = AnswerDouble(
                schema,
                lines,
                enforced=inspection.enforced,
                tempt=self.tempt,
                records=self.records,
                prefer=self.prefer,
            )
            answer = double.answer()
        ex.answer = answer
        return json.dumps(answer, ensure_ascii=False)

    def _within_context(self, inspection: Inspection, lines: list[Line]) -> tuple[list[Line], bool]:
        """Ollama truncates a prompt longer than its context window (docs: OLLAMA_CONTEXT):
        the model sees only the last `num_ctx` tokens, so it can only cite lines from there."""
        limit = inspection.context_tokens or 0
        if estimate_tokens(inspection.cache_text) <= limit:
            return lines, False
        visible = inspection.cache_text[-limit * 4 :]
        return transcript_lines([visible]), True

    # -- family hooks --

    def is_api_path(self, path: str) -> bool:
        raise NotImplementedError

    def key_of(self, path: str, headers: Mapping[str, str]) -> str | None:
        auth = headers.get("authorization", "")
        return auth[7:] if auth.lower().startswith("bearer ") else None

    def inspect(self, path: str, headers: Mapping[str, str], body: dict[str, Any]) -> Inspection:
        raise NotImplementedError

    def count_cache(self, ex: Exchange, inspection: Inspection) -> None:
        """Fill `cached_tokens` (and `cache_write_tokens`) by the provider's rule."""

    def success(self, ex: Exchange, inspection: Inspection, text: str, truncated: bool) -> Reply:
        raise NotImplementedError

    def refusal(self, message: str, body: Mapping[str, Any]) -> Reply:
        """The provider's 400 for a request that breaks a structured-output rule."""
        raise NotImplementedError

    def fault_reply(self, fault: Fault, body: Mapping[str, Any], key: str | None = None) -> Reply:
        """The provider's answer for a scripted fault (`key`: the key the request carried)."""
        raise NotImplementedError

    def malformed(self) -> Reply:
        return self.refusal("We could not parse the JSON body of your request.", {})

    def other(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Reply:
        return Reply(404, {"error": {"message": f"Unknown path {urlsplit(path).path}"}})


def _retry_headers(fault: Fault) -> dict[str, str]:
    """`Retry-After` in whole seconds, as HTTP defines it (HTTP_RETRY_AFTER)."""
    if fault.retry_after_s is None:
        return {}
    return {"retry-after": str(max(0, round(fault.retry_after_s)))}


def _mask(key: str | None) -> str:
    """A key as OpenAI quotes it back in a 401: its first and last characters only."""
    if not key:
        return ""
    return f"{key[:3]}{'*' * max(len(key) - 7, 4)}{key[-4:]}"


def _texts_of_content(content: Any) -> list[str]:
    """The text of a message `content`: a string, or a list of parts with `text`."""
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [str(p.get("text", "")) for p in content if isinstance(p, Mapping)]
    return []


# ---- OpenAI chat completions (and the servers that copy it)

Flavour = Literal["openai", "azure", "vllm", "lmstudio", "llamacpp"]

# OPENAI_STRUCTURED_OUTPUTS, "Supported schemas": the keywords strict mode accepts. Anything
# else (minLength, maxLength, default, allOf, not, if/then/else, dependent*, patternProperties,
# ...) is "not permitted". Structural keywords and annotations are listed with the constraints
# the page names: string `pattern`/`format`; number `multipleOf`, `maximum`,
# `exclusiveMaximum`, `minimum`, `exclusiveMinimum`; array `minItems`, `maxItems`.
OPENAI_STRICT_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "const",
        "anyOf",
        "$ref",
        "$defs",
        "definitions",
        "description",
        "title",
        "$schema",
        "$id",
        "pattern",
        "format",
        "multipleOf",
        "maximum",
        "exclusiveMaximum",
        "minimum",
        "exclusiveMinimum",
        "minItems",
        "maxItems",
    }
)
# OPENAI_STRUCTURED_OUTPUTS, "Supported string formats".
OPENAI_STRICT_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
# OPENAI_STRUCTURED_OUTPUTS, limits: 5,000 object properties, 10 levels of nesting, 1,000 enum
# values, 120,000 characters of names and enum values, 15,000 characters for a string enum of
# more than 250 values.
OPENAI_MAX_PROPERTIES = 5000
OPENAI_MAX_DEPTH = 10
OPENAI_MAX_ENUM_VALUES = 1000
OPENAI_MAX_SCHEMA_CHARS = 120_000
# OPENAI_CHAT_API, `response_format.json_schema.name`: a-z, A-Z, 0-9, underscores and dashes,
# at most 64 characters.
OPENAI_SCHEMA_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def _context(path: Path) -> str:
    return "(" + ", ".join(repr(p) for p in path) + ("," if len(path) == 1 else "") + ")"


def openai_strict_problems(schema: Any) -> list[str]:
    """What OpenAI's strict mode refuses in `schema` (OPENAI_STRUCTURED_OUTPUTS), in the words
    of its 400 (`In context=(...), ...`), in schema order."""
    if not isinstance(schema, Mapping):
        return ["schema must be a JSON Schema object"]
    problems: list[str] = []
    # "Root objects must not be anyOf and must be an object".
    if "anyOf" in schema or "object" not in types_of(schema):
        problems.append(
            "In context=(), schema must be a JSON Schema of 'type: \"object\"', "
            f"got 'type: \"{schema.get('type')}\"'."
        )
    properties = 0
    enum_values = 0
    chars = 0
    for path, node in schema_nodes(schema):
        if not isinstance(node, Mapping):
            continue
        for key in node:
            if key not in OPENAI_STRICT_KEYWORDS:
                problems.append(f"In context={_context(path)}, '{key}' is not permitted.")
        fmt = node.get("format")
        if isinstance(fmt, str) and fmt not in OPENAI_STRICT_FORMATS:
            problems.append(f"In context={_context(path)}, '{fmt}' is not a supported format.")
        if is_object(node) and "$ref" not in node:
            # "additionalProperties: false must always be set in objects".
            if node.get("additionalProperties") is not False:
                problems.append(
                    f"In context={_context(path)}, 'additionalProperties' is required to be "
                    "supplied and to be false."
                )
            # "All fields must be required".
            props = node.get("properties") or {}
            missing = [k for k in props if k not in (node.get("required") or [])]
            if missing:
                problems.append(
                    f"In context={_context(path)}, 'required' is required to be supplied and "
                    "to be an array including every key in properties. "
                    f"Missing '{missing[0]}'."
                )
            properties += len(props)
            chars += sum(len(str(k)) for k in props)
        if isinstance(node.get("enum"), list):
            enum_values += len(node["enum"])
            chars += sum(len(str(v)) for v in node["enum"])
        depth = sum(1 for p in path if p == "properties")
        if depth > OPENAI_MAX_DEPTH:
            problems.append(f"In context={_context(path)}, schema exceeds 10 levels of nesting.")
    if properties > OPENAI_MAX_PROPERTIES:
        problems.append(f"Schema has {properties} object properties, more than 5000.")
    if enum_values > OPENAI_MAX_ENUM_VALUES:
        problems.append(f"Schema has {enum_values} enum values, more than 1000.")
    if chars > OPENAI_MAX_SCHEMA_CHARS:
        problems.append("Schema property names and enum values exceed 120000 characters.")
    return problems


class OpenAIServer(ProviderServer):
    """`/v1/chat/completions` (Azure: `/openai/deployments/{name}/chat/completions`), with the
    rules of one server that speaks it (`flavour`):

    - `openai`, `azure`: `json_schema` with `strict: true` is enforced and checked against the
      strict subset (Azure documents the same subset: AZURE_STRUCTURED_OUTPUTS); with `strict`
      false or absent it is not enforced ("best effort"); `json_object` only promises JSON
      and needs the word "json" in the messages (OPENAI_JSON_MODE).
    - `vllm`: `json_schema` is enforced by its grammar backend (VLLM_STRUCTURED_OUTPUTS);
      `json_object` only promises JSON (a `schema` key beside it is ignored).
    - `lmstudio`: `json_schema` is enforced; any other `response_format.type` but `text` is
      refused with LM Studio's 400 (LMSTUDIO_JSON_OBJECT_REFUSED).
    - `llamacpp`: `json_object` with a `schema`, and `json_schema`, are both turned into a
      grammar and enforced (LLAMACPP_SERVER, "response_format")."""

    family = "openai"
    api_path = "/v1"

    def __init__(self, flavour: Flavour = "openai", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.flavour: Flavour = flavour
        # OPENAI_PROMPT_CACHING: prompts of 1,024 tokens or more; hits in 128-token steps; the
        # structured-output schema "serves as a prefix to the system message".
        self.cache = PromptCache(minimum=1024, step=128)

    @property
    def api_base(self) -> str:
        return self.root if self.flavour == "azure" else f"{self.root}/v1"

    def is_api_path(self, path: str) -> bool:
        return path.endswith("/chat/completions")

    def key_of(self, path: str, headers: Mapping[str, str]) -> str | None:
        if self.flavour == "azure":
            return headers.get("api-key")
        return super().key_of(path, headers)

    def inspect(self, path: str, headers: Mapping[str, str], body: dict[str, Any]) -> Inspection:
        messages = body.get("messages") or []
        texts = [
            t
            for m in messages
            if isinstance(m, Mapping)
            for t in _texts_of_content(m.get("content"))
        ]
        model = str(body.get("model", ""))
        if self.flavour == "azure":
            match = re.search(r"/openai/deployments/([^/]+)/chat/completions", path)
            model = match.group(1) if match else model
        found = Inspection(model=model, texts=texts)
        found.max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
        fmt = body.get("response_format")
        prefix = ""
        if isinstance(fmt, Mapping):
            version = (parse_qs(urlsplit(path).query).get("api-version") or [""])[0]
            self._inspect_format(fmt, texts, found, version)
            if found.schema is not None:
                prefix = json.dumps(found.schema, separators=(",", ":"))
        self._inspect_forced_tool(body, found)
        if body.get("tools"):
            prefix = json.dumps(body["tools"], separators=(",", ":")) + prefix
        found.cache_text = prefix + "".join(
            f"\n<{m.get('role')}>\n" + "".join(_texts_of_content(m.get("content")))
            for m in messages
            if isinstance(m, Mapping)
        )
        return found

    def _inspect_forced_tool(self, body: Mapping[str, Any], found: Inspection) -> None:
        """A forced function call (`tool_choice: {type: function, function: {name}}`), which
        litellm sends instead of `json_schema` where it thinks the model lacks it (Azure before
        API version 2024-08-01): answered as `tool_calls`, enforced only with `strict: true`
        (OPENAI_STRUCTURED_OUTPUTS, "function calling")."""
        choice = body.get("tool_choice")
        if not (isinstance(choice, Mapping) and choice.get("type") == "function"):
            return
        name = (choice.get("function") or {}).get("name")
        functions = {
            t["function"].get("name"): t["function"]
            for t in body.get("tools") or []
            if isinstance(t, Mapping) and isinstance(t.get("function"), Mapping)
        }
        function = functions.get(name)
        if function is None:
            found.problems.append(f"Invalid value for 'tool_choice': function '{name}' not found.")
            return
        strict = function.get("strict") is True
        found.tool, found.form = str(name), "tool_call strict" if strict else "tool_call"
        parameters = function.get("parameters")
        found.schema = dict(parameters) if isinstance(parameters, Mapping) else None
        if strict:
            found.carries_schema = True
            label = f"Invalid schema for function '{name}': "
            found.problems.extend(label + p for p in openai_strict_problems(parameters))
            found.enforced = not found.problems

    def _inspect_format(
        self, fmt: Mapping[str, Any], texts: list[str], found: Inspection, api_version: str
    ) -> None:
        kind = fmt.get("type")
        flavour = self.flavour
        if flavour == "lmstudio" and kind not in ("json_schema", "text"):
            found.problems.append("'response_format.type' must be 'json_schema' or 'text'")
            return
        if kind == "json_schema":
            spec = fmt.get("json_schema")
            spec = spec if isinstance(spec, Mapping) else {}
            schema = spec.get("schema", fmt.get("schema") if flavour == "llamacpp" else None)
            found.schema = dict(schema) if isinstance(schema, Mapping) else None
            found.carries_schema = True
            strict = spec.get("strict") is True
            found.form = "json_schema strict" if strict else "json_schema"
            if flavour == "azure" and api_version < "2024-08-01":
                # AZURE_STRUCTURED_OUTPUTS: supported from API version 2024-08-01-preview.
                found.problems.append(
                    "response_format value as json_schema is enabled only for api versions "
                    "2024-08-01-preview and later"
                )
            if flavour in ("openai", "azure"):
                name = spec.get("name")
                if not isinstance(name, str) or not OPENAI_SCHEMA_NAME.match(name):
                    found.problems.append(
                        "Invalid 'response_format.json_schema.name': string does not match "
                        "pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'."
                    )
                if strict:
                    label = f"Invalid schema for response_format '{name}': "
                    found.problems.extend(label + p for p in openai_strict_problems(schema))
                found.enforced = strict and not found.problems
            else:
                found.enforced = found.schema is not None
            return
        if kind == "json_object":
            found.form = "json_object"
            if flavour in ("openai", "azure") and not any("json" in t.lower() for t in texts):
                found.problems.append(
                    "'messages' must contain the word 'json' in some form, to use "
                    "'response_format' of type 'json_object'."
                )
            if flavour == "llamacpp" and isinstance(fmt.get("schema"), Mapping):
                found.schema, found.enforced = dict(fmt["schema"]), True
                found.form, found.carries_schema = "json_object schema", True
            return
        if kind not in (None, "text"):
            found.problems.append(
                f"Invalid value: '{kind}'. Supported values are: 'json_object', 'json_schema', "
                "and 'text'."
            )

    def count_cache(self, ex: Exchange, inspection: Inspection) -> None:
        if self.flavour in ("openai", "azure"):
            ex.cached_tokens = min(self.cache.hit(inspection.cache_text), ex.prompt_tokens)

    def success(self, ex: Exchange, inspection: Inspection, text: str, truncated: bool) -> Reply:
        usage: dict[str, Any] = {
            "prompt_tokens": ex.prompt_tokens,
            "completion_tokens": ex.completion_tokens,
            "total_tokens": ex.prompt_tokens + ex.completion_tokens,
        }
        if self.flavour in ("openai", "azure"):
            usage["prompt_tokens_details"] = {"cached_tokens": ex.cached_tokens, "audio_tokens": 0}
            usage["completion_tokens_details"] = {"reasoning_tokens": 0, "audio_tokens": 0}
        message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
        if inspection.tool is not None:
            call = {"name": inspection.tool, "arguments": text}
            message["content"] = None
            message["tool_calls"] = [
                {"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function", "function": call}
            ]
        return Reply(
            200,
            {
                "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": inspection.model,
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "logprobs": None,
                        "finish_reason": "length" if truncated else "stop",
                    }
                ],
                "usage": usage,
                "system_fingerprint": "fp_conformance",
            },
        )

    def _error(
        self,
        status: int,
        message: str,
        kind: str,
        *,
        param: str | None = None,
        code: Any = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        """OpenAI's error object (OPENAI_ERRORS); vLLM's is the same shape with its exception
        name as `type` and the status as `code` (VLLM_PROTOCOL, `ErrorResponse`)."""
        if self.flavour == "lmstudio":
            return Reply(status, {"error": message}, headers or {})  # LM Studio: a bare string
        if self.flavour == "vllm":
            kind = {400: "BadRequestError", 401: "Unauthorized", 404: "NotFoundError"}.get(
                status, "InternalServerError"
            )
            return Reply(
                status,
                {"error": {"message": message, "type": kind, "param": param, "code": status}},
                headers or {},
            )
        if self.flavour == "llamacpp":
            return Reply(
                status, {"error": {"code": status, "message": message, "type": kind}}, headers or {}
            )
        error = {"message": message, "type": kind, "param": param, "code": code}
        return Reply(status, {"error": error}, headers or {})

    def refusal(self, message: str, body: Mapping[str, Any]) -> Reply:
        param = "response_format" if "response_format" in message or "schema" in message else None
        return self._error(400, message, "invalid_request_error", param=param)

    def fault_reply(self, fault: Fault, body: Mapping[str, Any], key: str | None = None) -> Reply:
        model = str(body.get("model", ""))
        retry = _retry_headers(fault)
        azure = self.flavour == "azure"
        if fault.kind == "schema_refusal":
            if self.flavour == "vllm":  # vllm/v1/structured_output/backend_xgrammar.py
                return self.refusal(
                    "The provided JSON schema contains features not supported by xgrammar.", body
                )
            return self.refusal(
                "Invalid parameter: 'response_format' of type 'json_schema' is not supported "
                "with this model.",
                body,
            )
        if fault.kind == "auth":
            if azure:  # AZURE_QUOTA / Azure OpenAI REST: 401 with a string code
                return Reply(
                    401,
                    {
                        "error": {
                            "code": "401",
                            "message": "Access denied due to "
                            "invalid subscription key or wrong API endpoint. Make sure to provide "
                            "a valid key for an active subscription and use a correct regional "
                            "API endpoint for your resource.",
                        }
                    },
                )
            if self.flavour == "vllm":  # vllm's --api-key middleware
                return Reply(401, {"error": "Unauthorized"})
            return self._error(
                401,
                f"Incorrect API key provided: {_mask(key)}. "
                "You can find your API key at https://platform.openai.com/account/api-keys.",
                "invalid_request_error",
                code="invalid_api_key",
            )
        if fault.kind == "forbidden":
            return self._error(
                403,
                "You are not allowed to sample from this model",
                "invalid_request_error",
                code="model_not_found",
            )
        if fault.kind == "not_found":
            if azure:
                return Reply(
                    404,
                    {
                        "error": {
                            "code": "DeploymentNotFound",
                            "message": "The API "
                            "deployment for this resource does not exist. If you created the "
                            "deployment within the last 5 minutes, please wait a moment and try "
                            "again.",
                        }
                    },
                )
            return self._error(
                404,
                f"The model `{model}` does not exist or you do not have access to it.",
                "invalid_request_error",
                code="model_not_found",
            )
        if fault.kind == "rate_limit":
            wait = fault.retry_after_s or 20
            if azure:
                return Reply(
                    429,
                    {
                        "error": {
                            "code": "429",
                            "message": "Requests to the "
                            "ChatCompletions_Create Operation under Azure OpenAI API version "
                            "2025-02-01-preview have exceeded token rate limit of your current "
                            f"OpenAI S0 pricing tier. Please retry after {round(wait)} seconds.",
                        }
                    },
                    retry,
                )
            if self.flavour != "openai":  # a gateway in front of a local server: no quota text
                return self._error(429, "Too Many Requests", "rate_limit_error", headers=retry)
            headers = {
                **retry,
                "x-ratelimit-limit-requests": "500",
                "x-ratelimit-remaining-requests": "0",
                "x-ratelimit-reset-requests": f"{wait:g}s",
            }
            return self._error(
                429,
                f"Rate limit reached for {model} in organization org-conformance on requests per "
                f"min (RPM): Limit 500, Used 500, Requested 1. Please try again in {wait:g}s. "
                "Visit https://platform.openai.com/account/rate-limits to learn more.",
                "requests",
                code="rate_limit_exceeded",
                headers=headers,
            )
        if fault.kind == "overloaded":
            return self._error(
                503,
                "The engine is currently overloaded, please try again later.",
                "server_error",
                headers=retry,
            )
        return self._error(
            500,
            "The server had an error while processing your request. Sorry about that!",
            "server_error",
        )

    def other(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Reply:
        if method == "GET" and urlsplit(path).path.endswith("/models"):
            return Reply(
                200, {"object": "list", "data": [{"id": "conformance", "object": "model"}]}
            )
        return self._error(
            404, f"Invalid URL (POST {urlsplit(path).path})", "invalid_request_error"
        )


# ---- Anthropic messages

# ANTHROPIC_STRUCTURED_OUTPUTS, "JSON Schema limitations": constraints the grammar cannot
# enforce, refused with "output_format.schema: For '<type>' type, property '<kw>' is not
# supported" (the wording litellm quotes in its AnthropicConfig.filter_anthropic_output_schema).
ANTHROPIC_UNSUPPORTED = (
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "maxItems",
    "uniqueItems",
    "contains",
    "minContains",
    "maxContains",
    "prefixItems",
    "minProperties",
    "maxProperties",
    "patternProperties",
    "propertyNames",
    "dependentRequired",
    "dependentSchemas",
    "unevaluatedProperties",
    "if",
    "then",
    "else",
    "not",
)
# Same page: the string formats supported, and the complexity limits (24 optional parameters,
# 16 parameters with a union type, across the request's strict schemas).
ANTHROPIC_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"}
)
ANTHROPIC_MAX_OPTIONAL = 24
ANTHROPIC_MAX_UNIONS = 16
ANTHROPIC_GRAMMAR_TOO_LARGE = (  # github.com/anthropics/anthropic-sdk-python/issues/1185
    "The compiled grammar is too large, which would cause performance issues. Simplify your "
    "tool schemas or reduce the number of strict tools."
)
# ANTHROPIC_PROMPT_CACHING, "Cache limitations": the minimum cacheable prompt length.
ANTHROPIC_CACHE_MINIMUM = {"claude-haiku-4-5": 4096, "claude-opus-4-5": 4096}
ANTHROPIC_CACHE_DEFAULT_MINIMUM = 1024


def anthropic_schema_problems(schema: Any, where: str = "output_format.schema") -> list[str]:
    """What Anthropic refuses in a structured-output schema (ANTHROPIC_STRUCTURED_OUTPUTS)."""
    if not isinstance(schema, Mapping):
        return [f"{where}: Input should be a valid dictionary"]
    problems: list[str] = []
    optional = unions = 0
    for _path, node in schema_nodes(schema):
        if not isinstance(node, Mapping):
            continue
        kind = (types_of(node) or ["object" if "properties" in node else "any"])[0]
        for key in ANTHROPIC_UNSUPPORTED:
            if key in node:
                problems.append(f"{where}: For '{kind}' type, property '{key}' is not supported")
        if node.get("minItems") not in (None, 0, 1):
            problems.append(f"{where}: For 'array' type, property 'minItems' only supports 0 or 1")
        if "oneOf" in node:
            problems.append(f"{where}: Schema type 'oneOf' is not supported")
        fmt = node.get("format")
        if isinstance(fmt, str) and fmt not in ANTHROPIC_FORMATS:
            problems.append(f"{where}: String format '{fmt}' is not supported")
        ref = node.get("$ref")
        if isinstance(ref, str) and not ref.startswith("#"):
            problems.append(f"{where}: External '$ref' is not supported")
        enum = node.get("enum")
        if isinstance(enum, list) and any(isinstance(v, dict | list) for v in enum):
            problems.append(f"{where}: Complex types in 'enum' are not supported")
        if is_object(node) and "$ref" not in node:
            if node.get("additionalProperties") is not False:
                problems.append(
                    f"{where}: For 'object' type, 'additionalProperties' must be explicitly set "
                    "to false"
                )
            required = set(node.get("required") or [])
            optional += sum(1 for k in (node.get("properties") or {}) if k not in required)
        if "anyOf" in node or len(types_of(node)) > 1:
            unions += 1
    if _has_cycle(schema):
        problems.append(f"{where}: Recursive schemas are not supported")
    if optional > ANTHROPIC_MAX_OPTIONAL or unions > ANTHROPIC_MAX_UNIONS:
        problems.append(ANTHROPIC_GRAMMAR_TOO_LARGE)
    return problems


def _has_cycle(schema: Mapping[str, Any]) -> bool:
    """True when a local `$ref` leads back to a definition it is inside."""
    defs = {**(schema.get("definitions") or {}), **(schema.get("$defs") or {})}

    def refs(node: Any) -> set[str]:
        return {
            n["$ref"].rsplit("/", 1)[-1]
            for _, n in schema_nodes(node)
            if isinstance(n, Mapping) and isinstance(n.get("$ref"), str)
        }

    graph = {name: refs(node) for name, node in defs.items()}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in graph.get(start, ()):
            if nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt})):
                return True
        return False

    return any(reaches(name, name, {name}) for name in graph)


class AnthropicServer(ProviderServer):
    """`/v1/messages`. Structured output arrives as litellm sends it for models with native
    support: `output_format: {type: json_schema, schema}` with the beta header
    `structured-outputs-2025-11-13` (also accepted: the GA form `output_config.format`);
    both are enforced after the schema passes ANTHROPIC_STRUCTURED_OUTPUTS. A forced tool
    (`tool_choice: {type: tool}`) is answered with a `tool_use` block, enforced only when the
    tool is `strict`. Prompt caching follows `cache_control` breakpoints
    (ANTHROPIC_PROMPT_CACHING: tools, then system, then messages)."""

    family = "anthropic"
    api_path = ""
    BETA = "structured-outputs-2025-11-13"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cache = PromptCache(minimum=0)

    def is_api_path(self, path: str) -> bool:
        return path.endswith("/v1/messages")

    def key_of(self, path: str, headers: Mapping[str, str]) -> str | None:
        return headers.get("x-api-key")

    def inspect(self, path: str, headers: Mapping[str, str], body: dict[str, Any]) -> Inspection:
        parts: list[tuple[str, bool]] = []  # (text, cache_control breakpoint after it)
        for tool in body.get("tools") or []:
            if isinstance(tool, Mapping):
                parts.append((json.dumps(tool, sort_keys=True), "cache_control" in tool))
        system = body.get("system")
        blocks = [{"type": "text", "text": system}] if isinstance(system, str) else system or []
        for block in blocks:
            if isinstance(block, Mapping):
                parts.append((str(block.get("text", "")), "cache_control" in block))
        for message in body.get("messages") or []:
            if not isinstance(message, Mapping):
                continue
            content = message.get("content")
            items = [{"type": "text", "text": content}] if isinstance(content, str) else content
            for block in items or []:
                if isinstance(block, Mapping):
                    parts.append((str(block.get("text", "")), "cache_control" in block))
        texts = [t for t, _ in parts if t]
        found = Inspection(model=str(body.get("model", "")), texts=texts)
        offset = 0
        joined = []
        for text, mark in parts:
            joined.append(text)
            offset += len(text)
            if mark:
                found.breakpoints.append(offset)
        found.cache_text = "".join(joined)
        found.max_tokens = body.get("max_tokens")
        if not isinstance(found.max_tokens, int):  # ANTHROPIC_MESSAGES_API: max_tokens required
            found.problems.append("max_tokens: Field required")
        output_format = body.get("output_format")
        config = body.get("output_config")
        ga_format = config.get("format") if isinstance(config, Mapping) else None
        if output_format is not None:
            beta = headers.get("anthropic-beta", "")
            if self.BETA not in [b.strip() for b in beta.split(",")]:
                found.problems.append("output_format: Extra inputs are not permitted")
            self._inspect_format(output_format, "output_format", found)
        elif ga_format is not None:
            self._inspect_format(ga_format, "output_config.format", found)
        choice = body.get("tool_choice")
        if isinstance(choice, Mapping) and choice.get("type") == "tool":
            tools = {t.get("name"): t for t in body.get("tools") or [] if isinstance(t, Mapping)}
            tool = tools.get(choice.get("name"))
            if isinstance(tool, Mapping):
                found.tool = str(tool.get("name"))
                found.form = "tool_use strict" if tool.get("strict") else "tool_use"
                schema = tool.get("input_schema")
                found.schema = dict(schema) if isinstance(schema, Mapping) else None
                if tool.get("strict"):
                    found.carries_schema = True
                    where = "tools.0.custom.input_schema"
                    found.problems.extend(anthropic_schema_problems(schema, where))
                    found.enforced = not found.problems
        return found

    def _inspect_format(self, fmt: Any, where: str, found: Inspection) -> None:
        found.form, found.carries_schema = where, True
        if not isinstance(fmt, Mapping) or fmt.get("type") != "json_schema":
            found.problems.append(f"{where}.type: Input should be 'json_schema'")
            return
        schema = fmt.get("schema")
        found.schema = dict(schema) if isinstance(schema, Mapping) else None
        found.problems.extend(anthropic_schema_problems(schema, f"{where}.schema"))
        found.enforced = not found.problems

    def count_cache(self, ex: Exchange, inspection: Inspection) -> None:
        minimum = ANTHROPIC_CACHE_MINIMUM.get(inspection.model, ANTHROPIC_CACHE_DEFAULT_MINIMUM)
        read = write = 0
        for point in inspection.breakpoints:
            prefix = inspection.cache_text[:point]
            tokens = estimate_tokens(prefix)
            if tokens < minimum:
                continue
            if self.cache.breakpoint_hit(prefix):
                read = max(read, tokens)
            else:
                write = max(write, tokens - read)
        ex.cached_tokens, ex.cache_write_tokens = read, write

    def success(self, ex: Exchange, inspection: Inspection, text: str, truncated: bool) -> Reply:
        if inspection.tool is not None:
            try:
                value = json.loads(text)
            except ValueError:
                value = {}
            content: list[dict[str, Any]] = [
                {
                    "type": "tool_use",
                    "id": f"toolu_{uuid.uuid4().hex[:24]}",
                    "name": inspection.tool,
                    "input": value,
                }
            ]
            stop = "tool_use"
        else:
            content = [{"type": "text", "text": text}]
            stop = "end_turn"
        uncached = max(ex.prompt_tokens - ex.cached_tokens - ex.cache_write_tokens, 0)
        return Reply(
            200,
            {
                "id": f"msg_{uuid.uuid4().hex[:24]}",
                "type": "message",
                "role": "assistant",
                "model": inspection.model,
                "content": content,
                "stop_reason": "max_tokens" if truncated else stop,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": uncached,
                    "cache_creation_input_tokens": ex.cache_write_tokens,
                    "cache_read_input_tokens": ex.cached_tokens,
                    "output_tokens": ex.completion_tokens,
                },
            },
            {"request-id": f"req_{uuid.uuid4().hex[:24]}"},
        )

    def _error(
        self, status: int, kind: str, message: str, headers: dict[str, str] | None = None
    ) -> Reply:
        """ANTHROPIC_ERRORS, "Error shapes"."""
        request_id = f"req_{uuid.uuid4().hex[:24]}"
        payload = {
            "type": "error",
            "error": {"type": kind, "message": message},
            "request_id": request_id,
        }
        return Reply(status, payload, {"request-id": request_id, **(headers or {})})

    def refusal(self, message: str, body: Mapping[str, Any]) -> Reply:
        return self._error(400, "invalid_request_error", message)

    def fault_reply(self, fault: Fault, body: Mapping[str, Any], key: str | None = None) -> Reply:
        model = str(body.get("model", ""))
        if fault.kind == "schema_refusal":
            return self.refusal(ANTHROPIC_GRAMMAR_TOO_LARGE, body)
        if fault.kind == "auth":
            return self._error(401, "authentication_error", "invalid x-api-key")
        if fault.kind == "forbidden":
            return self._error(
                403,
                "permission_error",
                "Your API key does not have permission to use the specified resource.",
            )
        if fault.kind == "not_found":
            return self._error(404, "not_found_error", f"model: {model}")
        if fault.kind == "rate_limit":
            # ANTHROPIC_RATE_LIMITS: a 429 says how long to wait in `retry-after`.
            headers = {
                **_retry_headers(fault),
                "anthropic-ratelimit-requests-limit": "50",
                "anthropic-ratelimit-requests-remaining": "0",
            }
            return self._error(
                429,
                "rate_limit_error",
                "This request would exceed the rate limit for your organization of 50 requests "
                "per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits.",
                headers,
            )
        if fault.kind == "overloaded":
            return self._error(529, "overloaded_error", "Overloaded", _retry_headers(fault))
        return self._error(500, "api_error", "Internal server error")


# ---- Gemini generateContent

# GEMINI_GENERATION_CONFIG, `responseJsonSchema`: "only the following properties are
# supported"; the rest are accepted and not enforced. `propertyOrdering` is allowed too.
GEMINI_JSON_SCHEMA_KEYWORDS = frozenset(
    {
        "$id",
        "$defs",
        "$ref",
        "$anchor",
        "type",
        "format",
        "title",
        "description",
        "enum",
        "items",
        "prefixItems",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "anyOf",
        "oneOf",
        "properties",
        "additionalProperties",
        "required",
        "propertyOrdering",
    }
)
# GEMINI_GENERATION_CONFIG, `responseSchema`: the fields of its OpenAPI-subset `Schema`; any
# other field is an unknown name in the request and refused.
GEMINI_SCHEMA_FIELDS = frozenset(
    {
        "type",
        "format",
        "title",
        "description",
        "nullable",
        "enum",
        "maxItems",
        "minItems",
        "properties",
        "required",
        "minProperties",
        "maxProperties",
        "minLength",
        "maxLength",
        "pattern",
        "example",
        "anyOf",
        "propertyOrdering",
        "default",
        "items",
        "minimum",
        "maximum",
    }
)
GEMINI_TOO_COMPLEX = (  # GEMINI_STRUCTURED_OUTPUT: a complex schema can give a 400
    "The specified schema produces a constraint that has too many states for serving.  Typical "
    "causes of this error are schemas with lots of text (for example, very long property or "
    "enum names), schemas with long array length limits (especially when nested), or schemas "
    "using complex value matchers (for example, integers or numbers with minimum/maximum "
    "bounds or strings with complex formats like date-time)"
)


def gemini_json_schema_problems(schema: Any, where: str) -> tuple[list[str], list[str]]:
    """What Gemini refuses in a `responseJsonSchema`, and the keywords it ignores
    (GEMINI_GENERATION_CONFIG: "If $ref is set on a sub-schema, no other properties, except
    for those starting as a $, may be set"; enum "for strings and numbers")."""
    if not isinstance(schema, Mapping):
        return [f"Invalid value at '{where}' (google.protobuf.Value)"], []
    problems: list[str] = []
    ignored: set[str] = set()
    for path, node in schema_nodes(schema):
        if not isinstance(node, Mapping):
            continue
        if "$ref" in node:
            extra = [k for k in node if not str(k).startswith("$")]
            if extra:
                problems.append(
                    f"Invalid value at '{where}' ({'.'.join(path) or 'root'}): $ref cannot be "
                    f"combined with {', '.join(sorted(extra))}"
                )
        enum = node.get("enum")
        if isinstance(enum, list) and any(not isinstance(v, str | int | float) for v in enum):
            problems.append(f"Invalid value at '{where}': enum values must be strings or numbers")
        ignored.update(str(k) for k in node if k not in GEMINI_JSON_SCHEMA_KEYWORDS)
    return problems, sorted(ignored)


class GeminiServer(ProviderServer):
    """`/v1beta/models/{model}:generateContent`, as litellm calls it with an `api_base` (it
    appends `/models/{model}:generateContent`; give `api_base` with or without `/v1beta`).
    Structured output: `generationConfig.response_mime_type: application/json` with
    `response_json_schema` (enforced within GEMINI_JSON_SCHEMA_KEYWORDS, other keywords
    recorded in `ignored_keywords`) or `response_schema` (its OpenAPI subset; an unknown field
    is refused). Keys in snake or camel case, as the JSON API accepts both. Implicit caching:
    prefixes of at least 1,024 tokens (GEMINI_CACHING, Gemini 2.5 Flash)."""

    family = "gemini"
    api_path = "/v1beta"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cache = PromptCache(minimum=1024)

    def is_api_path(self, path: str) -> bool:
        return bool(re.search(r"/models/[^/:]+:generateContent$", urlsplit(path).path))

    def key_of(self, path: str, headers: Mapping[str, str]) -> str | None:
        query = parse_qs(urlsplit(path).query)
        return headers.get("x-goog-api-key") or (query.get("key") or [None])[0]

    @staticmethod
    def _pick(mapping: Mapping[str, Any], snake: str) -> Any:
        camel = re.sub(r"_([a-z])", lambda m: m.group(1).upper(), snake)
        return mapping.get(snake, mapping.get(camel))

    def inspect(self, path: str, headers: Mapping[str, str], body: dict[str, Any]) -> Inspection:
        match = re.search(r"/models/([^/:]+):generateContent", urlsplit(path).path)
        texts: list[str] = []
        system = self._pick(body, "system_instruction")
        if isinstance(system, Mapping):
            texts.extend(str(p.get("text", "")) for p in system.get("parts") or [])
        for content in body.get("contents") or []:
            if isinstance(content, Mapping):
                texts.extend(str(p.get("text", "")) for p in content.get("parts") or [])
        found = Inspection(model=match.group(1) if match else "", texts=[t for t in texts if t])
        found.cache_text = "\n".join(found.texts)
        config = self._pick(body, "generation_config") or {}
        found.max_tokens = self._pick(config, "max_output_tokens")
        mime = self._pick(config, "response_mime_type")
        json_schema = self._pick(config, "response_json_schema")
        openapi_schema = self._pick(config, "response_schema")
        if json_schema is not None and openapi_schema is not None:
            found.problems.append(
                "response_schema and response_json_schema cannot both be set (generation_config)"
            )
        schema = json_schema if json_schema is not None else openapi_schema
        if schema is not None and mime not in ("application/json", "text/x.enum"):
            # "If set, a compatible response_mime_type must also be set."
            found.problems.append(
                "GenerateContentRequest.generation_config.response_mime_type: response_mime_type "
                "must be application/json or text/x.enum when a response schema is set."
            )
        if json_schema is not None:
            found.form = "response_json_schema"
            problems, ignored = gemini_json_schema_problems(
                json_schema, "generation_config.response_json_schema"
            )
            found.problems.extend(problems)
            found.ignored.extend(ignored)
        elif openapi_schema is not None:
            found.form = "response_schema"
            for path_, node in schema_nodes(openapi_schema):
                for key in node if isinstance(node, Mapping) else ():
                    if key not in GEMINI_SCHEMA_FIELDS:
                        where = ".".join(("generation_config.response_schema", *path_))
                        found.problems.append(
                            f'Invalid JSON payload received. Unknown name "{key}" at '
                            f"'{where}': Cannot find field."
                        )
        elif mime == "application/json":
            found.form = "json_object"
        if isinstance(schema, Mapping):
            found.schema, found.carries_schema = dict(schema), True
            found.enforced = mime == "application/json" and not found.problems
        return found

    def count_cache(self, ex: Exchange, inspection: Inspection) -> None:
        ex.cached_tokens = min(self.cache.hit(inspection.cache_text), ex.prompt_tokens)

    def success(self, ex: Exchange, inspection: Inspection, text: str, truncated: bool) -> Reply:
        usage: dict[str, Any] = {
            "promptTokenCount": ex.prompt_tokens,
            "candidatesTokenCount": ex.completion_tokens,
            "totalTokenCount": ex.prompt_tokens + ex.completion_tokens,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": ex.prompt_tokens}],
        }
        if ex.cached_tokens:
            usage["cachedContentTokenCount"] = ex.cached_tokens
        return Reply(
            200,
            {
                "candidates": [
                    {
                        "content": {"parts": [{"text": text}], "role": "model"},
                        "finishReason": "MAX_TOKENS" if truncated else "STOP",
                        "index": 0,
                    }
                ],
                "usageMetadata": usage,
                "modelVersion": inspection.model,
                "responseId": uuid.uuid4().hex[:22],
            },
        )

    def _error(
        self, code: int, status: str, message: str, details: list[Any] | None = None
    ) -> Reply:
        """The Google API error model (GEMINI_ERRORS, GOOGLE_RETRY_INFO)."""
        error: dict[str, Any] = {"code": code, "message": message, "status": status}
        if details:
            error["details"] = details
        return Reply(code, {"error": error})

    def refusal(self, message: str, body: Mapping[str, Any]) -> Reply:
        return self._error(400, "INVALID_ARGUMENT", message)

    def fault_reply(self, fault: Fault, body: Mapping[str, Any], key: str | None = None) -> Reply:
        if fault.kind == "schema_refusal":
            return self.refusal(GEMINI_TOO_COMPLEX, body)
        if fault.kind == "auth":
            # GEMINI_ERRORS: a bad key is a 400 INVALID_ARGUMENT with reason API_KEY_INVALID.
            return self._error(
                400,
                "INVALID_ARGUMENT",
                "API key not valid. Please pass a valid API key.",
                [
                    {
                        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                        "reason": "API_KEY_INVALID",
                        "domain": "googleapis.com",
                        "metadata": {"service": "generativelanguage.googleapis.com"},
                    }
                ],
            )
        if fault.kind == "forbidden":
            return self._error(
                403,
                "PERMISSION_DENIED",
                "Method doesn't allow unregistered callers (callers without "
                "established identity). Please use API Key or other form of API "
                "consumer identity to call this API.",
            )
        if fault.kind == "not_found":
            return self._error(
                404,
                "NOT_FOUND",
                "models/unknown is not found for API version "
                "v1beta, or is not supported for generateContent.",
            )
        if fault.kind == "rate_limit":
            wait = fault.retry_after_s if fault.retry_after_s is not None else 20
            details = [
                {
                    "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                    "violations": [
                        {
                            "quotaMetric": "generativelanguage.googleapis.com/"
                            "generate_content_free_tier_requests",
                            "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
                            "quotaValue": "10",
                        }
                    ],
                },
                {
                    "@type": "type.googleapis.com/google.rpc.Help",
                    "links": [
                        {
                            "description": "Learn more about Gemini API quotas",
                            "url": GEMINI_RATE_LIMITS,
                        }
                    ],
                },
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{wait:g}s"},
            ]
            return self._error(
                429,
                "RESOURCE_EXHAUSTED",
                "You exceeded your current quota, "
                "please check your plan and billing details. For more information "
                f"on this error, head to: {GEMINI_RATE_LIMITS}.",
                details,
            )
        if fault.kind == "overloaded":
            return self._error(
                503, "UNAVAILABLE", "The model is overloaded. Please try again later."
            )
        return self._error(
            500,
            "INTERNAL",
            "An internal error has occurred. Please retry or "
            "report in https://developers.generativeai.google/guide/troubleshooting",
        )

    def other(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Reply:
        return self._error(404, "NOT_FOUND", f"Method not found: {urlsplit(path).path}")


# ---- Ollama /api/chat

OLLAMA_DEFAULT_CONTEXT = 4096
"""OLLAMA_CONTEXT: "By default, Ollama uses a context window size of 4096 tokens" (newer
releases may pick more from the GPU's memory; a profile should not rely on it)."""


class OllamaServer(ProviderServer):
    """`/api/chat`, non-streamed as litellm sends it (`stream: false`). `format` is `"json"`
    (JSON only) or a JSON schema, which Ollama compiles to a grammar and so enforces
    (OLLAMA_STRUCTURED_OUTPUTS). `options.num_ctx` sets the context window; a longer prompt is
    truncated and the double then sees only its end (`prompt_truncated`)."""

    family = "ollama"
    api_path = ""

    def is_api_path(self, path: str) -> bool:
        return urlsplit(path).path == "/api/chat"

    def inspect(self, path: str, headers: Mapping[str, str], body: dict[str, Any]) -> Inspection:
        messages = [m for m in body.get("messages") or [] if isinstance(m, Mapping)]
        texts = [str(m.get("content") or "") for m in messages]
        found = Inspection(model=str(body.get("model", "")), texts=texts)
        found.cache_text = "".join(
            f"\n<{m.get('role')}>\n{m.get('content') or ''}" for m in messages
        )
        options = body.get("options") if isinstance(body.get("options"), Mapping) else {}
        found.max_tokens = options.get("num_predict")
        ctx = options.get("num_ctx")
        found.context_tokens = ctx if isinstance(ctx, int) and ctx > 0 else OLLAMA_DEFAULT_CONTEXT
        fmt = body.get("format")
        if fmt == "json":
            found.form = "json_object"
        elif isinstance(fmt, Mapping):
            found.form, found.carries_schema = "format schema", True
            if not isinstance(fmt.get("type"), str | list) and "properties" not in fmt:
                found.problems.append("invalid JSON schema in format")
            else:
                found.schema, found.enforced = dict(fmt), True
        elif fmt not in (None, ""):
            found.problems.append(
                f'invalid format: expected "json" or a JSON schema, got {json.dumps(fmt)}'
            )
        return found

    def success(self, ex: Exchange, inspection: Inspection, text: str, truncated: bool) -> Reply:
        if ex.prompt_truncated and inspection.context_tokens:
            ex.prompt_tokens = inspection.context_tokens
        return Reply(
            200,
            {
                "model": inspection.model,
                "created_at": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime()),
                "message": {"role": "assistant", "content": text},
                "done": True,
                "done_reason": "length" if truncated else "stop",
                "total_duration": 1_000_000,
                "load_duration": 100_000,
                "prompt_eval_count": ex.prompt_tokens,
                "prompt_eval_duration": 500_000,
                "eval_count": ex.completion_tokens,
                "eval_duration": 400_000,
            },
        )

    def refusal(self, message: str, body: Mapping[str, Any]) -> Reply:
        return Reply(400, {"error": message})  # OLLAMA_ERRORS: {"error": "..."}

    def fault_reply(self, fault: Fault, body: Mapping[str, Any], key: str | None = None) -> Reply:
        model = str(body.get("model", ""))
        if fault.kind == "schema_refusal":
            return self.refusal("invalid JSON schema in format", body)
        if fault.kind == "auth":
            return Reply(401, {"error": "unauthorized"})
        if fault.kind == "forbidden":
            return Reply(403, {"error": "forbidden"})
        if fault.kind == "not_found":
            return Reply(404, {"error": f'model "{model}" not found, try pulling it first'})
        if fault.kind == "rate_limit":
            return Reply(429, {"error": "too many requests"}, _retry_headers(fault))
        if fault.kind == "overloaded":  # OLLAMA_QUEUE: a full queue answers 503
            return Reply(
                503,
                {"error": "server busy, please try again.  maximum pending requests exceeded"},
                _retry_headers(fault),
            )
        return Reply(500, {"error": "an error was encountered while running the model"})

    def other(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Reply:
        route = urlsplit(path).path
        if route == "/api/tags":
            return Reply(
                200, {"models": [{"name": n, "model": n} for n in sorted(self.model_names or [])]}
            )
        if route == "/api/show":
            return Reply(
                200,
                {
                    "modelfile": "",
                    "parameters": "",
                    "template": "{{ .Prompt }}",
                    "details": {"family": "llama", "format": "gguf"},
                    "model_info": {"llama.context_length": 131072},
                    "capabilities": ["completion"],
                },
            )
        if route == "/api/version":
            return Reply(200, {"version": "0.12.0"})
        return Reply(404, "404 page not found", content_type="text/plain")


# ---- helpers for tests

SERVERS: dict[str, Callable[..., ProviderServer]] = {
    "openai": OpenAIServer,
    "anthropic": AnthropicServer,
    "gemini": GeminiServer,
    "ollama": OllamaServer,
}


def citations_in(answer: Any) -> list[int]:
    """Every unit id an answer cites (the integers of every `unit_ids` list in it)."""
    found: list[int] = []

    def walk(value: Any, key: str | None) -> None:
        if isinstance(value, Mapping):
            for k, v in value.items():
                walk(v, str(k))
        elif isinstance(value, list):
            if key == "unit_ids":
                found.extend(v for v in value if type(v) is int)
            else:
                for v in value:
                    walk(v, key)

    walk(answer, None)
    return found
