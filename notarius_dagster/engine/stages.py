"""The generic merge and normalize modules (`appendorder`, `noop`) and the `json` output spec.
They know a lane's artifact kind only through the request context."""

from __future__ import annotations

from typing import Any

from notarius_dagster.engine.catalog import CATALOG, ModuleSpec
from notarius_dagster.engine.contracts import MergeRequest, ModuleOutput, NormalizeRequest


class AppendOrderMerger:
    """Concatenates the records of accepted extracts in chunk order; nothing is dropped."""

    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options

    def merge(self, request: MergeRequest) -> ModuleOutput:
        kind = request.context.kind
        assert kind is not None, "appendorder needs the lane's artifact kind"
        records: list[Any] = []
        for extract in request.extracts:
            assert extract.payload is not None
            records.extend(extract.payload.get(kind.items_field, []))
        payload = {
            "kind": kind.kind,
            "schema_version": kind.schema_version,
            "source_id": request.document.source_id,
            kind.items_field: records,
        }
        return ModuleOutput(payload=payload)


class NoopNormalizer:
    """Passes the merged artifact through unchanged."""

    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options

    def normalize(self, request: NormalizeRequest) -> ModuleOutput:
        return ModuleOutput(payload=request.merged.payload)


CATALOG.register(
    ModuleSpec(key="appendorder", stage="merge", requires=("chunks",)), AppendOrderMerger
)
CATALOG.register(ModuleSpec(key="noop", stage="normalize", requires=("chunks",)), NoopNormalizer)
CATALOG.register(ModuleSpec(key="json", stage="output"), lambda options: None)
