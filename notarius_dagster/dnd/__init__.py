"""The D&D lanes. Each lane is one subpackage that registers its artifact kind, modules and
validators when imported; `load_lanes()` imports them all."""

from __future__ import annotations

import importlib
import pkgutil


def load_lanes() -> list[str]:
    """Import every lane subpackage (adding a lane = adding a folder here)."""
    names = []
    for info in pkgutil.iter_modules(__path__):
        if info.ispkg:
            importlib.import_module(f"{__name__}.{info.name}")
            names.append(info.name)
    return sorted(names)
