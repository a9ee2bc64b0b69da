"""The alias hook: other names that denote the same person as a record's name, from a stage's
prepared references.

The engine knows no domain: a domain module registers an `AliasSource` (the D&D roster
registers one that reads the bound `roster` reference: `Jester` is also `LAURA`, the player's
speaker label). A validator that checks a record's name against its cited units (the support
validator) asks `aliases_for(references, name)` and may accept any of them as a mention.
Without a source, or without the reference a source reads, there are no aliases."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from notarius_dagster.engine.contracts import PreparedReference

AliasSource = Callable[[Mapping[str, PreparedReference], str], Sequence[str]]
"""(the stage's prepared references, a name) -> other names of the same person."""

_SOURCES: dict[str, AliasSource] = {}


def register_alias_source(name: str, source: AliasSource) -> None:
    """Register (or replace) the alias source called `name`."""
    _SOURCES[name] = source


def aliases_for(references: Mapping[str, PreparedReference], name: str) -> tuple[str, ...]:
    """Every registered source's aliases of `name`, deduplicated, in source order."""
    out: list[str] = []
    for source in _SOURCES.values():
        for alias in source(references, name):
            if alias not in out and alias != name:
                out.append(alias)
    return tuple(out)
