"""NPC grounding shared by the lanes that name characters (combat turns, spells, item events,
NPC interactions): a name the model wrote is matched, by canonical name or alias, against the
`npcs` lane's accepted artifact and gets that NPC's id. The model never invents ids; an
unmatched name stays a plain name. Warnings report only a count (names are never logged)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from notarius_dagster.dnd.llm_extract import (
    Converters,
    PayloadWithWarnings,
    ToPayload,
    answer_records,
    canonical_name,
)
from notarius_dagster.dnd.records import one_line
from notarius_dagster.dnd.reference_fingerprints import npcs_of
from notarius_dagster.dnd.roster import (
    drop_dm_labels,
    drop_party_side,
    map_speakers,
    roster_index,
)
from notarius_dagster.engine.contracts import ExtractRequest, ModuleOutput, PreparedReference
from notarius_dagster.engine.lane_models import allows_none
from notarius_dagster.engine.lanes import LaneRule, LaneSpec
from notarius_dagster.engine.models import ReferenceSlot, RunWarning
from notarius_dagster.engine.validators import ValidationContext

NPCS_SLOT = "npcs"
NPC_KIND = "dnd/npc-list"
MAX_CONTEXT_NPCS = 40
Grounded = Sequence[tuple[str, str]]
"""(name field, id field) pairs of a record: grounding fills the id from the name."""


def npcs_slot(*, required: bool = False) -> ReferenceSlot:
    """The `npcs` reference slot of a lane that grounds names (accepts `dnd/npc-list`)."""
    return ReferenceSlot(name=NPCS_SLOT, required=required, accepted_kinds=(NPC_KIND,))


@dataclass(frozen=True)
class NpcIndex:
    """Canonical name -> NPC id. A name shared by two different NPCs is ambiguous and grounds
    to nothing (guessing would put a wrong id on a record)."""

    ids_by_name: Mapping[str, str]
    ambiguous: frozenset[str]
    known_ids: frozenset[str]

    @classmethod
    def of(cls, reference: PreparedReference | None) -> NpcIndex:
        """The index of a bound `npcs` reference's records (empty without one)."""
        by_name: dict[str, str] = {}
        ambiguous: set[str] = set()
        known: set[str] = set()
        for npc in npcs_of(reference):
            npc_id = npc.id
            if not npc_id:
                continue  # an un-normalized NPC has no id to ground to
            known.add(npc_id)
            for name in [npc.name, *npc.aliases]:
                key = canonical_name(name)
                if not key:
                    continue
                if by_name.get(key, npc_id) != npc_id:
                    ambiguous.add(key)
                by_name.setdefault(key, npc_id)
        for key in ambiguous:
            by_name.pop(key, None)
        return cls(ids_by_name=by_name, ambiguous=frozenset(ambiguous), known_ids=frozenset(known))

    def lookup(self, name: str | None) -> str | None:
        """The id of the one NPC this name (or alias) denotes, else None."""
        if not name:
            return None
        return self.ids_by_name.get(canonical_name(name))

    def names(self) -> list[str]:
        """Canonical names known to the index, sorted (for prompt context)."""
        return sorted(self.ids_by_name)


def npc_index(references: Mapping[str, PreparedReference]) -> NpcIndex | None:
    """The index of the bound `npcs` reference, or None when the slot is unbound."""
    ref = references.get(NPCS_SLOT)
    if ref is None:
        return None
    return NpcIndex.of(ref)


def npc_names(references: Mapping[str, object], value: str) -> list[str]:
    """The support validator's known-names hook (`engine/support.py`): when `value` denotes
    exactly one NPC of the bound `npcs` artifact (by name or alias, as grounding matches), that
    NPC's name and aliases, the names a transcript line may call it by. Nothing for a name the
    artifact does not know, an ambiguous one, or without the reference."""
    ref = references.get(NPCS_SLOT)
    if not isinstance(ref, PreparedReference) or ref.artifact is None:
        return []
    npc_id = NpcIndex.of(ref).lookup(value)
    if npc_id is None:
        return []
    for npc in npcs_of(ref):
        if npc.id == npc_id:
            return [n for n in [npc.name, *npc.aliases] if n]
    return []


def ground_names(
    records: Sequence[dict[str, Any]], fields: Sequence[tuple[str, str]], request: ExtractRequest
) -> list[RunWarning]:
    """Fill each `id_field` from its `name_field` in place, from the request's `npcs`
    reference; one count-only warning per extract when some names stayed unmatched. Without
    the reference (slot unbound) ids stay null silently: there was nothing to ground against."""
    index = npc_index(request.context.references)
    unmatched = 0
    for record in records:
        for name_field, id_field in fields:
            name = record.get(name_field)
            npc_id = index.lookup(name) if index is not None else None
            record[id_field] = npc_id
            if index is not None and name and npc_id is None:
                unmatched += 1
    if not unmatched:
        return []
    return [
        RunWarning(
            stage="extract",
            code="npc_unmatched",
            lane=request.context.lane_id,
            chunk_id=request.chunk.chunk_id,
            message=f"{unmatched} name(s) matched no NPC of the npcs reference; "
            "they stay names without an NPC id",
        )
    ]


def grounded_payload(
    fields: Grounded,
    convert: Converters | None = None,
    *,
    name_lists: Sequence[str] = (),
    npc_side: str | None = None,
) -> ToPayload:
    """The conversion of a lane that names characters: the answer's records (`convert` as in
    `answer_records`), then, with a roster bound, the table's rules (`table_rules`), then
    their `fields` grounded against the `npcs` reference."""

    def to_payload(
        lane: LaneSpec, answer: dict[str, Any], request: ExtractRequest
    ) -> PayloadWithWarnings:
        records = answer_records(lane, answer, request, convert)
        records, warnings = table_rules(
            lane, records, request, [name for name, _ in fields], name_lists, npc_side
        )
        warnings += ground_names(records, fields, request)
        return lane.envelope(request.chunk.source_id, records), warnings

    return to_payload


def table_rules(
    lane: LaneSpec,
    records: list[dict[str, Any]],
    request: ExtractRequest,
    names: Sequence[str],
    name_lists: Sequence[str],
    npc_side: str | None,
) -> tuple[list[dict[str, Any]], list[RunWarning]]:
    """With a roster bound: a player's speaker label in a `names` field becomes the character
    (`LAURA` -> `Jester`); the DM's label is never a character (a record whose required name
    is one is dropped, a nullable name becomes null, `name_lists` lose it); and a record whose
    `npc_side` names a party member is dropped (the party never is the NPC of an interaction).
    Drops are counted in warnings, never named. Without a roster: the records as they are."""
    roster = roster_index(request.context.references, request.context.session_id)
    if roster is None:
        return records, []
    map_speakers(records, names, roster)
    lane_id, chunk_id = request.context.lane_id, request.chunk.chunk_id
    nullable = {
        info.alias or key: allows_none(info.annotation)
        for key, info in lane.record_model.model_fields.items()
    }
    records, warnings = drop_dm_labels(
        records,
        roster,
        required=[n for n in names if not nullable.get(n, False)],
        optional=[n for n in names if nullable.get(n, False)],
        lists=name_lists,
        lane=lane_id,
        chunk_id=chunk_id,
    )
    if npc_side is not None:
        records, dropped = drop_party_side(
            records, npc_side, roster, lane=lane_id, chunk_id=chunk_id
        )
        warnings += dropped
    return records, warnings


def known_npcs(request: ExtractRequest) -> str:
    """Prompt context: the names of the bound `npcs` artifact (at most 40, in its order), so
    the model can use the same names that grounding will match: names only, no descriptions,
    each on the one line they share (`one_line`): a name is the model's text, and a line break
    in it would start a line of its own in the prompt (`[3] MATT: ...`, a forged unit marker).
    The record model refuses such names; this holds for an artifact bound from a file too."""
    ref = request.context.references.get(NPCS_SLOT)
    names = [npc.name for npc in npcs_of(ref)]
    shown = [name for name in (one_line(str(n)) for n in names[:MAX_CONTEXT_NPCS]) if name]
    return "; ".join(shown) if shown else "(none known)"


def grounding_rule(fields: Grounded) -> LaneRule:
    """Extract rule `<prefix>.npc_grounding` over `fields` (see `grounding_problems`)."""

    def check(lane: LaneSpec, ctx: ValidationContext, output: ModuleOutput) -> list[str]:
        """A name that matches an NPC of the `npcs` reference carries that NPC's id."""
        return grounding_problems(ctx, output, lane.items_field, fields)

    return LaneRule(stage="extract", name="npc_grounding", check=check)


def grounding_problems(
    ctx: ValidationContext,
    output: ModuleOutput,
    items_field: str,
    fields: Sequence[tuple[str, str]],
) -> list[str]:
    """Lane rule: a name that denotes an NPC of the bound `npcs` artifact carries that NPC's
    id, and every id that is set belongs to that artifact. Problems name record index and
    field, never the name. The validation context carries references only when the engine
    passes them (see `references_of`); without them the rule has nothing to check against."""
    refs = references_of(ctx)
    if refs is None:
        return []
    if NPCS_SLOT not in refs:
        return _ids_without_reference(output, items_field, fields)
    index = NpcIndex.of(refs[NPCS_SLOT])
    problems: list[str] = []
    for i, record in enumerate(_records(output, items_field)):
        for name_field, id_field in fields:
            expected = index.lookup(record.get(name_field))
            actual = record.get(id_field)
            if expected is not None and actual != expected:
                problems.append(f"{items_field}[{i}].{id_field}: names an NPC but lacks its id")
            elif actual is not None and actual not in index.known_ids:
                problems.append(f"{items_field}[{i}].{id_field}: not an id of the npcs reference")
            elif actual is not None and expected is None:
                problems.append(f"{items_field}[{i}].{id_field}: set for a name that is no NPC")
    return problems


def _ids_without_reference(
    output: ModuleOutput, items_field: str, fields: Sequence[tuple[str, str]]
) -> list[str]:
    """With no `npcs` reference, no id can have come from grounding."""
    return [
        f"{items_field}[{i}].{id_field}: NPC id set but no npcs reference is bound"
        for i, record in enumerate(_records(output, items_field))
        for _, id_field in fields
        if record.get(id_field) is not None
    ]


def references_of(ctx: ValidationContext) -> Mapping[str, PreparedReference] | None:
    """The stage's prepared references, as the lane runner puts them in the validation
    context (None from a context object without them: the rule then has nothing to check)."""
    refs = getattr(ctx, "references", None)
    return refs if isinstance(refs, Mapping) else None


def _records(output: ModuleOutput, items_field: str) -> Iterable[dict[str, Any]]:
    records: list[dict[str, Any]] = (output.payload or {}).get(items_field, [])
    return records
