"""Three real sessions of one campaign for the codex tests: slices of Critical Role 2x01, 2x03
and 2x30 (data/sessions/), run through the npcs, scene-descriptions, spells and item-events
lanes in-process with the lane test double (`complete_responder`, keyword rules: not a model)
and the Mighty Nein roster, then published as a session publishes its bundle (index.json and
lane files, through the engine's atomic publish)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from notarius_dagster.engine.bundle import (
    JSON_MEDIA_TYPE,
    LogicalFile,
    encode_bundle,
    lane_files,
    publish_bundle,
)
from notarius_dagster.engine.chunking import make_chunk
from notarius_dagster.engine.inputs import parse_transcript
from notarius_dagster.engine.resolution import ResolvedPipeline, resolve_profile_file
from notarius_dagster.modules import registry
from tests.lane_doubles import RecordingClient, run_one_lane

REPO = Path(__file__).resolve().parent.parent
SESSIONS = REPO / "data" / "sessions"
ROSTER = REPO / "configs" / "rosters" / "mighty-nein.yaml"
PROFILE = REPO / "configs" / "campaign-mighty-nein.yaml"
SLICES = {"crd3-c2e001": (1050, 1250), "crd3-c2e003": (470, 570), "crd3-c2e030": (980, 1110)}
LANES = (
    ("npcs", "dnd/npc-list"),
    ("scene-descriptions", "dnd/scene-description-list"),
    ("spells", "dnd/spell-list"),
    ("item-events", "dnd/item-event-list"),
)


def campaign_pipeline() -> ResolvedPipeline:
    return resolve_profile_file(PROFILE, llm_profile="test-double", registry=registry())


@cache
def session_lanes(session_id: str) -> Mapping[str, dict[str, Any]]:
    """Lane kind -> accepted artifact of one real slice (computed once per test run)."""
    start, end = SLICES[session_id]
    lines = (SESSIONS / f"{session_id}.jsonl").read_text().splitlines()[start:end]
    doc = parse_transcript(
        ("\n".join(lines) + "\n").encode(), file_name=f"{session_id}.jsonl", source_id=session_id
    )
    units = list(doc.units)
    chunks = [
        make_chunk(doc, i, units[at : at + 25]) for i, at in enumerate(range(0, len(units), 25))
    ]
    pipeline = campaign_pipeline()
    client = RecordingClient()
    out: dict[str, dict[str, Any]] = {}
    npcs = run_one_lane(pipeline.lane("npcs"), doc, chunks, client=client)
    assert npcs.payload is not None
    out["dnd/npc-list"] = npcs.payload
    for lane_id, kind in LANES[1:]:
        result = run_one_lane(
            pipeline.lane(lane_id), doc, chunks, payloads={"npcs": npcs.payload}, client=client
        )
        assert result.payload is not None, lane_id
        out[kind] = result.payload
    return out


def publish_session(
    bundles: Path, session_id: str, lanes: Mapping[str, Mapping[str, Any]], run_id: str = "run-1"
) -> Path:
    """Publish `lanes` (kind -> artifact) as `session_id`'s bundle: index.json and the lane
    files, the way the bundle lists them."""
    by_kind = {kind: lane_id for lane_id, kind in LANES}
    files = lane_files([(by_kind[kind], dict(payload)) for kind, payload in lanes.items()])
    index = {
        "bundle_version": "1",
        "session_id": session_id,
        "run_id": run_id,
        "lanes": [
            {
                "lane_id": by_kind[f.payload["kind"]],
                "file": f.path,
                "kind": f.payload["kind"],
                "records": len(_items(f.payload)),
            }
            for f in files
        ],
    }
    encoded = encode_bundle([LogicalFile("index.json", JSON_MEDIA_TYPE, index), *files])
    return publish_bundle(bundles, session_id, encoded)


def _items(payload: Mapping[str, Any]) -> list[Any]:
    return next(v for k, v in payload.items() if isinstance(v, list))


def read_codex(bundles: Path, campaign: str = "mighty-nein") -> dict[str, Any]:
    path = bundles / ".campaigns" / campaign / "codex.json"
    data: dict[str, Any] = json.loads(path.read_text())
    return data
