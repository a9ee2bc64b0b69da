"""The lane registry: one value that says what a deployment offers, built once and passed
explicitly to resolution, the lane runner, the asset factory, the report and the codex.

It holds the lanes (`LaneSpec`, by id), the chunkers (the one pluggable stage besides lanes),
reference-only artifact kinds (files a slot may accept, e.g. a party roster), the LLM profiles
(as plain configuration and a validator, `engine/llm_profiles.py`) and the speaker-name hooks
of the `support` validator. Nothing fills it by importing: `notarius_dagster.modules.registry()`
builds the D&D one; a test adds a throwaway lane with `with_lanes(...)`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from notarius_dagster.engine.artifact_kinds import ArtifactKind
from notarius_dagster.engine.contracts import Chunker
from notarius_dagster.engine.evaluation import MatchFields
from notarius_dagster.engine.lanes import LaneSpec
from notarius_dagster.engine.llm_profiles import LLMProfileCatalog
from notarius_dagster.engine.models import ReferenceSlot
from notarius_dagster.engine.support import KnownNames, SpeakerNames


@dataclass(frozen=True)
class ChunkerSpec:
    """A chunker a profile may name (`pipeline.chunk.module`): `build` makes it from the
    profile's options and refuses options it does not know (`pydantic.ValidationError`,
    `ValueError` or `TypeError`); resolution builds it once to say so before anything runs."""

    key: str
    build: Callable[[dict[str, object]], Chunker]
    version: str = "1"
    slots: tuple[ReferenceSlot, ...] = ()

    def slot(self, name: str) -> ReferenceSlot | None:
        return next((s for s in self.slots if s.name == name), None)


@dataclass(frozen=True)
class LaneRegistry:
    """Lanes, chunkers, reference kinds, LLM profiles and speaker hooks (see the module
    docstring). Ids, kinds and chunker keys are unique; a lane's slot names too."""

    lanes: tuple[LaneSpec, ...] = ()
    chunkers: tuple[ChunkerSpec, ...] = ()
    reference_kinds: tuple[ArtifactKind, ...] = ()
    llm_profiles: LLMProfileCatalog = field(default_factory=LLMProfileCatalog)
    speaker_names: tuple[SpeakerNames, ...] = ()
    known_names: tuple[KnownNames, ...] = ()
    """Hooks naming the other names the references know a character by (the `support` check
    accepts any of them: `dnd/grounding.py: npc_names`)."""

    def __post_init__(self) -> None:
        for what, names in (
            ("lane id", [lane.lane_id for lane in self.lanes]),
            ("artifact kind", self._all_kinds()),
            ("chunker", [c.key for c in self.chunkers]),
        ):
            repeated = sorted({n for n in names if names.count(n) > 1})
            if repeated:
                raise ValueError(f"{what} registered twice: {repeated}")
        for lane in self.lanes:
            slots = [s.name for s in lane.slots]
            if len(slots) != len(set(slots)):
                raise ValueError(f"lane {lane.lane_id!r} declares a slot twice")

    def _all_kinds(self) -> list[str]:
        return [lane.kind for lane in self.lanes] + [k.kind for k in self.reference_kinds]

    def with_lanes(self, *lanes: LaneSpec) -> LaneRegistry:
        """This registry with `lanes` added (a lane of the same id is replaced)."""
        ids = {lane.lane_id for lane in lanes}
        kept = tuple(lane for lane in self.lanes if lane.lane_id not in ids)
        return dataclasses.replace(self, lanes=kept + tuple(lanes))

    def lane(self, lane_id: str) -> LaneSpec:
        """The lane of `lane_id`; KeyError names the registered ones."""
        for lane in self.lanes:
            if lane.lane_id == lane_id:
                return lane
        raise KeyError(f"unknown lane {lane_id!r}; registered: {self.lane_ids()}")

    def lane_ids(self) -> list[str]:
        return sorted(lane.lane_id for lane in self.lanes)

    def lane_of_kind(self, kind: str) -> LaneSpec | None:
        return next((lane for lane in self.lanes if lane.kind == kind), None)

    def kinds(self) -> dict[str, ArtifactKind]:
        """Every artifact kind by name: the lanes' and the reference kinds."""
        out = {lane.kind: lane.artifact_kind for lane in self.lanes}
        out.update((k.kind, k) for k in self.reference_kinds)
        return out

    def kind(self, name: str) -> ArtifactKind:
        """The artifact kind `name`; KeyError for one nothing here declares."""
        found = self.kinds().get(name)
        if found is None:
            raise KeyError(f"unknown artifact kind {name!r}")
        return found

    def chunker(self, key: str) -> ChunkerSpec | None:
        return next((c for c in self.chunkers if c.key == key), None)

    def chunker_keys(self) -> list[str]:
        return sorted(c.key for c in self.chunkers)

    def match_fields(self) -> Mapping[str, MatchFields]:
        """What the gold evaluation matches records on, by artifact kind, for every lane that
        declares `gold_match` (the table `engine/evaluation.py` is given)."""
        return {
            lane.kind: lane.match_fields for lane in self.lanes if lane.match_fields is not None
        }
