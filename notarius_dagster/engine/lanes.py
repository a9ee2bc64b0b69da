"""The lane registry: one `LaneSpec` per lane says everything the engine knows about it, and
`register_lane(spec)` — the same one call for every lane — registers its artifact kind, its
extract/merge/normalize modules in the catalog and its lane rules as validators.

A lane is a folder (a Python package) with `lane.py` defining `LANE = LaneSpec(...)`, the record
model(s) and `prompt.md`; `load_lane_packages` imports every such folder of a domain package and
`load_lane_folder` one folder outside the import path (a plug-in, a test's throwaway lane), both
through `load_lane_package`. The list envelope and the answer model are derived from the record
model (`engine/lane_models.py`). docs/lanes.md describes the fields; its lane table is generated
from this registry (`python -m notarius_dagster.schemas --write`)."""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from notarius_dagster.engine.artifact_kinds import ArtifactKind, register_kind
from notarius_dagster.engine.catalog import CATALOG, ModuleSpec, ReferenceSlot
from notarius_dagster.engine.contracts import ModuleOutput
from notarius_dagster.engine.evaluation import MatchFields
from notarius_dagster.engine.lane_models import AnswerSpec, answer_model, camel, list_model
from notarius_dagster.engine.models import SourceRef
from notarius_dagster.engine.validators import ValidationContext, register_validator

LaneStage = Literal["extract", "merge", "normalize"]
LANE_STAGES: tuple[LaneStage, ...] = ("extract", "merge", "normalize")
ModuleFactory = Callable[["LaneSpec", dict[str, Any]], Any]
"""Builds one module of a lane from the stage's options (an unknown option is a ValueError)."""
RuleCheck = Callable[["LaneSpec", ValidationContext, ModuleOutput], list[str]]
"""A lane rule: the problems it finds (empty: approved), naming fields and indexes only."""

_LANE_ID = re.compile(r"^[a-z][a-z0-9-]{0,47}$")
_KIND = re.compile(r"^[a-z][a-z0-9]*/[a-z][a-z0-9-]*$")


@dataclass(frozen=True)
class LaneRule:
    """A validator a lane adds to the central chain of one stage. It is registered as
    `<module prefix>.<name>` (e.g. `dnd.spells.ids`), the name profiles and rejections use."""

    stage: LaneStage
    name: str
    check: RuleCheck


@dataclass(frozen=True)
class LaneModules:
    """How a lane extracts, merges and normalizes, and the rules it adds: lanes that behave
    alike share one value (the D&D event lanes share `event_modules(...)`)."""

    extract: ModuleFactory
    merge: ModuleFactory
    normalize: ModuleFactory
    rules: tuple[LaneRule, ...] = ()


@dataclass(frozen=True)
class GoldMatch:
    """What the gold evaluation (engine/evaluation.py, docs/evaluation.md) matches this lane's
    records on: `name`, the field compared by alias-aware normalized name; `aliases`, the
    record's list of other names, if it has one; `also`, secondary fields that must agree when
    both sides set them; `many_to_one`, several records may match one gold record (a lane that
    reports one record per chunk, where one gold record can span chunks). Where the records
    and their citations are is the lane's own `items_field` and `refs_field`."""

    name: str
    aliases: str | None = None
    also: tuple[str, ...] = ()
    many_to_one: bool = False


@dataclass(frozen=True, eq=False)
class LaneSpec:
    """One lane, declared once (docs/lanes.md, "The lane registry").

    Required: `lane_id` (the id profiles give the lane, `spells`), `kind` (`dnd/spell-list`),
    `record_model` (one record; the list envelope and the answer are derived from it),
    `answer` (how the answer is derived) and `modules`. The rest has a default:

    - `support_fields`: record fields whose values the cited units must support: the `support`
      validator drops a record none of whose values is mentioned in the text of the units it
      cites (engine/support.py; recorded in rejected.json, counted in the manifest).
    - `speaker_mentions`: whether a cited unit's speaker label counts as a mention (default
      False: `LAURA:` is not a mention of `Jester`).
    - `speaker_acts`: whether the supported field names the one who speaks (a combat turn's
      actor), so the names a roster maps a cited unit's speaker label to count as mentions
      (LAURA's line shows Jester acting). Default False: a player's own line never supports a
      record about someone the party deals with.
    - `preview_fields`: record fields a preview may show (names, ids, kinds, numbers; never
      prose), in column order.
    - `slots`: the extractor's reference slots.
    - `id_field` and `id_prefix`: the field that identifies a record and the prefix the
      normalizer gives its ids (numbered `<prefix>-0001` in source order by the event lanes,
      `<prefix>-<name slug>` by npcs; None where the id is not made by the lane, e.g. a chunk id).
    - `refs_field`: the record's citations, a list of source references or a single one.
    - `unique_fields`: fields that must not repeat within one artifact (checked by the envelope).
    - `gold_match`: what the gold evaluation matches records on (`GoldMatch`); None: the lane
      is not scored (`registered_match_fields`).
    - `prompt`: the prompt file; default `prompt.md` beside the record model's module.
    - `version`: the modules' version (part of checkpoint fingerprints and code versions).
    - Derived unless given: `items_field` (`lane_id` with `_` for `-`), `module_prefix`
      (`<kind namespace>.<items_field>`: module keys `dnd.spells.extract`, ... and rule names),
      `schema_id` (`notarius.<namespace>.<kind name with _>`), `schema_name`
      (`<namespace>_<kind name with _>_<schema_version>`)."""

    lane_id: str
    kind: str
    record_model: type[BaseModel]
    answer: AnswerSpec
    modules: LaneModules
    support_fields: tuple[str, ...] = ()
    speaker_mentions: bool = False
    speaker_acts: bool = False
    preview_fields: tuple[str, ...] = ()
    slots: tuple[ReferenceSlot, ...] = ()
    id_field: str = "id"
    id_prefix: str | None = None
    refs_field: str = "source_refs"
    unique_fields: tuple[str, ...] = ()
    gold_match: GoldMatch | None = None
    prompt: Path = Path()
    version: str = "1"
    schema_version: str = "v1"
    items_field: str = ""
    module_prefix: str = ""
    schema_id: str = ""
    schema_name: str = ""

    def __post_init__(self) -> None:
        if not _LANE_ID.match(self.lane_id):
            raise ValueError(f"lane {self.lane_id!r}: a lane id is lower-case words and dashes")
        if not _KIND.match(self.kind):
            raise ValueError(f"lane {self.lane_id!r}: kind {self.kind!r} is not `namespace/name`")
        namespace, name = self.kind.split("/")
        stem = name.replace("-", "_")
        self._default("items_field", self.lane_id.replace("-", "_"))
        self._default("module_prefix", f"{namespace}.{self.items_field}")
        self._default("schema_id", f"notarius.{namespace}.{stem}")
        self._default("schema_name", f"{namespace}_{stem}_{self.schema_version}")
        if self.prompt == Path():
            object.__setattr__(self, "prompt", _beside(self.record_model, "prompt.md"))
        self._check_fields()

    def _default(self, key: str, value: str) -> None:
        if not getattr(self, key):
            object.__setattr__(self, key, value)

    def _check_fields(self) -> None:
        """Every field the spec names is a record field: a typo fails at import, with the lane."""
        known = set(self.record_fields()) | set(self.record_model.model_fields)
        named = {
            "support_fields": self.support_fields,
            "preview_fields": self.preview_fields,
            "unique_fields": self.unique_fields,
            "id_field": (self.id_field,),
            "refs_field": (self.refs_field,),
            "answer.omit": self.answer.omit,
            "answer.defaults": tuple(self.answer.defaults),
            "answer.fields": tuple(self.answer.fields),
        }
        if self.gold_match is not None:
            aliases = self.gold_match.aliases
            named["gold_match"] = (self.gold_match.name, *((aliases,) if aliases else ()))
            named["gold_match.also"] = self.gold_match.also
        for where, names in named.items():
            unknown = sorted(set(names) - known)
            if unknown:
                raise ValueError(f"lane {self.lane_id!r}: {where} names no record field: {unknown}")

    # ---- what is derived from the record model ----

    def record_fields(self) -> list[str]:
        """The record's keys as they appear in a payload (aliases, e.g. `from`)."""
        return [info.alias or name for name, info in self.record_model.model_fields.items()]

    @cached_property
    def list_model(self) -> type[BaseModel]:
        """The published artifact: `{kind, schema_version, source_id, <items_field>: [...]}`."""
        return list_model(
            name=camel(self.schema_id.rsplit(".", 1)[-1]),
            kind=self.kind,
            schema_version=self.schema_version,
            items_field=self.items_field,
            record_model=self.record_model,
            unique_fields=self.unique_fields,
        )

    @cached_property
    def answer_model(self) -> type[BaseModel]:
        """What the LLM is asked for (see `AnswerSpec`)."""
        return answer_model(
            self.answer,
            record_model=self.record_model,
            items_field=self.items_field,
            runner_fields=(self.id_field, self.refs_field),
        )

    @cached_property
    def artifact_kind(self) -> ArtifactKind:
        return ArtifactKind(
            kind=self.kind,
            model=self.list_model,
            schema_id=self.schema_id,
            schema_name=self.schema_name,
            schema_version=self.schema_version,
            items_field=self.items_field,
            project_source_refs=self.source_refs,
            preview_fields=self.preview_fields,
            support_fields=self.support_fields,
            refs_field=self.refs_field,
            speaker_mentions=self.speaker_mentions,
            speaker_acts=self.speaker_acts,
        )

    @cached_property
    def match_fields(self) -> MatchFields | None:
        """The evaluation's `MatchFields` of this lane's kind (None: the lane is not scored)."""
        match = self.gold_match
        if match is None:
            return None
        return MatchFields(
            items=self.items_field,
            name=match.name,
            aliases=match.aliases,
            also=match.also,
            refs=self.refs_field,
            many_to_one=match.many_to_one,
        )

    def source_refs(self, artifact: BaseModel) -> list[SourceRef]:
        """Each record's citations, in record order (a single reference counts as one)."""
        refs: list[SourceRef] = []
        for record in getattr(artifact, self.items_field):
            value = getattr(record, self.refs_field)
            refs.extend(value if isinstance(value, list) else [value])
        return refs

    def envelope(self, source_id: str, records: list[dict[str, Any]]) -> dict[str, Any]:
        """A payload of this lane's kind holding `records`."""
        return {
            "kind": self.kind,
            "schema_version": self.schema_version,
            "source_id": source_id,
            self.items_field: records,
        }

    # ---- what is registered ----

    def module_key(self, stage: LaneStage) -> str:
        return f"{self.module_prefix}.{stage}"

    def rule_names(self, stage: LaneStage) -> tuple[str, ...]:
        return tuple(
            f"{self.module_prefix}.{rule.name}"
            for rule in self.modules.rules
            if rule.stage == stage
        )

    def module_specs(self) -> tuple[ModuleSpec, ...]:
        """The catalog entries: extract (with the slots) provides the records; all three
        produce this lane's kind and carry its rules as default validators."""
        return tuple(
            ModuleSpec(
                key=self.module_key(stage),
                stage=stage,
                version=self.version,
                requires=("chunks",),
                provides=(self.items_field,) if stage == "extract" else (),
                slots=self.slots if stage == "extract" else (),
                artifact_kind=self.kind,
                default_validators=self.rule_names(stage) or None,
            )
            for stage in LANE_STAGES
        )


class NoOptionsModule:
    """Base of a lane module that takes no options: it keeps its lane and refuses any option
    (resolution builds every module once and reports the refusal with its key path)."""

    def __init__(self, lane: LaneSpec, options: dict[str, Any]) -> None:
        if options:
            raise ValueError(f"unknown option(s): {sorted(options)}")
        self.lane = lane


def _beside(model: type[BaseModel], name: str) -> Path:
    module_file = getattr(sys.modules.get(model.__module__), "__file__", None)
    return Path(module_file).with_name(name) if module_file else Path(name)


_LANES: dict[str, LaneSpec] = {}


def register_lane(lane: LaneSpec) -> LaneSpec:
    """Register a lane's kind, modules and rules. Registering the same spec again is a no-op;
    another spec for a registered kind is an error."""
    existing = _LANES.get(lane.kind)
    if existing is lane:
        return lane
    if existing is not None:
        raise ValueError(f"lane kind {lane.kind!r} registered twice")
    register_kind(lane.artifact_kind)
    for rule in lane.modules.rules:
        register_validator(f"{lane.module_prefix}.{rule.name}")(_bound_rule(lane.kind, rule))
    for spec in lane.module_specs():
        CATALOG.register(spec, _module_factory(lane.kind, spec.stage))
    _LANES[lane.kind] = lane
    return lane


def _module_factory(kind: str, stage: str) -> Callable[[dict[str, Any]], Any]:
    """Builds the module from the lane as registered at build time, not at registration, so
    a test can point a registered lane at an edited prompt (tests/lane_doubles.py, use_prompt)."""

    def build(options: dict[str, Any]) -> Any:
        lane = _LANES[kind]
        factory: ModuleFactory = getattr(lane.modules, stage)
        return factory(lane, options)

    return build


def _bound_rule(
    kind: str, rule: LaneRule
) -> Callable[[ValidationContext, ModuleOutput], list[str]]:
    def check(ctx: ValidationContext, output: ModuleOutput) -> list[str]:
        return rule.check(_LANES[kind], ctx, output)

    check.__doc__ = rule.check.__doc__
    return check


def registered_lanes() -> dict[str, LaneSpec]:
    """Registered lanes by kind, in registration order."""
    return dict(_LANES)


def registered_match_fields() -> dict[str, MatchFields]:
    """What the gold evaluation matches records on, by artifact kind, for every registered
    lane that declares `gold_match` (the table `engine/evaluation.py` is given)."""
    return {
        kind: lane.match_fields for kind, lane in _LANES.items() if lane.match_fields is not None
    }


# ---- discovery: a lane is a folder with lane.py ----


def load_lane_package(package: str) -> LaneSpec:
    """Import `<package>.lane` and register its `LANE`."""
    module = importlib.import_module(f"{package}.lane")
    lane = getattr(module, "LANE", None)
    if not isinstance(lane, LaneSpec):
        raise TypeError(f"{package}.lane defines no `LANE = LaneSpec(...)`")
    return register_lane(lane)


def load_lane_packages(parent: str, paths: Iterable[str]) -> list[LaneSpec]:
    """Register the lane of every subpackage of the package `parent` (at `paths`)."""
    return [
        load_lane_package(f"{parent}.{info.name}")
        for info in sorted(pkgutil.iter_modules(list(paths)), key=lambda i: i.name)
        if info.ispkg
    ]


def load_lane_folder(folder: Path) -> LaneSpec:
    """Register the lane of a folder outside the import path: it is imported as the top-level
    package named after the folder (its modules import each other relatively, `from .model
    import ...`), then loaded like any lane package."""
    name = folder.name
    init = folder / "__init__.py"
    if not init.is_file():
        raise ValueError(f"lane folder {name!r} has no __init__.py")
    loaded = sys.modules.get(name)
    if loaded is not None:
        if Path(getattr(loaded, "__file__", "") or "") != init:
            raise ValueError(f"lane folder {name!r}: another module has that name")
        return load_lane_package(name)
    spec = importlib.util.spec_from_file_location(
        name, init, submodule_search_locations=[str(folder)]
    )
    if spec is None or spec.loader is None:
        raise ValueError(f"lane folder {name!r} cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        return load_lane_package(name)
    except BaseException:
        sys.modules.pop(name, None)
        raise
