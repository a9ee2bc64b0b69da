"""Citation schemes measured with the bundled offline model: the `npcs` prompt over the first
chunks of the bundled sample, once per scheme (`unit-ids`: the chunk's own ids as an `enum`;
`line-numbers`: lines 1..N as an `enum`, mapped back by code). Per scheme: valid answers,
records, citations outside the chunk, rejections by validator (the lane's extract chain, as
the runner runs it, no retries), calls and tokens.
Writes benchmarks/results/citations.json. The bundled model is a proof of path, not a measure
of a hosted model; the figures say which scheme it follows better, nothing more.

    .venv/bin/python benchmarks/bench_citations.py [MAX_CHUNKS]
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


from notarius_dagster.dnd.llm_extract import CITATION_SCHEMES  # noqa: E402
from notarius_dagster.engine.chunk_stage import run_chunk_stage  # noqa: E402
from notarius_dagster.engine.contracts import ExtractRequest, RunContext  # noqa: E402
from notarius_dagster.engine.inputs import parse_transcript  # noqa: E402
from notarius_dagster.engine.resolution import resolve_profile_file  # noqa: E402
from notarius_dagster.engine.validators import ValidationContext, run_chain  # noqa: E402
from notarius_dagster.llm.client import LiteLLMClient  # noqa: E402
from notarius_dagster.llm.offline import OfflineModelServer  # noqa: E402
from notarius_dagster.llm.profiles import LLMProfile  # noqa: E402
from notarius_dagster.modules import registry  # noqa: E402

SAMPLE = ROOT / "samples" / "crd3-c2e001-slice.jsonl"
RESULTS = ROOT / "benchmarks" / "results" / "citations.json"


def out_of_chunk(payload: dict[str, Any] | None, items: str, chunk_units: set[int]) -> int:
    """Cited units (from the payload's references) that are not in the chunk."""
    if payload is None:
        return 0
    count = 0
    for record in payload[items]:
        for ref in record["source_refs"]:
            count += ref["start_unit_id"] not in chunk_units
            count += ref["end_unit_id"] != ref["start_unit_id"] and (
                ref["end_unit_id"] not in chunk_units
            )
    return count


def main(max_chunks: int = 6) -> None:
    pipeline = resolve_profile_file(ROOT / "configs" / "offline.yaml", registry=registry())
    lane = pipeline.lane("npcs")
    kind = registry().kind(lane.kind)
    profile = LLMProfile.model_validate(pipeline.llm_profile)
    doc = parse_transcript(SAMPLE.read_bytes(), file_name=SAMPLE.name, source_id="bench")
    chunk_map = run_chunk_stage(
        pipeline.chunk, doc, session_id="bench", registry=registry()
    ).chunk_map
    assert chunk_map is not None
    chunks = chunk_map.chunks[:max_chunks]
    schemes: dict[str, Any] = {}
    with OfflineModelServer(context_tokens=profile.context_tokens) as server:
        client = LiteLLMClient(profile, api_base_override=server.api_base)
        ctx = RunContext(
            session_id="bench",
            lane_id="npcs",
            module_key=lane.extract.module,
            options={},
            references={},
            client=client,
        )
        for name, scheme in CITATION_SCHEMES.items():
            extractor = registry().lane(lane.id).extractor()
            extractor.citations = scheme
            totals: Counter[str] = Counter()
            rejections: Counter[str] = Counter()
            started = time.perf_counter()
            for chunk in chunks:
                out = extractor.extract(ExtractRequest(document=doc, chunk=chunk, context=ctx))
                verdict = run_chain(
                    lane.extract.validators,
                    ValidationContext(
                        stage="extract",
                        lane_id="npcs",
                        module_key=lane.extract.module,
                        kind=kind,
                        document=doc,
                        chunk=chunk,
                    ),
                    out,
                )
                totals["chunks"] += 1
                totals["calls"] += out.usage.calls
                totals["prompt_tokens"] += out.usage.prompt_tokens
                totals["completion_tokens"] += out.usage.completion_tokens
                totals["valid_answers"] += out.payload is not None
                totals["out_of_chunk_citations"] += out_of_chunk(
                    out.payload, kind.items_field, set(chunk.unit_ids)
                )
                if verdict is None:
                    totals["accepted_chunks"] += 1
                    totals["records"] += len(out.payload[kind.items_field]) if out.payload else 0
                else:
                    rejections[verdict[0]] += 1
                print(name, chunk.chunk_id, dict(totals), dict(rejections), flush=True)
            schemes[name] = {
                **dict(totals),
                "rejections_by_validator": dict(rejections),
                "seconds": round(time.perf_counter() - started, 1),
            }
    result = {
        "benchmark": "citations",
        "date": datetime.now(UTC).isoformat(),
        "model": profile.model,
        "lane": "npcs",
        "session": SAMPLE.name,
        "chunks": len(chunks),
        "validators": list(lane.extract.validators),
        "schemes": schemes,
    }
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 6)
