"""Artifact kinds. A kind ties a name (`dnd/npc-list`) to its pydantic model,
schema identity, the list field that holds its records, an explicit, typed projection of its
source references (used by validators and the evidence context) and the record fields a preview
may show. A lane's kind is derived from its `LaneSpec` (`engine/lanes.py`); generic code only
ever sees kinds through the lane registry value (`engine/registry.py`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from pydantic import BaseModel

from notarius_dagster.engine.models import SourceRef

SourceRefProjection = Callable[[BaseModel], Iterable[SourceRef]]


@dataclass(frozen=True)
class ArtifactKind:
    """Everything generic code needs to know about one artifact kind."""

    kind: str
    model: type[BaseModel]
    schema_id: str
    schema_name: str
    schema_version: str
    items_field: str
    project_source_refs: SourceRefProjection
    preview_fields: tuple[str, ...] = ()
    """Record fields safe to show in a preview (names, ids, kinds, numbers; never prose)."""
    support_fields: tuple[str, ...] = ()
    """Record fields the cited units must mention (any one value suffices; engine/support.py)."""
    refs_field: str = "source_refs"
    """The record field holding its citations (a list of references or a single one)."""
    speaker_mentions: bool = False
    """Whether a cited unit's speaker label counts as a mention of a support value."""
    speaker_acts: bool = False
    """Whether the supported field names the one who speaks (a turn's actor), so the names a
    speaker-name hook maps a cited unit's label to count as mentions (engine/support.py)."""

    def json_schema(self) -> dict[str, object]:
        """The JSON Schema generated from the model (the checked-in file must equal it)."""
        schema = self.model.model_json_schema()
        schema["$id"] = self.schema_id
        schema["title"] = self.schema_name
        return schema

    def parse(self, payload: Mapping[str, object]) -> BaseModel:
        """A payload of this kind as its typed model (`pydantic.ValidationError` if not one)."""
        return self.model.model_validate(payload)

    def parse_held(
        self, payload: Mapping[str, object], held: tuple[object, BaseModel] | None
    ) -> tuple[object, BaseModel]:
        """`held` (a payload object and its parse) when it is this very payload parsed as this
        kind, else a new parse of `payload`: what a holder of a payload keeps so its readers
        share one parse, and a copy with another payload parses its own."""
        if held is not None and held[0] is payload and type(held[1]) is self.model:
            return held
        return (payload, self.parse(payload))

    def records(self, artifact: BaseModel) -> tuple[BaseModel, ...]:
        """The records of a typed artifact of this kind, in order."""
        records: list[BaseModel] = getattr(artifact, self.items_field)
        return tuple(records)

    def source_refs(self, payload: Mapping[str, object]) -> list[SourceRef]:
        """Direct references of a (valid) payload, in record order."""
        return list(self.project_source_refs(self.parse(payload)))
