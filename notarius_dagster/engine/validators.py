"""Validator chains. A validator returns the problems it found (empty: approved); raising is
a framework error that the runner retries. Chains come from the central defaults below unless
a stage-local override is configured (an explicit empty list is a valid override)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

import jsonschema
from pydantic import ValidationError

from notarius_dagster.engine.artifact_kinds import ArtifactKind
from notarius_dagster.engine.contracts import ModuleOutput, PreparedReference
from notarius_dagster.engine.models import Chunk, RunWarning, SourceDocument, SourceRef
from notarius_dagster.engine.support import (
    CITATION_WINDOW,
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


Validator = Callable[[ValidationContext, ModuleOutput], list[str]]
RecordValidator = Callable[[ValidationContext, ModuleOutput], dict[int, str]]
"""Judges single records of an approved output: record index -> content-safe reason. The
runner drops those records (each one recorded as a rejection) and keeps the rest: one bad
record must not cost a chunk of good ones."""

_VALIDATORS: dict[str, Validator] = {}
_RECORD_VALIDATORS: dict[str, RecordValidator] = {}

CENTRAL_DEFAULTS: dict[str, tuple[str, ...]] = {
    "chunk": (),
    "extract": ("schema", "refs_in_chunk", "support"),
    "merge": ("schema", "refs_in_document"),
    "normalize": ("schema", "refs_in_document"),
}


def register_validator(name: str) -> Callable[[Validator], Validator]:
    def wrap(func: Validator) -> Validator:
        _VALIDATORS[name] = func
        return func

    return wrap


def register_record_validator(name: str) -> Callable[[RecordValidator], RecordValidator]:
    def wrap(func: RecordValidator) -> RecordValidator:
        _RECORD_VALIDATORS[name] = func
        return func

    return wrap


def known_validators() -> set[str]:
    return set(_VALIDATORS) | set(_RECORD_VALIDATORS)


def get_validator(name: str) -> Validator:
    return _VALIDATORS[name]


@lru_cache(maxsize=128)
def _schema_validator(kind: ArtifactKind) -> jsonschema.Draft202012Validator:
    """One compiled validator per kind (a kind is frozen, so its model and schema are fixed):
    generating the schema from the model costs more than validating one payload."""
    return jsonschema.Draft202012Validator(kind.json_schema())


def schema_problems(kind: ArtifactKind, payload: dict[str, Any]) -> list[str]:
    """JSON Schema and model validation problems by path (never values)."""
    validator = _schema_validator(kind)
    problems = [
        f"{'/'.join(str(p) for p in err.absolute_path) or '(root)'}: {err.validator}"
        for err in validator.iter_errors(payload)
    ]
    if problems:
        return problems
    try:
        kind.parse(payload)
    except ValidationError as exc:
        return [f"{'/'.join(str(p) for p in e['loc'])}: {e['type']}" for e in exc.errors()]
    return []


@register_validator("schema")
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
    return schema_problems(ctx.kind, output.payload)


def _refs(ctx: ValidationContext, output: ModuleOutput) -> list[SourceRef]:
    if ctx.kind is None or output.payload is None:
        return []
    return ctx.kind.source_refs(output.payload)


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


@register_validator("refs_in_chunk")
def validate_refs_in_chunk(ctx: ValidationContext, output: ModuleOutput) -> list[str]:
    if ctx.chunk is None:
        return []
    positions = {u: i for i, u in enumerate(ctx.chunk.unit_ids)}
    return ref_problems(_refs(ctx, output), ctx.chunk.source_id, positions)


@register_validator("refs_in_document")
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
        if name in _RECORD_VALIDATORS:
            continue
        problems = get_validator(name)(ctx, output)
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
        validator = _RECORD_VALIDATORS.get(name)
        if validator is None:
            continue
        for index, reason in validator(ctx, output).items():
            verdicts.setdefault(index, (name, index, reason))
    return [verdicts[i] for i in sorted(verdicts)]


@register_record_validator("support")
def validate_support(ctx: ValidationContext, output: ModuleOutput) -> dict[int, str]:
    """Records whose support fields their cited units do not mention (engine/support.py)."""
    if ctx.kind is None or output.payload is None:
        return {}
    return unsupported_records(ctx.kind, output.payload, ctx.document, ctx.references)


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
    tightened = tighten_citations(ctx.kind, output.payload, ctx.document, ctx.references)
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
