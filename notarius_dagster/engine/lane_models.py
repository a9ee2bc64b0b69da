"""The two models a lane does not write by hand: its list envelope (the published artifact) and
the answer the LLM is asked for. Both are derived from the lane's record model, so a record
field is declared once. What the derivation keeps is exactly what the JSON Schemas say: the
envelope's schema is published (`schemas/`) and the answer's schema is sent to the model and
hashed into checkpoint fingerprints, so a change here is a change of both (docs/lanes.md)."""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator
from pydantic.fields import FieldInfo

CITATION_FIELD = "unit_ids"
"""The answer field in which the model cites the units (the `[n]` markers) it read."""
MAX_CITED_UNITS = 50

# Model configuration an answer keeps from its record: how fields are named, never how strict
# the record is (`extra="forbid"` would add `additionalProperties: false` to the answer).
_ANSWER_CONFIG_KEYS = (
    "populate_by_name",
    "serialize_by_alias",
    "validate_by_name",
    "validate_by_alias",
)


@dataclass(frozen=True)
class AnswerSpec:
    """How a lane's answer model is derived from its record model.

    The answer item holds the record's fields in their order, except the record id, the
    citations and `omit` (fields the runner fills, such as ids found by grounding), and ends
    with `unit_ids` (1 to `max_cited` cited unit ids, at most 50: a lane's citation budget,
    which a schema-honouring decoder enforces, so a small model cannot spend its answer on a
    run of consecutive ids). The model may leave out what the transcript does
    not say: a required field that allows null defaults to null, a required list to empty;
    `defaults` adds defaults for other fields, and `fields` replaces a field outright
    (`(annotation, Field(...))`, e.g. a looser nested model). The answer is
    `{<items field>: [item, ...]}` with at most `max_items` items, or, with `per_chunk`, the
    item alone without citations (the record is the chunk, cited as a whole).

    `name`, `item_name` and `doc` are part of the JSON Schema the model sees (titles, `$defs`
    keys, the item's description), so they are declared, never guessed."""

    name: str
    item_name: str = ""
    doc: str | None = None
    max_items: int = 40
    max_cited: int = MAX_CITED_UNITS
    omit: tuple[str, ...] = ()
    defaults: Mapping[str, Any] = field(default_factory=dict)
    fields: Mapping[str, tuple[Any, Any]] = field(default_factory=dict)
    per_chunk: bool = False

    def __post_init__(self) -> None:
        if not 1 <= self.max_cited <= MAX_CITED_UNITS:
            raise ValueError(f"answer {self.name}: max_cited must be 1..{MAX_CITED_UNITS}")

    def model_item_name(self) -> str:
        return self.item_name or f"{self.name}Item"


def camel(stem: str) -> str:
    """`npc_interaction_list` -> `NpcInteractionList`."""
    return "".join(part.capitalize() for part in stem.split("_"))


def list_model(
    *,
    name: str,
    kind: str,
    schema_version: str,
    items_field: str,
    record_model: type[BaseModel],
    unique_fields: tuple[str, ...] = (),
) -> type[BaseModel]:
    """The list envelope `{kind, schema_version, source_id, <items>: [record, ...]}`: strict and
    frozen like every published document. A field in `unique_fields` must not repeat within one
    artifact, so a bound reference that repeats one is malformed (an error, never "unbound")."""
    validators: dict[str, Any] = {}
    if unique_fields:

        def _unique(self: BaseModel) -> BaseModel:
            for key in unique_fields:
                values = [getattr(record, key) for record in getattr(self, items_field)]
                if len(set(values)) != len(values):
                    raise ValueError(f"{items_field}: {key} values must be unique")
            return self

        validators["_unique_fields"] = model_validator(mode="after")(_unique)
    fields: dict[str, Any] = {
        "kind": (Literal[kind], kind),
        "schema_version": (Literal[schema_version], schema_version),
        "source_id": (str, ...),
        items_field: (list[record_model], ...),  # type: ignore[valid-type]
    }
    return create_model(
        name,
        __config__=ConfigDict(extra="forbid", frozen=True),
        __module__=record_model.__module__,
        __validators__=validators or None,
        **fields,
    )


def answer_model(
    spec: AnswerSpec,
    *,
    record_model: type[BaseModel],
    items_field: str,
    runner_fields: tuple[str, ...],
) -> type[BaseModel]:
    """The answer model of `spec` (see `AnswerSpec`); `runner_fields` are the record id and
    citation fields, never asked of the model."""
    dropped = set(runner_fields) | set(spec.omit)
    fields: dict[str, Any] = {
        name: spec.fields.get(name) or _answer_field(info, spec.defaults.get(name, _UNSET))
        for name, info in record_model.model_fields.items()
        if name not in dropped
    }
    config = ConfigDict(
        **{
            k: v
            for k, v in record_model.model_config.items()  # type: ignore[typeddict-item]
            if k in _ANSWER_CONFIG_KEYS
        }
    )
    module = record_model.__module__
    if spec.per_chunk:
        return create_model(
            spec.name, __config__=config, __doc__=spec.doc, __module__=module, **fields
        )
    fields[CITATION_FIELD] = (list[int], Field(min_length=1, max_length=spec.max_cited))
    item = create_model(
        spec.model_item_name(), __config__=config, __doc__=spec.doc, __module__=module, **fields
    )
    answer: dict[str, Any] = {items_field: (list[item], Field(max_length=spec.max_items))}  # type: ignore[valid-type]
    return create_model(spec.name, __module__=module, **answer)


class _Unset:
    pass


_UNSET: Any = _Unset()


def _answer_field(info: FieldInfo, default: Any) -> tuple[Any, FieldInfo]:
    """The record field as an answer field: same type and constraints, with the answer's default
    (given, else null for a required nullable field, else empty for a required list)."""
    if default is _UNSET and info.is_required():
        if allows_none(info.annotation):
            default = None
        elif get_origin(info.annotation) is list:
            default = []
    if default is _UNSET:
        return (info.annotation, info)
    if default == [] and isinstance(default, list):
        info = FieldInfo.merge_field_infos(info, default_factory=list)
    else:
        info = FieldInfo.merge_field_infos(info, default=default)
    return (info.annotation, info)


def allows_none(annotation: Any) -> bool:
    """True when a field's annotation admits null (`str | None`)."""
    union = get_origin(annotation) in (Union, types.UnionType)
    return union and type(None) in get_args(annotation)
