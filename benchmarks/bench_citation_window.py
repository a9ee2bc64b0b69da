"""Two measurements on the gold (`data/gold/`), deterministic, no model.

1. How much of what careful readers cite survives the citation cut (engine/support.py,
`tighten_citations`), per window: every gold record of the three gold sessions (`data/gold/`)
is cut with its own citations, its lane's support fields (a list value: any of its spellings)
and its session's roster bound (so a combat turn's actor is supported by its player's lines,
as in a run), and the cited units kept are counted per lane, as a share of the units the
supported records cite. Gold records nothing supports are counted apart (the `support`
validator drops them; no window changes that).

2. The citation budgets (`AnswerSpec.max_cited`, docs/lanes.md "Citation budgets"): how many
units one gold record cites inside one chunk of the complete profile's chunking
(configs/dnd-complete.yaml), per lane (maximum and 90th percentile), beside each lane's budget.

Writes benchmarks/results/citation-window.json: run it after changing the matching, the window,
a budget or the chunking.

    .venv/bin/python benchmarks/bench_citation_window.py
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from notarius_dagster.dnd.roster import ROSTER_SLOT, Roster  # noqa: E402
from notarius_dagster.engine.chunk_stage import run_chunk_stage  # noqa: E402
from notarius_dagster.engine.contracts import PreparedReference  # noqa: E402
from notarius_dagster.engine.digest import digest_of  # noqa: E402
from notarius_dagster.engine.gold import load_gold  # noqa: E402
from notarius_dagster.engine.inputs import parse_transcript  # noqa: E402
from notarius_dagster.engine.resolution import resolve_profile_file  # noqa: E402
from notarius_dagster.engine.support import (  # noqa: E402
    CITATION_WINDOW,
    tighten_citations,
    unsupported_records,
)
from notarius_dagster.modules import registry  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "citation-window.json"
WINDOWS = (0, 1, 2, 3, 5, 8)
ROSTERS = {
    "crd3-c2e001-slice": "sample.yaml",
    "crd3-c2e003-u1944-2143": "mighty-nein.yaml",
    "fireball-sea-hag": "fireball-sea-hag.yaml",
}


def roster_reference(name: str) -> PreparedReference:
    data = yaml.safe_load((ROOT / "configs" / "rosters" / name).read_text())
    artifact = Roster.model_validate(data).model_dump(mode="json")
    return PreparedReference(
        slot=ROSTER_SLOT,
        origin="file",
        kind="dnd/roster",
        media_type="application/yaml",
        digest=digest_of(artifact),
        artifact=artifact,
    )


def main() -> None:
    lanes = {lane.lane_id: lane for lane in registry().lanes if lane.support_fields}
    kept: Counter[tuple[str, int]] = Counter()
    cited: Counter[str] = Counter()
    records: Counter[str] = Counter()
    unsupported: Counter[str] = Counter()
    for session, roster in ROSTERS.items():
        gold = load_gold(ROOT / "data" / "gold" / f"{session}.json")
        path = ROOT / gold.source.file
        doc = parse_transcript(path.read_bytes(), file_name=path.name, source_id=session)
        refs = {ROSTER_SLOT: roster_reference(roster)}
        for lane_id, lane in lanes.items():
            kind = registry().kind(lane.kind)
            for record in gold.lanes.get(lane_id, []):
                body: dict[str, Any] = record.model_dump()
                body[kind.refs_field] = [
                    {"source_id": session, "start_unit_id": u, "end_unit_id": u}
                    for u in record.unit_ids
                ]
                payload = {kind.items_field: [body]}
                units = len(set(record.unit_ids))
                records[lane_id] += 1
                if unsupported_records(kind, payload, doc, refs, registry().speaker_names):
                    unsupported[lane_id] += 1  # dropped by `support` whatever the window
                    continue
                cited[lane_id] += units
                for window in WINDOWS:
                    cut = tighten_citations(
                        kind, payload, doc, refs, registry().speaker_names, window=window
                    )
                    kept[(lane_id, window)] += units - cut.units
    by_lane = {
        lane_id: {
            "records": records[lane_id],
            "records_nothing_supports": unsupported[lane_id],
            "cited_units_of_supported_records": cited[lane_id],
            "kept_share_by_window": {
                str(w): round(kept[(lane_id, w)] / cited[lane_id], 3) if cited[lane_id] else None
                for w in WINDOWS
            },
        }
        for lane_id in lanes
    }
    total = sum(cited.values())
    out = {
        "benchmark": "citation-window",
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": "python benchmarks/bench_citation_window.py",
        "window_in_use": CITATION_WINDOW,
        "gold_sessions": list(ROSTERS),
        "records": sum(records.values()),
        "records_nothing_supports": sum(unsupported.values()),
        "cited_units_of_supported_records": total,
        "kept_share_by_window": {
            str(w): round(sum(kept[(lane, w)] for lane in lanes) / total, 3) for w in WINDOWS
        },
        "lanes": by_lane,
    }
    out["budgets"] = budgets()
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out["kept_share_by_window"]))
    for lane_id, row in by_lane.items():
        print(lane_id, row["records"], row["records_nothing_supports"], row["kept_share_by_window"])

    for lane_id, row in out["budgets"].items():
        print("budget", lane_id, row)


def budgets() -> dict[str, Any]:
    """Per lane with a citation budget: units one gold record cites within one chunk."""
    pipeline = resolve_profile_file(ROOT / "configs" / "dnd-complete.yaml", registry=registry())
    per_lane: dict[str, list[int]] = {}
    for session in ROSTERS:
        gold = load_gold(ROOT / "data" / "gold" / f"{session}.json")
        path = ROOT / gold.source.file
        doc = parse_transcript(path.read_bytes(), file_name=path.name, source_id=session)
        chunk_map = run_chunk_stage(
            pipeline.chunk, doc, session_id=session, registry=registry()
        ).chunk_map
        assert chunk_map is not None
        for lane_id, records in gold.lanes.items():
            for chunk in chunk_map.chunks:
                inside = set(chunk.unit_ids)
                per_lane.setdefault(lane_id, []).extend(
                    n for r in records if (n := len(inside & set(r.unit_ids)))
                )
    out: dict[str, Any] = {}
    for lane in registry().lanes:
        counts = sorted(per_lane.get(lane.lane_id, []))
        if lane.answer.per_chunk or not counts:
            continue
        out[lane.lane_id] = {
            "budget": lane.answer.max_cited,
            "record_chunk_pairs": len(counts),
            "max": counts[-1],
            "p90": counts[int(len(counts) * 0.9)],
        }
    return out


if __name__ == "__main__":
    main()
