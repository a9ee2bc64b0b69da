"""The bundled offline model through the real client: server start-up time, then per-call
latency, tokens and ladder rung for the `npcs` prompt over the sample's chunks.
Writes benchmarks/results/offline_model.json. A proof-of-path figure, not a quality figure."""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

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

SAMPLE = ROOT / "samples" / "crd3-c2e001-slice.jsonl"


def main(max_chunks: int = 5) -> None:
    pipeline = resolve_profile_file(ROOT / "configs" / "offline.yaml", registry=registry())
    profile = LLMProfile.model_validate(pipeline.llm_profile)
    doc = parse_transcript(SAMPLE.read_bytes(), file_name=SAMPLE.name, source_id="bench")
    chunk_map = run_chunk_stage(
        pipeline.chunk, doc, session_id="bench", registry=registry()
    ).chunk_map
    assert chunk_map is not None
    extractor = registry().lane("npcs").extractor()
    t0 = time.perf_counter()
    with OfflineModelServer(context_tokens=profile.context_tokens) as server:
        startup = time.perf_counter() - t0
        client = LiteLLMClient(profile, api_base_override=server.api_base)
        ctx = RunContext(
            session_id="bench",
            lane_id="npcs",
            module_key="dnd.npcs.extract",
            options={},
            references={},
            client=client,
        )
        calls = []
        for chunk in chunk_map.chunks[:max_chunks]:
            t = time.perf_counter()
            out = extractor.extract(ExtractRequest(document=doc, chunk=chunk, context=ctx))
            calls.append(
                {
                    "chunk": chunk.chunk_id,
                    "seconds": round(time.perf_counter() - t, 2),
                    "calls": out.usage.calls,
                    "prompt_tokens": out.usage.prompt_tokens,
                    "completion_tokens": out.usage.completion_tokens,
                    "rungs": out.usage.rungs,
                    "valid": out.payload is not None,
                }
            )
            print(calls[-1])
    result = {
        "benchmark": "offline_model",
        "date": datetime.now(UTC).isoformat(),
        "cores": os.cpu_count(),
        "server_startup_s": round(startup, 2),
        "calls": calls,
    }
    (ROOT / "benchmarks" / "results" / "offline_model.json").write_text(
        json.dumps(result, indent=2) + "\n"
    )


if __name__ == "__main__":
    main()
