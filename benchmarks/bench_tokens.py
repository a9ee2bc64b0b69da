"""What the complete profile's prompts cost in tokens, counted on the requests exactly as they
arrived over the wire (issue 18, "Tokens").

The real product runs (`notarius run`, a fresh Dagster home and data root, as
`bench_pipeline.py` runs it) with `configs/dnd-complete.yaml`'s six lanes on
`data/sessions/crd3-c2e030.jsonl`, its LLM profile pointed at a loopback server that keeps every
request body byte for byte and answers it validly (the answers of `latency_server.py`: the
minimal instance of the schema sent; see "Answers" below). Then, with the gpt-4o tokenizer
(o200k_base; see "Tokenizer"):

- prompt tokens of all calls, the floor (the transcript's units rendered as the prompts render
  them, `engine.chunking.render_units`, times the number of LLM lanes that made calls) and the
  ratio (issue 18 goal: <= 1.35);
- the share of prompt tokens inside a prefix of at least 1,024 tokens shared with an earlier call
  of the same session (goal: >= 40 %), and what OpenAI's cache would serve of it. OpenAI's rule
  (https://developers.openai.com/api/docs/guides/prompt-caching, "How it works": caching applies
  to prompts of 1024 tokens or longer, hits need an exact prefix match; the cookbook
  https://developers.openai.com/cookbook/examples/prompt_caching_201 adds "cache hits occurring in
  increments of 128 tokens"); the same guide, "What can be cached": "Structured outputs: the
  structured output schema serves as a prefix to the system message" (quoted from it in
  https://community.openai.com/t/prompt-caching-not-applied-when-schema-changes/967577/2);
- the tokens taken by every list of allowed unit ids written into the prompt (a schema `enum`
  or a list in the text), by the schema text, by lane-independent text (every lane's prompts carry
  the line), by the lane's own instructions (every other line that is not transcript) and by the
  chat framing;
- per lane and in total. Tokens are deterministic: one run, no repeats.

How a request is serialised into one token sequence (the prompt as the provider sees it):
  [schema block]  only on the `json_schema` rung of the OpenAI wire: the `json_schema` object
                  of `response_format` (name, schema, strict) as compact JSON, first, because
                  OpenAI puts the schema before the system message. Its exact rendering inside
                  OpenAI is not public, so these tokens are an estimate of the right order.
  per message     <start> role <sep> content <end>, the gpt-4o chat framing that OpenAI's
                  token-counting cookbook counts as 3 tokens plus the role (`<start>` etc. are
                  stand-in ids outside the vocabulary, one token each).
  <start> assistant <sep>  the reply priming, last.
The Ollama wire (`/api/chat`) is serialised the same way (its `format`, schema or "json", is a
decoding constraint, not prompt text); counted with the gpt-4o tokenizer as well, so the figures
compare layouts, not Llama's tokenizer.

Answers. Every request gets a valid answer to the schema it carries (`latency_server.answer_for`).
The scene lane answers `combat`, so the combat lane's gate opens on every chunk and all six lanes
are asked about every chunk (the floor's assumption). The npcs lane answers one NPC drawn from the
chunk (the most frequent capitalised name in its lines that is no speaker label, citing up to five
lines naming it), so the lanes that consume NPCs see a realistic "known NPCs" context.

Tokenizer. tiktoken's own `o200k_base`, with its BPE file taken from the `bpe-openai` package
(which ships it; tiktoken checks it against its expected SHA-256) because tiktoken would download
it and nothing but package registries is reachable here. Without `bpe-openai`: tiktoken's cache or
download, else litellm's bundled `cl100k_base` (the only BPE file litellm ships), named as such in
the output.

Writes benchmarks/results/tokens.json (git commit, model string, wire, rung, tokenizer,
command, figures) and prints a table. Never part of the test suite.

    .venv/bin/python benchmarks/bench_tokens.py                                  # gpt-4o-mini
    .venv/bin/python benchmarks/bench_tokens.py --model ollama_chat/llama3.1 \\
        --output benchmarks/results/tokens-ollama.json
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import importlib.resources
import json
import os
import re
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from array import array
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make `benchmarks.*` and the product importable
    sys.path.insert(0, str(ROOT))

from benchmarks import latency_server  # noqa: E402
from benchmarks.bench_pipeline import (  # noqa: E402
    KEY_ENV,
    BenchError,
    Store,
    git_info,
    notarius_command,
    run_process,
)

SESSION = ROOT / "data" / "sessions" / "crd3-c2e030.jsonl"
PROFILE = ROOT / "configs" / "dnd-complete.yaml"
RESULTS = ROOT / "benchmarks" / "results"
DEFAULT_MODEL = "openai/gpt-4o-mini"
BENCH_PROFILE = "bench"
CONCURRENCY = 8

# OpenAI's prompt-caching rule (URLs in the module docstring).
MIN_CACHED_PREFIX = 1024
CACHE_INCREMENT = 128
GOAL_RATIO = 1.35
GOAL_SHARED_SHARE = 0.40

# Stand-ins for the chat template's special tokens (<|im_start|>, <|im_sep|>, <|im_end|>): ids
# no tokenizer produces, one token each.
START, SEP, END = -1, -2, -3
COMPONENTS = ("transcript", "unit_ids", "schema", "preamble", "instructions", "framing")
WHAT_COMPONENT = {
    "transcript": "the chunk's unit lines ([id] Speaker: text)",
    "unit_ids": "lists of allowed unit ids (a schema enum, or a list in the text)",
    "schema": "JSON Schema text (the structured-output block, or a schema in a message)",
    "preamble": "lane-independent text: lines that the prompts of every lane carry",
    "instructions": "the lane's own text: instructions, labels, known-NPC context",
    "framing": "chat framing: role names and the stand-ins for special tokens",
}


# --- the pure arithmetic (tests/test_bench_tokens.py) ----------------------------------------


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens `a` and `b` share."""
    pa, pb = _packed(a), _packed(b)
    return _common_packed(pa, pb, min(len(a), len(b)))


def _packed(tokens: Sequence[int]) -> bytes:
    """Tokens as 4-byte signed ints: slices compare in C (a session has ~10^5 pairs of calls)."""
    return array("i", tokens).tobytes()


def _common_packed(a: bytes, b: bytes, n: int) -> int:
    """The shared leading tokens of two packed sequences, at most `n` (binary search)."""
    if a[: 4 * n] == b[: 4 * n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo]; a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[: 4 * mid] == b[: 4 * mid]:
            lo = mid
        else:
            hi = mid
    return lo


def shared_prefix_lengths(calls: Sequence[tuple[str, Sequence[int]]]) -> list[int]:
    """For each call (session, tokens), in the order the calls arrived: the longest prefix it
    shares with any earlier call of the same session (0 for a session's first call). Not only the
    previous call: a lane's call may share its prefix with another lane's call on the same chunk
    several calls back."""
    seen: dict[str, list[bytes]] = {}
    out = []
    for session, tokens in calls:
        packed = _packed(tokens)
        best = 0
        for earlier in seen.get(session, ()):
            n = min(len(packed), len(earlier)) // 4
            if n > best:
                best = max(best, _common_packed(packed, earlier, n))
        out.append(best)
        seen.setdefault(session, []).append(packed)
    return out


def counted_shared(shared: int, minimum: int = MIN_CACHED_PREFIX) -> int:
    """Tokens of a call inside a shared prefix that is at least `minimum` tokens long."""
    return shared if shared >= minimum else 0


def cached_tokens(
    shared: int, minimum: int = MIN_CACHED_PREFIX, increment: int = CACHE_INCREMENT
) -> int:
    """What OpenAI's cache could serve of a call whose prompt shares `shared` leading tokens with
    an earlier one: nothing under `minimum`, else whole `increment`s of the shared prefix."""
    if shared < minimum:
        return 0
    return minimum + (shared - minimum) // increment * increment


def llm_lanes(call_lanes: Iterable[str]) -> list[str]:
    """The LLM lanes of a run: the distinct lanes that made calls (a re-ask is no new lane)."""
    return sorted(set(call_lanes))


def floor_tokens(transcript_tokens: int, lanes: int) -> int:
    """The fewest prompt tokens a run can send: every lane sees every unit once, nothing else."""
    return transcript_tokens * lanes


def share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


# --- tokenizer -------------------------------------------------------------------------------

O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"


@dataclass(frozen=True)
class Tokenizer:
    name: str
    source: str
    encoding: Any  # tiktoken.Encoding

    def encode(self, text: str) -> list[int]:
        return list(self.encoding.encode(text, disallowed_special=()))

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[int]]:
        """Tokens and the character offset where each starts (to attribute tokens to spans)."""
        tokens = self.encode(text)
        if not tokens:
            return [], []
        _, offsets = self.encoding.decode_with_offsets(tokens)
        return tokens, list(offsets)


def load_tokenizer(work: Path) -> Tokenizer:
    """o200k_base through tiktoken, offline if `bpe-openai` is installed; cl100k_base from
    litellm's bundled file as the named last resort."""
    import tiktoken

    try:
        data = importlib.resources.files("bpe_openai") / "data" / "o200k_base.tiktoken.gz"
        raw = gzip.decompress(data.read_bytes())
    except (ModuleNotFoundError, FileNotFoundError, OSError):
        raw = None
    if raw is not None:
        cache = work / "tiktoken-cache"
        cache.mkdir(parents=True, exist_ok=True)
        (cache / hashlib.sha1(O200K_URL.encode()).hexdigest()).write_bytes(raw)
        previous = os.environ.get("TIKTOKEN_CACHE_DIR")
        os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
        try:  # tiktoken checks the file against o200k_base's expected SHA-256
            encoding = tiktoken.get_encoding("o200k_base")
        finally:
            if previous is None:
                os.environ.pop("TIKTOKEN_CACHE_DIR", None)
            else:
                os.environ["TIKTOKEN_CACHE_DIR"] = previous
        return Tokenizer("o200k_base", "tiktoken, BPE file shipped by bpe-openai", encoding)
    try:
        return Tokenizer("o200k_base", "tiktoken", tiktoken.get_encoding("o200k_base"))
    except Exception:  # no network, no cache: the one file litellm ships
        import litellm

        bundled = Path(litellm.__file__).parent / "litellm_core_utils" / "tokenizers"
        os.environ["TIKTOKEN_CACHE_DIR"] = str(bundled)
        encoding = tiktoken.get_encoding("cl100k_base")
        return Tokenizer("cl100k_base", "litellm's bundled file (o200k_base unavailable)", encoding)


# --- the recording server --------------------------------------------------------------------


@dataclass
class Recorded:
    seq: int
    at: float
    path: str
    raw: bytes


class RecordingServer(latency_server.StubServer):
    """`latency_server.StubServer` that keeps every POST body as received and answers OpenAI
    chat completions and Ollama `/api/chat` (non-streaming; response shape from Ollama's API
    docs, https://github.com/ollama/ollama/blob/main/docs/api.md, "Chat request (No
    streaming)")."""

    def __init__(self, address: tuple[str, int]) -> None:
        super().__init__(address, scene_kind="combat")
        self.RequestHandlerClass = RecordingHandler
        self.recorded: list[Recorded] = []
        self.lock = threading.Lock()

    def record(self, path: str, raw: bytes) -> None:
        with self.lock:
            self.recorded.append(Recorded(len(self.recorded), time.time(), path, raw))


class RecordingHandler(latency_server.StubHandler):
    server: RecordingServer

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        path = self.path.rstrip("/")
        ollama = path == "/api/chat"
        if not ollama and path not in ("/v1/chat/completions", "/chat/completions"):
            self._send(404, {"error": {"message": "not found"}})
            return
        self.server.record(path, raw)
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._send(400, {"error": {"message": "request body is not JSON"}})
            return
        content = json.dumps(answer(body))
        prompt_chars = sum(len(str(m.get("content") or "")) for m in body.get("messages") or ())
        model = str(body.get("model") or "stub")
        if ollama:
            self._send(200, ollama_chat_response(model, content, prompt_chars))
        else:
            self._send(200, latency_server.completion(model, content, prompt_chars))


def ollama_chat_response(model: str, content: str, prompt_chars: int) -> dict[str, Any]:
    return {
        "model": model,
        "created_at": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        "message": {"role": "assistant", "content": content},
        "done_reason": "stop",
        "done": True,
        "total_duration": 1_000_000,
        "load_duration": 1_000,
        "prompt_eval_count": max(1, prompt_chars // 4),
        "prompt_eval_duration": 1_000,
        "eval_count": max(1, len(content) // 4),
        "eval_duration": 1_000,
    }


def request_schema(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """The answer schema of a request: OpenAI's `response_format`, the system prompt, or
    Ollama's `format` when it carries a schema."""
    schema = latency_server.schema_of_request(body)
    if schema is None and isinstance(body.get("format"), dict):
        schema = body["format"]
    return schema


UNIT_LINE = re.compile(r"^\[(\d+)\] (.*)$", re.MULTILINE)
NAME = re.compile(r"\b[A-Z][a-z]{2,}(?:\s+[A-Z][a-z]{2,})?\b")
# Capitalised words of table talk that are no names (sentence starts are skipped anyway).
COMMON_WORDS = """The This That There Then They Their What When Where Which While Why Who How
    And But
    Yes Yeah Okay Alright All Any Are Can Could Did Does Don For From Good Great Have Here Hey
    Hello His Her Its Just Let Like Look Maybe Not Now Nope Off One Our Out Right She Should
    Sorry Some Thank Thanks Too Two Was Way Well Were Will With Would You Your Also Because Even
    Into Just Only Over Sure Very Wait Well Whoa Wow Dungeons Dragons Critical Role Twitch
    Monday Tuesday Wednesday Thursday Friday Saturday Sunday Oh God Gods Guys Dude Man Ooh Aww
    Hmm Huh Nice Cool Fine First Next Last Both Each Every Everyone Everything Nothing Something
    Anyway Actually Awesome Perfect Roll Rolling Natural Damage Initiative Perception
    Check"""
NOT_NAMES = frozenset(COMMON_WORDS.split())


def chunk_units(body: Mapping[str, Any], allowed: set[int] | None) -> list[tuple[int, str]]:
    """(label, text) of the unit lines the request's messages show (those the schema allows)."""
    found = []
    for message in body.get("messages") or ():
        if isinstance(message, dict) and message.get("role") in ("system", "user"):
            for match in UNIT_LINE.finditer(str(message.get("content") or "")):
                label = int(match.group(1))
                if allowed is None or label in allowed:
                    found.append((label, match.group(2)))
    return found


def plausible_npc(units: Sequence[tuple[int, str]]) -> tuple[str, list[int]] | None:
    """The most frequent capitalised name in the units' text (speaker labels and common words
    left out; not at a sentence start) and up to five units naming it."""
    speakers = {text.split(":", 1)[0].strip().casefold() for _, text in units if ":" in text}
    counts: Counter[str] = Counter()
    for _, text in units:
        spoken = text.split(":", 1)[1] if ":" in text else text
        for match in NAME.finditer(spoken):
            before = spoken[: match.start()].rstrip()
            name = match.group(0)
            first = name.split()[0]
            if not before or before[-1] in ".!?\"'":
                continue  # a sentence start says nothing about a name
            if first in NOT_NAMES or name.casefold() in speakers:
                continue
            counts[name] += 1
    if not counts:
        return None
    name = counts.most_common(1)[0][0]
    cited = [label for label, text in units if name in text][:5]
    return (name, cited) if cited else None


def enum_labels(schema: Mapping[str, Any]) -> set[int] | None:
    """The labels a schema lets a citation name (the per-chunk `enum`), if it has one."""
    text = json.dumps(schema)
    found = re.findall(r'"enum": \[([\d, ]+)\]', text)
    return {int(x) for group in found for x in group.split(",") if x.strip()} if found else None


def answer(body: Mapping[str, Any]) -> dict[str, Any]:
    """The answer to one request: `latency_server`'s minimal valid answer (scene kind combat),
    and for the npcs lane one plausible NPC of the chunk."""
    schema = request_schema(body)
    if schema is None:
        return {}
    lane = latency_server.lane_of(schema)
    result = latency_server.minimal_instance(schema, schema)
    if not isinstance(result, dict):
        return {}
    if lane == "scene-descriptions" and "kind" in result:
        result["kind"] = "combat"
    if lane == "npcs":
        npc = plausible_npc(chunk_units(body, enum_labels(schema)))
        item_schema = ((schema.get("properties") or {}).get("npcs") or {}).get("items") or {}
        if npc is not None:
            item = latency_server.minimal_instance(item_schema, schema)
            if isinstance(item, dict):
                item.update(name=npc[0], unit_ids=npc[1])
                if "description" in item:
                    item["description"] = "A character the Dungeon Master voices."
                result["npcs"] = [item]
    return result


# --- serialising a request -------------------------------------------------------------------


@dataclass
class Call:
    """One request as the provider sees it: its tokens, the component of each, and for tokens
    of lane text the line they belong to (preamble or instructions is decided over all calls)."""

    seq: int
    lane: str
    rung: str
    tokens: list[int] = field(default_factory=list)
    parts: list[str] = field(default_factory=list)
    lines: dict[int, str] = field(default_factory=dict)
    block: int = 0
    """Leading tokens that are the structured-output schema block (0 where none is sent)."""


def wire_of(path: str) -> str:
    return "ollama /api/chat" if path == "/api/chat" else "openai chat completions"


def rung_of(body: Mapping[str, Any], path: str) -> str:
    if path == "/api/chat":
        fmt = body.get("format")
        return "format schema" if isinstance(fmt, dict) else f"format {fmt!r}"
    kind = (body.get("response_format") or {}).get("type")
    return str(kind or "none")


ID_LIST = re.compile(r"\[?[ \t\n]*\d+(?:[ \t\n]*,[ \t\n]*\d+)+[ \t\n]*\]?")


def char_kinds(text: str, labels: set[int]) -> list[str]:
    """The component of each character of a text the provider sees: `transcript` for unit
    lines (with their newline), `schema` for JSON objects that are schemas, `unit_ids` for lists
    of two or more integers outside unit lines that are all labels the request shows; the rest is
    `text` (lane text, split into preamble and instructions later)."""
    kinds = ["text"] * len(text)
    for m in UNIT_LINE.finditer(text):
        end = m.end() + (1 if text[m.end() : m.end() + 1] == "\n" else 0)
        kinds[m.start() : end] = ["transcript"] * (end - m.start())
    decoder = json.JSONDecoder()
    i = text.find("{")
    while i != -1:
        if kinds[i] == "text":
            try:
                value, end = decoder.raw_decode(text, i)
            except json.JSONDecodeError:
                value = None
            if isinstance(value, dict) and ("properties" in value or "$defs" in value):
                kinds[i:end] = ["schema"] * (end - i)
                i = text.find("{", end)
                continue
        i = text.find("{", i + 1)
    for m in ID_LIST.finditer(text):
        if "transcript" in kinds[m.start() : m.end()]:
            continue
        numbers = {int(x) for x in re.findall(r"\d+", m.group(0))}
        if labels and numbers <= labels:
            kinds[m.start() : m.end()] = ["unit_ids"] * (m.end() - m.start())
    return kinds


def message_texts(body: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(role, text) of each message; content parts are joined in order."""
    out = []
    for message in body.get("messages") or ():
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(str(p.get("text") or "") for p in content if isinstance(p, dict))
        out.append((str(message.get("role") or ""), str(content or "")))
    return out


def serialise(record: Recorded, tokenizer: Tokenizer) -> Call:
    """The token sequence of one request as the provider sees it (module docstring)."""
    body = json.loads(record.raw)
    lane = latency_server.lane_of(request_schema(body))
    call = Call(record.seq, lane, rung_of(body, record.path))
    messages = message_texts(body)
    labels = {int(m.group(1)) for _, text in messages for m in UNIT_LINE.finditer(text)}

    def add(tokens: Sequence[int], part: str) -> None:
        call.tokens.extend(tokens)
        call.parts.extend([part] * len(tokens))

    def add_text(text: str, whole: str | None = None) -> None:
        """`text` encoded in one piece, as the provider tokenizes it; each token takes the
        component of its first character (`whole`: all but the id lists are that)."""
        if not text:
            return
        tokens, offsets = tokenizer.encode_with_offsets(text)
        kinds = char_kinds(text, labels)
        if whole is not None:
            kinds = [k if k == "unit_ids" else whole for k in kinds]
        starts = [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n"]
        lines = text.split("\n")
        for token, offset in zip(tokens, offsets, strict=True):
            kind = kinds[min(offset, len(text) - 1)]
            if kind == "text":
                call.lines[len(call.tokens)] = lines[bisect_right(starts, offset) - 1].strip()
            call.tokens.append(token)
            call.parts.append(kind)

    response_format = body.get("response_format") or {}
    if record.path != "/api/chat" and response_format.get("type") == "json_schema":
        block = response_format.get("json_schema")
        add_text(json.dumps(block, separators=(",", ":"), ensure_ascii=False), whole="schema")
        call.block = len(call.tokens)
    for role, text in messages:
        add([START, *tokenizer.encode(role), SEP], "framing")
        add_text(text)
        add([END], "framing")
    add([START, *tokenizer.encode("assistant"), SEP], "framing")
    return call


def split_lane_text(calls: Sequence[Call]) -> None:
    """Lane text becomes `preamble` where its line is in the prompts of every lane, else
    `instructions` (a blank line's tokens count as instructions)."""
    by_lane: dict[str, set[str]] = {}
    for call in calls:
        by_lane.setdefault(call.lane, set()).update(line for line in call.lines.values() if line)
    shared = set.intersection(*by_lane.values()) if len(by_lane) > 1 else set()
    for call in calls:
        for k, line in call.lines.items():
            call.parts[k] = "preamble" if line and line in shared else "instructions"


# --- running the product ---------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_profile(work: Path, model: str, url: str) -> Path:
    """The complete profile with an LLM profile `bench` pointing at the recording server."""
    import yaml

    data = yaml.safe_load(PROFILE.read_text())
    api_base = url if model.startswith(("ollama/", "ollama_chat/")) else f"{url}/v1"
    data.setdefault("llm_profiles", {})[BENCH_PROFILE] = {
        "model": model,
        "api_base": api_base,
        "api_key_env": KEY_ENV,
        "max_concurrency": CONCURRENCY,
        "timeout_s": 120,
    }
    data["pipeline"]["llm_profile"] = BENCH_PROFILE
    path = work / "dnd-complete-bench.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def run_product(work: Path, model: str, session: Path) -> tuple[list[Recorded], float]:
    """One `notarius run` against the recording server; the requests it sent, in order."""
    server = RecordingServer(("127.0.0.1", free_port()))
    thread = threading.Thread(target=server.serve_forever, name="recording-stub", daemon=True)
    thread.start()
    try:
        profile = write_profile(work, model, server.url)
        store = Store(work / "store")
        store.root.mkdir(parents=True, exist_ok=True)
        cmd = [*notarius_command(), "run", str(session), "--config", str(profile)]
        cmd += ["--out", str(store.out), "--data", str(store.data)]
        run = run_process(cmd, tree=ROOT, store=store, log=work / "run.log")
    finally:
        server.shutdown()
        server.server_close()
    return sorted(server.recorded, key=lambda r: r.seq), run.wall_s


def profile_lanes() -> list[str]:
    import yaml

    return [lane["id"] for lane in yaml.safe_load(PROFILE.read_text())["pipeline"]["lanes"]]


def transcript_tokens(session: Path, tokenizer: Tokenizer) -> tuple[int, int]:
    """(units, tokens) of the session's units as the prompts render them."""
    from notarius_dagster.engine.chunking import render_units
    from notarius_dagster.engine.inputs import parse_transcript

    document = parse_transcript(
        session.read_bytes(), file_name=session.name, source_id="bench-tokens"
    )
    return len(document.units), len(tokenizer.encode(render_units(document.units)))


# --- figures ---------------------------------------------------------------------------------


def tally(calls: Sequence[Call], shared: Sequence[int], unblocked: Sequence[int]) -> dict[str, Any]:
    """Figures of some calls; `shared`: each call's shared prefix, `unblocked`: the same without
    the schema block."""
    prompt = sum(len(c.tokens) for c in calls)
    counted = sum(counted_shared(s) for s in shared)
    cached = sum(min(cached_tokens(s), len(c.tokens)) for c, s in zip(calls, shared, strict=True))
    without = sum(len(c.tokens) - c.block for c in calls)
    counted_without = sum(counted_shared(s) for s in unblocked)
    parts = Counter(p for c in calls for p in c.parts)
    return {
        "calls": len(calls),
        "prompt_tokens": prompt,
        "prompt_tokens_per_call_median": statistics.median(len(c.tokens) for c in calls)
        if calls
        else 0,
        "shared_prefix_tokens": counted,
        "shared_prefix_share": share(counted, prompt),
        "openai_cached_tokens": cached,
        "openai_cached_share": share(cached, prompt),
        "without_schema_block": {
            "what": "the same on the messages alone (as if the schema were no prefix)",
            "prompt_tokens": without,
            "shared_prefix_share": share(counted_without, without),
            "openai_cached_share": share(
                sum(
                    min(cached_tokens(s), len(c.tokens) - c.block)
                    for c, s in zip(calls, unblocked, strict=True)
                ),
                without,
            ),
        },
        "components": {
            name: {"tokens": parts.get(name, 0), "share": share(parts.get(name, 0), prompt)}
            for name in COMPONENTS
        },
    }


def measure(
    records: Sequence[Recorded], tokenizer: Tokenizer, units: int, transcript: int
) -> dict[str, Any]:
    built = [serialise(r, tokenizer) for r in records]
    unknown = sum(c.lane == "unknown" for c in built)
    if unknown:  # the floor's lane count and every per-lane figure would be wrong
        raise BenchError(
            f"cannot tell the lane of {unknown} request(s): no answer schema found in them; "
            "update request_schema()"
        )
    split_lane_text(built)
    # One `notarius run` of one transcript is one session.
    shared = shared_prefix_lengths([("session", c.tokens) for c in built])
    unblocked = shared_prefix_lengths([("session", c.tokens[c.block :]) for c in built])
    lanes = llm_lanes(c.lane for c in built)
    floor = floor_tokens(transcript, len(lanes))
    total = tally(built, shared, unblocked)
    per_lane = {}
    for lane in lanes:
        picked = [k for k, c in enumerate(built) if c.lane == lane]
        row = tally(
            [built[k] for k in picked], [shared[k] for k in picked], [unblocked[k] for k in picked]
        )
        # A lane's floor is the transcript once.
        row["ratio_to_lane_floor"] = round(row["prompt_tokens"] / transcript, 3)
        per_lane[lane] = row
    return {
        "units": units,
        "transcript_tokens": transcript,
        "llm_lanes": lanes,
        "floor_tokens": floor,
        "ratio_to_floor": round(total["prompt_tokens"] / floor, 3) if floor else None,
        **total,
        "rungs": dict(Counter(c.rung for c in built)),
        "lanes": per_lane,
    }


def print_table(result: Mapping[str, Any]) -> None:
    f = result["figures"]
    print(
        f"\n{result['model']} ({result['wire']}, rung {', '.join(f['rungs'])}); "
        f"tokenizer {result['tokenizer']['name']} ({result['tokenizer']['source']})"
    )
    head = ["lane", "calls", "prompt", "x floor", "shared>=1024", "cached"]
    head += [c[:8] for c in COMPONENTS]
    print("  ".join(f"{h:>12}" if i else f"{h:<18}" for i, h in enumerate(head)))
    rows = [(lane, row, row["ratio_to_lane_floor"]) for lane, row in f["lanes"].items()]
    rows.append(("total", f, f["ratio_to_floor"]))
    for name, row, ratio in rows:
        cells = [
            f"{row['calls']:>12}",
            f"{row['prompt_tokens']:>12,}",
            f"{ratio:>11.3f}x",
            f"{100 * (row['shared_prefix_share'] or 0):>11.1f}%",
            f"{100 * (row['openai_cached_share'] or 0):>11.1f}%",
        ]
        cells += [f"{100 * (row['components'][c]['share'] or 0):>11.1f}%" for c in COMPONENTS]
        print(f"{name:<18}  " + "  ".join(cells))
    print(
        f"\nprompt tokens {f['prompt_tokens']:,} against the floor {f['floor_tokens']:,} "
        f"({f['transcript_tokens']:,} transcript tokens x {len(f['llm_lanes'])} lanes): "
        f"{f['ratio_to_floor']}x (goal <= {GOAL_RATIO}x)"
    )
    print(
        f"shared prefix >= {MIN_CACHED_PREFIX} tokens with an earlier call: "
        f"{100 * (f['shared_prefix_share'] or 0):.1f}% (goal >= {100 * GOAL_SHARED_SHARE:.0f}%); "
        f"OpenAI's cache in {CACHE_INCREMENT}-token steps: "
        f"{100 * (f['openai_cached_share'] or 0):.1f}%"
    )
    alone = f["without_schema_block"]
    if alone["prompt_tokens"] != f["prompt_tokens"]:
        print(
            "without the structured-output schema block (which OpenAI puts before the system "
            f"message): shared {100 * (alone['shared_prefix_share'] or 0):.1f}%, cached "
            f"{100 * (alone['openai_cached_share'] or 0):.1f}%"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=DEFAULT_MODEL, help=f"default {DEFAULT_MODEL}")
    parser.add_argument("--session", type=Path, default=SESSION)
    parser.add_argument("--output", type=Path, default=RESULTS / "tokens.json")
    parser.add_argument("--keep", action="store_true", help="keep the work folder and requests")
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="notarius-bench-tokens-"))
    started = time.perf_counter()
    try:
        tokenizer = load_tokenizer(work)
        units, transcript = transcript_tokens(args.session, tokenizer)
        print(f"work folder {work}; running the product on {args.session.name}", flush=True)
        records, wall = run_product(work, args.model, args.session)
    except BenchError as exc:
        print(f"error: {exc}\nwork folder kept: {work}", file=sys.stderr)
        return 1
    if not records:
        print(f"error: the product made no request; work folder kept: {work}", file=sys.stderr)
        return 1
    if args.keep:
        with (work / "requests.jsonl").open("w") as out:
            for r in records:
                out.write(json.dumps({"seq": r.seq, "path": r.path, "body": json.loads(r.raw)}))
                out.write("\n")
    try:
        figures = measure(records, tokenizer, units, transcript)
    except BenchError as exc:
        print(f"error: {exc}\nwork folder kept: {work}", file=sys.stderr)
        return 1
    configured = profile_lanes()
    if sorted(configured) != figures["llm_lanes"]:
        print(
            f"warning: lanes that made calls {figures['llm_lanes']} differ from the profile's "
            f"{sorted(configured)}; the floor counts the former",
            file=sys.stderr,
        )
    result = {
        "benchmark": "tokens",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(
            [
                ".venv/bin/python",
                f"benchmarks/{Path(__file__).name}",
                *(argv if argv is not None else sys.argv[1:]),
            ]
        ),
        "git": git_info(),
        "model": args.model,
        "wire": wire_of(records[0].path),
        "tokenizer": {"name": tokenizer.name, "source": tokenizer.source},
        "serialisation": (
            "json_schema rung (OpenAI wire): response_format.json_schema as compact JSON first "
            "(OpenAI: the schema is a prefix to the system message); then per message "
            "<start> role <sep> content <end> with one stand-in token per special token; "
            "then <start> assistant <sep>"
        ),
        "rule": {
            "min_shared_prefix": MIN_CACHED_PREFIX,
            "cache_increment": CACHE_INCREMENT,
            "source": "https://developers.openai.com/api/docs/guides/prompt-caching",
        },
        "goals": {"ratio_to_floor_max": GOAL_RATIO, "shared_prefix_share_min": GOAL_SHARED_SHARE},
        "config": {
            "session": args.session.name,
            "profile": str(PROFILE.relative_to(ROOT)),
            "profile_lanes": configured,
            "max_concurrency": CONCURRENCY,
            "run_wall_s": round(wall, 1),
        },
        "components": WHAT_COMPONENT,
        "figures": figures,
        "total_s": round(time.perf_counter() - started, 1),
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print_table(result)
    print(f"wrote {args.output}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
