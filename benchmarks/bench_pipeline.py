"""The whole pipeline measured from outside, as a user runs it: `notarius run` subprocesses with
a fresh DAGSTER_HOME and data root, against `latency_server.py` (an OpenAI-compatible stub on
loopback that answers every call with a valid, empty answer after a fixed latency), on Critical
Role 2x30 with the complete profile (`configs/dnd-complete.yaml`, six lanes over scene chunks)
and an LLM profile `stub` at concurrency 8.

Why from outside: what a user waits for is process start-up, orchestration, event writing and
re-run bookkeeping, none of which an in-process benchmark sees. The stub's latency is fixed and
its parallelism unlimited, so each figure's ideal follows from the calls the stub counted.

Figures (each repeated, min and median; ratios are taken within one repeat, side by side):
- first-run: wall time of a first run at `--latency` (1 s) against the critical-path ideal
  (each lane takes latency x ceil(calls / 8); a lane starts when the lanes it references end),
  and against the ideals of "one in-flight limit shared by the lanes of a level" and "lanes one
  after another";
- first-run-0: the same at latency 0 (pure overhead);
- start-to-first-call: subprocess start to the stub's first request (from both first runs);
- client-cpu: CPU per `LiteLLMClient.complete_structured` call, in a separate process
  against the stub at latency 0 (`time.process_time()` over N calls);
- rerun: a second `notarius run` of the same file on the same DAGSTER_HOME and data root, its
  wall time against the first run's and the model calls it made;
- npc-change: consumer-lane calls after one upstream NPC record's description changes (the
  stub answers one scripted NPC; then the npcs prompt is edited in a copy of the product tree,
  so the npcs lane is re-asked, and the stub answers the same NPC with another description);
- many-sessions: 30 small sessions (slices of ~60 units of the real transcripts) through the
  product's many-session path, against the sum of their critical-path ideals.
- bytecode: a first run from a copy of the tree without bytecode, against the first run of the
  same repeat: what compiling the product's modules from source in every process costs;
- daemon-start: runs launched through the daemon (`daemon_start.py`: `dg dev` on a fresh
  DAGSTER_HOME, the session added with `notarius sessions add`, GraphQL `launchRun` of its
  partition as the UI does): from the event log, RUN_START to the first STEP_START and to the
  stub's first request, for a first run and a `session_bundle`-only run.

Bytecode: this machine sets PYTHONDONTWRITEBYTECODE, and the product is an editable install, so
its modules have no `.pyc` and every process would compile them from source on every run; a
user's machine writes them once. Every product process therefore runs from a copy of the tree
compiled once with `python -m compileall` (its cost in `config.bytecode_compile`), with
PYTHONDONTWRITEBYTECODE=1 so no run writes any. The libraries, the peer's included, use the
bytecode pip wrote in site-packages (`config.bytecode_compile` counts modules without it).

Writes benchmarks/results/pipeline.json (figures, repeats, min/median, machine, load averages,
git commit) and prints it; if benchmarks/results/pipeline-before.json exists, prints the
medians side by side. Never part of the test suite; no time-based assertion anywhere.

    .venv/bin/python benchmarks/bench_pipeline.py            # 3 repeats, ~45 min on 2 cores
    .venv/bin/python benchmarks/bench_pipeline.py --quick    # 1 repeat, 5 small sessions
    .venv/bin/python benchmarks/bench_pipeline.py --figures first-run,rerun --repeats 1
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import platform
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
SESSIONS_DIR = ROOT / "data" / "sessions"
SESSION = SESSIONS_DIR / "crd3-c2e030.jsonl"
PROFILE = ROOT / "configs" / "dnd-complete.yaml"
SERVER = ROOT / "benchmarks" / "latency_server.py"
RESULTS = ROOT / "benchmarks" / "results"
CONCURRENCY = 8
KEY_ENV = "NOTARIUS_BENCH_KEY"
STUB_PROFILE = "stub"
# Small sessions number their units from their own block, so the stub can attribute each
# request to its session even when a backfill runs several at once.
UNIT_BLOCK = 100_000
SMALL_UNITS = 60
NPC_NAME = "Lorenzo"
"""An NPC the session names in several chunks: the scripted record cites a unit that names it
(`unit_ids: mentioning`), so the pipeline's support check keeps it and the edit is published."""
DESCRIPTION_BEFORE = "A benchmark NPC, first description."
DESCRIPTION_AFTER = "A benchmark NPC, second description."
PROMPT_EDIT = "(Benchmark edit: a changed prompt, so the npcs lane is asked again.)\n"
FIGURES = (
    "first-run",
    "npcs-only",
    "first-run-0",
    "client-cpu",
    "rerun",
    "npc-change",
    "many-sessions",
    "bytecode",
    "daemon-start",
)
# The answer schema of the npcs lane (NpcAnswer), embedded so the client-CPU figure sends the
# same request before and after the product is rewritten.
NPC_ANSWER_SCHEMA: dict[str, Any] = {
    "$defs": {
        "NpcAnswerItem": {
            "properties": {
                "name": {"maxLength": 120, "minLength": 1, "title": "Name", "type": "string"},
                "aliases": {
                    "items": {"type": "string"},
                    "maxItems": 20,
                    "title": "Aliases",
                    "type": "array",
                },
                "description": {
                    "default": "",
                    "maxLength": 600,
                    "title": "Description",
                    "type": "string",
                },
                "unit_ids": {
                    "items": {"type": "integer"},
                    "maxItems": 50,
                    "minItems": 1,
                    "title": "Unit Ids",
                    "type": "array",
                },
            },
            "required": ["name", "unit_ids"],
            "title": "NpcAnswerItem",
            "type": "object",
        }
    },
    "properties": {
        "npcs": {
            "items": {"$ref": "#/$defs/NpcAnswerItem"},
            "maxItems": 40,
            "title": "Npcs",
            "type": "array",
        }
    },
    "required": ["npcs"],
    "title": "NpcAnswer",
    "type": "object",
}
CLIENT_SYSTEM = (
    "You extract non-player characters (NPCs) from a transcript of a Dungeons & Dragons "
    'session. Answer with JSON only: {"npcs": [...]}.'
)


def process_tree() -> Any:
    """benchmarks/process_tree.py, imported when a run is measured (it needs psutil, the
    `bench` extra; modules that only borrow this file's helpers do not)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import process_tree as module

    return module


_STUB_PIDS: set[int] = set()
"""The latency servers running now: children of the benchmark left out of a run's tree."""


def stub_pids() -> set[int]:
    return set(_STUB_PIDS)


class BenchError(RuntimeError):
    """A measurement could not be taken (a run failed, the stub did not start)."""


# --- the stub --------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Stub:
    """`latency_server.py` as its own process on a fixed port (the port is in the profile
    file, so every run of the benchmark sees the same profile and the same pipeline digest)."""

    def __init__(self, port: int, latency: float, log: Path, script: Path | None = None):
        self.port, self.latency, self.log, self.script = port, latency, log, script
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        cmd = [sys.executable, str(SERVER), "--port", str(self.port)]
        cmd += ["--latency", str(self.latency), "--unit-block", str(UNIT_BLOCK)]
        if self.script is not None:
            cmd += ["--script", str(self.script)]
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log)
        _STUB_PIDS.add(self.proc.pid)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode().strip()
        if not line.startswith("listening on "):
            self.stop()
            raise BenchError(f"the latency server did not start (see {self.log})")

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(self.url + "/stats", timeout=10) as response:
            return dict(json.loads(response.read()))

    def reset(self) -> None:
        request = urllib.request.Request(self.url + "/reset", data=b"", method="POST")
        with urllib.request.urlopen(request, timeout=10):
            pass

    def stop(self) -> None:
        if self.proc is None:
            return
        _STUB_PIDS.discard(self.proc.pid)
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.proc = None


@contextmanager
def stub(ctx: Context, latency: float, script: Mapping[str, Any] | None = None) -> Iterator[Stub]:
    script_path = None
    if script is not None:
        script_path = ctx.work / f"script-{time.monotonic_ns()}.json"
        script_path.write_text(json.dumps(script))
    server = Stub(ctx.port, latency, ctx.work / "stub.log", script_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


# --- running notarius ------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    wall_s: float
    cpu_s: float  # the whole process tree (process_tree.py: every descendant, until all exit)
    started_at: float  # time.time() just before the process was started
    peak_pss_mb: float = 0.0  # summed proportional set size of the tree at its peak
    processes: int = 0  # distinct processes the tree held over its life
    peak_processes: int = 0  # most processes alive at once
    left_behind: int = 0  # descendants still alive when the command exited
    outlived_s: float = 0.0  # how long the last of them lived on after it

    def tree(self) -> dict[str, Any]:
        return {
            "tree_cpu_s": round(self.cpu_s, 2),
            "tree_peak_pss_mb": round(self.peak_pss_mb, 1),
            "tree_processes": self.processes,
            "tree_peak_processes": self.peak_processes,
            "left_behind": self.left_behind,
            "outlived_s": round(self.outlived_s, 2),
        }


@dataclass(frozen=True)
class Store:
    """One user's installation: a Dagster home, a data root and a bundle root."""

    root: Path

    @property
    def home(self) -> Path:
        return self.root / "dagster-home"

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def out(self) -> Path:
        return self.root / "bundles"


def notarius_command() -> list[str]:
    """The console script a user runs, else the same entry point through `-m`."""
    script = Path(sys.executable).with_name("notarius")
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-m", "notarius_dagster.cli"]


def run_env(tree: Path, store: Store) -> dict[str, str]:
    """The environment of a product process run from `tree`. PYTHONDONTWRITEBYTECODE is set:
    a run reads the bytecode its tree holds (`compiled_copy`) and writes none, so every repeat
    starts from the same tree."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOTARIUS_")}
    env.update(
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONPATH=str(tree),
        DAGSTER_HOME=str(store.home),
        NOTARIUS_DATA=str(store.data),
        NOTARIUS_INBOX=str(store.root / "inbox"),
    )
    env[KEY_ENV] = "bench-dummy-key"
    return env


def run_process(
    cmd: Sequence[str],
    *,
    tree: Path,
    store: Store,
    log: Path,
    env: Mapping[str, str] | None = None,
) -> Run:
    """Run one command to completion and measure its whole process tree (process_tree.py):
    wall time to the command's exit, CPU and peak summed PSS of the command and every process
    it started, directly or not, sampled until the last of them has exited."""
    with log.open("wb") as out:
        started_at = time.time()
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            list(cmd),
            cwd=tree,
            env=dict(env) if env is not None else run_env(tree, store),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        measured = process_tree().measure_tree(proc.pid, exclude=stub_pids)
    wall = measured.exit_s if measured.exit_s is not None else time.perf_counter() - t0
    if measured.returncode != 0:
        raise BenchError(f"{' '.join(cmd[1:3])} exited with {measured.returncode}; log: {log}")
    return Run(
        wall_s=wall,
        cpu_s=measured.cpu_s,
        started_at=started_at,
        peak_pss_mb=measured.peak_pss_bytes / 1e6,
        processes=measured.processes,
        peak_processes=measured.peak_processes,
        left_behind=measured.left_behind,
        outlived_s=measured.outlived_s,
    )


def notarius_run(
    ctx: Context,
    transcripts: Sequence[Path],
    store: Store,
    tree: Path | None = None,
    tag: str = "run",
    lanes: str | None = None,
) -> Run:
    """`notarius run TRANSCRIPT... --config PROFILE --out OUT --data DATA [--lanes L]`."""
    cmd = [*notarius_command(), "run", *map(str, transcripts)]
    cmd += ["--config", str(ctx.profile), "--out", str(store.out), "--data", str(store.data)]
    if lanes:
        cmd += ["--lanes", lanes]
    log = ctx.work / f"{tag}-{time.monotonic_ns()}.log"
    return run_process(cmd, tree=tree or ctx.tree, store=store, log=log)


# --- ideals ----------------------------------------------------------------------------------


def lane_dependencies(profile: Mapping[str, Any]) -> dict[str, set[str]]:
    """Lane id -> the lanes whose artifacts it references (`{lane: ID}` bindings)."""
    pipeline = profile["pipeline"]
    shared = {
        b["lane"]
        for b in (pipeline.get("references") or {}).values()
        if isinstance(b, dict) and "lane" in b
    }
    deps: dict[str, set[str]] = {}
    for lane in pipeline["lanes"]:
        found = set(shared) - {lane["id"]}
        for binding in (lane.get("references") or {}).values():
            if isinstance(binding, str):
                found.add(binding)
            elif isinstance(binding, dict) and "lane" in binding:
                found.add(binding["lane"])
        deps[lane["id"]] = found
    return deps


def ideals(
    calls: Mapping[str, int], deps: Mapping[str, set[str]], latency: float, concurrency: int
) -> dict[str, float]:
    """Ideal wall times for the calls one session made, at `concurrency` calls per lane.

    critical_path: a lane takes latency x ceil(calls / concurrency) and starts when every lane
    it references has ended (independent lanes run together). shared_limit: the lanes of one
    dependency level share one in-flight limit. lanes_sequential: one lane after another."""
    rounds = {lane: math.ceil(calls.get(lane, 0) / concurrency) for lane in deps}
    finish: dict[str, int] = {}
    level: dict[str, int] = {}

    def end(lane: str) -> int:
        if lane not in finish:
            finish[lane] = max((end(d) for d in deps[lane] if d in deps), default=0) + rounds[lane]
        return finish[lane]

    def depth(lane: str) -> int:
        if lane not in level:
            level[lane] = 1 + max((depth(d) for d in deps[lane] if d in deps), default=-1)
        return level[lane]

    by_level: dict[int, int] = {}
    for lane in deps:
        by_level[depth(lane)] = by_level.get(depth(lane), 0) + calls.get(lane, 0)
    return {
        "critical_path": latency * max((end(lane) for lane in deps), default=0),
        "shared_limit": latency * sum(math.ceil(n / concurrency) for n in by_level.values()),
        "lanes_sequential": latency * sum(rounds.values()),
    }


def ratio(value: float, ideal: float) -> float | None:
    return round(value / ideal, 3) if ideal > 0 else None


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


# --- the context -----------------------------------------------------------------------------


@dataclass
class Context:
    work: Path
    port: int
    profile: Path
    profile_data: dict[str, Any]
    deps: dict[str, set[str]]
    latency: float
    tree: Path = ROOT  # the product tree runs use: a compiled copy (`product_copy`)
    counter: int = 0

    def store(self, name: str) -> Store:
        self.counter += 1
        root = self.work / f"{self.counter:02d}-{name}"
        root.mkdir(parents=True)
        return Store(root)


def write_profile(work: Path, port: int) -> tuple[Path, dict[str, Any]]:
    """The complete profile with an LLM profile `stub` pointing at the latency server."""
    data = yaml.safe_load(PROFILE.read_text())
    data.setdefault("llm_profiles", {})[STUB_PROFILE] = {
        "model": "openai/stub",
        "api_base": f"http://127.0.0.1:{port}/v1",
        "api_key_env": KEY_ENV,
        "max_concurrency": CONCURRENCY,
        "timeout_s": 120,
    }
    data["pipeline"]["llm_profile"] = STUB_PROFILE
    path = work / "dnd-complete-stub.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path, data


# --- figures ---------------------------------------------------------------------------------


def lane_windows(stats: Mapping[str, Any], t0: float) -> dict[str, list[float]]:
    """Per lane: seconds after process start of its first and last request (overlap shows
    which lanes ran together)."""
    first, last = stats["lane_first_request_at"], stats["lane_last_request_at"]
    return {lane: [round(first[lane] - t0, 2), round(last[lane] - t0, 2)] for lane in first}


def call_span(stats: Mapping[str, Any], latency: float) -> float | None:
    """First model request to the end of the last one (its start + the fixed latency)."""
    first, last = stats.get("first_request_at"), stats.get("last_request_at")
    if first is None or last is None:
        return None
    return round(last + latency - first, 2)


def first_run(
    ctx: Context, latency: float, lanes: str | None = None, tree: Path | None = None
) -> tuple[dict[str, Any], Store]:
    store = ctx.store(f"first-{latency:g}s" + (f"-{lanes}" if lanes else ""))
    before = load()
    with stub(ctx, latency) as server:
        run = notarius_run(ctx, [SESSION], store, tree=tree, tag="first", lanes=lanes)
        stats = server.stats()
    ideal = ideals(stats["lanes"], ctx.deps, latency, CONCURRENCY)
    first_call = stats["first_request_at"]
    row = {
        "latency_s": latency,
        "wall_s": round(run.wall_s, 2),
        **run.tree(),
        "call_span_s": call_span(stats, latency),
        "ideal_critical_path_s": ideal["critical_path"],
        "ratio_to_ideal": ratio(run.wall_s, ideal["critical_path"]),
        "ideal_shared_limit_s": ideal["shared_limit"],
        "ratio_to_shared_limit_ideal": ratio(run.wall_s, ideal["shared_limit"]),
        "ideal_lanes_sequential_s": ideal["lanes_sequential"],
        "ratio_to_sequential_ideal": ratio(run.wall_s, ideal["lanes_sequential"]),
        "start_to_first_call_s": None
        if first_call is None
        else round(first_call - run.started_at, 2),
        "calls": stats["requests"],
        "calls_by_lane": stats["lanes"],
        "chunks": max(stats["lanes"].values(), default=0),
        "max_in_flight": stats["max_in_flight"],
        "lane_windows_s": lane_windows(stats, run.started_at),
        "load_avg_start": before,
        "load_avg_end": load(),
    }
    return row, store


PEER = ROOT / "benchmarks" / "peer_langextract.py"


def peer_langextract(ctx: Context, latency: float, chunks: int) -> dict[str, Any]:
    """langextract doing the same six passes on the same session against the same server
    (peer_langextract.py), measured the same way (its whole process tree)."""
    chars = len(transcript_text(SESSION))
    chunk_chars = max(500, chars // max(1, chunks))
    store = ctx.store("peer-langextract")
    before = load()
    with stub(ctx, latency) as server:
        cmd = [sys.executable, str(PEER), "--url", server.url, "--session", str(SESSION)]
        cmd += ["--chunk-chars", str(chunk_chars), "--concurrency", str(CONCURRENCY)]
        log = ctx.work / f"peer-{time.monotonic_ns()}.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("NOTARIUS_")}
        # As the product's runs: the bytecode pip wrote at install (langextract and every
        # library are in site-packages; `bytecode_check` counts what lacks it), none written.
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        run = run_process(cmd, tree=ROOT, store=store, log=log, env=env)
        stats = server.stats()
    detail = json.loads(log.read_text().strip().splitlines()[-1])
    return {
        "latency_s": latency,
        "wall_s": round(run.wall_s, 2),
        **run.tree(),
        "call_span_s": call_span(stats, latency),
        "calls": stats["requests"],
        "chunk_chars": chunk_chars,
        "import_s": detail["import_s"],
        "level_wall_s": [level["wall_s"] for level in detail["levels"]],
        "load_avg_start": before,
        "load_avg_end": load(),
    }


def transcript_text(session: Path) -> str:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from peer_langextract import transcript_text as text

    return text(session)


def rerun(ctx: Context, store: Store, first: Mapping[str, Any]) -> dict[str, Any]:
    before = load()
    with stub(ctx, first["latency_s"]) as server:
        run = notarius_run(ctx, [SESSION], store, tag="rerun")
        stats = server.stats()
    return {
        "latency_s": first["latency_s"],
        "first_wall_s": first["wall_s"],
        "wall_s": round(run.wall_s, 2),
        "ratio_to_first": ratio(run.wall_s, first["wall_s"]),
        **run.tree(),
        "calls": stats["requests"],
        "calls_by_lane": stats["lanes"],
        "load_avg_start": before,
        "load_avg_end": load(),
    }


def product_copy(ctx: Context, name: str | None = None, compiled: bool = True) -> Path:
    """A copy of the product tree the benchmark may edit (the repository is never touched),
    compiled to bytecode once (`compile_tree`) unless `compiled` is false."""
    skip_top = {
        ".git",
        ".venv",
        "var",
        "data",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
        ".hypothesis",
    }
    tree = ctx.work / (name or f"tree-{ctx.counter:02d}")

    def ignore(folder: str, names: list[str]) -> set[str]:
        top = Path(folder).resolve() == ROOT
        return {n for n in names if n == "__pycache__" or (top and n in skip_top)}

    shutil.copytree(ROOT, tree, ignore=ignore, symlinks=True)
    if compiled:
        compile_tree(tree)
    return tree


def compile_tree(tree: Path) -> dict[str, Any]:
    """Write the bytecode of every module of `tree` once (`python -m compileall`), as a user's
    first import does (or pip, for an installed package): this machine sets
    PYTHONDONTWRITEBYTECODE, so without it every process of every run would compile the
    product's modules from source. Returns the wall and CPU time of compiling."""
    t0 = time.perf_counter()
    usage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree)], check=True)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = usage.ru_utime + usage.ru_stime - usage0.ru_utime - usage0.ru_stime
    return {"wall_s": round(time.perf_counter() - t0, 2), "cpu_s": round(cpu, 2)}


def bytecode_check(tree: Path) -> dict[str, int]:
    """Modules without bytecode beside them: in the product tree the runs use, and in the
    venv's site-packages (the libraries of the product and of the peer)."""
    site = next(Path(p) for p in sys.path if p.endswith("site-packages") and Path(p).is_dir())

    def missing(root: Path) -> tuple[int, int]:
        files = [p for p in root.rglob("*.py") if ".venv" not in p.relative_to(root).parts]
        lacking = [p for p in files if not Path(importlib.util.cache_from_source(str(p))).exists()]
        return len(files), len(lacking)

    tree_files, tree_missing = missing(tree)
    site_files, site_missing = missing(site)
    return {
        "tree_modules": tree_files,
        "tree_modules_without_bytecode": tree_missing,
        "site_packages_modules": site_files,
        "site_packages_modules_without_bytecode": site_missing,
    }


def find_npcs_prompt(tree: Path) -> Path:
    """The npcs lane's prompt file in a product tree: a Markdown file in the package that is
    in an `npcs` folder or named `npcs`."""
    package = tree / "notarius_dagster"
    found = sorted(
        p
        for p in package.rglob("*.md")
        if "npcs" in p.relative_to(package).parts[:-1]
        or p.stem in ("npcs", "npcs-prompt", "npcs_prompt")
    )
    if len(found) != 1:
        raise BenchError(
            f"cannot tell the npcs prompt in the product tree ({len(found)} candidates); "
            "update find_npcs_prompt()"
        )
    return found[0]


def edit_prompt(path: Path) -> None:
    """Change the lane's instructions (a prompt file holds only them)."""
    text = path.read_text(encoding="utf-8")
    path.write_text(text + "\n" + PROMPT_EDIT, encoding="utf-8")


def published_text(store: Store) -> str:
    return "\n".join(
        p.read_text(errors="replace") for p in store.out.rglob("*.json") if p.is_file()
    )


def npc_change(ctx: Context) -> dict[str, Any]:
    """One NPC, then the same NPC with another description: consumer calls of the re-run."""
    store = ctx.store("npc-change")
    tree = product_copy(ctx)
    prompt = find_npcs_prompt(tree)
    record = {"name": NPC_NAME, "aliases": [], "unit_ids": "mentioning"}
    before = load()
    with stub(ctx, 0.0, {"npcs": [{**record, "description": DESCRIPTION_BEFORE}]}) as server:
        first = notarius_run(ctx, [SESSION], store, tree=tree, tag="npc-first")
        first_stats = server.stats()
    edit_prompt(prompt)
    with stub(ctx, 0.0, {"npcs": [{**record, "description": DESCRIPTION_AFTER}]}) as server:
        second = notarius_run(ctx, [SESSION], store, tree=tree, tag="npc-second")
        stats = server.stats()
    consumers = sorted(lane for lane, d in ctx.deps.items() if "npcs" in d)
    lanes = stats["lanes"]
    published = DESCRIPTION_AFTER in published_text(store)
    return {
        "consumer_calls": sum(lanes.get(lane, 0) for lane in consumers),
        "consumer_calls_by_lane": {lane: lanes.get(lane, 0) for lane in consumers},
        "consumer_chunks_first_run": sum(first_stats["lanes"].get(lane, 0) for lane in consumers),
        "npcs_calls": lanes.get("npcs", 0),
        "calls": stats["requests"],
        "description_change_published": published,
        "valid": bool(lanes.get("npcs", 0)) and published,
        "first_wall_s": round(first.wall_s, 2),
        "wall_s": round(second.wall_s, 2),
        "load_avg_start": before,
        "load_avg_end": load(),
    }


def chunk_windows(path: Path, size: int, count: int) -> list[list[dict[str, Any]]]:
    """`count` windows of `size` consecutive units of the transcript (wrapping around)."""
    units = [json.loads(raw) for raw in path.read_text().splitlines() if raw.strip()]
    windows = []
    for i in range(count):
        start = (i * size) % max(1, len(units) - size)
        windows.append(units[start : start + size])
    return windows


def chunk_schema(units: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The npcs answer schema as a lane sends it for one chunk: every citation list admits
    only the chunk's unit ids (an integer `enum`), so each chunk's schema differs."""
    schema = json.loads(json.dumps(NPC_ANSWER_SCHEMA))
    item = schema["$defs"]["NpcAnswerItem"]["properties"]["unit_ids"]
    item["items"] = {"type": "integer", "enum": [int(u["unit_id"]) for u in units]}
    return schema


def rendered(units: Sequence[Mapping[str, Any]]) -> str:
    return "\n".join(f"[{u['unit_id']}] {u.get('speaker', '')}: {u['text']}" for u in units)


def client_cpu_worker(url: str, calls: int) -> dict[str, Any]:
    """Runs in its own process: CPU per structured call of the product's client, sent as the
    lanes send them (each chunk its own text and its own schema, with the chunk's unit-id
    enum), and, for contrast, one schema for every call."""
    os.environ[KEY_ENV] = "bench-dummy-key"
    sys.path.insert(0, str(ROOT))
    t0 = time.process_time()
    from notarius_dagster.engine.llm_contract import StructuredRequest
    from notarius_dagster.llm.client import LiteLLMClient
    from notarius_dagster.llm.profiles import LLMProfile
    from notarius_dagster.settings import api_key

    import_cpu = time.process_time() - t0
    profile = LLMProfile(
        name=STUB_PROFILE,
        model="openai/stub",
        api_base=url + "/v1",
        api_key_env=KEY_ENV,
        max_concurrency=CONCURRENCY,
    )
    client = LiteLLMClient(profile, api_key=api_key(KEY_ENV))
    warmup = 5
    windows = chunk_windows(SESSION, 50, warmup + calls)

    def request(i: int, units: Sequence[Mapping[str, Any]], schema: dict[str, Any]) -> Any:
        return StructuredRequest(
            system=CLIENT_SYSTEM,
            user="Transcript excerpt:\n" + rendered(units),
            schema=schema,
            schema_name="NpcAnswer",
            session_id="bench",
            lane="npcs",
            chunk_id=f"chunk-{i:04d}",
        )

    per_chunk = [request(i, w, chunk_schema(w)) for i, w in enumerate(windows)]
    one_schema = [request(i, windows[0], chunk_schema(windows[0])) for i in range(len(windows))]
    first_call_cpu = time.process_time()
    client.complete_structured(per_chunk[0])
    first_call_cpu = time.process_time() - first_call_cpu
    figures: dict[str, float] = {}
    invalid = 0
    for name, requests in (("per_chunk", per_chunk), ("one_schema", one_schema)):
        for req in requests[1:warmup]:
            client.complete_structured(req)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        for req in requests[warmup:]:
            invalid += not client.complete_structured(req).valid
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        figures[name] = 1000 * cpu / calls
        figures[name + "_wall"] = 1000 * wall / calls
    return {
        "calls": calls,
        "invalid": invalid,
        "cpu_ms_per_call": round(figures["per_chunk"], 2),
        "wall_ms_per_call": round(figures["per_chunk_wall"], 2),
        "cpu_ms_per_call_one_schema": round(figures["one_schema"], 2),
        "first_call_cpu_s": round(first_call_cpu, 3),
        "litellm_floor_cpu_ms_per_call": litellm_floor(profile, per_chunk[0], calls),
        "client_import_cpu_s": round(import_cpu, 2),
    }


def litellm_floor(profile: Any, request: Any, calls: int) -> float:
    """CPU per call of `litellm.completion` alone, with the request the client sends on its
    first rung (same messages, response format and options): the part of the client's CPU
    that is litellm's, which no change to the client can remove."""
    from notarius_dagster.llm._litellm import litellm
    from notarius_dagster.llm.client import LiteLLMClient
    from notarius_dagster.settings import api_key

    client = LiteLLMClient(profile, api_key=api_key(profile.api_key_env))
    rung = client.first_rung(request.lane)
    kwargs = client.completion_kwargs(client.messages(rung, request), rung, request)
    for _ in range(5):
        litellm.completion(**kwargs)
    cpu0 = time.process_time()
    for _ in range(calls):
        litellm.completion(**kwargs)
    return round(1000 * (time.process_time() - cpu0) / calls, 2)


def client_cpu(ctx: Context, calls: int) -> dict[str, Any]:
    before = load()
    with stub(ctx, 0.0) as server:
        out = subprocess.run(
            [sys.executable, __file__, "--client-cpu-worker", server.url, "--calls", str(calls)],
            cwd=ROOT,
            env=run_env(ROOT, ctx.store("client-cpu")),
            capture_output=True,
            check=False,
        )
        stats = server.stats()
    if out.returncode != 0:
        log = ctx.work / "client-cpu.log"
        log.write_bytes(out.stdout + out.stderr)
        raise BenchError(f"the client CPU worker failed; log: {log}")
    row = json.loads(out.stdout.decode().strip().splitlines()[-1])
    return {
        **row,
        "stub_requests": stats["requests"],
        "load_avg_start": before,
        "load_avg_end": load(),
    }


# --- bytecode --------------------------------------------------------------------------------


def bytecode(ctx: Context, compiled: Mapping[str, Any], source_tree: Path) -> dict[str, Any]:
    """What compiling the product's modules from source in every process costs: a first run
    from a copy of the tree without bytecode, after the first run of the same repeat from the
    compiled copy (`compiled`), with the same stub latency and session."""
    row, _ = first_run(ctx, compiled["latency_s"], tree=source_tree)
    keys = ("wall_s", "tree_cpu_s", "start_to_first_call_s", "tree_peak_pss_mb")

    def diff(key: str) -> float | None:
        a, b = row.get(key), compiled.get(key)
        return None if a is None or b is None else round(a - b, 2)

    imports = {
        name: min(import_cpu(tree) for _ in range(3))
        for name, tree in (("compiled", ctx.tree), ("source", source_tree))
    }
    return {
        "latency_s": compiled["latency_s"],
        "compiled_import_cpu_s": imports["compiled"],
        "source_import_cpu_s": imports["source"],
        **{f"compiled_{k}": compiled[k] for k in keys},
        **{f"source_{k}": row[k] for k in keys},
        **{f"source_minus_compiled_{k}": diff(k) for k in keys},
        "source_calls": row["calls"],
        "load_avg_start": row["load_avg_start"],
        "load_avg_end": load(),
    }


IMPORTED = "notarius_dagster.run.definitions"
"""The code location's module: what `notarius run`, the code server and a run worker import."""


def import_cpu(tree: Path) -> float:
    """CPU seconds (user + system) of one interpreter importing the code location from `tree`:
    the per-process part of the bytecode cost, less noisy than a whole run's."""
    usage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    subprocess.run([sys.executable, "-c", f"import {IMPORTED}"], cwd=tree, env=env, check=True)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return round(usage.ru_utime + usage.ru_stime - usage0.ru_utime - usage0.ru_stime, 2)


# --- daemon-launched runs --------------------------------------------------------------------


def daemon_module() -> Any:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import daemon_start as module

    return module


def daemon_start(ctx: Context) -> dict[str, Any]:
    """Runs launched through the daemon (daemon_start.py): `dg dev` on a fresh DAGSTER_HOME
    with configs/dagster.yaml and the stub profile, the session registered with `notarius
    sessions add`, then a first run of the whole session job for its partition and a small run
    (only `session_bundle`, from the stored lanes: no model call), each launched through
    GraphQL as the UI does; their timelines from the event log and the stub."""
    daemon = daemon_module()
    store = ctx.store("daemon-start")
    for folder in (store.home, store.data, store.root / "inbox"):  # what `make setup` makes
        folder.mkdir(parents=True)
    shutil.copyfile(ctx.tree / "configs" / "dagster.yaml", store.home / "dagster.yaml")
    env = run_env(ctx.tree, store)
    # The servers read the pipeline profile from the environment; automation is stopped so
    # the only runs are the ones launched here (`sessions add` records a transcript event the
    # automation sensor would otherwise act on).
    env.update(NOTARIUS_PROFILE=str(ctx.profile), NOTARIUS_AUTOMATION="stopped")
    session = SESSION.stem
    before = load()
    row: dict[str, Any] = {"latency_s": ctx.latency}
    launched: dict[str, tuple[str, float, str, dict[str, Any]]] = {}
    with stub(ctx, ctx.latency) as server:
        t0 = time.perf_counter()
        servers = daemon.start_servers(ctx.tree, env, free_port(), ctx.work / "dg-dev.log")
        try:
            servers.wait_loaded()
            row["servers_ready_s"] = round(time.perf_counter() - t0, 2)
            add = subprocess.run(
                [*notarius_command(), "sessions", "add", str(SESSION), "--session-id", session],
                cwd=ctx.tree,
                env=env,
                capture_output=True,
                check=False,
            )
            if add.returncode != 0:
                raise BenchError(f"notarius sessions add failed: {add.stderr.decode()[-1000:]}")
            for name, assets in (("first", None), ("bundle", ["session_bundle"])):
                server.reset()
                run_id, submitted = servers.launch(session, assets)
                status = servers.wait_finished(run_id)
                stats = server.stats()
                launched[name] = (run_id, submitted, status, stats)
        except daemon.DaemonError as exc:
            raise BenchError(f"{exc} (servers' log: {ctx.work / 'dg-dev.log'})") from exc
        finally:
            servers.stop(keep=stub_pids())
    events = daemon.run_events(env, [run_id for run_id, *_ in launched.values()])
    for name, (run_id, submitted, status, stats) in launched.items():
        if status != "SUCCESS":
            raise BenchError(f"the daemon-launched {name} run ended {status}")
        figures = daemon.timeline(events[run_id], submitted, stats["first_request_at"])
        row.update({f"{name}_{k}": v for k, v in figures.items()})
        row[f"{name}_calls"] = stats["requests"]
    return {**row, "load_avg_start": before, "load_avg_end": load()}


# --- many sessions ---------------------------------------------------------------------------


def write_small_sessions(folder: Path, count: int) -> list[Path]:
    """`count` slices of SMALL_UNITS consecutive units, spread over every real transcript (round
    robin, evenly spaced within each), each its own session, with units renumbered from the
    session's own block of UNIT_BLOCK ids."""
    folder.mkdir(parents=True, exist_ok=True)
    sources = sorted(SESSIONS_DIR.glob("*.jsonl"))
    lines = {p: p.read_text().splitlines() for p in sources}
    paths = []
    for k in range(count):
        source = sources[k % len(sources)]
        taken = len(range(k % len(sources), count, len(sources)))
        j = k // len(sources)
        span = max(0, len(lines[source]) - SMALL_UNITS)
        start = span * (j + 1) // (taken + 1)
        out = []
        for i, raw in enumerate(lines[source][start : start + SMALL_UNITS]):
            unit = json.loads(raw)
            unit["unit_id"] = (k + 1) * UNIT_BLOCK + i
            out.append(json.dumps(unit, ensure_ascii=False))
        path = folder / f"bench-small-{k + 1:02d}.jsonl"
        path.write_text("\n".join(out) + "\n")
        paths.append(path)
    return paths


def run_loop(ctx: Context, transcripts: Sequence[Path], store: Store) -> dict[str, Any]:
    """Today's path: one `notarius run` process per session."""
    runs = [notarius_run(ctx, [t], store, tag="small") for t in transcripts]
    return {
        "processes": len(runs),
        "tree_cpu_s": round(sum(r.cpu_s for r in runs), 2),
        "per_session_wall_s": [round(r.wall_s, 2) for r in runs],
    }


def run_many(ctx: Context, transcripts: Sequence[Path], store: Store) -> dict[str, Any]:
    """One `notarius run` process given every transcript (if the product accepts several)."""
    run = notarius_run(ctx, transcripts, store, tag="many")
    return {"processes": 1, **run.tree()}


ManyPath = Callable[[Context, Sequence[Path], Store], dict[str, Any]]
# A new one-backfill path is one more entry here and one more probe in `many_session_path`.
MANY_SESSION_PATHS: dict[str, ManyPath] = {"run-loop": run_loop, "run-many": run_many}


def many_session_path(requested: str) -> str:
    """The many-session path to measure: the product's one-process path when its CLI offers
    one (`notarius run` taking several transcripts), else the `notarius run` loop."""
    if requested != "auto":
        return requested
    env = run_env(ROOT, Store(Path(tempfile.gettempdir())))
    out = subprocess.run(
        [*notarius_command(), "run", "--help"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    usage = out.stdout.split("\n\n", 1)[0]
    if re.search(r"\[(path|transcript)s? \.\.\.\]|\bpaths\b|\btranscripts\b", usage, re.I):
        return "run-many"
    return "run-loop"


def many_sessions(ctx: Context, count: int, path: str) -> dict[str, Any]:
    store = ctx.store("many-sessions")
    transcripts = write_small_sessions(store.root / "transcripts-in", count)
    before = load()
    with stub(ctx, ctx.latency) as server:
        t0 = time.perf_counter()
        detail = MANY_SESSION_PATHS[path](ctx, transcripts, store)
        wall = time.perf_counter() - t0
        stats = server.stats()
    per_session = [stats["unit_blocks"].get(str(k + 1), {}) for k in range(count)]
    ideal = [ideals(calls, ctx.deps, ctx.latency, CONCURRENCY) for calls in per_session]
    critical = sum(i["critical_path"] for i in ideal)
    sequential = sum(i["lanes_sequential"] for i in ideal)
    return {
        "path": path,
        "sessions": count,
        "latency_s": ctx.latency,
        "wall_s": round(wall, 2),
        "ideal_s": critical,
        "ratio_to_ideal": ratio(wall, critical),
        "ideal_lanes_sequential_s": sequential,
        "ratio_to_sequential_ideal": ratio(wall, sequential),
        "calls": stats["requests"],
        "unattributed_calls": stats["requests"] - sum(sum(c.values()) for c in per_session),
        "chunks_per_session": [max(c.values(), default=0) for c in per_session],
        "max_in_flight": stats["max_in_flight"],
        **detail,
        "load_avg_start": before,
        "load_avg_end": load(),
    }


# --- results ---------------------------------------------------------------------------------

WHAT = {
    "first-run": "wall time of a first run against the critical-path ideal; CPU and peak summed "
    "PSS of its whole process tree (goals: CPU <= 10 s, memory <= 600 MB)",
    "npcs-only": "a first run of the npcs lane alone (its call span is the one-level yardstick)",
    "span-ratio": "six-lane call span / npcs-only call span, side by side in one repeat "
    "(goal: <= 2.3; two levels of lanes make 2.0 the ideal)",
    "peer-langextract": "langextract 1.7.1, six passes on two levels, same server and session, "
    "its whole process tree",
    "side-by-side": "first run / langextract wall time, side by side in one repeat (goal <= 1.5)",
    "first-run-0": "wall time of a first run at latency 0 (overhead only)",
    "start-to-first-call": "process start to the first model call, seconds",
    "client-cpu": "client CPU per structured call, ms (goal: <= 5)",
    "rerun": "unchanged re-run: wall time against the first run's (goal: <= 0.15), calls "
    "(goal: 0) and processes left behind (goal: 0)",
    "npc-change": "consumer-lane calls after one NPC description changes (goal: 0)",
    "many-sessions": "small sessions through the many-session path against the sum of their "
    "critical-path ideals (goal: <= 2x)",
    "bytecode": "a first run from a tree without bytecode (every process compiles the product's "
    "modules from source) against the first run of the same repeat from the compiled tree; and "
    "the CPU of one interpreter importing the code location from each (min of 3)",
    "daemon-start": "runs launched through the daemon (`dg dev`, GraphQL launchRun of a session "
    "partition): RUN_START -> first STEP_START (goal: <= 3 s on an idle machine; ideal 0) and -> "
    "first model call, for a first run of the session job and a session_bundle-only run; and "
    "launch -> RUN_STARTING (queue) -> RUN_START (run worker start)",
}
HEADLINE = {
    "first-run": ["wall_s", "ratio_to_ideal", "tree_cpu_s", "tree_peak_pss_mb"],
    "span-ratio": ["ratio"],
    "peer-langextract": ["wall_s", "tree_cpu_s", "tree_peak_pss_mb"],
    "side-by-side": ["ratio"],
    "first-run-0": ["wall_s"],
    "start-to-first-call": ["seconds"],
    "client-cpu": ["cpu_ms_per_call"],
    "rerun": ["ratio_to_first", "calls", "left_behind"],
    "npc-change": ["consumer_calls"],
    "many-sessions": ["ratio_to_ideal", "wall_s"],
    "bytecode": [
        "source_minus_compiled_wall_s",
        "source_minus_compiled_tree_cpu_s",
        "source_import_cpu_s",
        "compiled_import_cpu_s",
    ],
    "daemon-start": [
        "first_run_start_to_first_step_s",
        "first_run_start_to_first_call_s",
        "bundle_run_start_to_first_step_s",
    ],
}


def first_call_row(run: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "latency_s": run["latency_s"],
        "seconds": run["start_to_first_call_s"],
        "load_avg_start": run["load_avg_start"],
    }


def summarize(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """min and median of every numeric top-level field over the repeats."""
    keys = [k for k, v in rows[0].items() if isinstance(v, int | float) and not isinstance(v, bool)]
    out = {}
    for key in keys:
        values = [row[key] for row in rows if isinstance(row.get(key), int | float)]
        if values:
            out[key] = {"min": min(values), "median": round(statistics.median(values), 3)}
    return out


def git_info() -> dict[str, Any]:
    def git(*args: str) -> str:
        out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
        return out.stdout.strip()

    return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain"))}


def compare(now: Mapping[str, Any], before_path: Path) -> None:
    if not before_path.is_file():
        return
    before = json.loads(before_path.read_text())
    print(f"\nmedians: {before_path.name} (commit {before['git']['commit'][:8]}) -> now")
    for figure, keys in HEADLINE.items():
        for key in keys:
            old = before["figures"].get(figure, {}).get("summary", {}).get(key, {}).get("median")
            new = now["figures"].get(figure, {}).get("summary", {}).get(key, {}).get("median")
            if old is not None or new is not None:
                print(f"  {figure:20} {key:22} {old!s:>10} -> {new!s:>10}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 repeat, 5 small sessions")
    parser.add_argument("--repeats", type=int, help="default 3 (1 with --quick)")
    parser.add_argument("--sessions", type=int, help="small sessions (default 30, 5 with --quick)")
    parser.add_argument(
        "--many-repeats", type=int, help="repeats of many-sessions (default: --repeats)"
    )
    parser.add_argument("--calls", type=int, help="client-cpu calls (default 200, 50 --quick)")
    parser.add_argument("--latency", type=float, default=1.0, help="stub latency, seconds")
    parser.add_argument("--figures", default=",".join(FIGURES), help="comma-separated subset")
    parser.add_argument("--many-path", default="auto", choices=["auto", *MANY_SESSION_PATHS])
    parser.add_argument("--output", type=Path, default=RESULTS / "pipeline.json")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument(
        "--compare",
        type=Path,
        help="results to print the medians beside (default results/pipeline-before.json)",
    )
    parser.add_argument(
        "--peer",
        choices=["langextract"],
        help="run the peer side by side after each first run (the `bench` extra)",
    )
    parser.add_argument("--client-cpu-worker", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.client_cpu_worker:
        print(json.dumps(client_cpu_worker(args.client_cpu_worker, args.calls or 200)))
        return 0
    repeats = args.repeats or (1 if args.quick else 3)
    many_repeats = repeats if args.many_repeats is None else args.many_repeats
    sessions = args.sessions or (5 if args.quick else 30)
    calls = args.calls or (50 if args.quick else 200)
    figures = [f.strip() for f in args.figures.split(",") if f.strip()]
    unknown = sorted(set(figures) - set(FIGURES))
    if unknown:
        parser.error(f"unknown figure(s) {unknown}; choose from {', '.join(FIGURES)}")
    if ("rerun" in figures or "bytecode" in figures) and "first-run" not in figures:
        figures.append("first-run")
    path = many_session_path(args.many_path) if "many-sessions" in figures else None

    process_tree().become_subreaper()  # orphans of a run are re-parented here and reaped
    work = Path(tempfile.mkdtemp(prefix="notarius-bench-"))
    port = free_port()
    profile, profile_data = write_profile(work, port)
    ctx = Context(work, port, profile, profile_data, lane_dependencies(profile_data), args.latency)
    # The product as a user runs it: its modules' bytecode written once (here: compiled into a
    # copy of the tree), not compiled from source in every process (PYTHONDONTWRITEBYTECODE).
    ctx.tree = product_copy(ctx, "tree-compiled", compiled=False)
    compiled = {**compile_tree(ctx.tree), **bytecode_check(ctx.tree)}
    source_tree = None
    if "bytecode" in figures:
        source_tree = product_copy(ctx, "tree-source", compiled=False)
    rows: dict[str, list[dict[str, Any]]] = {}
    started, load_start = time.perf_counter(), load()
    git = git_info()  # the code measured: the checkout as the runs started
    print(f"work folder {work}; stub port {port}; load {load_start}", flush=True)

    def record(name: str, row: dict[str, Any]) -> None:
        rows.setdefault(name, []).append(row)
        shown = {
            k: v for k, v in row.items() if not isinstance(v, dict | list) or k == "load_avg_start"
        }
        print(f"  {name}: {shown}", flush=True)

    def session_figures() -> None:
        if "first-run" in figures:
            row, store = first_run(ctx, args.latency)
            record("first-run", row)
            record("start-to-first-call", first_call_row(row))
            if args.peer == "langextract":
                peer = peer_langextract(ctx, args.latency, row["chunks"])
                record("peer-langextract", peer)
                side = {"first_run_s": row["wall_s"], "peer_s": peer["wall_s"]}
                record("side-by-side", {**side, "ratio": ratio(row["wall_s"], peer["wall_s"])})
            if "npcs-only" in figures:
                npcs, _ = first_run(ctx, args.latency, lanes="npcs")
                record("npcs-only", npcs)
                spans = {"six_lane_span_s": row["call_span_s"], "npcs_span_s": npcs["call_span_s"]}
                record(
                    "span-ratio",
                    {**spans, "ratio": ratio(row["call_span_s"] or 0, npcs["call_span_s"] or 0)},
                )
            if "rerun" in figures:
                record("rerun", rerun(ctx, store, row))
            if "bytecode" in figures:
                assert source_tree is not None
                record("bytecode", bytecode(ctx, row, source_tree))
        if "first-run-0" in figures:
            row, _ = first_run(ctx, 0.0)
            record("first-run-0", row)
            record("start-to-first-call", first_call_row(row))
        if "npc-change" in figures:
            record("npc-change", npc_change(ctx))
        if "client-cpu" in figures:
            record("client-cpu", client_cpu(ctx, calls))
        if "daemon-start" in figures:
            record("daemon-start", daemon_start(ctx))

    try:
        for r in range(max(repeats, many_repeats)):
            print(f"repeat {r + 1}", flush=True)
            if r < repeats:
                session_figures()
            if "many-sessions" in figures and r < many_repeats:
                assert path is not None
                record("many-sessions", many_sessions(ctx, sessions, path))
    except BenchError as exc:
        print(f"error: {exc}\nwork folder kept: {work}", file=sys.stderr)
        return 1
    result = {
        "benchmark": "pipeline",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(
            [Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]
        ),
        "git": git,
        "machine": {
            "cpu_count": os.cpu_count(),
            "load_avg_start": load_start,
            "load_avg_end": load(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "config": {
            "session": SESSION.name,
            "units": len(SESSION.read_text().splitlines()),
            "profile": str(PROFILE.relative_to(ROOT)),
            "llm_profile": {
                k: v
                for k, v in profile_data["llm_profiles"][STUB_PROFILE].items()
                if k != "api_base"
            },
            "latency_s": args.latency,
            "repeats": repeats,
            "quick": args.quick,
            "small_sessions": sessions if path else None,
            "many_session_path": path,
            "client_cpu_calls": calls,
            "bytecode": "every product process runs from a copy of the tree whose modules were "
            "compiled once (`python -m compileall`), as a user's first import or pip writes them; "
            "PYTHONDONTWRITEBYTECODE=1 in every run, so none is written during a measurement. "
            "The libraries (Dagster, litellm, langextract for the peer) use the bytecode pip wrote "
            "in site-packages. The `bytecode` figure measures a run without it.",
            "bytecode_compile": compiled,
        },
        "total_s": round(time.perf_counter() - started, 1),
        "figures": {
            name: {"what": WHAT[name], "repeats": figure_rows, "summary": summarize(figure_rows)}
            for name, figure_rows in rows.items()
        },
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.output} in {result['total_s']} s")
    before = args.compare or RESULTS / "pipeline-before.json"
    if args.output.resolve() != before.resolve():
        compare(result, before)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
