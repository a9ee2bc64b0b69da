"""The session's steps without Dagster (engine/session_steps.py): what each asset's one engine
call does with the stored transcript, the chunker, a lane, its references and a run's runtime
references."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from notarius_dagster.engine.chunk_stage import ChunkResult
from notarius_dagster.engine.chunking import GenericChunker
from notarius_dagster.engine.config import parse_profile
from notarius_dagster.engine.contracts import BaseExtractor, ExtractRequest, ModuleOutput
from notarius_dagster.engine.errors import InputError, InvalidReferenceError
from notarius_dagster.engine.lanes import LaneSpec
from notarius_dagster.engine.models import ReferenceSlot, Rejection
from notarius_dagster.engine.registry import ChunkerSpec
from notarius_dagster.engine.resolution import ResolvedPipeline, RuntimeBinding, resolve_pipeline
from notarius_dagster.engine.session_steps import (
    NO_OVERRIDES,
    RunPipeline,
    RuntimeOverrides,
    chunk_document,
    load_source_document,
    run_lane_step,
)
from notarius_dagster.engine.transcripts import register_transcript
from notarius_dagster.modules import registry

SECRET = "STEPS-REFERENCE-MARKER-5521"


def cited_word(request: ExtractRequest, unit: int) -> list[str]:
    """An alias the cited unit mentions (its first word), so the record passes the `support`
    check: these modules test reference handling, not grounding."""
    text = next(u.text for u in request.document.units if u.unit_id == unit)
    return text.split()[:1]


class NotesExtractor(BaseExtractor):
    """Names one NPC after the number of lines in its `notes` reference (0 when unbound)."""

    def __init__(self, lane: LaneSpec, options: dict[str, Any]) -> None:
        pass

    def extract(self, request: ExtractRequest) -> ModuleOutput:
        notes = request.context.references.get("notes")
        lines = len(notes.text.splitlines()) if notes and notes.text else 0
        unit = request.chunk.unit_ids[0]
        ref = {"source_id": request.chunk.source_id, "start_unit_id": unit, "end_unit_id": unit}
        return ModuleOutput(
            payload={
                "kind": "dnd/npc-list",
                "schema_version": "v1",
                "source_id": request.chunk.source_id,
                "npcs": [
                    {
                        "name": f"notes-lines-{lines}",
                        "aliases": cited_word(request, unit),
                        "description": "",
                        "source_refs": [ref],
                    }
                ],
            }
        )


NPCS = registry().lane("npcs")
REGISTRY = dataclasses.replace(
    registry().with_lanes(
        dataclasses.replace(
            NPCS,
            modules=dataclasses.replace(NPCS.modules, extract=NotesExtractor),
            slots=(
                ReferenceSlot(name="notes", max_bytes=100),
                ReferenceSlot(name="scenes", accepted_kinds=("dnd/scene-description-list",)),
            ),
        )
    ),
    chunkers=(
        *registry().chunkers,
        ChunkerSpec(
            key="test.steps-chunker", build=GenericChunker, slots=(ReferenceSlot(name="style"),)
        ),
    ),
)


def profile_data(notes: str | None = "notes.txt", style: str | None = None) -> dict[str, Any]:
    chunk: dict[str, Any] = {"module": "test.steps-chunker" if style else "generic"}
    if style:
        chunk["references"] = {"style": {"path": style}}
    return {
        "version": 1,
        "pipeline": {
            "id": "steps",
            "llm_profile": "test-double",
            "chunk": chunk,
            "lanes": [{"id": "npcs", "references": {"notes": {"path": notes}} if notes else {}}],
        },
    }


def plan_for(folder: Path, data: dict[str, Any]) -> RunPipeline:
    profile = parse_profile(data, profile_name="steps.yaml")

    def resolve(refs: Sequence[RuntimeBinding], unbinds: Sequence[str]) -> ResolvedPipeline:
        return resolve_pipeline(
            profile,
            profile_name="steps.yaml",
            base_dir=folder,
            runtime_references=refs,
            runtime_unbinds=unbinds,
            cwd=folder,
            registry=REGISTRY,
        )

    return RunPipeline(pipeline=resolve((), ()), registry=REGISTRY, resolve=resolve)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(
        "".join(json.dumps({"text": f"line {i}", "speaker": "DM"}) + "\n" for i in range(4))
    )
    register_transcript(tmp_path / "transcripts", "s1", transcript)
    return tmp_path / "transcripts"


@contextmanager
def no_client() -> Iterator[None]:
    yield None


def refusing_client() -> Any:
    raise AssertionError("the client must not be opened")


def lane(
    plan: RunPipeline,
    document: Any,
    chunks: ChunkResult,
    overrides: RuntimeOverrides = NO_OVERRIDES,
) -> Any:
    return run_lane_step(
        plan,
        "npcs",
        overrides,
        document=document,
        chunks=chunks,
        upstream={},
        open_client=no_client,
        session_id="s1",
        llm_fingerprint="fp",
        max_concurrency=1,
        checkpoints=None,
    )


def test_the_stored_transcript_becomes_the_source_document(tmp_path: Path, store: Path) -> None:
    (tmp_path / "notes.txt").write_text("a\n")
    document = load_source_document(
        plan_for(tmp_path, profile_data()), transcripts=store, session_id="s1"
    )
    assert document.source_id == "s1" and len(document.units) == 4
    with pytest.raises(InputError, match="no transcript is registered for session 's2'"):
        load_source_document(plan_for(tmp_path, profile_data()), transcripts=store, session_id="s2")


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda p: None, "reference npcs.extract.notes: file 'notes.txt' not found"),
        (lambda p: p.mkdir(), "'notes.txt' is a folder, not a file"),
        (lambda p: p.write_bytes(b"x" * 101), "file 'notes.txt' is 101 bytes; the slot allows 100"),
    ],
)
def test_a_bad_reference_file_fails_before_the_transcript_is_parsed(
    tmp_path: Path, store: Path, setup: Any, message: str
) -> None:
    setup(tmp_path / "notes.txt")
    (store / "s1.jsonl").write_text('{"speaker": "DM"}\n')  # malformed: would fail to parse
    with pytest.raises(InvalidReferenceError, match=message):
        load_source_document(plan_for(tmp_path, profile_data()), transcripts=store, session_id="s1")


def test_reference_content_is_checked_before_the_transcript_is_parsed(
    tmp_path: Path, store: Path
) -> None:
    """A reference that is not UTF-8 (or not a valid artifact) fails at the first step, before
    parsing and before any model call, not in the lane that would use it."""
    (tmp_path / "notes.txt").write_bytes(b"caf\xe9")
    plan = plan_for(tmp_path, profile_data())
    with pytest.raises(InvalidReferenceError, match="'notes.txt' is not UTF-8"):
        load_source_document(plan, transcripts=store, session_id="s1")


def test_the_chunker_references_are_prepared_with_provenance_and_warnings(
    tmp_path: Path, store: Path
) -> None:
    (tmp_path / "notes.txt").write_text("a\n")
    (tmp_path / "style.md").write_text("")
    plan = plan_for(tmp_path, profile_data(style="style.md"))
    document = load_source_document(plan, transcripts=store, session_id="s1")
    result = chunk_document(plan, document, session_id="s1")
    assert result.chunk_map is not None and result.chunk_map.chunks
    [provenance] = result.references
    assert (provenance["file"], provenance["bytes"], provenance["target"]) == (
        "style.md",
        0,
        "chunk",
    )
    assert [w.code for w in result.warnings] == ["empty_reference"]


def test_a_lane_runs_with_its_references_their_warnings_first_and_their_provenance(
    tmp_path: Path, store: Path
) -> None:
    (tmp_path / "notes.txt").write_text(f"{SECRET}\nsecond\nthird\n")
    plan = plan_for(tmp_path, profile_data())
    document = load_source_document(plan, transcripts=store, session_id="s1")
    result = lane(plan, document, chunk_document(plan, document, session_id="s1"))
    assert result.status == "accepted"
    assert {n["name"] for n in result.payload["npcs"]} == {"notes-lines-3"}
    [provenance] = result.references
    assert provenance["file"] == "notes.txt" and provenance["binding"] == "target"
    assert SECRET not in json.dumps(result.model_dump(mode="json"))
    (tmp_path / "notes.txt").write_text("")
    empty = lane(plan, document, chunk_document(plan, document, session_id="s1"))
    assert empty.warnings[0].code == "empty_reference"


def test_a_lane_after_rejected_chunking_is_rejected_without_opening_the_client(
    tmp_path: Path, store: Path
) -> None:
    (tmp_path / "notes.txt").write_text("a\n")
    plan = plan_for(tmp_path, profile_data())
    document = load_source_document(plan, transcripts=store, session_id="s1")
    rejected = ChunkResult(
        chunk_map=None,
        rejection=Rejection(
            stage="chunk",
            lane=None,
            module="generic",
            chunk_id=None,
            validator="v",
            message="m",
            attempts=1,
        ),
    )
    result = run_lane_step(
        plan,
        "npcs",
        document=document,
        chunks=rejected,
        upstream={},
        open_client=refusing_client,
        session_id="s1",
        llm_fingerprint="fp",
        max_concurrency=1,
        checkpoints=None,
    )
    assert (result.status, result.payload, result.metadata) == (
        "rejected",
        None,
        {"skipped": "chunking was rejected"},
    )


def test_runtime_references_apply_to_every_step_of_the_run(tmp_path: Path, store: Path) -> None:
    (tmp_path / "notes.txt").write_text("a\n")
    (tmp_path / "run.txt").write_text("a\nb\n")
    (tmp_path / "style.md").write_text("x")
    (tmp_path / "run-style.md").write_text("")
    plan = plan_for(tmp_path, profile_data(style="style.md"))
    overrides = RuntimeOverrides(references={"notes": "run.txt", "style": "run-style.md"})
    document = load_source_document(plan, overrides, transcripts=store, session_id="s1")
    chunks = chunk_document(plan, document, overrides, session_id="s1")
    assert chunks.references[0]["file"] == "run-style.md"
    assert chunks.references[0]["binding"] == "runtime"
    result = lane(plan, document, chunks, overrides)
    assert {n["name"] for n in result.payload["npcs"]} == {"notes-lines-2"}
    assert result.references[0]["binding"] == "runtime"
    unbound = lane(plan, document, chunks, RuntimeOverrides(unbind=("notes",)))
    assert {n["name"] for n in unbound.payload["npcs"]} == {"notes-lines-0"}


def test_runtime_references_are_checked_by_the_profile_rules_and_say_so(
    tmp_path: Path, store: Path
) -> None:
    plan = plan_for(tmp_path, profile_data())
    assert plan.for_run(RuntimeOverrides()) is plan.pipeline
    with pytest.raises(
        InvalidReferenceError,
        match=r"^runtime references: profile 'steps.yaml': "
        r"--reference nope: no selected target",
    ):
        plan.for_run(RuntimeOverrides(references={"nope": "x.txt"}))
    (tmp_path / "missing-but-overridden.txt").write_text("a\n")
    overridden = RuntimeOverrides(references={"notes": "missing-but-overridden.txt"})
    document = load_source_document(plan, overridden, transcripts=store, session_id="s1")
    assert len(document.units) == 4  # the profile's notes.txt is missing; the run's is not
    with pytest.raises(InvalidReferenceError, match="cannot apply them"):
        RunPipeline(plan.pipeline, REGISTRY).for_run(overridden)


def test_a_runtime_file_may_replace_another_lanes_artifact(tmp_path: Path) -> None:
    data = profile_data(notes=None)
    data["pipeline"]["lanes"].insert(0, {"id": "scene-descriptions"})
    data["pipeline"]["lanes"][1]["references"] = {"scenes": "scene-descriptions"}
    plan = plan_for(tmp_path, data)
    assert plan.pipeline.lane("npcs").depends_on == ("scene-descriptions",)
    run = plan.for_run(RuntimeOverrides(references={"scenes": "scenes.json"}))
    npcs = run.lane("npcs")
    assert npcs.depends_on == ()
    assert [(b.origin, b.source, b.display) for b in npcs.extract.references] == [
        ("file", "runtime", "scenes.json")
    ]
