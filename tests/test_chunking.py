"""The generic chunker and every framework chunk invariant (docs/internals.md, "Chunks")."""

from __future__ import annotations

import pytest

from notarius_dagster.engine.chunk_stage import run_chunk_stage
from notarius_dagster.engine.chunking import (
    GenericChunker,
    chunk_invariant_problems,
    make_chunk,
    rebuild_chunks,
)
from notarius_dagster.engine.contracts import ChunkRequest, RunContext
from notarius_dagster.engine.errors import ChunkingError
from notarius_dagster.engine.models import Chunk, SourceDocument
from notarius_dagster.engine.registry import ChunkerSpec, LaneRegistry
from notarius_dagster.engine.resolution import ResolvedStage
from tests.conftest import make_document


def chunk_with(doc: SourceDocument, **changes: object) -> Chunk:
    return make_chunk(doc, 0, doc.units[:3]).model_copy(update=changes)


def run_generic(doc: SourceDocument, **options: object) -> list[Chunk]:
    ctx = RunContext(
        session_id="s1",
        lane_id=None,
        module_key="generic",
        options=options,
        references={},
        client=None,
    )
    return GenericChunker(dict(options)).chunk(ChunkRequest(document=doc, context=ctx))


def test_generic_chunker_bounds_chunks_by_units() -> None:
    chunks = run_generic(make_document(list(range(10))), max_units=4)
    assert [c.unit_ids for c in chunks] == [(0, 1, 2, 3), (4, 5, 6, 7), (8, 9)]
    assert [c.index for c in chunks] == [0, 1, 2]


def test_generic_chunker_bounds_chunks_by_characters() -> None:
    doc = make_document(list(range(6)), texts=["x" * 150] * 6)
    chunks = run_generic(doc, max_units=100, max_chars=400)
    assert all(len(c.content) <= 400 for c in chunks)
    assert [u for c in chunks for u in c.unit_ids] == list(range(6))


def test_generic_chunker_overlap_repeats_tail_units() -> None:
    chunks = run_generic(make_document(list(range(7))), max_units=4, overlap_units=1)
    assert [c.unit_ids for c in chunks] == [(0, 1, 2, 3), (3, 4, 5, 6)]


def test_generic_chunker_follows_document_order_not_ids() -> None:
    chunks = run_generic(make_document([30, 10, 20, 5]), max_units=2)
    assert [c.unit_ids for c in chunks] == [(30, 10), (20, 5)]
    assert chunks[0].start_unit_id == 30 and chunks[0].end_unit_id == 10


def test_valid_chunks_have_no_problems(doc: SourceDocument) -> None:
    assert chunk_invariant_problems(doc, run_generic(doc, max_units=3)) == []


def test_invariant_chunk_ids_must_be_non_empty(doc: SourceDocument) -> None:
    assert "empty chunk id" in chunk_invariant_problems(doc, [chunk_with(doc, chunk_id=" ")])[0]


def test_invariant_chunk_ids_must_be_unique(doc: SourceDocument) -> None:
    a = make_chunk(doc, 0, doc.units[:2], chunk_id="same")
    b = make_chunk(doc, 1, doc.units[2:4], chunk_id="same")
    assert any("duplicate chunk id" in p for p in chunk_invariant_problems(doc, [a, b]))


def test_invariant_source_id_must_match_document(doc: SourceDocument) -> None:
    problems = chunk_invariant_problems(doc, [chunk_with(doc, source_id="other")])
    assert any("source id" in p for p in problems)


def test_invariant_index_must_equal_position(doc: SourceDocument) -> None:
    problems = chunk_invariant_problems(doc, [chunk_with(doc, index=3)])
    assert any("index 3 is not its position 0" in p for p in problems)


def test_invariant_start_and_end_units_must_exist(doc: SourceDocument) -> None:
    problems = chunk_invariant_problems(doc, [chunk_with(doc, end_unit_id=999)])
    assert any("start or end unit id not in the document" in p for p in problems)


def test_invariant_start_must_not_come_after_end(doc: SourceDocument) -> None:
    problems = chunk_invariant_problems(doc, [chunk_with(doc, start_unit_id=2, end_unit_id=0)])
    assert any("start unit comes after end unit" in p for p in problems)


def test_invariant_content_and_media_type_must_be_non_empty(doc: SourceDocument) -> None:
    assert any(
        "empty content" in p for p in chunk_invariant_problems(doc, [chunk_with(doc, content="  ")])
    )
    assert any(
        "media type" in p for p in chunk_invariant_problems(doc, [chunk_with(doc, media_type="")])
    )


def test_invariant_chunk_must_contain_a_unit(doc: SourceDocument) -> None:
    problems = chunk_invariant_problems(doc, [chunk_with(doc, unit_ids=())])
    assert any("contains no source unit" in p for p in problems)


def test_invariant_chunk_must_not_repeat_a_unit(doc: SourceDocument) -> None:
    problems = chunk_invariant_problems(doc, [chunk_with(doc, unit_ids=(0, 1, 1, 2))])
    assert any("repeats a source unit" in p for p in problems)


def test_invariant_chunk_units_must_exist_in_document(doc: SourceDocument) -> None:
    problems = chunk_invariant_problems(doc, [chunk_with(doc, unit_ids=(0, 77, 2))])
    assert any("not in the document" in p for p in problems)


def test_invariant_chunk_units_must_be_in_document_order(doc: SourceDocument) -> None:
    problems = chunk_invariant_problems(doc, [chunk_with(doc, unit_ids=(0, 2, 1))])
    assert any("not in document order" in p for p in problems)


def test_overlap_and_incomplete_coverage_are_allowed(doc: SourceDocument) -> None:
    a = make_chunk(doc, 0, doc.units[0:3])
    b = make_chunk(doc, 1, doc.units[2:4])
    assert chunk_invariant_problems(doc, [a, b]) == []


def test_rebuild_uses_canonical_units_and_copies_metadata(doc: SourceDocument) -> None:
    chunk = make_chunk(doc, 0, doc.units[:2], metadata={"scene": "a"})
    rebuilt = rebuild_chunks(doc, [chunk])[0]
    assert rebuilt.unit_ids == (0, 1) and rebuilt.metadata == {"scene": "a"}
    assert rebuilt.metadata is not chunk.metadata
    assert rebuilt.digest == chunk.digest


class _BadChunker:
    calls = 0

    def __init__(self, options: dict[str, object]) -> None:
        pass

    def chunk(self, request: ChunkRequest) -> list[Chunk]:
        _BadChunker.calls += 1
        doc = request.document
        return [make_chunk(doc, 0, doc.units[:2]).model_copy(update={"index": 5})]


class _CrashingChunker:
    def __init__(self, options: dict[str, object]) -> None:
        pass

    def chunk(self, request: ChunkRequest) -> list[Chunk]:
        raise RuntimeError("boom")


CHUNKERS = LaneRegistry(
    chunkers=(
        ChunkerSpec(key="test.bad-chunker", build=_BadChunker),
        ChunkerSpec(key="test.crashing-chunker", build=_CrashingChunker),
    )
)


def stage(module: str, retries: int = 0) -> ResolvedStage:
    return ResolvedStage(
        stage="chunk",
        module=module,
        version="1",
        options={},
        retries=retries,
        validators=(),
        validators_source="default",
    )


def test_rejected_chunk_result_is_recorded_after_retries(doc: SourceDocument) -> None:
    _BadChunker.calls = 0
    result = run_chunk_stage(
        stage("test.bad-chunker", retries=2), doc, session_id="s1", registry=CHUNKERS
    )
    assert result.chunk_map is None
    assert result.rejection is not None and result.rejection.validator == "chunk_invariants"
    assert result.rejection.attempts == 3 and _BadChunker.calls == 3


def test_chunker_framework_error_fails_after_retries(doc: SourceDocument) -> None:
    with pytest.raises(ChunkingError, match="failed after 2 attempt"):
        run_chunk_stage(
            stage("test.crashing-chunker", retries=1), doc, session_id="s1", registry=CHUNKERS
        )
