"""The published evidence context (docs/internals.md, "Evidence context"), one acceptance
criterion at a time: opt-in with an explicit allowlist, position-based expansion, one
deduplicated copy of each unit, direct references kept distinct from context, loud failure on
invalid references, a valid empty document, and an unchanged bundle otherwise."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from dagster import (
    AssetExecutionContext,
    AssetKey,
    DagsterInstance,
    Failure,
    Output,
    build_asset_context,
)
from pydantic import BaseModel, ConfigDict

from assets.evidence import build_evidence_context_asset
from notarius_dagster.engine.bundle import encode_bundle
from notarius_dagster.engine.bundle_assembly import assemble_bundle
from notarius_dagster.engine.bundle_documents import EVIDENCE_DESCRIPTOR as EVIDENCE_MODEL
from notarius_dagster.engine.chunk_stage import ChunkResult
from notarius_dagster.engine.chunking import make_chunk
from notarius_dagster.engine.config import parse_profile
from notarius_dagster.engine.digest import canonical_json
from notarius_dagster.engine.errors import EvidenceError, ProfileError
from notarius_dagster.engine.evidence import EvidenceContext, build_evidence_context
from notarius_dagster.engine.lane_models import AnswerSpec
from notarius_dagster.engine.lane_runner import LaneResult, LaneStats
from notarius_dagster.engine.lanes import LaneModules, LaneSpec
from notarius_dagster.engine.manifest import build_manifest
from notarius_dagster.engine.models import ChunkMap, SourceDocument, SourceRef
from notarius_dagster.engine.output_options import validate_output_options
from notarius_dagster.engine.resolution import ResolvedPipeline, resolve_pipeline
from notarius_dagster.modules import registry
from tests.conftest import make_document

REPO = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((REPO / "schemas" / "notarius.source.evidence_context.json").read_text())
CHUNK_MAP_SCHEMA = json.loads((REPO / "schemas" / "notarius.source.chunk_map.json").read_text())
EVIDENCE_DESCRIPTOR = EVIDENCE_MODEL.model_dump(mode="json")  # as index.json publishes it


# --- test lanes: plural references ("things") and a singular-reference "scene" lane


class Thing(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str | None = None
    name: str
    source_refs: list[SourceRef]


class Scene(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str | None = None
    summary: str
    source_ref: SourceRef


class _NeverRuns:
    """Lane module for resolution tests only: nothing here executes a lane."""

    def __init__(self, lane: LaneSpec, options: dict[str, Any]) -> None:
        self.options = options


NEVER_RUNS = LaneModules(extract=_NeverRuns, merge=_NeverRuns, normalize=_NeverRuns)
THINGS_LANE = LaneSpec(
    lane_id="things",
    kind="test/evidence-plural",
    schema_id="test.evidence_plural",
    record_model=Thing,
    answer=AnswerSpec("ThingAnswer"),
    modules=NEVER_RUNS,
)
SCENES_LANE = LaneSpec(
    lane_id="scenes",
    kind="test/evidence-scene",
    schema_id="test.evidence_scene",
    record_model=Scene,
    refs_field="source_ref",
    answer=AnswerSpec("SceneAnswer"),
    modules=NEVER_RUNS,
)
REGISTRY = registry().with_lanes(THINGS_LANE, SCENES_LANE)
KINDS = REGISTRY.kinds()
PLURAL = THINGS_LANE.artifact_kind
SCENES = SCENES_LANE.artifact_kind
ThingList = THINGS_LANE.list_model
SceneList = SCENES_LANE.list_model

TEXTS = [f"secret line number {i} said aloud" for i in range(10)]


# --- helpers


def things(lane_id: str, refs: list[tuple[int, int]], source_id: str = "s1") -> LaneResult:
    payload = ThingList(
        source_id=source_id,
        things=[
            Thing(
                name=f"thing-{i}",
                source_refs=[SourceRef(source_id=source_id, start_unit_id=s, end_unit_id=e)],
            )
            for i, (s, e) in enumerate(refs)
        ],
    ).model_dump(mode="json")
    return LaneResult(
        lane_id=lane_id,
        kind=PLURAL.kind,
        status="accepted",
        payload=payload,
        stats=LaneStats(records=len(refs)),
    )


def scenes(lane_id: str, refs: list[tuple[int, int]]) -> LaneResult:
    payload = SceneList(
        source_id="s1",
        scenes=[
            Scene(
                summary=f"scene {i}",
                source_ref=SourceRef(source_id="s1", start_unit_id=s, end_unit_id=e),
            )
            for i, (s, e) in enumerate(refs)
        ],
    ).model_dump(mode="json")
    return LaneResult(
        lane_id=lane_id,
        kind=SCENES.kind,
        status="accepted",
        payload=payload,
        stats=LaneStats(records=len(refs)),
    )


def rejected(lane_id: str) -> LaneResult:
    return LaneResult(lane_id=lane_id, kind=PLURAL.kind, status="rejected", payload=None)


def unit_ids(evidence: EvidenceContext) -> list[list[int]]:
    return [[u.unit_id for u in c.units] for c in evidence.contexts]


def direct(evidence: EvidenceContext) -> list[list[tuple[int, int, tuple[str, ...]]]]:
    return [
        [(r.source_ref.start_unit_id, r.source_ref.end_unit_id, r.lanes) for r in c.references]
        for c in evidence.contexts
    ]


def build(
    document: SourceDocument, results: list[LaneResult], lanes: list[str], window: int = 1
) -> EvidenceContext:
    return build_evidence_context(document, results, lanes=lanes, window_units=window, kinds=KINDS)


def profile(
    evidence: dict[str, Any] | None = None, lanes: tuple[str, ...] = ("things", "scenes")
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "version": 1,
        "pipeline": {
            "id": "p1",
            "llm_profile": "test-double",
            "lanes": [{"id": lane} for lane in lanes],
        },
    }
    if evidence is not None:
        data["pipeline"]["output"] = {"module": "json", "options": {"evidence_context": evidence}}
    return data


def resolve(data: dict[str, Any], **kwargs: Any) -> ResolvedPipeline:
    parsed = parse_profile(data, profile_name="p.yaml")
    return resolve_pipeline(
        parsed, profile_name="p.yaml", base_dir=Path("."), registry=REGISTRY, **kwargs
    )


def resolution_error(data: dict[str, Any], **kwargs: Any) -> ProfileError:
    with pytest.raises(ProfileError) as info:
        resolve(data, **kwargs)
    return info.value


def options_error(options: dict[str, Any]) -> str:
    with pytest.raises(ValueError) as info:
        validate_output_options(
            options,
            configured_lanes={"things": PLURAL.kind},
            fail=lambda key, msg: ValueError(f"{key}: {msg}"),
        )
    return str(info.value)


def published_files(evidence: EvidenceContext | None, results: list[LaneResult]) -> dict[str, Any]:
    """The logical files of a bundle, assembled the way the bundle asset does it."""
    document = make_document(texts=TEXTS)
    pipeline = resolve(profile(lanes=("things", "scenes")))
    chunk_map = ChunkMap(
        source_id="s1",
        source_digest=document.digest,
        chunker="generic",
        chunks=(make_chunk(document, 0, document.units),),
    )
    chunks = ChunkResult(chunk_map=chunk_map)
    manifest = build_manifest(
        run_id="r1",
        session_id="s1",
        pipeline=pipeline,
        document=document,
        chunk_result=chunks,
        lane_results=results,
        started_at="t0",
        completed_at="t1",
        wall_time_s=1.0,
        evidence_enabled=False,
        kinds=KINDS,
    )
    files = assemble_bundle(
        manifest=manifest,
        chunk_result=chunks,
        lane_results=results,
        evidence_context=evidence,
        kinds=KINDS,
    )
    return {name: json.loads(data) for name, data in encode_bundle(files).items()}


@contextmanager
def invocation() -> Iterator[AssetExecutionContext]:
    """A context for invoking an asset directly, on an ephemeral instance disposed afterwards."""
    with (
        DagsterInstance.ephemeral() as instance,
        build_asset_context(partition_key="s1", instance=instance) as context,
    ):
        yield context


@pytest.fixture
def document() -> SourceDocument:
    return make_document(texts=TEXTS)


# --- Evidence publication is disabled by default and leaves existing bundles unchanged.


def test_evidence_publication_is_disabled_by_default() -> None:
    pipeline = resolve(profile())
    assert pipeline.output_options == {"evidence_context": None}
    assert build_evidence_context_asset(pipeline, REGISTRY) is None


def test_enabled_false_is_the_same_as_absent() -> None:
    pipeline = resolve(profile({"enabled": False}))
    assert pipeline.output_options == {"evidence_context": None}
    assert build_evidence_context_asset(pipeline, REGISTRY) is None


def test_disabled_bundle_has_no_evidence_file_or_descriptor() -> None:
    files = published_files(None, [things("things", [(2, 2)]), scenes("scenes", [(0, 9)])])
    assert sorted(files) == [
        "chunk-map.json",
        "index.json",
        "lanes/scenes.json",
        "lanes/things.json",
        "manifest.json",
        "rejected.json",
        "warnings.json",
    ]
    assert "evidence_context" not in files["index.json"]


def test_enabled_bundle_adds_only_the_evidence_file_and_its_descriptor(
    document: SourceDocument,
) -> None:
    results = [things("things", [(2, 2)]), scenes("scenes", [(0, 9)])]
    evidence = build(document, results, ["things"])
    without = published_files(None, results)
    with_evidence = published_files(evidence, results)
    assert set(with_evidence) - set(without) == {"evidence-context.json"}
    index = dict(with_evidence["index.json"])
    assert index.pop("evidence_context") == EVIDENCE_DESCRIPTOR
    assert index == without["index.json"]
    for name in without:
        if name != "index.json":
            assert with_evidence[name] == without[name], name


# --- Enabling it requires an explicit non-empty lane allowlist.


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"evidence_context": {"enabled": True}}, "evidence_context.lanes: a non-empty list"),
        (
            {"evidence_context": {"enabled": True, "lanes": []}},
            "evidence_context.lanes: a non-empty",
        ),
        ({"evidence_context": {"enabled": True, "lanes": "things"}}, "evidence_context.lanes:"),
        ({"evidence_context": {"lanes": ["things"]}}, "evidence_context.enabled: required"),
        ({"evidence_context": {"enabled": False, "lanes": ["things"]}}, "not allowed when enabled"),
        ({"evidence_context": {"enabled": False, "window_units": 2}}, "not allowed when enabled"),
        (
            {"evidence_context": {"enabled": True, "lanes": ["things"], "window_units": -1}},
            "window_units: must be a non-negative integer",
        ),
    ],
)
def test_enabling_requires_an_explicit_allowlist(options: dict[str, Any], message: str) -> None:
    assert message in options_error(options)


def test_allowlist_is_trimmed_sorted_and_window_defaults_to_three() -> None:
    pipeline = resolve(profile({"enabled": True, "lanes": [" things", "scenes "]}))
    assert pipeline.output_options == {
        "evidence_context": {"enabled": True, "window_units": 3, "lanes": ["scenes", "things"]}
    }


def test_the_engine_refuses_an_empty_allowlist(document: SourceDocument) -> None:
    with pytest.raises(EvidenceError, match="non-empty lane allowlist"):
        build(document, [things("things", [(1, 1)])], [])


# --- Invalid selected lanes and unsupported artifact kinds fail before execution.


def test_unknown_allowlisted_lane_fails_resolution() -> None:
    err = resolution_error(profile({"enabled": True, "lanes": ["things", "spells"]}))
    assert err.key_path == "pipeline.output.options.evidence_context.lanes[1]"
    assert "not configured" in str(err)


def test_duplicate_allowlisted_lane_fails_resolution() -> None:
    err = resolution_error(profile({"enabled": True, "lanes": ["things", " things"]}))
    assert err.key_path == "pipeline.output.options.evidence_context.lanes[1]"
    assert "duplicate" in str(err)


def test_invocation_lane_filtering_keeps_the_configured_allowlist(document: SourceDocument) -> None:
    pipeline = resolve(
        profile({"enabled": True, "lanes": ["scenes", "things"], "window_units": 0}),
        lanes=["things"],
    )
    asset = build_evidence_context_asset(pipeline, REGISTRY)
    assert asset is not None
    assert set(asset.keys_by_input_name) == {"source_document", "things"}
    evidence = build(document, [things("things", [(4, 4)])], ["scenes", "things"], window=0)
    assert evidence.lanes == ("scenes", "things")
    assert direct(evidence) == [[(4, 4, ("things",))]]


def test_asset_depends_on_the_source_and_only_allowlisted_lanes() -> None:
    pipeline = resolve(profile({"enabled": True, "lanes": ["things"]}))
    asset = build_evidence_context_asset(pipeline, REGISTRY)
    assert asset is not None
    assert asset.key == AssetKey("evidence_context")
    assert set(asset.keys_by_input_name) == {"source_document", "things"}


# --- References from all selected successful lanes contribute to one deduplicated document.


def test_references_from_every_selected_lane_form_one_document(document: SourceDocument) -> None:
    results = [
        things("things", [(2, 2), (8, 8)]),
        things("more-things", [(2, 2), (3, 3)]),
        scenes("scenes", [(5, 6)]),
    ]
    evidence = build(document, results, ["more-things", "scenes", "things"], window=0)
    assert unit_ids(evidence) == [[2, 3], [5, 6], [8]]
    assert direct(evidence) == [
        [(2, 2, ("more-things", "things")), (3, 3, ("more-things",))],
        [(5, 6, ("scenes",))],
        [(8, 8, ("things",))],
    ]
    assert evidence.contributing_lanes() == ["more-things", "scenes", "things"]


def test_a_reference_cited_twice_by_one_lane_appears_once(document: SourceDocument) -> None:
    evidence = build(document, [things("things", [(4, 5), (4, 5)])], ["things"], window=0)
    assert direct(evidence) == [[(4, 5, ("things",))]]


def test_rejected_and_absent_lanes_contribute_nothing(document: SourceDocument) -> None:
    evidence = build(
        document,
        [rejected("more-things"), things("things", [(7, 7)])],
        ["more-things", "scenes", "things"],
        window=0,
    )
    assert evidence.lanes == ("more-things", "scenes", "things")
    assert direct(evidence) == [[(7, 7, ("things",))]]
    assert evidence.contributing_lanes() == ["things"]


def test_lanes_outside_the_allowlist_are_never_read(document: SourceDocument) -> None:
    broken = things("other", [(1, 1)], source_id="another-session")
    evidence = build(document, [broken, things("things", [(7, 7)])], ["things"], window=0)
    assert direct(evidence) == [[(7, 7, ("things",))]]


# --- Non-monotonic unit IDs are expanded and ordered correctly by document position.


def test_non_monotonic_unit_ids_expand_by_position() -> None:
    doc = make_document([50, 3, 99, 7, 20, 1, 64, 2])
    evidence = build(doc, [things("things", [(99, 99)])], ["things"], window=1)
    assert unit_ids(evidence) == [[3, 99, 7]]
    assert (evidence.contexts[0].start_unit_id, evidence.contexts[0].end_unit_id) == (3, 7)


def test_a_range_whose_start_id_is_larger_than_its_end_id_is_valid_by_position() -> None:
    doc = make_document([50, 3, 99, 7, 20, 1, 64, 2])
    evidence = build(doc, [things("things", [(64, 2), (99, 20)])], ["things"], window=0)
    assert unit_ids(evidence) == [[99, 7, 20], [64, 2]]
    assert direct(evidence) == [[(99, 20, ("things",))], [(64, 2, ("things",))]]


def test_contexts_follow_document_order_not_citation_order() -> None:
    doc = make_document([9, 8, 7, 6, 5, 4, 3, 2, 1, 0])
    evidence = build(doc, [things("things", [(1, 1), (8, 8), (4, 4)])], ["things"], window=0)
    assert unit_ids(evidence) == [[8], [4], [1]]


# --- Overlapping windows share one ordered copy of each included source unit.


def test_overlapping_windows_share_one_copy_of_each_unit(document: SourceDocument) -> None:
    evidence = build(
        document,
        [things("things", [(2, 2), (4, 4)]), scenes("scenes", [(3, 3)])],
        ["scenes", "things"],
        window=1,
    )
    assert unit_ids(evidence) == [[1, 2, 3, 4, 5]]
    assert [r[:2] for r in direct(evidence)[0]] == [(2, 2), (3, 3), (4, 4)]


def test_touching_windows_merge_and_separated_windows_do_not(document: SourceDocument) -> None:
    touching = build(document, [things("things", [(1, 1), (4, 4)])], ["things"], window=1)
    assert unit_ids(touching) == [[0, 1, 2, 3, 4, 5]]
    apart = build(document, [things("things", [(1, 1), (5, 5)])], ["things"], window=1)
    assert unit_ids(apart) == [[0, 1, 2], [4, 5, 6]]


def test_a_nested_reference_adds_no_units(document: SourceDocument) -> None:
    evidence = build(document, [things("things", [(3, 6), (4, 4)])], ["things"], window=1)
    assert unit_ids(evidence) == [[2, 3, 4, 5, 6, 7]]
    assert [r[:2] for r in direct(evidence)[0]] == [(3, 6), (4, 4)]


def test_windows_are_clipped_at_the_document_ends(document: SourceDocument) -> None:
    evidence = build(document, [things("things", [(0, 0), (9, 9)])], ["things"], window=3)
    assert unit_ids(evidence) == [[0, 1, 2, 3], [6, 7, 8, 9]]
    everything = build(document, [things("things", [(5, 5)])], ["things"], window=50)
    assert unit_ids(everything) == [list(range(10))]


# --- Direct references remain distinguishable from added context.


def test_direct_references_are_kept_unchanged_beside_their_context(
    document: SourceDocument,
) -> None:
    evidence = build(document, [things("things", [(4, 5)])], ["things"], window=2)
    [context] = evidence.contexts
    assert (context.start_unit_id, context.end_unit_id) == (2, 7)
    [reference] = context.references
    assert reference.source_ref == SourceRef(source_id="s1", start_unit_id=4, end_unit_id=5)
    assert reference.lanes == ("things",)
    cited = {
        u.unit_id
        for u in context.units
        if reference.source_ref.start_unit_id <= u.unit_id <= reference.source_ref.end_unit_id
    }
    assert cited == {4, 5} and len(context.units) == 6


def test_units_keep_kind_text_metadata_and_a_self_reference(document: SourceDocument) -> None:
    evidence = build(document, [things("things", [(3, 3)])], ["things"], window=0)
    [unit] = evidence.contexts[0].units
    assert unit.unit_id == 3 and unit.kind == "utterance" and unit.text == TEXTS[3]
    assert unit.metadata == {"speaker": "Player"}
    assert unit.source_ref == SourceRef(source_id="s1", start_unit_id=3, end_unit_id=3)


def test_document_identifies_its_source_window_and_allowlist(document: SourceDocument) -> None:
    evidence = build(document, [], ["things", "scenes"], window=2)
    assert (evidence.kind, evidence.schema_version) == ("source/evidence-context", "v1")
    assert (evidence.source_id, evidence.source_digest) == ("s1", document.digest)
    assert evidence.window_units == 2 and evidence.lanes == ("scenes", "things")


# --- Scene descriptions cannot contribute unless their lane is explicitly allowlisted.


def test_scene_lane_contributes_nothing_unless_allowlisted(document: SourceDocument) -> None:
    results = [things("things", [(2, 2)]), scenes("scenes", [(0, 9)])]
    without = build(document, results, ["things"], window=0)
    assert unit_ids(without) == [[2]]
    assert "scenes" not in without.contributing_lanes()
    with_scenes = build(document, results, ["scenes", "things"], window=0)
    assert unit_ids(with_scenes) == [list(range(10))]
    assert direct(with_scenes) == [[(0, 9, ("scenes",)), (2, 2, ("things",))]]


def test_a_new_pipeline_lane_does_not_widen_the_evidence(document: SourceDocument) -> None:
    before = build(document, [things("things", [(2, 2)])], ["things"])
    after = build(document, [things("things", [(2, 2)]), things("new-lane", [(8, 8)])], ["things"])
    assert after == before


# --- Invalid accepted references fail output projection rather than being ignored.


@pytest.mark.parametrize(
    ("ref", "problem"),
    [
        (
            SourceRef(source_id="another-session", start_unit_id=1, end_unit_id=1),
            "cites another source document",
        ),
        (SourceRef(source_id="s1", start_unit_id=404, end_unit_id=2), "start unit is not in"),
        (SourceRef(source_id="s1", start_unit_id=2, end_unit_id=404), "end unit is not in"),
        (SourceRef(source_id="s1", start_unit_id=7, end_unit_id=99), "comes after its end unit"),
    ],
)
def test_invalid_accepted_reference_fails_projection(ref: SourceRef, problem: str) -> None:
    doc = make_document([50, 3, 99, 7, 20, 1, 64, 2], texts=TEXTS[:8])
    payload = ThingList(
        source_id="s1",
        things=[
            Thing(
                name="fine",
                source_refs=[SourceRef(source_id="s1", start_unit_id=3, end_unit_id=3), ref],
            )
        ],
    ).model_dump(mode="json")
    bad = LaneResult(lane_id="things", kind=PLURAL.kind, status="accepted", payload=payload)
    with pytest.raises(EvidenceError) as info:
        build(doc, [bad], ["things"])
    message = str(info.value)
    assert "lane 'things' reference 1" in message and problem in message
    assert not any(text in message for text in TEXTS)


def test_accepted_payload_that_does_not_match_its_kind_fails_content_safely(
    document: SourceDocument,
) -> None:
    bad = LaneResult(
        lane_id="things",
        kind=PLURAL.kind,
        status="accepted",
        payload={"kind": "test/evidence-plural", "source_id": "s1", "things": [{"name": TEXTS[0]}]},
    )
    with pytest.raises(EvidenceError, match="does not match artifact kind") as info:
        build(document, [bad], ["things"])
    assert TEXTS[0] not in str(info.value)


def test_evidence_asset_fails_the_run_on_an_invalid_reference() -> None:
    pipeline = resolve(profile({"enabled": True, "lanes": ["things"]}))
    asset = build_evidence_context_asset(pipeline, REGISTRY)
    assert asset is not None
    doc = make_document(texts=TEXTS)
    with invocation() as context, pytest.raises(Failure) as info:
        asset(context, source_document=doc, things=things("things", [(2, 404)]))
    assert "lane 'things' reference 0" in str(info.value.description)


def test_evidence_asset_returns_the_document_with_counts_only() -> None:
    pipeline = resolve(profile({"enabled": True, "lanes": ["things"], "window_units": 1}))
    asset = build_evidence_context_asset(pipeline, REGISTRY)
    assert asset is not None
    doc = make_document(texts=TEXTS)
    with invocation() as context:
        output = asset(context, source_document=doc, things=things("things", [(2, 2), (7, 7)]))
    assert isinstance(output, Output) and isinstance(output.value, EvidenceContext)
    assert unit_ids(output.value) == [[1, 2, 3], [6, 7, 8]]
    meta = {key: getattr(value, "value", value) for key, value in output.metadata.items()}
    assert (meta["contexts"], meta["units"], meta["direct_references"]) == (2, 6, 2)
    assert meta["lanes_contributing"] == ["things"]
    assert not any(text in repr(meta) for text in TEXTS)


# --- Empty selected-lane results produce a valid empty evidence artifact.


def test_empty_selected_results_produce_a_valid_empty_artifact(document: SourceDocument) -> None:
    for results in ([], [things("things", [])], [rejected("things")]):
        evidence = build(document, results, ["things"])
        assert evidence.contexts == ()
        assert evidence.lanes == ("things",)
        jsonschema.validate(evidence.model_dump(mode="json"), SCHEMA)
    files = published_files(build(document, [], ["things"]), [])
    assert files["evidence-context.json"]["contexts"] == []
    assert files["index.json"]["evidence_context"] == EVIDENCE_DESCRIPTOR


# --- Window zero publishes only directly referenced units.


def test_window_zero_publishes_only_directly_referenced_units(document: SourceDocument) -> None:
    evidence = build(document, [things("things", [(2, 3), (6, 6)])], ["things"], window=0)
    assert unit_ids(evidence) == [[2, 3], [6]]
    adjacent = build(document, [things("things", [(2, 3), (4, 4)])], ["things"], window=0)
    assert unit_ids(adjacent) == [[2, 3, 4]]


# --- Determinism.


def test_same_inputs_give_byte_identical_json(document: SourceDocument) -> None:
    a = [
        things("things", [(8, 8), (2, 2)]),
        scenes("scenes", [(4, 5)]),
        things("more-things", [(2, 2)]),
    ]
    first = build(document, a, ["things", "scenes", "more-things"], window=1)
    second = build(document, list(reversed(a)), ["more-things", "scenes", "things"], window=1)
    assert canonical_json(first) == canonical_json(second)
    assert first.model_dump_json() == second.model_dump_json()


def test_stored_value_round_trips_through_json(document: SourceDocument) -> None:
    evidence = build(document, [things("things", [(2, 2)])], ["things"])
    assert EvidenceContext.model_validate_json(evidence.model_dump_json()) == evidence
    assert EvidenceContext.model_validate(evidence.model_dump(mode="json")) == evidence


# --- Existing lane schemas, normalized-output counts and reference semantics do not change.


def test_lane_files_counts_and_manifest_are_the_same_with_evidence(
    document: SourceDocument,
) -> None:
    results = [things("things", [(2, 2), (3, 3)]), scenes("scenes", [(0, 9)])]
    without = published_files(None, results)
    with_evidence = published_files(build(document, results, ["scenes", "things"]), results)
    assert with_evidence["index.json"]["lanes"] == without["index.json"]["lanes"]
    assert [lane["records"] for lane in with_evidence["index.json"]["lanes"]] == [2, 1]
    assert len(with_evidence["manifest.json"]["outputs"]) == 2
    assert with_evidence["lanes/things.json"] == results[0].payload


def test_lane_payloads_are_not_modified_by_projection(document: SourceDocument) -> None:
    results = [things("things", [(2, 2)]), scenes("scenes", [(4, 6)])]
    before = [r.model_dump(mode="json") for r in results]
    build(document, results, ["scenes", "things"], window=4)
    assert [r.model_dump(mode="json") for r in results] == before


def test_dnd_lanes_participate_through_their_registered_projection(
    document: SourceDocument,
) -> None:
    payload = {
        "kind": "dnd/npc-list",
        "schema_version": "v1",
        "source_id": "s1",
        "npcs": [
            {
                "id": "npc-ornna",
                "name": "Ornna",
                "aliases": [],
                "description": "",
                "source_refs": [{"source_id": "s1", "start_unit_id": 5, "end_unit_id": 5}],
            }
        ],
    }
    npcs = LaneResult(lane_id="npcs", kind="dnd/npc-list", status="accepted", payload=payload)
    evidence = build(document, [npcs], ["npcs"], window=1)
    assert unit_ids(evidence) == [[4, 5, 6]]
    assert direct(evidence) == [[(5, 5, ("npcs",))]]


# --- The published contract: schema, discovery.


def test_published_evidence_validates_against_the_checked_in_schema(
    document: SourceDocument,
) -> None:
    results = [things("things", [(2, 2), (7, 8)]), scenes("scenes", [(4, 4)])]
    files = published_files(build(document, results, ["scenes", "things"], window=1), results)
    published = files["evidence-context.json"]
    jsonschema.validate(published, SCHEMA)
    assert published["kind"] == files["index.json"]["evidence_context"]["kind"]
    assert SCHEMA["$id"] == EVIDENCE_DESCRIPTOR["schema_id"]
    assert SCHEMA["title"] == EVIDENCE_DESCRIPTOR["schema_name"]
    assert published["schema_version"] == EVIDENCE_DESCRIPTOR["schema_version"]


def test_schema_rejects_a_document_missing_its_contexts(document: SourceDocument) -> None:
    published = build(document, [], ["things"]).model_dump(mode="json")
    del published["contexts"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(published, SCHEMA)


def test_published_chunk_map_validates_against_the_checked_in_schema() -> None:
    files = published_files(None, [])
    jsonschema.validate(files["chunk-map.json"], CHUNK_MAP_SCHEMA)
    assert CHUNK_MAP_SCHEMA["$id"] == files["index.json"]["chunk_map"]["schema_id"]


def test_checked_in_bundle_schemas_are_current() -> None:
    from notarius_dagster.schemas import stale

    assert not [name for name in stale() if name.startswith("notarius.source.")], (
        "run `python -m notarius_dagster.schemas --write`"
    )


# --- Generic framework and output packages neither depend on D&D types nor parse JSON
# --- heuristically.

GENERIC = [
    REPO / "notarius_dagster" / "engine" / "evidence.py",
    REPO / "notarius_dagster" / "engine" / "bundle_schemas.py",
    REPO / "notarius_dagster" / "engine" / "bundle_assembly.py",
    REPO / "notarius_dagster" / "engine" / "bundle_documents.py",
    REPO / "assets" / "evidence.py",
]


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return names


@pytest.mark.parametrize("path", GENERIC, ids=lambda p: p.name)
def test_generic_evidence_code_does_not_import_dnd(path: Path) -> None:
    assert not [name for name in _imports(path) if "dnd" in name.split(".")]


def test_engine_package_does_not_import_dnd() -> None:
    offenders = [
        f"{path.name}: {name}"
        for path in (REPO / "notarius_dagster" / "engine").rglob("*.py")
        for name in _imports(path)
        if "dnd" in name.split(".")
    ]
    assert offenders == []


def test_importing_the_evidence_projector_loads_no_dnd_module() -> None:
    code = (
        "import sys, notarius_dagster.engine.evidence, notarius_dagster.engine.bundle_schemas;"
        "print(sorted(m for m in sys.modules if '.dnd' in m))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert out.stdout.strip() == "[]"


def test_projector_never_looks_for_reference_fields_in_json() -> None:
    path = REPO / "notarius_dagster" / "engine" / "evidence.py"
    tree = ast.parse(path.read_text())
    literals = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]
    assert not [s for s in literals if "source_ref" in s and "\n" not in s]
    assert "json" not in _imports(path)
    # The only way in is the kind's typed projection.
    assert "project_source_refs" in path.read_text()


# --- End to end: the real asset job, with evidence enabled for the npcs lane.


def test_enabled_profile_publishes_evidence_through_the_asset_job(tmp_path: Path) -> None:
    import yaml

    from notarius_dagster.engine.transcripts import register_transcript
    from notarius_dagster.run.runner import run_session
    from tests.doubles import lane_responder
    from tests.llm_double import scripted_llm

    sample = REPO / "samples" / "crd3-c2e001-slice.jsonl"
    data = yaml.safe_load((REPO / "configs" / "offline.yaml").read_text())
    data["pipeline"]["output"] = {
        "module": "json",
        "options": {"evidence_context": {"enabled": True, "window_units": 1, "lanes": ["npcs"]}},
    }
    profile_path = tmp_path / "evidence.yaml"
    profile_path.write_text(yaml.safe_dump(data))
    register_transcript(tmp_path / "data" / "transcripts", "sample", sample)
    with DagsterInstance.ephemeral() as instance, scripted_llm(lane_responder):
        outcome = run_session(
            session_id="sample",
            profile=profile_path,
            data_root=tmp_path / "data",
            llm_profile="test-double",
            instance=instance,
            quiet=True,
        )
    assert outcome.success, outcome.error
    bundle = tmp_path / "data" / "bundles" / "sample"
    index = json.loads((bundle / "index.json").read_text())
    manifest = json.loads((bundle / "manifest.json").read_text())
    evidence = json.loads((bundle / index["evidence_context"]["file"]).read_text())
    npcs = json.loads((bundle / "lanes" / "npcs.json").read_text())
    jsonschema.validate(evidence, SCHEMA)
    assert index["evidence_context"] == EVIDENCE_DESCRIPTOR
    assert [lane["lane_id"] for lane in index["lanes"]] == ["npcs"]
    assert manifest["evidence_context"] is True and len(manifest["outputs"]) == 1
    cited = sorted(
        {
            (r["source_id"], r["start_unit_id"], r["end_unit_id"])
            for npc in npcs["npcs"]
            for r in npc["source_refs"]
        }
    )
    published = sorted(
        (
            r["source_ref"]["source_id"],
            r["source_ref"]["start_unit_id"],
            r["source_ref"]["end_unit_id"],
        )
        for c in evidence["contexts"]
        for r in c["references"]
    )
    assert cited and published == cited
    texts = {json.loads(line)["text"] for line in sample.read_text().splitlines()}
    assert all(u["text"] in texts for c in evidence["contexts"] for u in c["units"])
    assert str(tmp_path) not in json.dumps(evidence)
