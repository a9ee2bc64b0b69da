"""The evidence context (docs/internals.md, "Evidence context"): the transcript units that
explain what the allowlisted lanes cite, published once, deduplicated, as
`evidence-context.json`.

Domain-neutral on purpose. References reach this module only through each lane's registered
artifact kind (`ArtifactKind.project_source_refs`, a typed projection over the parsed artifact);
payloads are never searched for reference-shaped fields. This module owns what is generic:
validating every reference against the source document, expanding it by document *position*
(never unit-id arithmetic) by `window_units` on each side, clipping at the document's ends and
merging expanded ranges that overlap or touch. Each context then lists the original direct
references it covers (unchanged, with the lanes that cited them) and its units in document
order, each unit once.

An invalid reference is a broken accepted-artifact contract: it raises `EvidenceError` (naming
the lane and the reference's index, never transcript text) and nothing is published."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final, Literal

from pydantic import ConfigDict, Field, ValidationError

from notarius_dagster.engine.artifact_kinds import ArtifactKind
from notarius_dagster.engine.errors import EvidenceError
from notarius_dagster.engine.lane_runner import LaneResult
from notarius_dagster.engine.models import Frozen, SourceDocument, SourceRef

EVIDENCE_KIND: Final = "source/evidence-context"
EVIDENCE_SCHEMA_ID = "notarius.source.evidence_context"
EVIDENCE_SCHEMA_NAME = "notarius_source_evidence_context_v1"
EVIDENCE_SCHEMA_VERSION: Final = "v1"


class _Published(Frozen):
    """Published values: every field is always written, so the schema requires every field."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", json_schema_serialization_defaults_required=True
    )


class EvidenceUnit(_Published):
    """One accepted source unit, as parsed: id, kind, text, metadata (speaker, timestamps, ...)
    and a reference to itself, so a consumer can cite it like any record cites its source."""

    unit_id: int
    kind: str
    text: str
    source_ref: SourceRef = Field(description="the unit itself as a one-unit source reference")
    metadata: dict[str, object] = Field(default_factory=dict)


class DirectReference(_Published):
    """An original source reference of an allowlisted lane's accepted artifact, unchanged,
    with the sorted ids of every lane that cited exactly this range."""

    source_ref: SourceRef
    lanes: tuple[str, ...] = Field(min_length=1)


class EvidenceSpan(_Published):
    """One merged context: the expanded bounds (navigation aids, not citations), the direct
    references it covers (the authoritative evidence) and its units in document order."""

    start_unit_id: int = Field(description="first unit of the expanded range (not a citation)")
    end_unit_id: int = Field(description="last unit of the expanded range (not a citation)")
    references: tuple[DirectReference, ...] = Field(min_length=1)
    units: tuple[EvidenceUnit, ...] = Field(min_length=1)


class EvidenceContext(_Published):
    """The durable `source/evidence-context` document (schema `notarius.source.evidence_context`,
    version v1)."""

    kind: Literal["source/evidence-context"] = EVIDENCE_KIND
    schema_version: Literal["v1"] = EVIDENCE_SCHEMA_VERSION
    source_id: str
    source_digest: str
    window_units: int = Field(ge=0)
    lanes: tuple[str, ...] = Field(
        min_length=1, description="the configured lane allowlist, sorted"
    )
    contexts: tuple[EvidenceSpan, ...] = ()

    def contributing_lanes(self) -> list[str]:
        """Lanes that cited at least one published reference, sorted."""
        return sorted({lane for c in self.contexts for r in c.references for lane in r.lanes})

    def unit_count(self) -> int:
        return sum(len(c.units) for c in self.contexts)

    def reference_count(self) -> int:
        return sum(len(c.references) for c in self.contexts)


def build_evidence_context(
    document: SourceDocument,
    lane_results: Sequence[LaneResult],
    *,
    lanes: Sequence[str],
    window_units: int,
    kinds: Mapping[str, ArtifactKind],
) -> EvidenceContext:
    """Project the accepted artifacts of the allowlisted `lanes` onto `document`.

    Lanes outside the allowlist, rejected lanes and lanes without a payload contribute nothing;
    allowlisted lanes absent from `lane_results` contribute nothing either, but the allowlist is
    recorded in full. Same inputs, same document (field for field)."""
    allowlist = _allowlist(lanes)
    if isinstance(window_units, bool) or not isinstance(window_units, int) or window_units < 0:
        raise EvidenceError("evidence context: window_units must be a non-negative integer")
    positions = document.position_index()
    cited = _collect(document, positions, lane_results, set(allowlist), kinds)
    contexts = tuple(
        _span(document, cited, merged)
        for merged in _expand_and_merge(cited, window_units, len(document.units))
    )
    return EvidenceContext(
        source_id=document.source_id,
        source_digest=document.digest,
        window_units=window_units,
        lanes=allowlist,
        contexts=contexts,
    )


def _allowlist(lanes: Sequence[str]) -> tuple[str, ...]:
    if isinstance(lanes, str) or not lanes:
        raise EvidenceError("evidence context: a non-empty lane allowlist is required")
    if len(set(lanes)) != len(lanes):
        raise EvidenceError("evidence context: the lane allowlist repeats a lane id")
    return tuple(sorted(lanes))


# A validated direct reference: (start position, end position) -> (reference, citing lanes).
_Cited = dict[tuple[int, int], tuple[SourceRef, set[str]]]
# A merged context: first and last position, and the position keys of the references it covers.
_Merged = tuple[int, int, list[tuple[int, int]]]


def _collect(
    document: SourceDocument,
    positions: Mapping[int, int],
    lane_results: Sequence[LaneResult],
    allowed: set[str],
    kinds: Mapping[str, ArtifactKind],
) -> _Cited:
    cited: _Cited = {}
    seen_lanes: set[str] = set()
    for result in lane_results:
        if result.lane_id not in allowed:
            continue
        if result.lane_id in seen_lanes:
            raise EvidenceError(f"evidence context: lane {result.lane_id!r} has two results")
        seen_lanes.add(result.lane_id)
        if result.status != "accepted" or result.payload is None:
            continue  # rejected or absent output: nothing of it is published
        for index, ref in enumerate(_project(result, kinds.get(result.kind))):
            key = _validate(document, positions, ref, result.lane_id, index)
            entry = cited.setdefault(key, (ref, set()))
            entry[1].add(result.lane_id)
    return cited


def _project(result: LaneResult, kind: ArtifactKind | None) -> list[SourceRef]:
    """Direct references of a lane's accepted artifact, through its kind's typed projection.
    Defensive copies: nothing downstream shares objects with the lane's value."""
    lane = result.lane_id
    if kind is None:
        raise EvidenceError(f"evidence context: lane {lane!r} has an unregistered artifact kind")
    try:
        artifact = result.artifact(kind)
    except ValidationError:
        # The validation message may quote payload values: never repeat it.
        raise EvidenceError(
            f"evidence context: lane {lane!r}: the accepted payload does not "
            f"match artifact kind {result.kind!r}"
        ) from None
    assert artifact is not None  # accepted lanes only
    refs: Iterable[object] = kind.project_source_refs(artifact)
    out: list[SourceRef] = []
    for index, ref in enumerate(refs):
        if not isinstance(ref, SourceRef):
            raise EvidenceError(
                f"evidence context: lane {lane!r} reference {index}: the "
                "projection yielded something that is not a source reference"
            )
        out.append(ref.model_copy())
    return out


def _validate(
    document: SourceDocument, positions: Mapping[int, int], ref: SourceRef, lane: str, index: int
) -> tuple[int, int]:
    where = f"evidence context: lane {lane!r} reference {index}"
    if ref.source_id != document.source_id:
        raise EvidenceError(f"{where} cites another source document; nothing was published")
    start = positions.get(ref.start_unit_id)
    end = positions.get(ref.end_unit_id)
    if start is None:
        raise EvidenceError(
            f"{where}: its start unit is not in the source document; nothing was published"
        )
    if end is None:
        raise EvidenceError(
            f"{where}: its end unit is not in the source document; nothing was published"
        )
    if start > end:
        raise EvidenceError(
            f"{where}: its start unit comes after its end unit in the source "
            "document; nothing was published"
        )
    return start, end


def _expand_and_merge(cited: _Cited, window: int, size: int) -> list[_Merged]:
    """Expanded position ranges, clipped, merged when they overlap or touch, in document
    order, each with the (start, end) positions of the direct references it covers. Sorting
    by start position also sorts the expanded starts, so one pass merges everything."""
    merged: list[_Merged] = []
    for start, end in sorted(cited):
        lo, hi = max(0, start - window), min(size - 1, end + window)
        if merged and lo <= merged[-1][1] + 1:
            last_lo, last_hi, keys = merged[-1]
            merged[-1] = (last_lo, max(last_hi, hi), [*keys, (start, end)])
        else:
            merged.append((lo, hi, [(start, end)]))
    return merged


def _span(document: SourceDocument, cited: _Cited, merged: _Merged) -> EvidenceSpan:
    lo, hi, keys = merged
    units = document.units[lo : hi + 1]
    return EvidenceSpan(
        start_unit_id=units[0].unit_id,
        end_unit_id=units[-1].unit_id,
        references=tuple(
            DirectReference(source_ref=cited[key][0], lanes=tuple(sorted(cited[key][1])))
            for key in keys
        ),
        units=tuple(
            EvidenceUnit(
                unit_id=u.unit_id,
                kind=u.kind,
                text=u.text,
                source_ref=SourceRef(
                    source_id=document.source_id, start_unit_id=u.unit_id, end_unit_id=u.unit_id
                ),
                metadata=dict(u.metadata),
            )
            for u in units
        ),
    )
