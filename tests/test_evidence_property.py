"""Property: for any document (unique, non-monotonic unit ids), any valid references from any
lanes and any window, the published contexts are exactly the maximal runs of units that lie
within `window` positions of some allowlisted, accepted reference, computed unit by unit."""

from __future__ import annotations

from typing import Literal

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict

from notarius_dagster.engine.artifact_kinds import ArtifactKind
from notarius_dagster.engine.evidence import build_evidence_context
from notarius_dagster.engine.lane_runner import LaneResult
from notarius_dagster.engine.models import SourceRef
from tests.conftest import make_document

LANES = ("alpha", "beta", "gamma", "delta")


class Cited(BaseModel):
    model_config = ConfigDict(extra="forbid")
    source_refs: list[SourceRef]


class CitedList(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["test/evidence-property"] = "test/evidence-property"
    source_id: str
    items: list[Cited]


def _refs(artifact: BaseModel) -> list[SourceRef]:
    assert isinstance(artifact, CitedList)
    return [ref for item in artifact.items for ref in item.source_refs]


KIND = ArtifactKind(
    kind="test/evidence-property",
    model=CitedList,
    schema_id="test.evidence_property",
    schema_name="test_evidence_property_v1",
    schema_version="v1",
    items_field="items",
    project_source_refs=_refs,
)


@st.composite
def scenarios(draw: st.DrawFn) -> dict:
    ids = draw(st.lists(st.integers(-10_000, 10_000), min_size=1, max_size=40, unique=True))
    size = len(ids)
    position = st.integers(0, size - 1)
    ref = st.tuples(position, position).map(lambda p: (min(p), max(p)))
    cited = draw(
        st.dictionaries(st.sampled_from(LANES), st.lists(ref, max_size=6), max_size=len(LANES))
    )
    rejected = draw(st.sets(st.sampled_from(LANES)))
    allowlist = draw(st.lists(st.sampled_from(LANES), min_size=1, unique=True))
    return {
        "ids": ids,
        "cited": cited,
        "rejected": rejected,
        "allowlist": allowlist,
        "window": draw(st.integers(0, 8)),
    }


def lane_result(
    lane: str, refs: list[tuple[int, int]], ids: list[int], rejected: bool
) -> LaneResult:
    if rejected:
        return LaneResult(lane_id=lane, kind=KIND.kind, status="rejected", payload=None)
    payload = CitedList(
        source_id="s1",
        items=[
            Cited(source_refs=[SourceRef(source_id="s1", start_unit_id=ids[s], end_unit_id=ids[e])])
            for s, e in refs
        ],
    )
    return LaneResult(
        lane_id=lane, kind=KIND.kind, status="accepted", payload=payload.model_dump(mode="json")
    )


@settings(max_examples=200, deadline=None)
@given(scenarios())
def test_contexts_equal_the_unit_by_unit_union_of_windows(scenario: dict) -> None:
    ids, window = scenario["ids"], scenario["window"]
    document = make_document(ids)
    results = [
        lane_result(lane, refs, ids, lane in scenario["rejected"])
        for lane, refs in scenario["cited"].items()
    ]
    evidence = build_evidence_context(
        document,
        results,
        lanes=scenario["allowlist"],
        window_units=window,
        kinds={KIND.kind: KIND},
    )

    # Brute force: which lanes cite which (start, end) positions; which positions are in.
    citing: dict[tuple[int, int], set[str]] = {}
    for lane, refs in scenario["cited"].items():
        if lane in scenario["allowlist"] and lane not in scenario["rejected"]:
            for ref in refs:
                citing.setdefault(ref, set()).add(lane)
    included = [any(s - window <= p <= e + window for s, e in citing) for p in range(len(ids))]
    runs: list[list[int]] = []
    for p, inside in enumerate(included):
        if inside and p > 0 and included[p - 1]:
            runs[-1].append(p)
        elif inside:
            runs.append([p])

    assert [[u.unit_id for u in c.units] for c in evidence.contexts] == [
        [ids[p] for p in run] for run in runs
    ]
    published = [u.unit_id for c in evidence.contexts for u in c.units]
    assert len(published) == len(set(published))  # each unit at most once, in document order
    assert [ids.index(u) for u in published] == sorted(ids.index(u) for u in published)
    for context, run in zip(evidence.contexts, runs, strict=True):
        assert (context.start_unit_id, context.end_unit_id) == (ids[run[0]], ids[run[-1]])
        assert all(
            u.source_ref.start_unit_id == u.source_ref.end_unit_id == u.unit_id
            for u in context.units
        )

    # Every direct reference appears exactly once, in the context that covers it, with the
    # lanes that cited it.
    seen: dict[tuple[int, int], tuple[str, ...]] = {}
    for context, run in zip(evidence.contexts, runs, strict=True):
        for reference in context.references:
            key = (
                ids.index(reference.source_ref.start_unit_id),
                ids.index(reference.source_ref.end_unit_id),
            )
            assert key not in seen
            assert run[0] <= key[0] <= key[1] <= run[-1]
            seen[key] = reference.lanes
    assert seen == {key: tuple(sorted(lanes)) for key, lanes in citing.items()}
    assert evidence.lanes == tuple(sorted(scenario["allowlist"]))
