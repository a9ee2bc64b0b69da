"""The LLM profiles a pipeline may name, as the engine sees them.

The engine resolves `pipeline.llm_profile` without knowing what a profile is made of: the LLM
layer (`notarius_dagster.llm.profiles`) owns the profile model and the built-in profiles, and
`notarius_dagster.modules.load_modules()` hands both to this catalog. The engine keeps only
plain configuration mappings and a validator callable, so it never imports the LLM layer (nor
the model strings of any provider)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from notarius_dagster.engine.errors import ResolutionError

LLMProfileValidator = Callable[[str, Mapping[str, Any]], dict[str, Any]]
"""Checks one named profile configuration and returns its canonical JSON form (every field,
defaults filled in). An invalid configuration raises `pydantic.ValidationError`: resolution
turns its first error's location into the key path `llm_profiles.<name>.<field>`."""


class LLMProfileCatalog:
    """Built-in LLM profiles by name, and the validator every named profile goes through."""

    def __init__(self) -> None:
        self._builtins: dict[str, Mapping[str, Any]] = {}
        self._validator: LLMProfileValidator | None = None

    def register_builtin(self, name: str, cfg: Mapping[str, Any]) -> None:
        """Offer `name` to every pipeline profile (a profile's own `llm_profiles` entry of the
        same name wins). Registering the same configuration again is a no-op."""
        frozen = MappingProxyType(dict(cfg))
        if name in self._builtins and dict(self._builtins[name]) != dict(frozen):
            raise ValueError(f"built-in LLM profile {name!r} registered twice")
        self._builtins[name] = frozen

    def set_validator(self, validator: LLMProfileValidator) -> None:
        self._validator = validator

    def builtins(self) -> Mapping[str, Mapping[str, Any]]:
        return MappingProxyType(self._builtins)

    def validate(self, name: str, cfg: Mapping[str, Any]) -> dict[str, Any]:
        """The canonical form of profile `name`; see `LLMProfileValidator` for errors."""
        if self._validator is None:
            raise ResolutionError(
                "no LLM profile validator is registered (load the modules before resolving)"
            )
        return self._validator(name, cfg)


LLM_PROFILES = LLMProfileCatalog()
