"""Profile resolution: everything that can be checked before a single LLM call.

Lane selection, module defaults, catalog and capability checks, validator chains, reference
bindings (pipeline defaults, target-local overrides, runtime overrides and unbinds, flat slot
names only when exactly one selected target declares the slot) and a stable digest."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, cast

from pydantic import Field, ValidationError

from notarius_dagster.engine.artifact_kinds import registered_kinds
from notarius_dagster.engine.catalog import CATALOG, ModuleCatalog, ModuleSpec, ReferenceSlot
from notarius_dagster.engine.config import (
    DEFAULT_MERGE_MODULE,
    DEFAULT_NORMALIZE_MODULE,
    ProfileFile,
    PublishConfig,
    ReferenceBindingConfig,
    StageConfig,
    load_profile,
)
from notarius_dagster.engine.digest import digest_of
from notarius_dagster.engine.errors import ProfileError
from notarius_dagster.engine.limits import Budget, InputLimits
from notarius_dagster.engine.llm_profiles import LLM_PROFILES, LLMProfileCatalog
from notarius_dagster.engine.models import Frozen, Rejection, Stage
from notarius_dagster.engine.output_options import validate_output_options
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


class ResolvedStage(Frozen):
    stage: str
    module: str
    version: str
    options: dict[str, Any]
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
    llm_profile: dict[str, Any]
    lanes: tuple[ResolvedLane, ...]
    configured_lanes: tuple[str, ...]
    output_module: str
    output_options: dict[str, Any]
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
    def __init__(self, profile: ProfileFile, name: str, base_dir: Path, catalog: ModuleCatalog):
        self.profile = profile
        self.name = name
        self.base_dir = base_dir
        self.catalog = catalog

    def fail(self, key: str, problem: str) -> ProfileError:
        return ProfileError(self.name, key, problem)

    def spec(self, stage: str, cfg_module: str, key: str) -> ModuleSpec:
        spec = self.catalog.spec(stage, cfg_module)
        if spec is None:
            known = ", ".join(self.catalog.keys(stage)) or "none"
            raise self.fail(
                f"{key}.module", f"unknown {stage} module {cfg_module!r}; known: {known}"
            )
        return spec

    def stage(
        self, stage: str, cfg: StageConfig, key: str, spec: ModuleSpec, kind: str | None
    ) -> ResolvedStage:
        if cfg.validators is not None:
            unknown = sorted(set(cfg.validators) - known_validators())
            if unknown:
                raise self.fail(f"{key}.validators", f"unknown validator(s): {', '.join(unknown)}")
        try:  # a module refuses options it does not know: say so before anything runs
            self.catalog.build(stage, spec.key, dict(cfg.options))
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            raise self.fail(
                f"{key}.options.{where}" if where else f"{key}.options", err["msg"]
            ) from None
        except (ValueError, TypeError) as exc:
            raise self.fail(f"{key}.options", str(exc) or type(exc).__name__) from None
        chain, source = resolve_chain(stage, cfg.validators, spec.default_validators)
        return ResolvedStage(
            stage=stage,
            module=spec.key,
            version=spec.version,
            options=dict(cfg.options),
            retries=cfg.retries,
            validators=chain,
            validators_source=source,
            artifact_kind=spec.artifact_kind or kind,
        )

    def binding(
        self,
        slot: ReferenceSlot,
        target: str,
        cfg: ReferenceBindingConfig,
        source: BindingSource,
        key: str,
        base: Path,
    ) -> ResolvedBinding:
        common = dict(
            slot=slot.name,
            target=target,
            source=source,
            required=slot.required,
            accepted_kinds=slot.accepted_kinds,
            accepted_media_types=slot.accepted_media_types,
            max_bytes=slot.max_bytes,
        )
        if cfg.lane is not None:
            return ResolvedBinding(origin="lane", lane=cfg.lane.strip(), **common)  # type: ignore[arg-type]
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
        return ResolvedBinding(origin="file", path=str(path), display=Path(cfg.path).name, **common)  # type: ignore[arg-type]


def resolve_pipeline(
    profile: ProfileFile,
    *,
    profile_name: str,
    base_dir: Path,
    lanes: Sequence[str] | None = None,
    runtime_references: Sequence[RuntimeBinding] = (),
    runtime_unbinds: Sequence[str] = (),
    llm_profile: str | None = None,
    cwd: Path | None = None,
    catalog: ModuleCatalog = CATALOG,
    llm_catalog: LLMProfileCatalog = LLM_PROFILES,
) -> ResolvedPipeline:
    """Resolve a parsed profile; every error names the profile and key path. `catalog` and
    `llm_catalog` are filled by `notarius_dagster.modules.load_modules()`."""
    r = _Resolver(profile, profile_name, base_dir, catalog)
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

    chunk_spec = r.spec("chunk", pipe.chunk.module, "pipeline.chunk")
    available = {"source"}
    _check_caps(r, chunk_spec, available, "pipeline.chunk")
    chunk = r.stage("chunk", pipe.chunk, "pipeline.chunk", chunk_spec, None)

    targets: dict[str, tuple[ModuleSpec, StageConfig, str]] = {
        "chunk": (chunk_spec, pipe.chunk, "pipeline.chunk")
    }
    lane_parts: dict[str, dict[str, ResolvedStage]] = {}
    lane_kinds: dict[str, str] = {}
    for index, lane_cfg in enumerate(pipe.lanes):
        if lane_cfg.id not in selected:
            continue
        key = f"pipeline.lanes[{index}]"
        caps = set(available) | {"chunks"}
        ex_spec = r.spec("extract", lane_cfg.extract.module, f"{key}.extract")
        _check_caps(r, ex_spec, caps, f"{key}.extract")
        kind = ex_spec.artifact_kind
        if kind is None or kind not in registered_kinds():
            raise r.fail(
                f"{key}.extract.module", "extract module declares no registered artifact kind"
            )
        merge_cfg = lane_cfg.merge or StageConfig(module=DEFAULT_MERGE_MODULE)
        norm_cfg = lane_cfg.normalize or StageConfig(module=DEFAULT_NORMALIZE_MODULE)
        mg_spec = r.spec("merge", merge_cfg.module, f"{key}.merge")
        _check_caps(r, mg_spec, caps, f"{key}.merge")
        nm_spec = r.spec("normalize", norm_cfg.module, f"{key}.normalize")
        _check_caps(r, nm_spec, caps, f"{key}.normalize")
        for spec_, stage_key in ((mg_spec, "merge"), (nm_spec, "normalize")):
            if spec_.artifact_kind not in (None, kind):
                raise r.fail(
                    f"{key}.{stage_key}.module",
                    f"module produces {spec_.artifact_kind!r}, lane is {kind!r}",
                )
        lane_kinds[lane_cfg.id] = kind
        lane_parts[lane_cfg.id] = {
            "extract": r.stage("extract", lane_cfg.extract, f"{key}.extract", ex_spec, kind),
            "merge": r.stage("merge", merge_cfg, f"{key}.merge", mg_spec, kind),
            "normalize": r.stage("normalize", norm_cfg, f"{key}.normalize", nm_spec, kind),
        }
        for stage_name, spec_, cfg in (
            ("extract", ex_spec, lane_cfg.extract),
            ("merge", mg_spec, merge_cfg),
            ("normalize", nm_spec, norm_cfg),
        ):
            targets[f"{lane_cfg.id}.{stage_name}"] = (spec_, cfg, f"{key}.{stage_name}")

    bindings = _resolve_bindings(r, targets, runtime_references, runtime_unbinds, cwd or Path.cwd())
    for target, bound in bindings.items():
        for b in bound.values():
            if b.origin == "lane":
                if b.lane not in lane_kinds:
                    raise r.fail(
                        f"{targets[target][2]}.references.{b.slot}.lane",
                        f"lane {b.lane!r} is not a selected lane of this pipeline",
                    )
                if b.accepted_kinds and lane_kinds[b.lane] not in b.accepted_kinds:
                    raise r.fail(
                        f"{targets[target][2]}.references.{b.slot}.lane",
                        f"lane {b.lane!r} produces {lane_kinds[b.lane]!r}; slot accepts "
                        f"{list(b.accepted_kinds)}",
                    )

    resolved_lanes = []
    for lane_id in selected:
        parts = lane_parts[lane_id]
        stages = {}
        deps: set[str] = set()
        for stage_name, stage in parts.items():
            refs = tuple(
                sorted(bindings.get(f"{lane_id}.{stage_name}", {}).values(), key=lambda b: b.slot)
            )
            deps |= {b.lane for b in refs if b.lane}
            stages[stage_name] = stage.model_copy(update={"references": refs})
        if lane_id in deps:
            raise r.fail("pipeline.lanes", f"lane {lane_id!r} references itself")
        resolved_lanes.append(
            ResolvedLane(
                id=lane_id, kind=lane_kinds[lane_id], depends_on=tuple(sorted(deps)), **stages
            )
        )
    _check_acyclic(r, resolved_lanes)
    chunk = chunk.model_copy(
        update={
            "references": tuple(sorted(bindings.get("chunk", {}).values(), key=lambda b: b.slot))
        }
    )
    if any(b.origin == "lane" for b in chunk.references):
        raise r.fail("pipeline.chunk.references", "the chunker cannot consume a lane artifact")

    llm_name = llm_profile or pipe.llm_profile
    llm_available = {**llm_catalog.builtins(), **profile.llm_profiles}
    llm_cfg = llm_available.get(llm_name)
    if llm_cfg is None:
        known = sorted(llm_available)
        raise r.fail("pipeline.llm_profile", f"unknown LLM profile {llm_name!r}; known: {known}")
    llm_resolved = _validate_llm_profile(r, llm_catalog, llm_name, llm_cfg)

    output_spec = r.spec("output", pipe.output.module, "pipeline.output")
    output_options = _validate_output_options(
        r, output_spec, pipe.output.options, configured, lane_kinds_all(profile, catalog)
    )

    resolved = ResolvedPipeline(
        pipeline_id=pipe.id,
        profile_name=profile_name,
        input_format=pipe.input.format,
        chunk=chunk,
        llm_profile_name=llm_name,
        llm_profile=llm_resolved,
        lanes=tuple(sorted(resolved_lanes, key=lambda lane: lane.id)),
        configured_lanes=tuple(sorted(configured)),
        output_module=output_spec.key,
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


def lane_kinds_all(profile: ProfileFile, catalog: ModuleCatalog) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for lane in profile.pipeline.lanes:
        spec = catalog.spec("extract", lane.extract.module)
        out[lane.id] = spec.artifact_kind if spec else None
    return out


def _check_caps(r: _Resolver, spec: ModuleSpec, available: set[str], key: str) -> None:
    missing = [c for c in spec.requires if c not in available]
    if missing:
        raise r.fail(f"{key}.module", f"module {spec.key!r} requires {missing}, not available here")
    available |= set(spec.provides)


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
    targets: dict[str, tuple[ModuleSpec, StageConfig, str]],
    runtime: Sequence[RuntimeBinding],
    unbinds: Sequence[str],
    cwd: Path,
) -> dict[str, dict[str, ResolvedBinding]]:
    out: dict[str, dict[str, ResolvedBinding]] = {t: {} for t in targets}
    declaring: dict[str, list[str]] = {}
    for target, (spec, _, _) in targets.items():
        for slot in spec.slots:
            declaring.setdefault(slot.name, []).append(target)
    for slot_name, cfg in r.profile.pipeline.references.items():
        if slot_name not in declaring:
            raise r.fail(
                f"pipeline.references.{slot_name}",
                "no selected chunk, extract, merge or normalize module declares this slot",
            )
        for target in declaring[slot_name]:
            pipeline_slot = targets[target][0].slot(slot_name)
            assert pipeline_slot is not None
            out[target][slot_name] = r.binding(
                pipeline_slot,
                target,
                cfg,
                "pipeline",
                f"pipeline.references.{slot_name}",
                r.base_dir,
            )
    for target, (spec, stage_cfg, key) in targets.items():
        for slot_name, bcfg in stage_cfg.references.items():
            target_slot = spec.slot(slot_name)
            if target_slot is None:
                raise r.fail(
                    f"{key}.references.{slot_name}",
                    f"module {spec.key!r} declares no slot {slot_name!r}",
                )
            out[target][slot_name] = r.binding(
                target_slot, target, bcfg, "target", f"{key}.references", r.base_dir
            )

    def pick(selector: str, what: str) -> tuple[str, str]:
        parts = selector.rsplit(".", 1)
        if len(parts) == 1:
            slot_name = selector
            found = declaring.get(slot_name, [])
            if len(found) != 1:
                if not found:
                    raise r.fail(f"{what} {selector}", "no selected target declares this slot")
                options = ", ".join(f"{t}.{slot_name}" for t in sorted(found))
                raise r.fail(
                    f"{what} {selector}",
                    f"slot is declared by several targets; use one of: {options}",
                )
            return found[0], slot_name
        target, slot_name = parts
        if target not in targets or targets[target][0].slot(slot_name) is None:
            raise r.fail(
                f"{what} {selector}",
                "no selected target declares this slot; selectors "
                "are SLOT, chunk.SLOT, LANE.extract.SLOT, LANE.merge.SLOT, "
                "LANE.normalize.SLOT",
            )
        return target, slot_name

    for rb in runtime:
        target, slot_name = pick(rb.selector, "--reference")
        runtime_slot = targets[target][0].slot(slot_name)
        assert runtime_slot is not None
        out[target][slot_name] = r.binding(
            runtime_slot,
            target,
            ReferenceBindingConfig(path=rb.path),
            "runtime",
            "--reference",
            cwd,
        )
    for selector in unbinds:
        target, slot_name = pick(selector, "--unbind")
        unbound_slot = targets[target][0].slot(slot_name)
        assert unbound_slot is not None
        if unbound_slot.required:
            raise r.fail(f"--unbind {selector}", "slot is required and cannot be unbound")
        out[target].pop(slot_name, None)
    for target, (spec, _, key) in targets.items():
        for slot in spec.slots:
            if slot.required and slot.name not in out[target]:
                raise r.fail(
                    f"{key}.references.{slot.name}",
                    f"required reference slot {slot.name!r} of module {spec.key!r} is not bound",
                )
    return out


def _validate_llm_profile(
    r: _Resolver, llm_catalog: LLMProfileCatalog, name: str, cfg: Mapping[str, Any]
) -> dict[str, Any]:
    try:
        return llm_catalog.validate(name, cfg)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise r.fail(f"llm_profiles.{name}.{loc}", err["msg"]) from None


def _validate_output_options(
    r: _Resolver,
    spec: ModuleSpec,
    options: dict[str, Any],
    configured: list[str],
    kinds: dict[str, str | None],
) -> dict[str, Any]:
    return validate_output_options(
        options,
        configured_lanes=kinds,
        fail=lambda key, msg: r.fail(f"pipeline.output.options.{key}", msg),
    )


def resolve_profile_file(path: Path, **kwargs: Any) -> ResolvedPipeline:
    """Load and resolve a profile file; config paths resolve relative to its folder."""
    profile = load_profile(path)
    return resolve_pipeline(
        profile, profile_name=path.name, base_dir=path.parent.resolve(), **kwargs
    )
