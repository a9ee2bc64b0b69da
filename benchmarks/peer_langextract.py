"""The peer the pipeline benchmark runs side by side with Notarius: langextract 1.7.1 (Google's
LLM extraction library; the `bench` extra of pyproject.toml, never a runtime dependency) doing
the same shape of work on the same session against the same latency server.

The same shape: six extraction passes, one per lane of `configs/dnd-complete.yaml`, on two
levels as the profile's lanes run (`npcs` and `scene-descriptions` together, then the four
lanes that consume `npcs` together), each pass `--concurrency` calls in flight (the LLM
profile's `max_concurrency`, 8) over chunks of about the size Notarius sends (`--chunk-chars`,
the transcript's characters divided by Notarius's chunk count, so both make about as many
calls). langextract sends its OpenAI `json_schema` response format (built from the examples);
the latency server answers it with the smallest valid object (`{"extractions": []}`) after
its fixed latency, as it answers Notarius.

What it does not do that Notarius does: grounding checks, checkpoints, Dagster's event log,
re-runs, bundles. The figure is the cost of the same model calls in a plain library.

    python benchmarks/peer_langextract.py --url http://127.0.0.1:PORT --session S.jsonl \
        --chunk-chars 5800"""

from __future__ import annotations

import argparse
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

LEVELS: list[dict[str, str]] = [
    {
        "npcs": "Extract the non-player characters the game master voices or describes.",
        "scene-descriptions": "Extract the scenes: where the party is and what happens.",
    },
    {
        "combat-turns": "Extract each combat turn: who acts, what they do, the outcome.",
        "spells": "Extract each spell cast: caster, spell, target.",
        "item-events": "Extract items found, bought, given or used.",
        "npc-interactions": "Extract each interaction between a player character and an NPC.",
    },
]


def transcript_text(session: Path) -> str:
    """The units as Notarius renders them for a prompt: `[id] SPEAKER: text` lines."""
    lines = []
    for raw in session.read_text(encoding="utf-8").splitlines():
        if raw.strip():
            unit = json.loads(raw)
            lines.append(f"[{unit['unit_id']}] {unit.get('speaker', '')}: {unit['text']}")
    return "\n".join(lines)


def one_pass(lx: Any, text: str, lane: str, description: str, args: argparse.Namespace) -> int:
    example = lx.data.ExampleData(
        text="[1] MATT: The innkeeper, Yussa, waves you over.",
        extractions=[
            lx.data.Extraction(
                extraction_class=lane.replace("-", "_"),
                extraction_text="Yussa",
                attributes={"unit_id": "1"},
            )
        ],
    )
    config = lx.factory.ModelConfig(
        model_id="gpt-4o-mini",
        provider="OpenAILanguageModel",
        provider_kwargs={"base_url": args.url + "/v1", "api_key": "bench-dummy-key"},
    )
    result = lx.extract(
        text_or_documents=text,
        prompt_description=description,
        examples=[example],
        config=config,
        max_char_buffer=args.chunk_chars,
        batch_length=args.concurrency,
        max_workers=args.concurrency,
        extraction_passes=1,
        show_progress=False,
    )
    return len(result.extractions or [])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--session", type=Path, required=True)
    parser.add_argument("--chunk-chars", type=int, required=True)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "bench-dummy-key")
    t0 = time.perf_counter()
    import langextract as lx

    imported = time.perf_counter() - t0
    text = transcript_text(args.session)
    levels = []
    for level in LEVELS:
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=len(level)) as pool:
            futures = {
                lane: pool.submit(one_pass, lx, text, lane, description, args)
                for lane, description in level.items()
            }
            found = {lane: f.result() for lane, f in futures.items()}
        levels.append({"lanes": found, "wall_s": round(time.perf_counter() - started, 2)})
    print(json.dumps({"import_s": round(imported, 2), "levels": levels}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
