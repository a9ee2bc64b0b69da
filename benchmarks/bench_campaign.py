"""The campaign codex at 3 and 30 sessions: how long reading the published bundles, building
the codex and publishing it takes, alone and as a Dagster materialization of `campaign_codex`
(docs/campaign.md, "Shape and cost"). Writes benchmarks/results/campaign.json.

Sessions are the three real slices of tests/campaign_sessions.py (Critical Role 2x01, 2x03,
2x30 through the lane test double with the Mighty Nein roster), repeated under new session ids
to reach 30: the codex does the same work per session as for distinct ones (every record is
read, keyed and merged)."""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from dagster import DagsterInstance, materialize  # noqa: E402

from assets.campaign import CODEX_ASSET, build_campaign_assets  # noqa: E402
from notarius_dagster.campaign.store import load_roster, publish_codex  # noqa: E402
from notarius_dagster.dnd.roster import Roster  # noqa: E402
from notarius_dagster.modules import registry  # noqa: E402
from resources.bundle_store import BundleStore  # noqa: E402
from tests.campaign_sessions import (  # noqa: E402
    ROSTER,
    SLICES,
    campaign_pipeline,
    publish_session,
    session_lanes,
)

REPEATS = 5


def campaign(bundles: Path, sessions: int) -> tuple[Roster, Path]:
    base = load_roster(ROSTER)
    real = list(SLICES)
    ids = [f"c2-s{n:03d}" for n in range(1, sessions + 1)]
    for n, session in enumerate(ids):
        source = real[n % len(real)]
        text = json.dumps(dict(session_lanes(source))).replace(f'"{source}"', f'"{session}"')
        publish_session(bundles, session, json.loads(text))
    data = base.model_dump(mode="json")
    data["sessions"] = [{"id": s, "number": n} for n, s in enumerate(ids, start=1)]
    roster = Roster.model_validate(data)
    path = bundles.parent / f"roster-{sessions}.yaml"
    path.write_text(json.dumps(roster.model_dump(mode="json")))  # JSON is YAML
    return roster, path


def measure(sessions: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        bundles = Path(tmp) / "bundles"
        roster, roster_file = campaign(bundles, sessions)
        times = []
        for _ in range(REPEATS):
            started = time.perf_counter()
            published = publish_codex(bundles, roster, registry())
            times.append(time.perf_counter() - started)
        codex = published.codex
        pipeline = campaign_pipeline()
        binding = next(b for b in pipeline.lane("npcs").extract.references if b.slot == "roster")
        pipeline = pipeline.model_copy(
            update={
                "lanes": tuple(
                    lane.model_copy(
                        update={
                            "extract": lane.extract.model_copy(
                                update={
                                    "references": tuple(
                                        b.model_copy(update={"path": str(roster_file)})
                                        if b.slot == "roster"
                                        else b
                                        for b in lane.extract.references
                                    )
                                }
                            )
                        }
                    )
                    for lane in pipeline.lanes
                )
            }
        )
        assert binding.path
        (asset,), _ = build_campaign_assets(pipeline, registry())
        store = BundleStore(root=tmp, bundles_root=str(bundles), inbox=tmp)
        dagster_times = []
        with DagsterInstance.ephemeral() as instance:
            for _ in range(3):
                started = time.perf_counter()
                result = materialize([asset], instance=instance, resources={"store": store})
                dagster_times.append(time.perf_counter() - started)
                assert result.success
        size = (bundles / ".campaigns" / roster.campaign / "codex.json").stat().st_size
    return {
        "sessions": sessions,
        "publish_codex_s_median": round(statistics.median(times), 4),
        "publish_codex_s_max": round(max(times), 4),
        "materialize_campaign_codex_s_median": round(statistics.median(dagster_times), 4),
        "codex_bytes": size,
        "npcs": len(codex.npcs),
        "appearances": sum(len(n.appearances) for n in codex.npcs),
        "item_events": len(codex.item_events),
        "spells_cast": sum(s.count for s in codex.spells),
        "scenes": len(codex.scenes),
    }


def main() -> None:
    results = {
        "benchmark": "campaign codex: read published bundles, build, publish (codex, page, index)",
        "asset": CODEX_ASSET,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpu_count": os.cpu_count(),
        "repeats": REPEATS,
        "runs": [measure(3), measure(30)],
    }
    out = REPO / "benchmarks" / "results" / "campaign.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
