"""Persists each per-asset value as JSON under the store (`StorePaths.asset_values`), one file
per asset and partition.
Values are pydantic models, stored with their type name so loading validates them again
(asset functions that take upstream values as **kwargs carry no annotation)."""

from __future__ import annotations

import importlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from dagster import ConfigurableIOManager, InputContext, OutputContext
from pydantic import BaseModel

from notarius_dagster.store import session_values_folder


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

    def load_input(self, context: InputContext) -> Any:
        path = self._path(context)
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
