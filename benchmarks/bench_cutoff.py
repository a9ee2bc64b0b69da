"""How often the bundled offline model's answer is cut off at `max_tokens`, after the re-ask.

Runs lane extractors (the real `LLMListExtractor` and client, the offline profile's retries,
the llama.cpp server with the schema as its grammar) over every chunk of a transcript and
counts, per lane, the lane-chunks whose final answer was refused as "answer cut off at
max_tokens", refused for another reason, or accepted. One server for the whole benchmark.
Writes (merges into) benchmarks/results/cutoff.json under `--label`. On demand only: a call
of SmolLM2-135M takes 5-9 s on this machine, so keep `--lanes` and `--max-chunks` small.

    .venv/bin/python benchmarks/bench_cutoff.py --label before --lanes npcs,item-events
    .venv/bin/python benchmarks/bench_cutoff.py --label max-tokens-768 --max-tokens 768

A proof-of-path figure about the bundled model's answers, not a quality figure."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from notarius_dagster.engine.chunk_stage import run_chunk_stage  # noqa: E402
from notarius_dagster.engine.contracts import ExtractRequest, RunContext  # noqa: E402
from notarius_dagster.engine.inputs import parse_transcript  # noqa: E402
from notarius_dagster.engine.resolution import resolve_profile_file  # noqa: E402
from notarius_dagster.llm.client import LiteLLMClient  # noqa: E402
from notarius_dagster.llm.offline import OfflineModelServer  # noqa: E402
from notarius_dagster.llm.profiles import LLMProfile  # noqa: E402
from notarius_dagster.modules import registry  # noqa: E402

CUT_OFF = "answer cut off at max_tokens"
RESULTS = ROOT / "benchmarks" / "results" / "cutoff.json"


def outcome(errors: tuple[str, ...], valid: bool) -> str:
    if valid:
        return "accepted"
    return "cut off" if any(CUT_OFF in e for e in errors) else "refused (other)"


def run(args: argparse.Namespace) -> dict[str, Any]:
    lanes_registry = registry()
    pipeline = resolve_profile_file(ROOT / args.config, registry=lanes_registry)
    profile = LLMProfile.model_validate(pipeline.llm_profile)
    if args.max_tokens:
        profile = profile.model_copy(update={"max_tokens": args.max_tokens})
    transcript = ROOT / args.transcript
    doc = parse_transcript(transcript.read_bytes(), file_name=transcript.name, source_id="bench")
    chunk_map = run_chunk_stage(
        pipeline.chunk, doc, session_id="bench", registry=lanes_registry
    ).chunk_map
    assert chunk_map is not None
    chunks = chunk_map.chunks[: args.max_chunks] if args.max_chunks else chunk_map.chunks
    commit = subprocess.run(  # the code that runs is the code at the start
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    lanes: dict[str, Any] = {}
    t0 = time.perf_counter()
    with OfflineModelServer(context_tokens=profile.context_tokens) as server:
        client = LiteLLMClient(profile, api_base_override=server.api_base)
        for lane in args.lanes.split(","):
            key = f"dnd.{lane.replace('-', '_')}.extract"
            extractor = lanes_registry.lane(lane).extractor()
            per_chunk = []
            for chunk in chunks:
                ctx = RunContext(
                    session_id="bench",
                    lane_id=lane,
                    module_key=key,
                    options={},
                    references={},
                    client=client,
                )
                t = time.perf_counter()
                out = extractor.extract(ExtractRequest(document=doc, chunk=chunk, context=ctx))
                row = {
                    "chunk": chunk.chunk_id,
                    "outcome": outcome(out.schema_errors, out.payload is not None),
                    "seconds": round(time.perf_counter() - t, 2),
                    "calls": out.usage.calls,
                    "prompt_tokens": out.usage.prompt_tokens,
                    "completion_tokens": out.usage.completion_tokens,
                }
                per_chunk.append(row)
                print(lane, row, flush=True)
            counts = {
                k: sum(r["outcome"] == k for r in per_chunk)
                for k in ("accepted", "cut off", "refused (other)")
            }
            lanes[lane] = {"counts": counts, "chunks": per_chunk}
    total = sum(len(v["chunks"]) for v in lanes.values())
    cut = sum(v["counts"]["cut off"] for v in lanes.values())
    return {
        "date": datetime.now(UTC).isoformat(),
        "git_commit": commit,
        "command": "bench_cutoff.py " + " ".join(sys.argv[1:]),
        "config": args.config,
        "transcript": args.transcript,
        "model": profile.model,
        "max_tokens": profile.max_tokens,
        "context_tokens": profile.context_tokens,
        "retries": profile.retries,
        "wall_time_s": round(time.perf_counter() - t0, 1),
        "lane_chunks": total,
        "cut_off": cut,
        "cut_off_rate": round(cut / total, 4) if total else None,
        "lanes": lanes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", required=True, help="key of this run in the results file")
    parser.add_argument("--lanes", default="npcs,item-events")
    parser.add_argument("--config", default="configs/offline.yaml")
    parser.add_argument("--transcript", default="samples/crd3-c2e001-slice.jsonl")
    parser.add_argument("--max-tokens", type=int, default=0, help="override the profile's")
    parser.add_argument("--max-chunks", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    result = run(args)
    existing = json.loads(args.out.read_text()) if args.out.exists() else {}
    existing.setdefault("benchmark", "cutoff")
    existing.setdefault("runs", {})[args.label] = result
    args.out.write_text(json.dumps(existing, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "lanes"}, indent=2))


if __name__ == "__main__":
    main()
