"""Scores a published bundle against a gold file, per lane: precision, recall and F1 of the
records by name, the same with grounding (a match must cite mostly units of its gold record),
and citation precision. Domain-neutral: what a lane's records are matched on comes from a table
of `MatchFields` per artifact kind, passed in by the caller (each domain provides its own).

How it is computed by the default scorer, `v2` (docs/evaluation.md says the same for readers):

- Names are compared after `normalize_name` (case, diacritics, possessives, punctuation,
  whitespace and a leading article do not count). A predicted record is matched on its own
  name only (its match field); a gold record's names are its match field (a string or a list
  of spellings) plus its `aliases`. The prediction's own aliases never count: a junk record
  listing every gold name as an alias must not match them. Two records *name-match* when the
  prediction's name is one of the gold record's and every secondary field
  (`MatchFields.also`) that both records set agrees.
- Cited units of a predicted record: every unit its references cover, ranges expanded by
  document position (the bundle's chunk map gives the order). A prediction is *grounded* in a
  gold record when at least `GROUNDED_MIN_PRECISION` (half) of its cited units are that gold
  record's units: citing the whole transcript is not grounding.
- One-to-one kinds: an optimal matching (maximum cardinality, then the most shared units;
  `max_weight_matching`), so the figures never depend on record order. The *grounded*
  matching is a second, separate matching over grounded pairs only.
- Many-to-one kinds (one record per chunk, where one gold record spans several chunks): a gold
  record may be matched once per chunk of the bundle's chunk map that its units touch, by a
  prediction from that chunk (the chunk holding the prediction's citations). So a second
  report of one gold record from the same chunk is a duplicate (a false positive), and a
  prediction from a chunk the gold record does not touch matches nothing (a scene is matched by
  kind and span). Recall counts the gold records an optimal one-to-one matching covers.
- P = matched predicted / predicted, R = matched gold / gold, F1 = 2PR / (P + R). P is null
  with no predictions, R null with no gold records; F1 is 0 when exactly one side is empty
  and null when both are (nothing to measure).
- Citation precision, over the name-matched pairs: the share of their cited units that are
  among the matched gold record's `unit_ids` (summed over pairs, so micro-averaged).
- A lane in the gold but not in the bundle (rejected, or not in the profile) is scored as an
  empty prediction, never skipped; a lane in the bundle but not in the gold is listed and
  left out of the totals. Totals are micro-averaged: counts summed over the gold's lanes.

The previous scorer, `v1` (greedy matching in bundle order, the prediction's aliases counted,
grounding = one shared unit, many-to-one without limit), stays selectable for one release
(`scorer="v1"`, `notarius eval --scorer v1`) so earlier figures can be reproduced.

Errors name the bundle folder, the file and the key path, never a value taken from them."""

from __future__ import annotations

import dataclasses
import json
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field

from notarius_dagster.engine.errors import NotariusError
from notarius_dagster.engine.gold import GoldFile, GoldRecord, gold_schema, load_gold

REPORT_SCHEMA_ID = "notarius.eval.report"
REPORT_SCHEMA_NAME = "notarius_eval_report_v1"
ROUND_TO = 4

Scorer = Literal["v1", "v2"]
"""`v2`: the scorer described above (the default); `v1`: the previous one, kept for one release
so figures recorded with it can be reproduced."""
SCORERS: tuple[Scorer, ...] = ("v1", "v2")
DEFAULT_SCORER: Scorer = "v2"
GROUNDED_MIN_PRECISION = 0.5
"""v2: the least share of a prediction's cited units that must be its gold record's units for
the pair to count as grounded."""


class EvaluationError(NotariusError):
    """A bundle cannot be scored against a gold file (unreadable, or made from another
    transcript); the message names files and key paths only."""


# --- what a lane is matched on ---------------------------------------------------------------


@dataclass(frozen=True)
class MatchFields:
    """How records of one artifact kind are matched against gold records.

    `items`: the list field of the lane document; `name`: the field compared by name (both
    sides); `aliases`: the predicted record's list of other names, if the kind has one (gold
    records may always carry `aliases`); `also`: secondary fields compared when both records
    set them; `refs`: the field holding the record's citations (one reference or a list);
    `many_to_one`: several predicted records may match the same gold record."""

    items: str
    name: str
    aliases: str | None = None
    also: tuple[str, ...] = ()
    refs: str = "source_refs"
    many_to_one: bool = False


# --- names -----------------------------------------------------------------------------------

_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "`": "'"})
_POSSESSIVE = re.compile(r"(?<=\w)'s\b")
_PLURAL_POSSESSIVE = re.compile(r"(?<=s)'(?=\s|$)")
_NOT_WORD = re.compile(r"[^\w\s]|_")
_ARTICLES = frozenset({"the", "a", "an"})


def normalize_name(text: str) -> str:
    """A name as the scorer compares it: diacritics dropped, case-folded, possessive `'s`
    dropped, punctuation turned into spaces, whitespace collapsed, and a leading article
    dropped when other words follow ("The Old Mill's" -> "old mill")."""
    decomposed = unicodedata.normalize("NFKD", text)
    plain = "".join(c for c in decomposed if not unicodedata.combining(c))
    folded = plain.casefold().translate(_QUOTES)
    folded = _PLURAL_POSSESSIVE.sub("", _POSSESSIVE.sub("", folded))
    tokens = _NOT_WORD.sub(" ", folded).split()
    if len(tokens) > 1 and tokens[0] in _ARTICLES:
        tokens = tokens[1:]
    return " ".join(tokens)


def _spellings(value: object) -> set[str]:
    """Normalized spellings of a field value (a string, a number or a list of them)."""
    values = value if isinstance(value, list) else [value]
    out = {normalize_name(str(v)) for v in values if v is not None and not isinstance(v, bool)}
    out.discard("")
    return out


# --- the report ------------------------------------------------------------------------------


class Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Prf(Frozen):
    """Precision, recall and F1 of one matching (null where undefined, see the module doc)."""

    matched_predicted: int = Field(ge=0)
    matched_gold: int = Field(ge=0)
    precision: float | None
    recall: float | None
    f1: float | None


class CitationScore(Frozen):
    """Cited units of name-matched predictions, and how many are the gold record's units."""

    cited_units: int = Field(ge=0)
    supported_units: int = Field(ge=0)
    precision: float | None


LaneStatus = Literal["scored", "missing_from_bundle", "missing_from_gold"]


class LaneScore(Frozen):
    lane_id: str
    kind: str | None
    status: LaneStatus
    bundle_status: str | None = Field(
        description="the lane's status in the manifest (accepted, rejected) or null when the "
        "profile had no such lane"
    )
    predicted: int = Field(ge=0)
    gold: int = Field(ge=0)
    by_name: Prf
    grounded: Prf
    citation: CitationScore


class Totals(Frozen):
    """Micro-averaged over the gold's lanes (lanes missing from the bundle included)."""

    lanes: list[str]
    predicted: int
    gold: int
    by_name: Prf
    grounded: Prf
    citation: CitationScore


class EvaluationReport(Frozen):
    """What `notarius eval --json` prints and the quality check records."""

    report_version: Literal["1"] = "1"
    scorer: Scorer = Field(
        default=DEFAULT_SCORER,
        description="the matching rules the numbers were computed with (docs/evaluation.md)",
    )
    session_id: str
    gold_session_id: str
    source_digest: str | None
    source_checked: bool = Field(description="the gold's source digest equals the bundle's")
    lanes: list[LaneScore]
    totals: Totals


def report_schema() -> dict[str, object]:
    schema = EvaluationReport.model_json_schema()
    schema["$id"] = REPORT_SCHEMA_ID
    schema["title"] = REPORT_SCHEMA_NAME
    return schema


def evaluation_schemas() -> dict[str, dict[str, object]]:
    """Schema id -> JSON Schema of the evaluation documents (gold file, report)."""
    gold = gold_schema()
    return {str(gold["$id"]): gold, REPORT_SCHEMA_ID: report_schema()}


# --- arithmetic ------------------------------------------------------------------------------


def _ratio(num: int, den: int) -> float | None:
    return round(num / den, ROUND_TO) if den else None


def prf(matched_predicted: int, matched_gold: int, predicted: int, gold: int) -> Prf:
    precision = _ratio(matched_predicted, predicted)
    recall = _ratio(matched_gold, gold)
    f1: float | None
    if predicted == 0 and gold == 0:
        f1 = None
    elif predicted == 0 or gold == 0:
        f1 = 0.0
    else:
        p, r = matched_predicted / predicted, matched_gold / gold
        f1 = round(2 * p * r / (p + r), ROUND_TO) if p + r else 0.0
    return Prf(
        matched_predicted=matched_predicted,
        matched_gold=matched_gold,
        precision=precision,
        recall=recall,
        f1=f1,
    )


# --- matching --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Predicted:
    names: frozenset[str]
    also: Mapping[str, frozenset[str]]
    cited: frozenset[int]
    cited_count: int
    chunk: int | None = None
    """v2: the index (in the chunk map) of the chunk the prediction comes from."""


@dataclass(frozen=True)
class _Gold:
    names: frozenset[str]
    also: Mapping[str, frozenset[str]]
    units: frozenset[int]
    chunks: frozenset[int] = frozenset()
    """v2: the chunks (indexes in the chunk map) its units touch."""


def _refs_of(record: Mapping[str, object], refs_field: str) -> list[Mapping[str, object]]:
    value = record.get(refs_field)
    if isinstance(value, Mapping):
        return [value]
    if isinstance(value, list):
        return [r for r in value if isinstance(r, Mapping)]
    return []


def cited_units(
    refs: Iterable[Mapping[str, object]], positions: Mapping[int, int], order: Sequence[int]
) -> list[int]:
    """Every unit the references cover, in citation order without repeats. A range is
    resolved by document position; a reference whose endpoints are not both in the document,
    or that runs backwards, counts only its endpoints (they cannot be gold units)."""
    out: dict[int, None] = {}
    for ref in refs:
        start, end = ref.get("start_unit_id"), ref.get("end_unit_id")
        if not isinstance(start, int) or not isinstance(end, int):
            continue
        a, b = positions.get(start), positions.get(end)
        if a is None or b is None or a > b:
            out.update({start: None, end: None})
        else:
            out.update(dict.fromkeys(order[a : b + 1]))
    return list(out)


@dataclass(frozen=True)
class _Chunks:
    """The bundle's chunks as unit sets, and for each unit the chunks that hold it. Without a
    chunk map the whole document is one chunk."""

    units: tuple[frozenset[int], ...]
    of_unit: Mapping[int, tuple[int, ...]]

    @classmethod
    def of(cls, chunks: Sequence[Sequence[int]], order: Sequence[int]) -> _Chunks:
        sets = tuple(frozenset(c) for c in chunks) or (frozenset(order),)
        of_unit: dict[int, list[int]] = {}
        for index, units in enumerate(sets):
            for unit in units:
                of_unit.setdefault(unit, []).append(index)
        return cls(sets, {u: tuple(c) for u, c in of_unit.items()})

    def source(self, cited: Sequence[int], positions: Mapping[int, int]) -> int | None:
        """The chunk a prediction comes from: of the chunks holding its first cited unit (by
        document position), the first that holds all its cited units, else the first."""
        inside = [u for u in cited if u in positions]
        if not inside:
            return None
        first = min(inside, key=positions.__getitem__)
        candidates = self.of_unit.get(first, ())
        whole = set(inside)
        holding = [c for c in candidates if whole <= self.units[c]]
        if holding:
            return holding[0]
        return candidates[0] if candidates else None

    def touched(self, units: Iterable[int]) -> frozenset[int]:
        return frozenset(c for u in units for c in self.of_unit.get(u, ()))


def _predicted(
    record: Mapping[str, object],
    fields: MatchFields,
    positions: Mapping[int, int],
    order: Sequence[int],
    scorer: Scorer,
    chunks: _Chunks,
) -> _Predicted:
    names = _spellings(record.get(fields.name))
    if fields.aliases and scorer == "v1":
        names |= _spellings(record.get(fields.aliases) or [])
    cited = cited_units(_refs_of(record, fields.refs), positions, order)
    also = {f: frozenset(_spellings(record.get(f))) for f in fields.also}
    chunk = chunks.source(cited, positions) if scorer == "v2" else None
    return _Predicted(frozenset(names), also, frozenset(cited), len(cited), chunk)


def _gold(record: GoldRecord, fields: MatchFields, chunks: _Chunks) -> _Gold:
    names = _spellings(record.value(fields.name)) | _spellings(record.aliases)
    if fields.aliases and fields.aliases != "aliases":
        names |= _spellings(record.value(fields.aliases))
    also = {f: frozenset(_spellings(record.value(f))) for f in fields.also}
    units = frozenset(record.unit_ids)
    return _Gold(frozenset(names), also, units, chunks.touched(units))


def _name_match(p: _Predicted, g: _Gold) -> bool:
    if not p.names & g.names:
        return False
    # A secondary field is compared when both sides say something: silence is not a
    # contradiction, a different value is.
    return all(not p.also[f] or not g.also[f] or bool(p.also[f] & g.also[f]) for f in g.also)


def _match_v1(
    predicted: Sequence[_Predicted], gold: Sequence[_Gold], *, grounded: bool, many_to_one: bool
) -> list[tuple[int, int]]:
    """The v1 matching: greedy in bundle order, each prediction taking the name-matching gold
    record that shares the most units with it (ties: the earliest); grounded = one shared
    unit; many-to-one without limit."""
    taken: set[int] = set()
    pairs: list[tuple[int, int]] = []
    for i, p in enumerate(predicted):
        best: tuple[int, int] | None = None  # (shared units, -gold index)
        for j, g in enumerate(gold):
            if (j in taken and not many_to_one) or not _name_match(p, g):
                continue
            shared = len(p.cited & g.units)
            if grounded and shared == 0:
                continue
            if best is None or (shared, -j) > best:
                best = (shared, -j)
        if best is not None:
            j = -best[1]
            pairs.append((i, j))
            taken.add(j)
    return pairs


def max_weight_matching(weights: Mapping[tuple[int, int], int]) -> list[tuple[int, int]]:
    """A maximum-weight matching of a bipartite graph given as `(left, right) -> weight`
    (weights > 0; a missing pair is no edge): the Hungarian algorithm with potentials,
    O(n^2 m) on the vertices that have an edge. The standard library has no assignment
    solver and scipy is not a dependency; the graphs here are a lane's records (tens to a few
    hundred), so this is milliseconds. Returned pairs are sorted."""
    if not weights:
        return []
    rows = sorted({i for i, _ in weights})
    cols = sorted({j for _, j in weights})
    transpose = len(rows) > len(cols)
    if transpose:
        rows, cols = cols, rows
    n, m = len(rows), len(cols)

    def cost(r: int, c: int) -> int:
        key = (cols[c], rows[r]) if transpose else (rows[r], cols[c])
        return -weights.get(key, 0)

    inf = float("inf")
    u = [0.0] * (n + 1)
    v = [0.0] * (m + 1)
    owner = [0] * (m + 1)  # owner[j]: the row (1-based) assigned to column j, 0 = none
    way = [0] * (m + 1)
    for i in range(1, n + 1):
        owner[0] = i
        j0 = 0
        minv = [inf] * (m + 1)
        used = [False] * (m + 1)
        while True:
            used[j0] = True
            i0, delta, j1 = owner[j0], inf, 0
            for j in range(1, m + 1):
                if used[j]:
                    continue
                cur = cost(i0 - 1, j - 1) - u[i0] - v[j]
                if cur < minv[j]:
                    minv[j], way[j] = cur, j0
                if minv[j] < delta:
                    delta, j1 = minv[j], j
            for j in range(m + 1):
                if used[j]:
                    u[owner[j]] += delta
                    v[j] -= delta
                else:
                    minv[j] -= delta
            j0 = j1
            if owner[j0] == 0:
                break
        while j0:
            j1 = way[j0]
            owner[j0] = owner[j1]
            j0 = j1
    pairs = []
    for j in range(1, m + 1):
        if owner[j]:
            r, c = rows[owner[j] - 1], cols[j - 1]
            pair = (c, r) if transpose else (r, c)
            if pair in weights:
                pairs.append(pair)
    return sorted(pairs)


def _grounded(p: _Predicted, g: _Gold) -> bool:
    """v2: at least `GROUNDED_MIN_PRECISION` of the prediction's cited units are the gold
    record's."""
    return p.cited_count > 0 and len(p.cited & g.units) >= GROUNDED_MIN_PRECISION * p.cited_count


def _match_v2(
    predicted: Sequence[_Predicted], gold: Sequence[_Gold], *, grounded: bool, many_to_one: bool
) -> tuple[list[tuple[int, int]], int]:
    """(predicted index, gold index) pairs of the optimal matching, and how many gold records
    it matches (see the module docstring)."""
    edges = [
        (i, j)
        for i, p in enumerate(predicted)
        for j, g in enumerate(gold)
        if _name_match(p, g)
        and (not many_to_one or p.chunk in g.chunks)
        and (not grounded or _grounded(p, g))
    ]
    # Cardinality first (each edge outweighs every possible sum of shared units), then the
    # pairing whose citations share the most units with their gold records.
    big = 1 + sum(p.cited_count for p in predicted)
    shared = {(i, j): big + len(predicted[i].cited & gold[j].units) for i, j in edges}
    if not many_to_one:
        pairs = max_weight_matching(shared)
        return pairs, len(pairs)
    # A gold record offers one slot per chunk it touches; a prediction can take the slot of
    # its own chunk. Recall: the gold records a one-to-one matching over the same pairs covers.
    slots = sorted({(j, predicted[i].chunk) for i, j in edges})
    slot_index = {slot: k for k, slot in enumerate(slots)}
    by_slot = {(i, slot_index[(j, predicted[i].chunk)]): w for (i, j), w in shared.items()}
    pairs = [(i, slots[k][0]) for i, k in max_weight_matching(by_slot)]
    covered = max_weight_matching(dict.fromkeys(shared, 1))
    return pairs, len(covered)


@dataclass(frozen=True)
class Matched:
    """What one matching paired: predicted records matched, and gold records matched (in a
    `many_to_one` kind a gold record taken several times counts once)."""

    predicted: int = 0
    gold: int = 0

    @classmethod
    def of(cls, pairs: Sequence[tuple[int, int]]) -> Matched:
        return cls(predicted=len(pairs), gold=len({j for _, j in pairs}))

    def __add__(self, other: Matched) -> Matched:
        return Matched(self.predicted + other.predicted, self.gold + other.gold)

    def prf(self, predicted: int, gold: int) -> Prf:
        return prf(self.predicted, self.gold, predicted, gold)


@dataclass(frozen=True)
class LaneCounts:
    """Summable counts of one lane (or of the totals): the records on each side, what the
    name and the grounded matching paired, and the units the name-matched predictions cite
    (`cited`) with how many of those are their gold record's (`supported`)."""

    predicted: int = 0
    gold: int = 0
    by_name: Matched = Matched()
    grounded: Matched = Matched()
    cited: int = 0
    supported: int = 0

    def __add__(self, other: LaneCounts) -> LaneCounts:
        names = [f.name for f in dataclasses.fields(self)]
        return LaneCounts(*(getattr(self, name) + getattr(other, name) for name in names))

    def report_fields(self, *, scored: bool = True) -> ReportFields:
        """What a lane row and the totals both publish: the record counts and the three scores
        (`scored=False`, a lane the gold does not have: every score empty)."""
        if scored:
            by_name = self.by_name.prf(self.predicted, self.gold)
            grounded = self.grounded.prf(self.predicted, self.gold)
            citation = CitationScore(
                cited_units=self.cited,
                supported_units=self.supported,
                precision=_ratio(self.supported, self.cited),
            )
        else:
            by_name = grounded = Matched().prf(0, 0)
            citation = CitationScore(cited_units=0, supported_units=0, precision=None)
        return {
            "predicted": self.predicted,
            "gold": self.gold,
            "by_name": by_name,
            "grounded": grounded,
            "citation": citation,
        }


class ReportFields(TypedDict):
    """What a lane row and the totals both publish (`LaneCounts.report_fields`)."""

    predicted: int
    gold: int
    by_name: Prf
    grounded: Prf
    citation: CitationScore


def count_lane(
    records: Sequence[Mapping[str, object]],
    gold: Sequence[GoldRecord],
    fields: MatchFields,
    order: Sequence[int],
    *,
    chunks: Sequence[Sequence[int]] = (),
    scorer: Scorer = DEFAULT_SCORER,
) -> LaneCounts:
    """The counts of one lane: predicted records (in bundle order) against gold records;
    `chunks` (the chunk map's unit ids per chunk) place the records of many-to-one kinds."""
    positions = {unit: pos for pos, unit in enumerate(order)}
    placed = _Chunks.of(chunks, order)
    preds = [_predicted(r, fields, positions, order, scorer, placed) for r in records]
    golds = [_gold(g, fields, placed) for g in gold]
    many = fields.many_to_one
    if scorer == "v1":
        by_name = _match_v1(preds, golds, grounded=False, many_to_one=many)
        grounded = _match_v1(preds, golds, grounded=True, many_to_one=many)
        name_counts, grounded_counts = Matched.of(by_name), Matched.of(grounded)
    else:
        by_name, name_gold = _match_v2(preds, golds, grounded=False, many_to_one=many)
        grounded, grounded_gold = _match_v2(preds, golds, grounded=True, many_to_one=many)
        name_counts = Matched(predicted=len(by_name), gold=name_gold)
        grounded_counts = Matched(predicted=len(grounded), gold=grounded_gold)
    return LaneCounts(
        predicted=len(preds),
        gold=len(golds),
        by_name=name_counts,
        grounded=grounded_counts,
        cited=sum(preds[i].cited_count for i, _ in by_name),
        supported=sum(len(preds[i].cited & golds[j].units) for i, j in by_name),
    )


# --- the bundle ------------------------------------------------------------------------------


@dataclass(frozen=True)
class BundleLane:
    lane_id: str
    kind: str
    records: list[Mapping[str, object]]


@dataclass(frozen=True)
class BundleView:
    """What the scorer reads from a published bundle (resolved once, read consistently)."""

    name: str
    session_id: str
    source_digest: str | None
    order: list[int]
    lanes: dict[str, BundleLane]
    lane_status: dict[str, tuple[str | None, str]] = field(default_factory=dict)
    """lane id -> (kind, manifest status) for every lane the manifest lists."""
    chunks: list[list[int]] = field(default_factory=list)
    """The unit ids of each chunk of the chunk map, in its order (empty: no chunk map)."""


def _read_json(folder: Path, rel: str, name: str) -> Any:
    if Path(rel).is_absolute() or ".." in Path(rel).parts:
        raise EvaluationError(f"bundle {name!r}: index.json names a file outside the bundle")
    path = folder / rel
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise EvaluationError(f"bundle {name!r}: {rel} is missing") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise EvaluationError(
            f"bundle {name!r}: {rel} cannot be read ({type(exc).__name__})"
        ) from None
    except ValueError:
        raise EvaluationError(f"bundle {name!r}: {rel} is not valid JSON") from None


def load_bundle(path: Path, match_fields: Mapping[str, MatchFields]) -> BundleView:
    """Read a published bundle through its index.json. The session's symlink is resolved once,
    so every file comes from the same version. Lanes of kinds without match fields are kept
    out (the scorer reports them as not in the table, if the gold has them)."""
    name = path.name
    folder = path.resolve()
    if not (folder / "index.json").is_file():
        raise EvaluationError(
            f"bundle {name!r}: index.json is missing (not a published bundle folder)"
        )
    index = _read_json(folder, "index.json", name)
    if not isinstance(index, dict) or not isinstance(index.get("lanes"), list):
        raise EvaluationError(f"bundle {name!r}: index.json has no 'lanes' list")
    manifest_rel = str((index.get("files") or {}).get("manifest") or "manifest.json")
    manifest = _read_json(folder, manifest_rel, name) if (folder / manifest_rel).is_file() else {}
    order: list[int] = []
    chunk_units: list[list[int]] = []
    chunk_map = index.get("chunk_map")
    if isinstance(chunk_map, dict) and chunk_map.get("file"):
        rel = str(chunk_map["file"])
        chunk_doc = _read_json(folder, rel, name)
        chunks = chunk_doc.get("chunks") if isinstance(chunk_doc, dict) else None
        if not isinstance(chunks, list):
            raise EvaluationError(f"bundle {name!r}: {rel} has no 'chunks' list")
        seen: set[int] = set()
        for chunk in chunks:
            units = [
                u
                for u in (chunk.get("unit_ids", []) if isinstance(chunk, dict) else [])
                if isinstance(u, int)
            ]
            chunk_units.append(units)
            for unit in units:
                if unit not in seen:
                    seen.add(unit)
                    order.append(unit)
    lanes: dict[str, BundleLane] = {}
    for position, raw in enumerate(index["lanes"]):
        entry: dict[str, object] = raw if isinstance(raw, dict) else {}
        values = [entry.get(key) for key in ("lane_id", "kind", "file")]
        if not all(isinstance(v, str) and v for v in values):
            raise EvaluationError(
                f"bundle {name!r}: index.json lanes[{position}] lacks lane_id, kind or file"
            )
        lane_id, kind, rel = (str(v) for v in values)
        document = _read_json(folder, rel, name)
        fields = match_fields.get(kind)
        items: Any = []
        if fields is not None:
            items = document.get(fields.items) if isinstance(document, dict) else None
            if not isinstance(items, list):
                raise EvaluationError(f"bundle {name!r}: {rel} has no {fields.items!r} list")
        lanes[lane_id] = BundleLane(lane_id, kind, [r for r in items if isinstance(r, dict)])
    status: dict[str, tuple[str | None, str]] = {}
    for lane in (manifest.get("artifact_lanes") or []) if isinstance(manifest, dict) else []:
        if isinstance(lane, dict) and isinstance(lane.get("lane_id"), str):
            status[lane["lane_id"]] = (lane.get("kind"), str(lane.get("status")))
    return BundleView(
        name=name,
        session_id=str(index.get("session_id", "")),
        source_digest=index.get("source_digest"),
        order=order,
        lanes=lanes,
        lane_status=status,
        chunks=chunk_units,
    )


# --- scoring ---------------------------------------------------------------------------------


def _lane_score(
    lane_id: str,
    kind: str | None,
    status: LaneStatus,
    bundle_status: str | None,
    counts: LaneCounts,
    *,
    scored: bool = True,
) -> LaneScore:
    return LaneScore(
        lane_id=lane_id,
        kind=kind,
        status=status,
        bundle_status=bundle_status,
        **counts.report_fields(scored=scored),
    )


def score_bundle(
    bundle: BundleView,
    gold: GoldFile,
    match_fields: Mapping[str, MatchFields],
    gold_name: str = "gold",
    *,
    scorer: Scorer = DEFAULT_SCORER,
) -> EvaluationReport:
    """Score every lane of the gold (and list the bundle's other lanes); see the module doc."""
    checked = False
    if gold.source.digest is not None:
        if bundle.source_digest != gold.source.digest:
            raise EvaluationError(
                f"bundle {bundle.name!r} was made from another transcript than gold "
                f"{gold_name!r} describes (source digest differs)"
            )
        checked = True
    lanes: list[LaneScore] = []
    total = LaneCounts()
    for lane_id in sorted(set(gold.lanes) | set(bundle.lanes)):
        manifest_kind, manifest_status = bundle.lane_status.get(lane_id, (None, None))
        published = bundle.lanes.get(lane_id)
        if lane_id not in gold.lanes:
            assert published is not None
            counts = LaneCounts(predicted=len(published.records))
            lanes.append(
                _lane_score(
                    lane_id,
                    published.kind,
                    "missing_from_gold",
                    manifest_status or "accepted",
                    counts,
                    scored=False,
                )
            )
            continue
        records = gold.lanes[lane_id]
        if published is None:
            counts = LaneCounts(gold=len(records))
            lanes.append(
                _lane_score(lane_id, manifest_kind, "missing_from_bundle", manifest_status, counts)
            )
            total += counts
            continue
        fields = match_fields.get(published.kind)
        if fields is None:
            raise EvaluationError(
                f"gold {gold_name!r}: lanes.{lane_id}: the bundle's kind "
                f"{published.kind!r} has no match fields"
            )
        for position, record in enumerate(records):
            if not _spellings(record.value(fields.name)):
                raise EvaluationError(
                    f"gold {gold_name!r}: lanes.{lane_id}[{position}]: no "
                    f"{fields.name!r} (the lane's match field)"
                )
        counts = count_lane(
            published.records,
            records,
            fields,
            bundle.order,
            chunks=bundle.chunks,
            scorer=scorer,
        )
        lanes.append(
            _lane_score(lane_id, published.kind, "scored", manifest_status or "accepted", counts)
        )
        total += counts
    totals = Totals(lanes=sorted(gold.lanes), **total.report_fields())
    return EvaluationReport(
        scorer=scorer,
        session_id=bundle.session_id,
        gold_session_id=gold.session_id,
        source_digest=bundle.source_digest,
        source_checked=checked,
        lanes=lanes,
        totals=totals,
    )


def evaluate(
    bundle_path: Path,
    gold_path: Path,
    match_fields: Mapping[str, MatchFields],
    *,
    scorer: Scorer = DEFAULT_SCORER,
) -> EvaluationReport:
    """Load both files and score (what the command and the quality check call)."""
    gold = load_gold(gold_path)
    bundle = load_bundle(bundle_path, match_fields)
    return score_bundle(bundle, gold, match_fields, gold_path.name, scorer=scorer)
