"""Persists each per-asset value as JSON under the store (`StorePaths.asset_values`), one file
per asset and partition.
Values are pydantic models, stored with their type name so loading validates them again
(asset functions that take upstream values as **kwargs carry no annotation).

The source document and the chunk map are read by every lane step of a run: they are kept in
memory per process, keyed by file path, modification time and size, so a process loads and
validates each once (a file rewritten since, by this or another process, is read again)."""

from __future__ import annotations

import importlib
import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

from dagster import ConfigurableIOManager, InputContext, OutputContext
from pydantic import BaseModel

from notarius_dagster.store import session_values_folder

# Assets whose values are large, immutable and read by many steps of a run.
CACHED_ASSETS = frozenset({"source_document", "chunk_map"})
_MAX_CACHED = 32


class _ValueCache:
    """Process-wide: (path, mtime_ns, size) -> the validated value."""

    def __init__(self) -> None:
        self._values: dict[Path, tuple[tuple[int, int], Any]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _stamp(path: Path) -> tuple[int, int]:
        stat = path.stat()
        return stat.st_mtime_ns, stat.st_size

    def get(self, path: Path) -> Any | None:
        with self._lock:
            held = self._values.get(path)
        if held is None:
            return None
        try:
            return held[1] if held[0] == self._stamp(path) else None
        except FileNotFoundError:
            return None

    def clear(self) -> None:
        with self._lock:
            self._values.clear()

    def put(self, path: Path, value: Any) -> None:
        stamp = self._stamp(path)
        with self._lock:
            if len(self._values) >= _MAX_CACHED:
                self._values.clear()
            self._values[path] = (stamp, value)


VALUE_CACHE = _ValueCache()


def _cached(context: InputContext | OutputContext) -> bool:
    return context.asset_key.path[-1] in CACHED_ASSETS


class JsonAssetIOManager(ConfigurableIOManager):
    root: str  # StorePaths.asset_values

    def _path(self, context: InputContext | OutputContext) -> Path:
        key = "/".join(context.asset_key.path)
        partition = context.asset_partition_key if context.has_asset_partitions else "_"
        return session_values_folder(Path(self.root), partition) / f"{key}.json"

    def handle_output(self, context: OutputContext, obj: Any) -> None:
        if obj is None:
            return
        if isinstance(obj, BaseModel):
            typ = f"{type(obj).__module__}:{type(obj).__qualname__}"
            data = json.dumps({"type": typ, "value": obj.model_dump(mode="json")})
        else:
            data = json.dumps({"type": None, "value": obj})
        path = self._path(context)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(data)
        os.replace(tmp, path)
        if _cached(context):
            VALUE_CACHE.put(path, obj)

    def load_input(self, context: InputContext) -> Any:
        path = self._path(context)
        if _cached(context):
            held = VALUE_CACHE.get(path)
            if held is not None:
                return held
        value = self._read(context, path)
        if _cached(context):
            VALUE_CACHE.put(path, value)
        return value

    def _read(self, context: InputContext, path: Path) -> Any:
        stored = json.loads(path.read_text(encoding="utf-8"))
        if not stored.get("type"):
            return stored["value"]
        module_name, _, qualname = stored["type"].partition(":")
        typ = getattr(importlib.import_module(module_name), qualname)
        if not (isinstance(typ, type) and issubclass(typ, BaseModel)):
            raise TypeError(
                f"stored value of {context.asset_key.to_user_string()} has an unexpected type"
            )
        return typ.model_validate(stored["value"])
