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
import threading
from pathlib import Path

from dagster import ConfigurableIOManager, InputContext, OutputContext
from pydantic import BaseModel, JsonValue, ValidationError

from notarius_dagster.engine.errors import NotariusError
from notarius_dagster.engine.failure_causes import cause_of, validation_problems
from notarius_dagster.engine.files import sweep_leftovers, write_atomically
from notarius_dagster.store import session_values_folder

# Assets whose values are large, immutable and read by many steps of a run.
CACHED_ASSETS = frozenset({"source_document", "chunk_map"})
_MAX_CACHED = 32


class _ValueCache:
    """Process-wide: (path, mtime_ns, size) -> the validated value."""

    def __init__(self) -> None:
        self._values: dict[Path, tuple[tuple[int, int], object]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _stamp(path: Path) -> tuple[int, int]:
        stat = path.stat()
        return stat.st_mtime_ns, stat.st_size

    def get(self, path: Path) -> object | None:
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

    def put(self, path: Path, value: object) -> None:
        stamp = self._stamp(path)
        with self._lock:
            if len(self._values) >= _MAX_CACHED:
                self._values.clear()
            self._values[path] = (stamp, value)


VALUE_CACHE = _ValueCache()


def _cached(context: InputContext | OutputContext) -> bool:
    return context.asset_key.path[-1] in CACHED_ASSETS


class StoredValueError(NotariusError):
    """A per-asset value could not be stored or read back (content-safe: asset, session and
    what is wrong by field path and rule)."""


STORED_MODULES = ("notarius_dagster.",)
"""Where a stored value's type may come from: a file in the store names its type, and only the
project's own models may be imported by that name."""


def _what(context: InputContext | OutputContext) -> str:
    partition = context.asset_partition_key if context.has_asset_partitions else None
    name = context.asset_key.to_user_string()
    return f"{name} (session {partition!r})" if partition else name


def _stored_type(name: object) -> type[BaseModel] | None:
    """The pydantic model a stored value names, if it is one of the project's own."""
    if not isinstance(name, str):
        return None
    module_name, _, qualname = name.partition(":")
    if not module_name.startswith(STORED_MODULES):
        return None
    try:
        typ = getattr(importlib.import_module(module_name), qualname, None)
    except ImportError:
        return None
    return typ if isinstance(typ, type) and issubclass(typ, BaseModel) else None


class JsonAssetIOManager(ConfigurableIOManager):
    root: str  # StorePaths.asset_values

    def _path(self, context: InputContext | OutputContext) -> Path:
        key = "/".join(context.asset_key.path)
        partition = context.asset_partition_key if context.has_asset_partitions else "_"
        return session_values_folder(Path(self.root), partition) / f"{key}.json"

    def handle_output(self, context: OutputContext, obj: object) -> None:
        if obj is None:
            return
        if isinstance(obj, BaseModel):
            typ = f"{type(obj).__module__}:{type(obj).__qualname__}"
            data = json.dumps({"type": typ, "value": obj.model_dump(mode="json")})
        else:
            data = json.dumps({"type": None, "value": obj})
        path = self._path(context)
        sweep_leftovers(path)
        try:
            write_atomically(path, data.encode("utf-8"))
        except OSError as exc:  # disk full, read-only store: name the store, never the path
            raise StoredValueError(
                f"cannot store the value of {_what(context)} in the asset-value store "
                f"(<store>/assets): {cause_of(exc)}; nothing of it was kept"
            ) from None
        if _cached(context):
            VALUE_CACHE.put(path, obj)

    def load_input(self, context: InputContext) -> object:
        path = self._path(context)
        if _cached(context):
            held = VALUE_CACHE.get(path)
            if held is not None:
                return held
        value = self._read(context, path)
        if _cached(context):
            VALUE_CACHE.put(path, value)
        return value

    def _read(self, context: InputContext, path: Path) -> BaseModel | JsonValue:
        """The stored value, validated again. Every error says what is wrong by field path and
        rule, never the value: a stored lane value holds transcript text, and the error goes
        to the event log."""
        what = _what(context)
        try:
            stored: JsonValue = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise StoredValueError(
                f"the stored value of {what} is missing; materialize it again"
            ) from None
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise StoredValueError(
                f"the stored value of {what} cannot be read ({cause_of(exc)}); materialize it again"
            ) from None
        if not isinstance(stored, dict) or "value" not in stored:
            raise StoredValueError(f"the stored value of {what} is not a stored value")
        if not stored.get("type"):
            return stored["value"]
        typ = _stored_type(stored["type"])
        if typ is None:
            raise StoredValueError(f"the stored value of {what} names an unexpected type")
        try:
            return typ.model_validate(stored["value"])
        except ValidationError as exc:
            raise StoredValueError(
                f"the stored value of {what} is not a valid {typ.__name__}: "
                f"{validation_problems(exc)}; materialize it again"
            ) from None
