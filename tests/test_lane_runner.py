"""Lane execution semantics: retries per binding, runner-owned provenance, validator
rejections recorded and not fatal, warnings only from used attempts, checkpoints, progress
lines, LLM errors by type, and no model call after a failed chunk."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict

from notarius_dagster.engine.chunking import make_chunk
from notarius_dagster.engine.contracts import BaseExtractor, ExtractRequest, LLMUsage, ModuleOutput
from notarius_dagster.engine.errors import LaneError, LLMError, TransientLLMError
from notarius_dagster.engine.lane_models import AnswerSpec
from notarius_dagster.engine.lane_runner import LaneResult, run_lane
from notarius_dagster.engine.lanes import LaneModules, LaneSpec
from notarius_dagster.engine.models import RunWarning, SourceDocument, SourceRef
from notarius_dagster.engine.registry import LaneRegistry
from notarius_dagster.engine.resolution import ResolvedLane, ResolvedStage


class Item(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str | None = None
    name: str
    source_refs: list[SourceRef]


class ItemList(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["test/item-list"] = "test/item-list"
    schema_version: Literal["v1"] = "v1"
    source_id: str
    items: list[Item]


Script = Callable[[ExtractRequest, int], ModuleOutput]
SCRIPT: dict[str, Script] = {}
ATTEMPTS: dict[str, int] = {}


class ScriptedExtractor(BaseExtractor):
    """Behaves per chunk and attempt as the test's script says."""

    def __init__(self, lane: LaneSpec, options: dict[str, Any]) -> None:
        self.options = options

    def extract(self, request: ExtractRequest) -> ModuleOutput:
        key = request.chunk.chunk_id
        ATTEMPTS[key] = ATTEMPTS.get(key, 0) + 1
        return SCRIPT["fn"](request, ATTEMPTS[key])


class AppendMerger:
    """Concatenates the records of the accepted extracts in chunk order."""

    def __init__(self, lane: LaneSpec, options: dict[str, Any]) -> None:
        self.lane = lane

    def merge(self, request: Any) -> ModuleOutput:
        records = [r for e in request.extracts for r in e.payload["items"]]
        return ModuleOutput(payload=self.lane.envelope(request.document.source_id, records))


class PassNormalizer:
    """Passes the merged artifact through unchanged."""

    def __init__(self, lane: LaneSpec, options: dict[str, Any]) -> None:
        pass

    def normalize(self, request: Any) -> ModuleOutput:
        return ModuleOutput(payload=request.merged.payload)


ITEMS = LaneSpec(
    lane_id="items",
    kind="test/item-list",
    schema_id="test.items",
    record_model=Item,
    answer=AnswerSpec("ItemAnswer"),
    modules=LaneModules(extract=ScriptedExtractor, merge=AppendMerger, normalize=PassNormalizer),
)
REGISTRY = LaneRegistry(lanes=(ITEMS,))


def with_modules(**modules: Any) -> LaneRegistry:
    """The test registry with the items lane's modules replaced."""
    return LaneRegistry(
        lanes=(dataclasses.replace(ITEMS, modules=dataclasses.replace(ITEMS.modules, **modules)),)
    )


def payload(request: ExtractRequest, names: list[str], cite: int | None = None) -> dict[str, Any]:
    unit = cite if cite is not None else request.chunk.unit_ids[0]
    return {
        "kind": "test/item-list",
        "schema_version": "v1",
        "source_id": request.chunk.source_id,
        "items": [
            {
                "name": n,
                "source_refs": [
                    {
                        "source_id": request.chunk.source_id,
                        "start_unit_id": unit,
                        "end_unit_id": unit,
                    }
                ],
            }
            for n in names
        ],
    }


def good(request: ExtractRequest, names: list[str] | None = None, **kw: Any) -> ModuleOutput:
    return ModuleOutput(
        payload=payload(request, names or [request.chunk.chunk_id]),
        usage=LLMUsage(calls=1, prompt_tokens=10, completion_tokens=5, rungs={"json_object": 1}),
        **kw,
    )


def lane(
    retries: int = 0, validators: tuple[str, ...] = ("schema", "refs_in_chunk")
) -> ResolvedLane:
    def st(stage: str, module: str, chain: tuple[str, ...], r: int = 0) -> ResolvedStage:
        return ResolvedStage(
            stage=stage,
            module=module,
            version="1",
            options={},
            retries=r,
            validators=chain,
            validators_source="default",
            artifact_kind="test/item-list",
        )

    return ResolvedLane(
        id="items",
        kind="test/item-list",
        extract=st("extract", "test.scripted", validators, retries),
        merge=st("merge", "test.append", ("schema", "refs_in_document")),
        normalize=st("normalize", "test.pass", ("schema", "refs_in_document")),
    )


def run(
    doc: SourceDocument, script: Script, *, run_kw: dict[str, Any] | None = None, **lane_kw: Any
) -> LaneResult:
    SCRIPT["fn"] = script
    ATTEMPTS.clear()
    chunks = [make_chunk(doc, 0, doc.units[:5]), make_chunk(doc, 1, doc.units[5:])]
    return run_lane(
        lane(**lane_kw),
        document=doc,
        chunks=chunks,
        references={},
        client=None,
        session_id="s1",
        llm_fingerprint="fp",
        **{"registry": REGISTRY, **(run_kw or {})},
    )


def test_accepted_extracts_merge_in_chunk_order(doc: SourceDocument) -> None:
    result = run(doc, lambda req, n: good(req))
    assert result.status == "accepted"
    assert [i["name"] for i in result.payload["items"]] == ["chunk-0000", "chunk-0001"]
    assert result.stats.usage.calls == 2 and result.stats.usage.rungs == {"json_object": 2}


def test_runner_fills_provenance(doc: SourceDocument) -> None:
    seen: list[dict[str, Any]] = []

    class Recorder:
        def __init__(self, lane: LaneSpec, options: dict[str, Any]) -> None:
            pass

        def merge(self, request: Any) -> ModuleOutput:
            seen.extend(e.provenance for e in request.extracts)
            return ModuleOutput(payload=payload_for_merge(request))

    def payload_for_merge(request: Any) -> dict[str, Any]:
        items = [i for e in request.extracts for i in e.payload["items"]]
        return {"kind": "test/item-list", "schema_version": "v1", "source_id": "s1", "items": items}

    SCRIPT["fn"] = lambda req, n: good(req)
    ATTEMPTS.clear()
    the_lane = lane().model_copy(
        update={"merge": lane().merge.model_copy(update={"module": "test.recorder"})}
    )
    run_lane(
        the_lane,
        document=doc,
        chunks=[make_chunk(doc, 0, doc.units[:5])],
        references={},
        client=None,
        session_id="s1",
        llm_fingerprint="fp",
        registry=with_modules(merge=Recorder),
    )
    assert seen == [
        {
            "lane_id": "items",
            "extractor": "test.scripted",
            "source_id": "s1",
            "chunk_id": "chunk-0000",
            "chunk_index": 0,
            "unit_span": [doc.units[0].unit_id, doc.units[4].unit_id],
        }
    ]


def test_rejection_is_recorded_and_not_fatal(doc: SourceDocument) -> None:
    def script(req: ExtractRequest, n: int) -> ModuleOutput:
        if req.chunk.index == 1:  # cites a unit outside its chunk
            return ModuleOutput(payload=payload(req, ["bad"], cite=0))
        return good(req)

    result = run(doc, script)
    assert result.status == "accepted"
    assert [i["name"] for i in result.payload["items"]] == ["chunk-0000"]
    assert len(result.rejections) == 1
    rejection = result.rejections[0]
    assert (rejection.stage, rejection.chunk_id, rejection.validator) == (
        "extract",
        "chunk-0001",
        "refs_in_chunk",
    )


def test_rejection_consumes_retries_then_is_recorded_with_attempts(doc: SourceDocument) -> None:
    result = run(doc, lambda req, n: ModuleOutput(payload=payload(req, ["x"], cite=999)), retries=2)
    assert ATTEMPTS == {"chunk-0000": 3, "chunk-0001": 3}
    assert all(r.attempts == 3 for r in result.rejections)


def test_retry_after_rejection_uses_the_later_accepted_output(doc: SourceDocument) -> None:
    def script(req: ExtractRequest, n: int) -> ModuleOutput:
        return ModuleOutput(payload=payload(req, ["x"], cite=999)) if n == 1 else good(req)

    result = run(doc, script, retries=1)
    assert result.rejections == () and result.stats.records == 2


def test_framework_error_retries_then_fails_the_lane(doc: SourceDocument) -> None:
    def script(req: ExtractRequest, n: int) -> ModuleOutput:
        raise RuntimeError("provider exploded")

    with pytest.raises(LaneError, match="failed after 2 attempt"):
        run(doc, script, retries=1)


def test_framework_error_then_success_is_recovered(doc: SourceDocument) -> None:
    def script(req: ExtractRequest, n: int) -> ModuleOutput:
        if n == 1:
            raise RuntimeError("flaky")
        return good(req)

    assert run(doc, script, retries=1).stats.records == 2


def test_warnings_only_from_attempts_whose_output_is_used(doc: SourceDocument) -> None:
    def script(req: ExtractRequest, n: int) -> ModuleOutput:
        warning = RunWarning(
            stage="extract", code=f"attempt-{n}", message="m", chunk_id=req.chunk.chunk_id
        )
        if n == 1:
            return ModuleOutput(payload=payload(req, ["x"], cite=999), warnings=(warning,))
        return good(req, warnings=(warning,))

    result = run(doc, script, retries=1)
    assert {w.code for w in result.warnings} == {"attempt-2"}


def test_structured_output_failure_is_a_schema_rejection(doc: SourceDocument) -> None:
    result = run(doc, lambda req, n: ModuleOutput(payload=None, schema_errors=("npcs/0: type",)))
    assert {r.validator for r in result.rejections} == {"schema"}
    assert result.payload == {
        "kind": "test/item-list",
        "schema_version": "v1",
        "source_id": "s1",
        "items": [],
    }


def test_deterministic_skip_is_never_retried(doc: SourceDocument) -> None:
    def script(req: ExtractRequest, n: int) -> ModuleOutput:
        return ModuleOutput(payload=payload(req, []), skipped=True)

    result = run(doc, script, retries=3)
    assert ATTEMPTS == {"chunk-0000": 1, "chunk-0001": 1}
    assert result.stats.skipped == 2 and result.stats.called_model == 0


def test_explicit_empty_validator_chain_accepts_everything(doc: SourceDocument) -> None:
    result = run(
        doc, lambda req, n: ModuleOutput(payload=payload(req, ["x"], cite=999)), validators=()
    )
    # Nothing is rejected at extract; the merge's default chain still catches the bad citation.
    assert [r.stage for r in result.rejections] == ["merge"]
    assert result.status == "rejected" and result.payload is None


class MemoryCheckpoints:
    """A checkpoint store in a dict, recording the fingerprints it was asked for."""

    def __init__(self) -> None:
        self.stored: dict[str, ModuleOutput] = {}
        self.asked: list[str] = []

    def get(self, fingerprint: str) -> ModuleOutput | None:
        self.asked.append(fingerprint)
        return self.stored.get(fingerprint)

    def put(self, fingerprint: str, output: ModuleOutput) -> None:
        self.stored[fingerprint] = output


def test_progress_names_every_chunk_in_order_then_the_merge_and_the_normalize(
    doc: SourceDocument,
) -> None:
    lines: list[str] = []
    run(doc, lambda req, n: good(req), run_kw={"progress": lines.append, "max_concurrency": 2})
    assert lines == [
        "items: chunk 1/2 chunk-0000 llm",
        "items: chunk 2/2 chunk-0001 llm",
        "items: merged 2 extract(s)",
        "items: normalized",
    ]


def test_a_rejected_merge_reports_no_merge_or_normalize_progress(doc: SourceDocument) -> None:
    lines: list[str] = []
    result = run(
        doc,
        lambda req, n: ModuleOutput(payload=payload(req, ["x"], cite=999)),
        validators=(),
        run_kw={"progress": lines.append},
    )
    assert result.status == "rejected"
    assert lines == ["items: chunk 1/2 chunk-0000 llm", "items: chunk 2/2 chunk-0001 llm"]
    assert result.stats.rejected == 0  # counts rejected chunks; the merge rejection is listed
    assert [r.stage for r in result.rejections] == ["merge"]


def test_a_stored_extraction_is_reused_without_calling_the_extractor(
    doc: SourceDocument,
) -> None:
    store = MemoryCheckpoints()
    first = run(doc, lambda req, n: good(req), run_kw={"checkpoints": store})
    lines: list[str] = []
    second = run(
        doc, lambda req, n: good(req), run_kw={"checkpoints": store, "progress": lines.append}
    )
    assert ATTEMPTS == {}
    assert second.payload == first.payload
    assert second.chunk_status == {"chunk-0000": "reused", "chunk-0001": "reused"}
    assert (second.stats.reused, second.stats.called_model, second.stats.usage.calls) == (2, 0, 0)
    assert lines[:2] == ["items: chunk 1/2 chunk-0000 reused", "items: chunk 2/2 chunk-0001 reused"]
    assert len(set(store.asked)) == 2  # one fingerprint per chunk, the same both times


def test_a_rejected_extraction_is_not_stored(doc: SourceDocument) -> None:
    store = MemoryCheckpoints()
    run(
        doc,
        lambda req, n: ModuleOutput(payload=payload(req, ["x"], cite=999)),
        run_kw={"checkpoints": store},
    )
    assert store.stored == {}


class MaterialExtractor(ScriptedExtractor):
    """A scripted extractor with its own fingerprint material and manifest metadata."""

    material: dict[str, str] = {"prompt": "sha256:one"}

    def fingerprint_material(self) -> dict[str, str]:
        return dict(MaterialExtractor.material)

    def manifest_metadata(self) -> dict[str, str]:
        return {"prompt_sha256": MaterialExtractor.material["prompt"]}


def test_fingerprint_material_changes_the_checkpoint_key_and_metadata_reaches_the_result(
    doc: SourceDocument,
) -> None:
    store = MemoryCheckpoints()
    the_lane = lane().model_copy(
        update={"extract": lane().extract.model_copy(update={"module": "test.material"})}
    )
    SCRIPT["fn"] = lambda req, n: good(req)
    chunks = [make_chunk(doc, 0, doc.units[:5])]

    def go() -> LaneResult:
        ATTEMPTS.clear()
        return run_lane(
            the_lane,
            document=doc,
            chunks=chunks,
            references={},
            client=None,
            session_id="s1",
            llm_fingerprint="fp",
            checkpoints=store,
            registry=with_modules(extract=MaterialExtractor),
        )

    MaterialExtractor.material = {"prompt": "sha256:one"}
    first = go()
    assert first.metadata == {"extractor": {"prompt_sha256": "sha256:one"}}
    assert go().chunk_status == {"chunk-0000": "reused"}
    MaterialExtractor.material = {"prompt": "sha256:two"}  # an edited prompt
    edited = go()
    assert edited.chunk_status == {"chunk-0000": "llm"} and ATTEMPTS == {"chunk-0000": 1}
    assert edited.metadata == {"extractor": {"prompt_sha256": "sha256:two"}}


def test_the_default_hooks_add_no_metadata(doc: SourceDocument) -> None:
    assert run(doc, lambda req, n: good(req)).metadata == {}


def test_a_transient_llm_error_escapes_unchanged_and_is_not_retried(doc: SourceDocument) -> None:
    def script(req: ExtractRequest, n: int) -> ModuleOutput:
        raise TransientLLMError("LLM call to m failed after 3 attempts: RateLimitError: slow")

    with pytest.raises(TransientLLMError, match="RateLimitError"):
        run(doc, script, retries=2)
    assert ATTEMPTS == {"chunk-0000": 1}


def test_a_permanent_llm_error_fails_the_lane_at_its_first_attempt(doc: SourceDocument) -> None:
    def script(req: ExtractRequest, n: int) -> ModuleOutput:
        raise LLMError("LLM call to m failed after 1 attempt: AuthenticationError: bad key")

    with pytest.raises(LaneError) as info:
        run(doc, script, retries=2)
    assert not isinstance(info.value, TransientLLMError)
    assert str(info.value) == (
        "lane 'items' extract (test.scripted) chunk 'chunk-0000' failed after 1 attempt(s): "
        "LLM call to m failed after 1 attempt: AuthenticationError: bad key"
    )
    assert ATTEMPTS == {"chunk-0000": 1}


def test_after_a_failed_chunk_the_chunks_not_started_never_call_the_extractor(
    doc: SourceDocument,
) -> None:
    """Two workers: chunk 1 fails while chunk 0 is still running, so the free worker moves on
    to chunks 2-4 while the lane cannot stop yet. They must not reach the extractor."""
    chunk_one_failed = threading.Event()

    def script(req: ExtractRequest, n: int) -> ModuleOutput:
        if req.chunk.index == 1:
            chunk_one_failed.set()
            raise RuntimeError("provider exploded")
        if req.chunk.index == 0:
            assert chunk_one_failed.wait(timeout=10)
            time.sleep(0.3)  # time enough for the free worker to take every later chunk
        return good(req)

    SCRIPT["fn"] = script
    ATTEMPTS.clear()
    lines: list[str] = []
    chunks = [make_chunk(doc, i, doc.units[2 * i : 2 * i + 2]) for i in range(5)]
    with pytest.raises(LaneError, match="chunk 'chunk-0001' failed after 1 attempt"):
        run_lane(
            lane(),
            document=doc,
            chunks=chunks,
            references={},
            client=None,
            session_id="s1",
            llm_fingerprint="fp",
            max_concurrency=2,
            progress=lines.append,
            registry=REGISTRY,
        )
    assert ATTEMPTS == {"chunk-0000": 1, "chunk-0001": 1}
    assert lines == ["items: chunk 1/5 chunk-0000 llm"]


def test_progress_is_bounded_by_deciles_with_the_first_and_the_last_chunk(
    doc: SourceDocument,
) -> None:
    """42 chunks give 11 chunk lines (the first, then one per tenth, the last among them), not
    42; every chunk's status is still in the result."""
    SCRIPT["fn"] = lambda req, n: good(req)
    ATTEMPTS.clear()
    chunks = [
        make_chunk(doc, i, doc.units[i % len(doc.units) : i % len(doc.units) + 1])
        for i in range(42)
    ]
    lines: list[str] = []
    result = run_lane(
        lane(),
        document=doc,
        chunks=chunks,
        references={},
        client=None,
        session_id="s1",
        llm_fingerprint="fp",
        progress=lines.append,
        max_concurrency=4,
        registry=REGISTRY,
    )
    chunk_lines = [line for line in lines if ": chunk " in line]
    assert len(chunk_lines) == 11
    assert chunk_lines[0].startswith("items: chunk 1/42 ")
    assert chunk_lines[-1].startswith("items: chunk 42/42 ")
    done = [int(line.split()[2].split("/")[0]) for line in chunk_lines]
    assert done == sorted(done) and all(b - a <= 5 for a, b in zip(done, done[1:], strict=False))
    assert len(result.chunk_status) == 42
    assert lines[-2:] == ["items: merged 42 extract(s)", "items: normalized"]
