"""The `scenes` chunker: deterministic cuts at initiative calls, breaks, long silences and the
DM narrating a change of scene, bounded by min/max units and characters; consecutive chunks
that cover the document without overlap; unknown options refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from notarius_dagster.dnd.scenes_chunker import SCENES_CHUNKER
from notarius_dagster.engine.chunking import chunk_invariant_problems
from notarius_dagster.engine.contracts import ChunkRequest, RunContext
from notarius_dagster.engine.inputs import document_digest, parse_transcript
from notarius_dagster.engine.models import Chunk, SourceDocument, SourceUnit
from tests.conftest import DATA
from tests.lane_doubles import complete_pipeline

FILLER = "We keep talking about the weather."


def document(lines: list[tuple[str, str] | tuple[str, str, float]]) -> SourceDocument:
    units = []
    for i, line in enumerate(lines):
        metadata: dict[str, Any] = {"speaker": line[0]}
        if len(line) == 3:
            metadata["start"] = metadata["end"] = line[2]
        units.append(SourceUnit(unit_id=1000 + i, text=line[1], metadata=metadata))
    return SourceDocument(
        source_id="s1",
        media_type="application/x-ndjson",
        units=tuple(units),
        digest=document_digest(units),
    )


def chunked(doc: SourceDocument, **options: Any) -> list[Chunk]:
    chunker = SCENES_CHUNKER.build({"min_units": 2, **options})
    ctx = RunContext(
        session_id="s1",
        lane_id=None,
        module_key="scenes",
        options=options,
        references={},
        client=None,
    )
    return chunker.chunk(ChunkRequest(doc, ctx))


def starts(chunks: list[Chunk]) -> list[tuple[int, str]]:
    return [(c.start_unit_id, c.metadata["opened_by"]) for c in chunks]


def table(*special: tuple[int, tuple[str, str]], n: int = 12) -> SourceDocument:
    lines: list[tuple[str, str]] = [("DM" if i % 3 else "Player", FILLER) for i in range(n)]
    for at, line in special:
        lines[at] = line
    return document(lines)  # type: ignore[arg-type]


def test_an_initiative_call_starts_a_scene() -> None:
    doc = table((5, ("DM", "Okay, everyone roll for initiative!")))
    assert starts(chunked(doc)) == [(1000, "start"), (1005, "initiative")]


def test_a_break_announcement_ends_a_scene_and_welcome_back_starts_one() -> None:
    doc = table(
        (3, ("DM", "And we'll be right back after the break.")),
        (8, ("DM", "Welcome back, everybody.")),
    )
    assert starts(chunked(doc)) == [(1000, "start"), (1004, "break"), (1008, "break")]


def test_a_long_silence_between_timestamps_starts_a_scene() -> None:
    times = [0.0, 5.0, 9.0, 15.0, 900.0, 905.0, 910.0]
    doc = document([("DM", FILLER, t) for t in times])
    assert starts(chunked(doc, gap_seconds=300)) == [(1000, "start"), (1004, "gap")]
    assert starts(chunked(doc, gap_seconds=1000)) == [(1000, "start")]


def test_the_dm_narrating_a_change_of_scene_starts_one_a_player_does_not() -> None:
    doc = table(
        (4, ("Player", "Meanwhile I check my pockets.")),
        (8, ("DM", "The next morning, you wake to rain.")),
    )
    assert starts(chunked(doc)) == [(1000, "start"), (1008, "scene_change")]


def test_the_dm_is_the_most_frequent_speaker_unless_configured() -> None:
    doc = table((8, ("Player", "Meanwhile, across town, the guards gather.")))
    assert starts(chunked(doc)) == [(1000, "start")]
    assert starts(chunked(doc, dm_speakers=["player"])) == [(1000, "start"), (1008, "scene_change")]


def test_a_cue_inside_a_too_short_scene_is_ignored() -> None:
    doc = table((2, ("DM", "Roll initiative.")), (6, ("DM", "Roll initiative again.")))
    assert starts(chunked(doc, min_units=4)) == [(1000, "start"), (1006, "initiative")]


def test_scenes_are_bounded_by_max_units_and_max_chars() -> None:
    doc = table(n=25)
    assert [len(c.unit_ids) for c in chunked(doc, max_units=10)] == [10, 10, 5]
    by_chars = chunked(doc, max_chars=200)
    assert all(len(c.content) <= 200 for c in by_chars)
    assert {c.metadata["opened_by"] for c in by_chars[1:]} == {"size"}


def test_scenes_cover_the_document_in_order_without_overlap() -> None:
    doc = table((3, ("DM", "Roll for initiative.")), (7, ("DM", "Welcome back!")), n=30)
    chunks = chunked(doc, max_units=8)
    assert [u for c in chunks for u in c.unit_ids] == [u.unit_id for u in doc.units]
    assert [c.chunk_id for c in chunks] == [f"scene-{i:04d}" for i in range(len(chunks))]
    assert chunk_invariant_problems(doc, chunks) == []


def test_chunking_is_deterministic() -> None:
    doc = table((5, ("DM", "Roll for initiative.")), n=40)
    assert chunked(doc, max_units=7) == chunked(doc, max_units=7)


@pytest.mark.parametrize(
    "options",
    [{"use_llm": True}, {"max_unit": 5}, {"min_units": 10, "max_units": 5}, {"max_units": 0}],
)
def test_unknown_or_invalid_options_are_refused(options: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        SCENES_CHUNKER.build(options)


@pytest.mark.parametrize("name", ["fireball-sea-hag.jsonl", "crd3-c2e003.jsonl"])
def test_real_transcripts_chunk_into_valid_scenes(name: str) -> None:
    path: Path = DATA / "sessions" / name
    doc = parse_transcript(path.read_bytes(), file_name=name, source_id="real")
    chunks = chunked(doc, min_units=8)
    assert chunk_invariant_problems(doc, chunks) == []
    assert sum(len(c.unit_ids) for c in chunks) == len(doc.units)
    assert all(len(c.unit_ids) <= 60 for c in chunks)


def test_the_complete_profile_uses_the_scenes_chunker() -> None:
    chunk = complete_pipeline().chunk
    assert chunk.module == "scenes" and chunk.options["max_units"] == 60
