"""The chunk stage: run the configured chunker (with its retries), check the framework
invariants and its validator chain, and rebuild accepted chunks from source units. A rejected
chunk result is recorded and stops the lanes; a framework error fails the run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from notarius_dagster.engine.chunking import chunk_invariant_problems, rebuild_chunks
from notarius_dagster.engine.contracts import (
    ChunkRequest,
    ModuleOutput,
    PreparedReference,
    RunContext,
)
from notarius_dagster.engine.errors import ChunkingError
from notarius_dagster.engine.llm_contract import StructuredClient
from notarius_dagster.engine.models import (
    Chunk,
    ChunkMap,
    Frozen,
    Rejection,
    RunWarning,
    SourceDocument,
)
from notarius_dagster.engine.registry import LaneRegistry
from notarius_dagster.engine.resolution import ResolvedStage
from notarius_dagster.engine.validators import ValidationContext, run_chain


class ChunkResult(Frozen):
    """The chunk asset's value: the validated chunk map, or the rejection that stopped it."""

    chunk_map: ChunkMap | None
    rejection: Rejection | None = None
    attempts: int = 1
    references: tuple[dict[str, object], ...] = ()  # provenance of the chunker's references
    warnings: tuple[RunWarning, ...] = ()


def run_chunk_stage(
    stage: ResolvedStage,
    document: SourceDocument,
    *,
    session_id: str,
    references: Mapping[str, PreparedReference] | None = None,
    client: StructuredClient | None = None,
    registry: LaneRegistry,
) -> ChunkResult:
    """Chunk `document` with its retries: a framework error or a rejected chunk list uses one
    attempt; the last rejection is returned, the last framework error raised as ChunkingError.
    The chunker comes from `registry` (resolution checked that it is there)."""
    spec = registry.chunker(stage.module)
    if spec is None:
        raise ChunkingError(f"chunker {stage.module!r} is not in the registry")
    chunker = spec.build(dict(stage.options))
    request = ChunkRequest(
        document=document,
        context=RunContext(
            session_id=session_id,
            lane_id=None,
            module_key=stage.module,
            options=stage.options,
            references=references or {},
            client=client,
        ),
    )
    attempts = stage.retries + 1
    problem: tuple[str, str] | None = None
    for attempt in range(1, attempts + 1):
        try:
            chunks = chunker.chunk(request)
        except Exception as exc:
            if attempt < attempts:
                continue
            raise ChunkingError(
                f"chunker {stage.module!r} failed after {attempts} attempt(s): "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        problem = _problem(stage, document, chunks)
        if problem is None:
            return ChunkResult(
                chunk_map=ChunkMap(
                    source_id=document.source_id,
                    source_digest=document.digest,
                    chunker=stage.module,
                    chunks=rebuild_chunks(document, chunks),
                ),
                attempts=attempt,
            )
    assert problem is not None
    return ChunkResult(
        chunk_map=None,
        attempts=attempts,
        rejection=stage.rejection(problem, attempts),
    )


def _problem(
    stage: ResolvedStage, document: SourceDocument, chunks: Sequence[Chunk]
) -> tuple[str, str] | None:
    """The framework invariants first (they name chunks by index, never content), then the
    stage's validator chain; None when the chunk list is accepted."""
    problems = chunk_invariant_problems(document, chunks)
    if problems:
        return ("chunk_invariants", "; ".join(problems[:5]))
    vctx = ValidationContext(
        stage="chunk", lane_id=None, module_key=stage.module, kind=None, document=document
    )
    return run_chain(stage.validators, vctx, ModuleOutput(payload={"chunks": len(chunks)}))
