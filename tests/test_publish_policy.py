"""Publishing what you can stand behind: a lane below `pipeline.publish.min_accepted_chunk_share`
fails the run with a message naming the lane and its counts, and the previous bundle of the
session stays byte for byte (the blocking Dagster check is in test_asset_checks.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from notarius_dagster.engine.config import DEFAULT_MIN_ACCEPTED_CHUNK_SHARE, PublishConfig
from notarius_dagster.engine.errors import ProfileError
from notarius_dagster.engine.lane_runner import LaneResult, LaneStats
from notarius_dagster.engine.publish_policy import (
    PublishPolicyError,
    below_policy,
    check_publish_policy,
)
from tests.lane_doubles import complete_pipeline
from tests.llm_double import ResponderServer, responder_server
from tests.test_cli_run import SAMPLE, notarius, offline_answered_by, run_args

EMPTY = {"kind": "dnd/npc-list", "schema_version": "v1", "source_id": "s1", "npcs": []}


def answers_garbage(messages: list[dict[str, Any]], response_format: Any) -> str:
    """The double for the bad run: never JSON, so every chunk is rejected."""
    return "not json"


def result(chunks: int, rejected: int, skipped: int = 0, payload: Any = EMPTY) -> LaneResult:
    return LaneResult(
        lane_id="npcs",
        kind="dnd/npc-list",
        status="accepted" if payload is not None else "rejected",
        payload=payload,
        stats=LaneStats(chunks=chunks, rejected=rejected, skipped=skipped),
    )


def test_the_default_share_is_one_half_and_skipped_chunks_count_as_accepted() -> None:
    policy = PublishConfig()
    assert policy.min_accepted_chunk_share == DEFAULT_MIN_ACCEPTED_CHUNK_SHARE == 0.5
    assert below_policy(policy, result(4, 2)) is None
    assert below_policy(policy, result(4, 2, skipped=2)) is None
    assert below_policy(policy, result(0, 0)) is None  # no chunk: nothing to judge
    assert below_policy(policy, result(4, 3)) == (
        "lane 'npcs': 1 of 4 chunk(s) accepted (25%, below "
        "pipeline.publish.min_accepted_chunk_share 0.5)"
    )
    assert "no accepted payload" in (below_policy(policy, result(4, 0, payload=None)) or "")
    assert below_policy(PublishConfig(min_accepted_chunk_share=0), result(4, 4)) is None


def test_every_lane_below_the_policy_is_named() -> None:
    spells = result(2, 2).model_copy(update={"lane_id": "spells"})
    with pytest.raises(PublishPolicyError) as caught:
        check_publish_policy(PublishConfig(), [result(4, 4), result(3, 0), spells], "s-1")
    message = str(caught.value)
    assert "session 's-1' was not published" in message and "previous bundle stays" in message
    assert "lane 'npcs': 0 of 4" in message and "lane 'spells': 0 of 2" in message


def test_the_policy_is_read_from_the_profile() -> None:
    assert complete_pipeline().publish == PublishConfig()
    with pytest.raises(ProfileError, match="pipeline.publish.min_accepted_chunk_share"):
        from notarius_dagster.engine.config import parse_profile

        parse_profile(
            {
                "pipeline": {
                    "id": "p",
                    "llm_profile": "x",
                    "lanes": [{"id": "npcs"}],
                    "publish": {"min_accepted_chunk_share": 2},
                }
            },
            profile_name="p.yaml",
        )


def test_a_run_below_the_policy_fails_and_the_previous_bundle_stays(
    tmp_path: Path, lane_loopback: ResponderServer
) -> None:
    offline_answered_by(tmp_path, lane_loopback)
    good = notarius(tmp_path, *run_args(tmp_path, SAMPLE, "--session-id", "kept"))
    assert good.returncode == 0, good.stderr
    bundle = tmp_path / "bundles" / "kept"
    before = {p.relative_to(bundle): p.read_bytes() for p in bundle.rglob("*") if p.is_file()}
    assert Path("lanes/npcs.json") in before

    # A new version of the transcript (so the session is not up to date) and a fresh store (so
    # no stored extraction of the good run is reused): every chunk goes to the model again.
    lines = SAMPLE.read_text(encoding="utf-8").splitlines()
    last = json.loads(lines[-1])
    last["text"] = str(last.get("text", "")) + " (edited)"
    edited = tmp_path / "kept.jsonl"
    edited.write_text("\n".join([*lines[:-1], json.dumps(last)]) + "\n", encoding="utf-8")
    args = run_args(tmp_path, edited, "--session-id", "kept")
    args[args.index("--data") + 1] = str(tmp_path / "fresh-data")
    with responder_server(answers_garbage) as garbage:
        offline_answered_by(tmp_path, garbage)
        bad = notarius(tmp_path, *args)
    assert bad.returncode != 0
    assert "lane 'npcs': 0 of 8 chunk(s) accepted" in bad.stderr
    assert "min_accepted_chunk_share" in bad.stderr and "Traceback" not in bad.stderr
    after = {p.relative_to(bundle): p.read_bytes() for p in bundle.rglob("*") if p.is_file()}
    assert after == before
