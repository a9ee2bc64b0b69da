"""Module specs and the one module catalog.

Every module registers a `ModuleSpec` (key, stage, provides, requires, reference slots) and a
factory that builds the module from its options. Resolution reads specs (and builds each module
once, so that unknown options fail before anything runs); the runners ask for instances by
stage and get the stage's protocol (`engine/contracts.py`) back."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from pydantic import Field

from notarius_dagster.engine.contracts import Chunker, Extractor, Merger, Normalizer, StageModule
from notarius_dagster.engine.models import Frozen

ModuleStage = Literal["input", "chunk", "extract", "merge", "normalize", "validate", "output"]
SLOT_STAGES: frozenset[str] = frozenset({"chunk", "extract", "merge", "normalize"})


class ReferenceSlot(Frozen):
    """A named input a module may receive: an external file or another lane's artifact."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,47}$")
    required: bool = False
    accepted_kinds: tuple[str, ...] = ()
    accepted_media_types: tuple[str, ...] = ()
    max_bytes: int = 1_000_000


class ModuleSpec(Frozen):
    """What a module is, for resolution: no instance needed to read it."""

    key: str
    stage: ModuleStage
    version: str = "1"
    provides: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()
    slots: tuple[ReferenceSlot, ...] = ()
    artifact_kind: str | None = Field(
        default=None, description="the kind an extract/merge/normalize module produces"
    )
    default_validators: tuple[str, ...] | None = Field(
        default=None, description="lane rules added to the central defaults for this module"
    )

    def model_post_init(self, __context: Any) -> None:
        if self.slots and self.stage not in SLOT_STAGES:
            raise ValueError(f"module {self.key!r}: {self.stage} modules cannot declare slots")

    def slot(self, name: str) -> ReferenceSlot | None:
        return next((s for s in self.slots if s.name == name), None)


ModuleFactory = Callable[[dict[str, Any]], StageModule]
"""Builds a module from its options; raises `pydantic.ValidationError`, `ValueError` or
`TypeError` for options it does not accept. A `chunk` factory returns a `Chunker`, an
`extract` factory an `Extractor`, and so on."""


@dataclass(frozen=True)
class CatalogEntry:
    spec: ModuleSpec
    factory: ModuleFactory


class ModuleCatalog:
    """Specs and factories by (stage, key)."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str], CatalogEntry] = {}

    def register(self, spec: ModuleSpec, factory: ModuleFactory) -> None:
        slot_names = [s.name for s in spec.slots]
        if len(slot_names) != len(set(slot_names)):
            raise ValueError(f"module {spec.key!r} declares a slot twice")
        key = (spec.stage, spec.key)
        if key in self._entries and self._entries[key].spec != spec:
            raise ValueError(f"{spec.stage} module {spec.key!r} registered twice")
        self._entries[key] = CatalogEntry(spec, factory)

    def spec(self, stage: str, key: str) -> ModuleSpec | None:
        entry = self._entries.get((stage, key))
        return entry.spec if entry else None

    def keys(self, stage: str) -> list[str]:
        return sorted(k for s, k in self._entries if s == stage)

    def build(self, stage: str, key: str, options: Mapping[str, Any]) -> StageModule:
        """Any module by stage and key (resolution builds each one to check its options).
        Raises KeyError for an unregistered (stage, key)."""
        entry = self._entries[(stage, key)]
        return entry.factory(dict(options))

    def build_chunker(self, key: str, options: Mapping[str, Any]) -> Chunker:
        return cast(Chunker, self.build("chunk", key, options))

    def build_extractor(self, key: str, options: Mapping[str, Any]) -> Extractor:
        return cast(Extractor, self.build("extract", key, options))

    def build_merger(self, key: str, options: Mapping[str, Any]) -> Merger:
        return cast(Merger, self.build("merge", key, options))

    def build_normalizer(self, key: str, options: Mapping[str, Any]) -> Normalizer:
        return cast(Normalizer, self.build("normalize", key, options))

    def fingerprint_material(
        self, stage: str, key: str, options: Mapping[str, Any]
    ) -> dict[str, Any]:
        """What, besides key, version and options, determines a module's output: an
        extractor's own material (`Extractor.fingerprint_material`); nothing for the other
        stages, whose output is a function of their inputs and options."""
        if stage != "extract":
            return {}
        return dict(self.build_extractor(key, options).fingerprint_material())


CATALOG = ModuleCatalog()
