"""The LLM profiles a pipeline may name, as the engine sees them.

The engine resolves `pipeline.llm_profile` without knowing what a profile is made of: the LLM
layer (`notarius_dagster.llm.profiles.profile_catalog()`) builds this value from its profile
model and built-in profiles, and the lane registry (`engine/registry.py`) carries it. The engine
keeps only plain configuration mappings and a validator callable, so it never imports the LLM
layer (nor the model strings of any provider)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from notarius_dagster.engine.errors import ResolutionError

LLMProfileValidator = Callable[[str, Mapping[str, object]], Mapping[str, object]]
"""Checks one named profile configuration and returns its canonical JSON form (every field,
defaults filled in). An invalid configuration raises `pydantic.ValidationError`: resolution
turns its first error's location into the key path `llm_profiles.<name>.<field>`."""


def _no_validator(name: str, cfg: Mapping[str, object]) -> dict[str, object]:
    raise ResolutionError("no LLM profile validator is given (the registry has no LLM layer)")


@dataclass(frozen=True)
class LLMProfileCatalog:
    """Built-in LLM profiles by name, and the validator every named profile goes through."""

    builtins: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    validator: LLMProfileValidator = _no_validator

    def __post_init__(self) -> None:
        frozen = {name: MappingProxyType(dict(cfg)) for name, cfg in self.builtins.items()}
        object.__setattr__(self, "builtins", MappingProxyType(frozen))

    def validate(self, name: str, cfg: Mapping[str, object]) -> Mapping[str, object]:
        """The canonical form of profile `name`; see `LLMProfileValidator` for errors."""
        return self.validator(name, cfg)
