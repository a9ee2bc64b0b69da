"""Module specs and the one module catalog.

Every module registers a `ModuleSpec` (key, stage, provides, requires, reference slots) and a
factory. Resolution reads specs only; execution asks the catalog for instances."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

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


@dataclass(frozen=True)
class CatalogEntry:
    spec: ModuleSpec
    factory: Callable[[dict[str, Any]], Any]


class ModuleCatalog:
    """Specs and factories by (stage, key)."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str], CatalogEntry] = {}

    def register(self, spec: ModuleSpec, factory: Callable[[dict[str, Any]], Any]) -> None:
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

    def build(self, stage: str, key: str, options: dict[str, Any]) -> Any:
        entry = self._entries[(stage, key)]
        return entry.factory(options)


CATALOG = ModuleCatalog()
