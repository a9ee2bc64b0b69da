"""Lanes: one `LaneSpec` per lane says everything the engine knows about it (its artifact kind,
its extract/merge/normalize modules, its rules); the lane registry value (`engine/registry.py`)
holds the specs a deployment offers, and a profile names lanes by id.

A lane is a folder (a Python package) with `lane.py` defining `LANE = LaneSpec(...)`, the record
model(s) and `prompt.md`; `load_lane_packages` imports every such folder of a domain package and
`load_lane_folder` one folder outside the import path (a plug-in, a test's throwaway lane), both
through `load_lane_package`; none of them registers anything: they return the specs. The list
envelope and the answer model are derived from the record model (`engine/lane_models.py`).
docs/lanes.md describes the fields; its lane table is generated from the D&D registry
(`python -m notarius_dagster.schemas --write`)."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import pkgutil
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from notarius_dagster.engine.artifact_kinds import ArtifactKind
from notarius_dagster.engine.contracts import Extractor, Merger, ModuleOutput, Normalizer
from notarius_dagster.engine.evaluation import MatchFields
from notarius_dagster.engine.lane_models import AnswerSpec, answer_model, camel, list_model
from notarius_dagster.engine.models import ReferenceSlot, SourceRef
from notarius_dagster.engine.validators import ValidationContext, Validator

LaneStage = Literal["extract", "merge", "normalize"]
LANE_STAGES: tuple[LaneStage, ...] = ("extract", "merge", "normalize")
ModuleFactory = Callable[["LaneSpec", Mapping[str, object]], Any]
"""Builds one module of a lane from the stage's options (an unknown option is a ValueError)."""
RuleCheck = Callable[["LaneSpec", ValidationContext, ModuleOutput], list[str]]
"""A lane rule: the problems it finds (empty: approved), naming fields and indexes only."""

_LANE_ID = re.compile(r"^[a-z][a-z0-9-]{0,47}$")
_KIND = re.compile(r"^[a-z][a-z0-9]*/[a-z][a-z0-9-]*$")


@dataclass(frozen=True)
class LaneRule:
    """A validator a lane adds to the central chain of one stage. It is named
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


Scalar = str | int | float | bool | None
ReportLayout = Literal["table", "rounds", "cards", "scenes"]


@dataclass(frozen=True)
class ReportColumn:
    """One column of a lane's report section: `header`, the record `field` it shows (a field
    name or alias; `outcome.hit` reads a field of a nested model) and how a value shows:
    `labels` says which values show as a word (`((0, "cantrip"),)`), `template` how any other
    value shows (`"level {}"`); None and "" show as a dash, a list as its items joined. `link`
    names the record field holding the id of the record the value names (a grounded NPC's
    id): the cell links to that record when it is shown as a card, and the card lists the
    records that name it."""

    header: str
    field: str
    labels: tuple[tuple[Scalar, str], ...] = ()
    template: str = "{}"
    link: str | None = None


@dataclass(frozen=True)
class ReportTable:
    """How the session report shows a lane: a section titled `title` (anchor `section_id`,
    default `lane-<lane id>`), whose records are called `noun`, laid out as `layout`:

    - `table`: a row per record: its id (under `id_header`, default the noun), the `columns`,
      its citations.
    - `rounds`: the same table, split by the scene each record starts in and then into runs
      of consecutive records with the same `group` value (`Round 1`, `Round not stated`).
    - `cards`: a card per record, the records other lanes `link` to: the first column is its
      heading, the others its lines; its appearances, scenes and who names it.
    - `scenes`: the records are ranges of the document (a single citation each) that the
      other sections' records are placed in: the columns are the badge, the heading and the
      summary.

    Sections come in `order` (then lane id). Default (`LaneSpec.report_table`): a table of the
    preview fields under the lane id."""

    title: str
    noun: str
    columns: tuple[ReportColumn | tuple[str, str], ...]
    section_id: str = ""
    layout: ReportLayout = "table"
    id_header: str = ""
    group: ReportColumn | None = None
    order: int = 100

    def column_specs(self) -> tuple[ReportColumn, ...]:
        """The columns, a `(header, field)` pair as a plain column."""
        return tuple(c if isinstance(c, ReportColumn) else ReportColumn(*c) for c in self.columns)

    def fields(self) -> tuple[str, ...]:
        """Every record field the section reads (the first part of a nested path)."""
        columns = (*self.column_specs(), *((self.group,) if self.group else ()))
        named = [c.field for c in columns] + [c.link for c in columns if c.link]
        return tuple(name.split(".", 1)[0] for name in named)


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
      is not scored (`LaneRegistry.match_fields`).
    - `report`: how the session report shows the lane when no section of its own does
      (`ReportTable`); None: `report_table` derives one from the preview fields.
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
    report: ReportTable | None = None
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
        if self.report is not None:
            named["report.columns"] = self.report.fields()
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

    @property
    def report_table(self) -> ReportTable:
        """The report's section of this lane: `report`, else a table of the preview fields
        under the lane id (the id column comes first anyway); its anchor defaults to
        `lane-<lane id>` (a lane id is `[a-z0-9-]`, safe as an HTML id)."""
        table = self.report
        if table is None:
            columns = tuple((f, f) for f in self.preview_fields if f != self.id_field)
            table = ReportTable(title=self.lane_id, noun="records", columns=columns)
        if not table.section_id:
            table = dataclasses.replace(table, section_id=f"lane-{self.lane_id}")
        return table

    def source_refs(self, artifact: BaseModel) -> list[SourceRef]:
        """Each record's citations, in record order (a single reference counts as one)."""
        refs: list[SourceRef] = []
        for record in getattr(artifact, self.items_field):
            value = getattr(record, self.refs_field)
            refs.extend(value if isinstance(value, list) else [value])
        return refs

    def envelope(self, source_id: str, records: list[dict[str, object]]) -> dict[str, object]:
        """A payload of this lane's kind holding `records`."""
        return {
            "kind": self.kind,
            "schema_version": self.schema_version,
            "source_id": source_id,
            self.items_field: records,
        }

    # ---- module keys and rules ----

    def module_key(self, stage: LaneStage) -> str:
        return f"{self.module_prefix}.{stage}"

    def rule_names(self, stage: LaneStage) -> tuple[str, ...]:
        return tuple(
            f"{self.module_prefix}.{rule.name}"
            for rule in self.modules.rules
            if rule.stage == stage
        )

    def rules(self) -> dict[str, Validator]:
        """The lane's rules by name, bound to this spec (the validation context carries them)."""
        return {
            f"{self.module_prefix}.{rule.name}": _bound(self, rule) for rule in self.modules.rules
        }

    def extractor(self) -> Extractor:
        extractor: Extractor = self.modules.extract(self, {})
        return extractor

    def merger(self) -> Merger:
        merger: Merger = self.modules.merge(self, {})
        return merger

    def normalizer(self) -> Normalizer:
        normalizer: Normalizer = self.modules.normalize(self, {})
        return normalizer


def _bound(lane: LaneSpec, rule: LaneRule) -> Validator:
    def check(ctx: ValidationContext, output: ModuleOutput) -> list[str]:
        return rule.check(lane, ctx, output)

    check.__doc__ = rule.check.__doc__
    return check


class NoOptionsModule:
    """Base of a lane module that takes no options: it keeps its lane and refuses any option
    (resolution builds every module once and reports the refusal with its key path)."""

    def __init__(self, lane: LaneSpec, options: Mapping[str, object]) -> None:
        if options:
            raise ValueError(f"unknown option(s): {sorted(options)}")
        self.lane = lane


def _beside(model: type[BaseModel], name: str) -> Path:
    module_file = getattr(sys.modules.get(model.__module__), "__file__", None)
    return Path(module_file).with_name(name) if module_file else Path(name)


# ---- discovery: a lane is a folder with lane.py ----


def load_lane_package(package: str) -> LaneSpec:
    """Import `<package>.lane` and return its `LANE`."""
    module = importlib.import_module(f"{package}.lane")
    lane = getattr(module, "LANE", None)
    if not isinstance(lane, LaneSpec):
        raise TypeError(f"{package}.lane defines no `LANE = LaneSpec(...)`")
    return lane


def load_lane_packages(parent: str, paths: Iterable[str]) -> list[LaneSpec]:
    """The lane of every subpackage of the package `parent` (at `paths`), by folder name."""
    return [
        load_lane_package(f"{parent}.{info.name}")
        for info in sorted(pkgutil.iter_modules(list(paths)), key=lambda i: i.name)
        if info.ispkg
    ]


def load_lane_folder(folder: Path) -> LaneSpec:
    """The lane of a folder outside the import path: it is imported as the top-level
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
