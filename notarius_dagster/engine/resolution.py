"""Profile resolution: everything that can be checked before a single LLM call.

Against the lane registry value (`engine/registry.py`): lane selection, each lane by id, the
chunker and its options, validator chains, reference bindings (pipeline defaults, a lane's own,
runtime overrides and unbinds, flat slot names only when exactly one selected target declares
the slot), lane order, the LLM profile, output options, and a stable digest."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypedDict, cast

from pydantic import Field, ValidationError

from notarius_dagster.engine.config import (
    DEFAULT_OUTPUT_MODULE,
    LaneConfig,
    ProfileFile,
    PublishConfig,
    ReferenceBindingConfig,
    StageConfig,
    load_profile,
)
from notarius_dagster.engine.digest import digest_of
from notarius_dagster.engine.errors import ProfileError
from notarius_dagster.engine.lanes import LANE_STAGES, LaneSpec, LaneStage
from notarius_dagster.engine.limits import Budget, InputLimits
from notarius_dagster.engine.models import Frozen, ReferenceSlot, Rejection, Stage
from notarius_dagster.engine.output_options import OutputOptions, validate_output_options
from notarius_dagster.engine.registry import LaneRegistry
from notarius_dagster.engine.validators import known_validators, resolve_chain

BindingSource = Literal["pipeline", "target", "runtime"]


class ResolvedBinding(Frozen):
    """A reference slot bound for one target. `path` is absolute and never published;
    manifests show `display` (the file name) and the content digest."""

    slot: str
    target: str  # "chunk" or "<lane>.<stage>"
    origin: Literal["file", "lane"]
    source: BindingSource
    lane: str | None = None
    path: str | None = Field(default=None, exclude=True)
    display: str | None = None
    required: bool = False
    accepted_kinds: tuple[str, ...] = ()
    accepted_media_types: tuple[str, ...] = ()
    max_bytes: int = 1_000_000


class _BindingCommon(TypedDict):
    """What a binding to a file and one to a lane share (`ResolvedBinding`)."""

    slot: str
    target: str
    source: BindingSource
    required: bool
    accepted_kinds: tuple[str, ...]
    accepted_media_types: tuple[str, ...]
    max_bytes: int


class ResolvedStage(Frozen):
    stage: str
    module: str
    version: str
    options: dict[str, object]
    retries: int
    validators: tuple[str, ...]
    validators_source: Literal["default", "override"]
    references: tuple[ResolvedBinding, ...] = ()
    artifact_kind: str | None = None

    def rejection(
        self,
        verdict: tuple[str, str],
        attempts: int,
        *,
        lane_id: str | None = None,
        chunk_id: str | None = None,
    ) -> Rejection:
        """What rejected.json records when this stage's output is refused after `attempts`:
        the verdict of its validator chain (validator, message), with the stage's module and,
        for a lane stage, the lane and the chunk (if it was one chunk's output)."""
        validator, message = verdict
        return Rejection(
            stage=cast(Stage, self.stage),
            lane=lane_id,
            module=self.module,
            chunk_id=chunk_id,
            validator=validator,
            message=message,
            attempts=attempts,
        )


class ResolvedLane(Frozen):
    id: str
    kind: str
    extract: ResolvedStage
    merge: ResolvedStage
    normalize: ResolvedStage
    depends_on: tuple[str, ...] = ()

    def stages(self) -> tuple[ResolvedStage, ResolvedStage, ResolvedStage]:
        return (self.extract, self.merge, self.normalize)


class ResolvedPipeline(Frozen):
    pipeline_id: str
    profile_name: str
    input_format: str | None
    chunk: ResolvedStage
    llm_profile_name: str
    llm_profile: dict[str, object]
    lanes: tuple[ResolvedLane, ...]
    configured_lanes: tuple[str, ...]
    output_module: str
    output_options: OutputOptions
    limits: InputLimits = Field(default_factory=InputLimits)
    budget: Budget = Field(default_factory=Budget)
    publish: PublishConfig = Field(default_factory=PublishConfig)
    digest: str = ""

    def lane(self, lane_id: str) -> ResolvedLane:
        return next(lane for lane in self.lanes if lane.id == lane_id)

    def lane_ids(self) -> list[str]:
        return [lane.id for lane in self.lanes]


class RuntimeBinding(Frozen):
    """`--reference SELECTOR=PATH` (path relative to the working directory)."""

    selector: str
    path: str


class _Resolver:
    def __init__(
        self, profile: ProfileFile, name: str, base_dir: Path, registry: LaneRegistry
    ) -> None:
        self.profile = profile
        self.name = name
        self.base_dir = base_dir
        self.registry = registry

    def fail(self, key: str, problem: str) -> ProfileError:
        return ProfileError(self.name, key, problem)

    def chain(
        self, stage: str, override: list[str] | None, rules: tuple[str, ...], key: str
    ) -> tuple[tuple[str, ...], Literal["default", "override"]]:
        if override is not None:
            unknown = sorted(set(override) - known_validators(rules))
            if unknown:
                raise self.fail(key, f"unknown validator(s): {', '.join(unknown)}")
        return resolve_chain(stage, override, rules or None)

    def chunk(self, cfg: StageConfig) -> tuple[ResolvedStage, tuple[ReferenceSlot, ...]]:
        spec = self.registry.chunker(cfg.module)
        if spec is None:
            known = ", ".join(self.registry.chunker_keys()) or "none"
            raise self.fail(
                "pipeline.chunk.module", f"unknown chunker {cfg.module!r}; known: {known}"
            )
        try:  # a chunker refuses options it does not know: say so before anything runs
            spec.build(dict(cfg.options))
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            key = f"pipeline.chunk.options.{where}" if where else "pipeline.chunk.options"
            raise self.fail(key, err["msg"]) from None
        except (ValueError, TypeError) as exc:
            raise self.fail("pipeline.chunk.options", str(exc) or type(exc).__name__) from None
        chain, source = self.chain("chunk", cfg.validators, (), "pipeline.chunk.validators")
        stage = ResolvedStage(
            stage="chunk",
            module=spec.key,
            version=spec.version,
            options=dict(cfg.options),
            retries=cfg.retries,
            validators=chain,
            validators_source=source,
        )
        return stage, spec.slots

    def lane(self, cfg: LaneConfig, key: str) -> tuple[LaneSpec, dict[LaneStage, ResolvedStage]]:
        try:
            spec = self.registry.lane(cfg.id)
        except KeyError:
            known = ", ".join(self.registry.lane_ids()) or "none"
            raise self.fail(f"{key}.id", f"unknown lane {cfg.id!r}; registered: {known}") from None
        stages: dict[LaneStage, ResolvedStage] = {}
        for stage in LANE_STAGES:
            chain, source = self.chain(
                stage,
                cfg.validators.get(stage),
                spec.rule_names(stage),
                f"{key}.validators.{stage}",
            )
            stages[stage] = ResolvedStage(
                stage=stage,
                module=spec.module_key(stage),
                version=spec.version,
                options={},
                retries=cfg.retries if stage == "extract" else 0,
                validators=chain,
                validators_source=source,
                artifact_kind=spec.kind,
            )
        return spec, stages

    def binding(
        self,
        slot: ReferenceSlot,
        target: str,
        cfg: ReferenceBindingConfig,
        source: BindingSource,
        key: str,
        base: Path,
    ) -> ResolvedBinding:
        common = _BindingCommon(
            slot=slot.name,
            target=target,
            source=source,
            required=slot.required,
            accepted_kinds=slot.accepted_kinds,
            accepted_media_types=slot.accepted_media_types,
            max_bytes=slot.max_bytes,
        )
        if cfg.lane is not None:
            return ResolvedBinding(origin="lane", lane=cfg.lane.strip(), **common)
        assert cfg.path is not None
        path = (base / cfg.path).resolve()
        if source != "runtime" and not Path(cfg.path).is_absolute():
            # A relative path written in a profile is confined to the profile's folder (after
            # symbolic links are resolved): a shared profile must not read `../../etc/passwd`.
            # An absolute path is the author's explicit choice; runtime paths are the user's.
            key_path = key if key.endswith(f".{slot.name}") else f"{key}.{slot.name}"
            if not path.is_relative_to(base.resolve()):
                raise self.fail(
                    f"{key_path}.path",
                    "a relative path must stay inside the profile's folder (it leads "
                    "outside the profile's folder); give an absolute path to use a file "
                    "elsewhere",
                )
        return ResolvedBinding(origin="file", path=str(path), display=Path(cfg.path).name, **common)


class _Target(Frozen):
    """Where reference slots are bound: the chunker (`chunk`) or a lane's extractor
    (`<lane>.extract`, the one lane stage that declares slots)."""

    name: str
    slots: tuple[ReferenceSlot, ...]
    key: str
    bindings: dict[str, ReferenceBindingConfig]

    def slot(self, name: str) -> ReferenceSlot | None:
        return next((s for s in self.slots if s.name == name), None)


def resolve_pipeline(
    profile: ProfileFile,
    *,
    profile_name: str,
    base_dir: Path,
    registry: LaneRegistry,
    lanes: Sequence[str] | None = None,
    runtime_references: Sequence[RuntimeBinding] = (),
    runtime_unbinds: Sequence[str] = (),
    llm_profile: str | None = None,
    cwd: Path | None = None,
) -> ResolvedPipeline:
    """Resolve a parsed profile against `registry`; every error names the profile and key
    path."""
    r = _Resolver(profile, profile_name, base_dir, registry)
    pipe = profile.pipeline
    configured = [lane.id for lane in pipe.lanes]
    if len(set(configured)) != len(configured):
        dup = next(x for x in configured if configured.count(x) > 1)
        raise r.fail("pipeline.lanes", f"lane id {dup!r} appears twice")
    selected = list(configured)
    if lanes:
        unknown = [x for x in lanes if x not in configured]
        if unknown:
            raise r.fail(
                "lanes (selection)", f"unknown lane(s) {unknown}; configured: {configured}"
            )
        selected = [x for x in configured if x in set(lanes)]

    chunk, chunk_slots = r.chunk(pipe.chunk)
    targets = {
        "chunk": _Target(
            name="chunk",
            slots=chunk_slots,
            key="pipeline.chunk",
            bindings=dict(pipe.chunk.references),
        )
    }
    lane_stages: dict[str, dict[LaneStage, ResolvedStage]] = {}
    lane_kinds: dict[str, str] = {}
    for index, lane_cfg in enumerate(pipe.lanes):
        key = f"pipeline.lanes[{index}]"
        spec, stages = r.lane(lane_cfg, key)
        if lane_cfg.id not in selected:
            continue
        lane_kinds[lane_cfg.id] = spec.kind
        lane_stages[lane_cfg.id] = stages
        target = f"{lane_cfg.id}.extract"
        targets[target] = _Target(
            name=target, slots=spec.slots, key=key, bindings=lane_cfg.bindings()
        )

    bindings = _resolve_bindings(r, targets, runtime_references, runtime_unbinds, cwd or Path.cwd())
    resolved_lanes = []
    for lane_id in selected:
        refs = tuple(sorted(bindings[f"{lane_id}.extract"].values(), key=lambda b: b.slot))
        for b in refs:
            _check_lane_binding(r, b, lane_kinds, targets[b.target].key)
        deps = {b.lane for b in refs if b.lane}
        if lane_id in deps:
            raise r.fail("pipeline.lanes", f"lane {lane_id!r} references itself")
        stages = lane_stages[lane_id]
        resolved_lanes.append(
            ResolvedLane(
                id=lane_id,
                kind=lane_kinds[lane_id],
                depends_on=tuple(sorted(d for d in deps if d is not None)),
                extract=stages["extract"].model_copy(update={"references": refs}),
                merge=stages["merge"],
                normalize=stages["normalize"],
            )
        )
    _check_acyclic(r, resolved_lanes)
    chunk_refs = tuple(sorted(bindings["chunk"].values(), key=lambda b: b.slot))
    if any(b.origin == "lane" for b in chunk_refs):
        raise r.fail("pipeline.chunk.references", "the chunker cannot consume a lane artifact")
    chunk = chunk.model_copy(update={"references": chunk_refs})

    llm_name = llm_profile or pipe.llm_profile
    llm_available = {**registry.llm_profiles.builtins, **profile.llm_profiles}
    llm_cfg = llm_available.get(llm_name)
    if llm_cfg is None:
        known = sorted(llm_available)
        raise r.fail("pipeline.llm_profile", f"unknown LLM profile {llm_name!r}; known: {known}")
    try:
        llm_resolved = registry.llm_profiles.validate(llm_name, llm_cfg)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise r.fail(f"llm_profiles.{llm_name}.{loc}", err["msg"]) from None

    if pipe.output.module != DEFAULT_OUTPUT_MODULE:
        raise r.fail(
            "pipeline.output.module",
            f"unknown output module {pipe.output.module!r}; known: {DEFAULT_OUTPUT_MODULE}",
        )
    output_options = validate_output_options(
        pipe.output.options,
        configured_lanes=configured,
        fail=lambda key, msg: r.fail(f"pipeline.output.options.{key}", msg),
    )

    resolved = ResolvedPipeline(
        pipeline_id=pipe.id,
        profile_name=profile_name,
        input_format=pipe.input.format,
        chunk=chunk,
        llm_profile_name=llm_name,
        llm_profile=dict(llm_resolved),
        lanes=tuple(sorted(resolved_lanes, key=lambda lane: lane.id)),
        configured_lanes=tuple(sorted(configured)),
        output_module=DEFAULT_OUTPUT_MODULE,
        output_options=output_options,
        limits=pipe.limits,
        budget=pipe.budget,
        publish=pipe.publish,
    )
    return resolved.model_copy(update={"digest": pipeline_digest(resolved)})


def pipeline_digest(resolved: ResolvedPipeline) -> str:
    """Digest of the resolved pipeline without the digest field (absolute paths excluded), and
    without the limits and budget: they decide whether a run may start, never what it makes."""
    return digest_of(resolved.model_dump(mode="json", exclude={"digest", "limits", "budget"}))


def _check_lane_binding(
    r: _Resolver, b: ResolvedBinding, lane_kinds: Mapping[str, str], key: str
) -> None:
    """A slot bound to a lane names a selected lane whose kind the slot accepts."""
    if b.origin != "lane" or b.lane is None:
        return
    if b.lane not in lane_kinds:
        raise r.fail(
            f"{key}.references.{b.slot}",
            f"lane {b.lane!r} is not a selected lane of this pipeline",
        )
    if b.accepted_kinds and lane_kinds[b.lane] not in b.accepted_kinds:
        raise r.fail(
            f"{key}.references.{b.slot}",
            f"lane {b.lane!r} produces {lane_kinds[b.lane]!r}; slot accepts "
            f"{list(b.accepted_kinds)}",
        )


def _check_acyclic(r: _Resolver, lanes: list[ResolvedLane]) -> None:
    deps = {lane.id: set(lane.depends_on) for lane in lanes}
    done: set[str] = set()
    while deps:
        ready = [lane for lane, d in deps.items() if d <= done]
        if not ready:
            raise r.fail("pipeline.lanes", f"lane references form a cycle among {sorted(deps)}")
        for lane in ready:
            done.add(lane)
            del deps[lane]


def _resolve_bindings(
    r: _Resolver,
    targets: Mapping[str, _Target],
    runtime: Sequence[RuntimeBinding],
    unbinds: Sequence[str],
    cwd: Path,
) -> dict[str, dict[str, ResolvedBinding]]:
    """Each target's bindings by slot: the pipeline's defaults for every declaring target, then
    the target's own, then `--reference` overrides, minus `--unbind`; required slots bound."""
    out: dict[str, dict[str, ResolvedBinding]] = {t: {} for t in targets}
    declaring: dict[str, list[str]] = {}
    for target in targets.values():
        for slot in target.slots:
            declaring.setdefault(slot.name, []).append(target.name)
    for slot_name, cfg in r.profile.pipeline.references.items():
        if slot_name not in declaring:
            raise r.fail(
                f"pipeline.references.{slot_name}",
                "no selected lane or chunker declares this slot",
            )
        for name in declaring[slot_name]:
            key = f"pipeline.references.{slot_name}"
            declared = _slot(targets[name], slot_name)
            out[name][slot_name] = r.binding(declared, name, cfg, "pipeline", key, r.base_dir)
    for target in targets.values():
        for slot_name, bcfg in target.bindings.items():
            own = target.slot(slot_name)
            if own is None:
                raise r.fail(
                    f"{target.key}.references.{slot_name}", f"declares no slot {slot_name!r}"
                )
            key = f"{target.key}.references"
            out[target.name][slot_name] = r.binding(
                own, target.name, bcfg, "target", key, r.base_dir
            )

    def pick(selector: str, what: str) -> tuple[_Target, ReferenceSlot]:
        head, _, slot_name = selector.rpartition(".")
        if not head:
            found = declaring.get(slot_name, [])
            if len(found) == 1:
                return targets[found[0]], _slot(targets[found[0]], slot_name)
            if not found:
                raise r.fail(f"{what} {selector}", "no selected target declares this slot")
            options = ", ".join(f"{t}.{slot_name}" for t in sorted(found))
            raise r.fail(
                f"{what} {selector}", f"slot is declared by several targets; use one of: {options}"
            )
        name = head if head == "chunk" or head.endswith(".extract") else f"{head}.extract"
        target = targets.get(name)
        if target is None or target.slot(slot_name) is None:
            raise r.fail(
                f"{what} {selector}",
                "no selected target declares this slot; selectors are SLOT, chunk.SLOT, "
                "LANE.SLOT and LANE.extract.SLOT",
            )
        return target, _slot(target, slot_name)

    for rb in runtime:
        target, slot = pick(rb.selector, "--reference")
        cfg = ReferenceBindingConfig(path=rb.path)
        out[target.name][slot.name] = r.binding(
            slot, target.name, cfg, "runtime", "--reference", cwd
        )
    for selector in unbinds:
        target, slot = pick(selector, "--unbind")
        if slot.required:
            raise r.fail(f"--unbind {selector}", "slot is required and cannot be unbound")
        out[target.name].pop(slot.name, None)
    for target in targets.values():
        for slot in target.slots:
            if slot.required and slot.name not in out[target.name]:
                raise r.fail(
                    f"{target.key}.references.{slot.name}",
                    f"required reference slot {slot.name!r} is not bound",
                )
    return out


def _slot(target: _Target, name: str) -> ReferenceSlot:
    slot = target.slot(name)
    assert slot is not None
    return slot


def resolve_profile_file(path: Path, *, registry: LaneRegistry, **kwargs: Any) -> ResolvedPipeline:
    """Load and resolve a profile file against `registry`; config paths resolve relative to
    its folder."""
    profile = load_profile(path)
    return resolve_pipeline(
        profile, profile_name=path.name, base_dir=path.parent.resolve(), registry=registry, **kwargs
    )
