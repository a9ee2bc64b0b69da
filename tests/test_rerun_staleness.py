"""Re-runs do only what changed: with `only_stale` (what `notarius run` asks), an asset whose
code version and input data versions are unchanged is not executed again; an unchanged
session launches no run and makes no model call; a changed transcript runs everything; a
deleted bundle runs only what publishes it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dagster import DagsterInstance

from notarius_dagster.engine.transcripts import register_transcript
from notarius_dagster.run.runner import RunOutcome, run_session
from tests.doubles import lane_responder
from tests.llm_double import scripted_llm

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "samples" / "crd3-c2e001-slice.jsonl"
PROFILE = REPO / "configs" / "offline.yaml"


def run(tmp_path: Path, instance: DagsterInstance, calls: list[int]) -> RunOutcome:
    def counting(messages: Any, response_format: Any) -> str:
        calls.append(1)
        return lane_responder(messages, response_format)

    with scripted_llm(counting):
        outcome = run_session(
            session_id="again",
            profile=PROFILE,
            data_root=tmp_path / "data",
            llm_profile="test-double",
            instance=instance,
            quiet=True,
            only_stale=True,
        )
    assert outcome.success, outcome.error
    return outcome


def test_an_unchanged_rerun_runs_nothing_and_a_change_runs_what_it_touches(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    transcripts = tmp_path / "data" / "transcripts"
    register_transcript(transcripts, "again", SAMPLE)
    calls: list[int] = []
    first = run(tmp_path, instance, calls)
    assert first.run_id is not None and calls and first.up_to_date == ()

    calls.clear()
    register_transcript(transcripts, "again", SAMPLE)  # the same bytes, copied again
    unchanged = run(tmp_path, instance, calls)
    assert unchanged.run_id is None and calls == []
    assert {"source_document", "chunk_map", "npcs", "session_bundle"} <= set(unchanged.up_to_date)

    manifest = tmp_path / "data" / "bundles" / "again" / "manifest.json"
    manifest.unlink()
    republished = run(tmp_path, instance, calls)
    assert republished.run_id is not None and calls == []
    assert "session_bundle" in republished.ran and "npcs" not in republished.ran
    assert manifest.is_file()

    edited = tmp_path / "edited.jsonl"
    edited.write_text(SAMPLE.read_text(encoding="utf-8").replace("the", "teh", 1), encoding="utf-8")
    register_transcript(transcripts, "again", edited)
    changed = run(tmp_path, instance, calls)
    assert changed.run_id is not None and changed.up_to_date == ()
