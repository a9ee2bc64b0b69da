"""Validator chains. A validator returns the problems it found (empty: approved); raising is
a framework error that the runner retries. Chains come from the central defaults below plus the
lane's own rules (`LaneSpec.rules`, carried by the validation context) unless the profile
overrides a stage's chain (an explicit empty list is a valid override)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

import jsonschema
from pydantic import ValidationError

from notarius_dagster.engine.artifact_kinds import ArtifactKind
from notarius_dagster.engine.contracts import ModuleOutput, PreparedReference
from notarius_dagster.engine.models import Chunk, RunWarning, SourceDocument, SourceRef
from notarius_dagster.engine.support import (
    CITATION_WINDOW,
    KnownNames,
    SpeakerNames,
    tighten_citations,
    unsupported_records,
)


@dataclass(frozen=True)
class ValidationContext:
    stage: str
    lane_id: str | None
    module_key: str
    kind: ArtifactKind | None
    document: SourceDocument
    chunk: Chunk | None = None
    extracts: tuple[ModuleOutput, ...] = ()
    merged: ModuleOutput | None = None
    references: Mapping[str, PreparedReference] = field(default_factory=dict)
    rules: Mapping[str, Validator] = field(default_factory=dict)
    """The lane's own rules by registered name (`dnd.spells.ids`)."""
    speaker_names: tuple[SpeakerNames, ...] = ()
    """The registry's speaker-name hooks, for the `support` validator (engine/support.py)."""
    known_names: tuple[KnownNames, ...] = ()
    """The registry's known-names hooks, for the `support` validator (engine/support.py)."""


Validator = Callable[[ValidationContext, ModuleOutput], list[str]]
RecordValidator = Callable[[ValidationContext, ModuleOutput], dict[int, str]]
"""Judges single records of an approved output: record index -> content-safe reason. The
runner drops those records (each one recorded as a rejection) and keeps the rest: one bad
record must not cost a chunk of good ones."""

CENTRAL_DEFAULTS: dict[str, tuple[str, ...]] = {
    "chunk": (),
    "extract": ("schema", "refs_in_chunk", "support"),
    "merge": ("schema", "refs_in_document"),
    "normalize": ("schema", "refs_in_document"),
}


@lru_cache(maxsize=128)
def _schema_validator(kind: ArtifactKind) -> jsonschema.Draft202012Validator:
    """One compiled validator per kind (a kind is frozen, so its model and schema are fixed):
    generating the schema from the model costs more than validating one payload."""
    return jsonschema.Draft202012Validator(kind.json_schema())


def json_schema_problems(kind: ArtifactKind, payload: Mapping[str, object]) -> list[str]:
    """JSON Schema problems by path (never values)."""
    return [
        f"{'/'.join(str(p) for p in err.absolute_path) or '(root)'}: {err.validator}"
        for err in _schema_validator(kind).iter_errors(payload)
    ]


def model_problems(exc: ValidationError) -> list[str]:
    """A model validation error's problems by path and type (never values)."""
    return [f"{'/'.join(str(p) for p in e['loc'])}: {e['type']}" for e in exc.errors()]


def schema_problems(kind: ArtifactKind, payload: Mapping[str, object]) -> list[str]:
    """JSON Schema and model validation problems by path (never values)."""
    problems = json_schema_problems(kind, payload)
    if problems:
        return problems
    try:
        kind.parse(payload)
    except ValidationError as exc:
        return model_problems(exc)
    return []


def validate_schema(ctx: ValidationContext, output: ModuleOutput) -> list[str]:
    if output.schema_errors:
        return [
            "structured output failed validation after re-ask: "
            + "; ".join(output.schema_errors[:5])
        ]
    if output.payload is None:
        return ["no payload"]
    if ctx.kind is None:
        return []
    problems = json_schema_problems(ctx.kind, output.payload)
    if problems:
        return problems
    try:  # the typed parse the rest of the chain reads (`ModuleOutput.artifact`)
        output.artifact(ctx.kind)
    except ValidationError as exc:
        return model_problems(exc)
    return []


def _refs(ctx: ValidationContext, output: ModuleOutput) -> list[SourceRef]:
    artifact = None if ctx.kind is None else output.artifact(ctx.kind)
    if ctx.kind is None or artifact is None:
        return []
    return list(ctx.kind.project_source_refs(artifact))


def ref_problems(
    refs: Sequence[SourceRef], source_id: str, positions: Mapping[int, int]
) -> list[str]:
    """Each reference must name this source and an ordered range of existing units."""
    problems = []
    for i, ref in enumerate(refs):
        if ref.source_id != source_id:
            problems.append(f"reference {i}: source id does not match")
            continue
        start, end = positions.get(ref.start_unit_id), positions.get(ref.end_unit_id)
        if start is None or end is None:
            problems.append(
                f"reference {i}: unit {ref.start_unit_id}..{ref.end_unit_id} not in scope"
            )
        elif start > end:
            problems.append(f"reference {i}: start unit after end unit")
    return problems


def validate_refs_in_chunk(ctx: ValidationContext, output: ModuleOutput) -> list[str]:
    if ctx.chunk is None:
        return []
    positions = {u: i for i, u in enumerate(ctx.chunk.unit_ids)}
    return ref_problems(_refs(ctx, output), ctx.chunk.source_id, positions)


def validate_refs_in_document(ctx: ValidationContext, output: ModuleOutput) -> list[str]:
    return ref_problems(_refs(ctx, output), ctx.document.source_id, ctx.document.position_index())


ChainSource = Literal["default", "override"]


def resolve_chain(
    stage: str, override: Sequence[str] | None, module_rules: Sequence[str] | None
) -> tuple[tuple[str, ...], ChainSource]:
    """The chain for a stage and where it came from ("default" or "override")."""
    if override is not None:
        return tuple(override), "override"
    return CENTRAL_DEFAULTS.get(stage, ()) + tuple(module_rules or ()), "default"


def run_chain(
    chain: Sequence[str], ctx: ValidationContext, output: ModuleOutput
) -> tuple[str, str] | None:
    """Run the output validators of `chain` in order (record validators are `record_verdicts`'
    job); the first rejection is returned as (validator, message)."""
    for name in chain:
        if name in RECORD_VALIDATORS:
            continue
        validator = CENTRAL_VALIDATORS.get(name) or ctx.rules[name]
        problems = validator(ctx, output)
        if problems:
            return name, "; ".join(problems[:5])
    return None


def record_verdicts(
    chain: Sequence[str], ctx: ValidationContext, output: ModuleOutput
) -> list[tuple[str, int, str]]:
    """The record validators of `chain` on an approved output: (validator, record index,
    reason) per rejected record, in record order; a record is judged by the first validator
    that rejects it."""
    verdicts: dict[int, tuple[str, int, str]] = {}
    for name in chain:
        validator = RECORD_VALIDATORS.get(name)
        if validator is None:
            continue
        for index, reason in validator(ctx, output).items():
            verdicts.setdefault(index, (name, index, reason))
    return [verdicts[i] for i in sorted(verdicts)]


def validate_support(ctx: ValidationContext, output: ModuleOutput) -> dict[int, str]:
    """Records whose support fields their cited units do not mention (engine/support.py)."""
    if ctx.kind is None or output.payload is None:
        return {}
    return unsupported_records(
        ctx.kind, output.payload, ctx.document, ctx.references, ctx.speaker_names, ctx.known_names
    )


TRIMMED_CODE = "citations_trimmed"


def tighten_supported(
    chain: Sequence[str], ctx: ValidationContext, output: ModuleOutput
) -> ModuleOutput:
    """Where the chain runs `support`, the output with its records' citations cut to what
    supports them (`support.tighten_citations`) and one count-only warning saying how many
    records and units; the same output when the chain does not check support or nothing was
    cut. Run on the records `support` kept (a record nothing supports is dropped, not cut)."""
    if "support" not in chain or ctx.kind is None or output.payload is None:
        return output
    tightened = tighten_citations(
        ctx.kind,
        output.payload,
        ctx.document,
        ctx.references,
        ctx.speaker_names,
        ctx.known_names,
    )
    if not tightened.records:
        return output
    warning = RunWarning(
        stage="extract",
        code=TRIMMED_CODE,
        lane=ctx.lane_id,
        chunk_id=ctx.chunk.chunk_id if ctx.chunk is not None else None,
        message=(
            f"{tightened.records} record(s) cited units more than {CITATION_WINDOW} units "
            "from any that mentions them (or, for a citation mostly of such context, any "
            f"that does not mention them); {tightened.units} such unit(s) removed from "
            "their citations"
        ),
    )
    return output.model_copy(
        update={"payload": dict(tightened.payload), "warnings": (*output.warnings, warning)}
    )


CENTRAL_VALIDATORS: Mapping[str, Validator] = {
    "schema": validate_schema,
    "refs_in_chunk": validate_refs_in_chunk,
    "refs_in_document": validate_refs_in_document,
}
"""The output validators any chain may name, besides the lane's own rules."""

RECORD_VALIDATORS: Mapping[str, RecordValidator] = {"support": validate_support}
"""The record validators any chain may name."""


def known_validators(rules: Sequence[str] = ()) -> set[str]:
    """The names a chain may use: the central validators and `rules` (the lane's own)."""
    return set(CENTRAL_VALIDATORS) | set(RECORD_VALIDATORS) | set(rules)
