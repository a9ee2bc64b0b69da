"""Engine throughput on real transcripts: parse, chunk, and run the `npcs` lane through the
real litellm path into the in-process test double (so the figures are engine overhead, not
model time). Writes benchmarks/results/engine.json."""

from __future__ import annotations

import json
import os
import sys
import time
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from notarius_dagster.engine.chunk_stage import run_chunk_stage  # noqa: E402
from notarius_dagster.engine.inputs import parse_transcript  # noqa: E402
from notarius_dagster.engine.lane_runner import run_lane  # noqa: E402
from notarius_dagster.engine.resolution import resolve_profile_file  # noqa: E402
from notarius_dagster.llm.client import LiteLLMClient  # noqa: E402
from notarius_dagster.modules import registry  # noqa: E402
from tests.doubles import lane_responder  # noqa: E402
from tests.llm_double import double_profile, install_profile, scripted_llm  # noqa: E402

SESSIONS = ROOT / "data" / "sessions"


def main() -> None:
    install_profile()  # the test suite's `test-double` LLM profile (tests/llm_double.py)
    pipeline = resolve_profile_file(
        ROOT / "configs" / "offline.yaml", llm_profile="test-double", registry=registry()
    )
    client = LiteLLMClient(double_profile(max_concurrency=2))
    rows = []
    for path in sorted(SESSIONS.glob("*.jsonl")):
        tracemalloc.start()
        t0 = time.perf_counter()
        doc = parse_transcript(path.read_bytes(), file_name=path.name, source_id="bench")
        t1 = time.perf_counter()
        chunks = run_chunk_stage(
            pipeline.chunk, doc, session_id="bench", registry=registry()
        ).chunk_map
        assert chunks is not None
        t2 = time.perf_counter()
        with scripted_llm(lane_responder):
            result = run_lane(
                pipeline.lane("npcs"),
                document=doc,
                chunks=chunks.chunks,
                references={},
                client=client,
                session_id="bench",
                llm_fingerprint="bench",
                max_concurrency=2,
                registry=registry(),
            )
        t3 = time.perf_counter()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        rows.append(
            {
                "file": path.name,
                "units": len(doc.units),
                "chunks": len(chunks.chunks),
                "parse_s": round(t1 - t0, 4),
                "chunk_s": round(t2 - t1, 4),
                "lane_s": round(t3 - t2, 4),
                "records": result.stats.records,
                "peak_mib": round(peak / 2**20, 1),
            }
        )
        print(rows[-1])
    out = {
        "benchmark": "engine",
        "date": datetime.now(UTC).isoformat(),
        "cores": os.cpu_count(),
        "rows": rows,
    }
    (ROOT / "benchmarks" / "results" / "engine.json").write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
