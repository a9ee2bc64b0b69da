"""The party roster: a campaign file (YAML) naming the party — each player, their character,
the labels the transcript gives the player, aliases — plus known NPCs and places, the campaign's
name and the explicit order of its sessions (docs/configuration.md, "The party roster").

The `Roster` model is the file's single schema source (`schemas/notarius.dnd.roster.json`); it
is registered as the artifact kind `dnd/roster`, so a bound `roster` slot is decoded and
validated at the reference boundary like any structured reference (its digest enters the
checkpoint fingerprints of every lane that declares the slot: editing the roster re-extracts).

With a roster bound, the lanes that name people use `RosterIndex`:
- the `npcs` extractor drops records whose name or alias is a player character's or a player's
  (`drop_party`), and the `npc-interactions` extractor records whose NPC side is one, with a
  count-only warning (`party_member_dropped`), never the name;
- the DM's labels (`dm:`, e.g. `MATT`) are never a character (`drop_dm_labels`): a record whose
  NPC, actor or caster is one is dropped, an item's `from`/`to` that is one becomes null, and
  one is removed from lists of names (aliases, targets, participants), with one count-only
  warning (`dm_label_dropped`);
- the lanes that name actors and casters map a player's speaker label to the character
  (`LAURA` -> `Jester`, `map_speakers`);
- every such prompt gets one context line naming the party and the DM (`party_line`), names
  only;
- the support validator accepts a player's speaker label as a mention of the character only
  where the supported field is the speaker (a combat turn's actor: `speaker_names`, the support
  validator's speaker hook the D&D registry carries; `LaneSpec.speaker_acts`).
Without a roster nothing here runs and every lane behaves as before."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from notarius_dagster.engine.artifact_kinds import ArtifactKind
from notarius_dagster.engine.contracts import PreparedReference
from notarius_dagster.engine.models import ReferenceSlot, RunWarning, SourceRef

ROSTER_SLOT = "roster"
ROSTER_KIND = "dnd/roster"
DROPPED_CODE = "party_member_dropped"
DM_CODE = "dm_label_dropped"
MAX_PARTY_LINE = 20

# One line, no control characters, bounded: a name goes into prompts and must not forge lines.
Name = Annotated[
    str,
    StringConstraints(
        strip_whitespace=True, min_length=1, max_length=120, pattern=r"^[^\x00-\x1f\x7f]+$"
    ),
]
SessionId = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_-]{0,63}$")]


def name_key(name: str) -> str:
    """Matching key of a name: case-folded, punctuation dropped, whitespace collapsed (the
    same key as `llm_extract.canonical_name`, which NPC grounding uses)."""
    cleaned = "".join(ch if ch.isalnum() or ch.isspace() else " " for ch in name.casefold())
    return " ".join(cleaned.split())


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PartyMember(_Strict):
    """One player and the character they play. `speaker_labels` are the transcript's labels
    for the player (default: the player's name); `first_session`/`last_session` bound, by the
    roster's session numbers, when the player plays this character (a player who changes
    character has one entry per character)."""

    player: Name
    character: Name
    speaker_labels: list[Name] = Field(default_factory=list, max_length=10)
    aliases: list[Name] = Field(default_factory=list, max_length=20)
    first_session: int | None = Field(default=None, ge=0)
    last_session: int | None = Field(default=None, ge=0)

    def labels(self) -> list[str]:
        return self.speaker_labels or [self.player]

    def plays_in(self, number: int | None) -> bool:
        """Whether the member plays in the session numbered `number` (unknown: a member with
        no bounds plays, a bounded one does not: its label would be ambiguous)."""
        if number is None:
            return self.first_session is None and self.last_session is None
        return (self.first_session is None or number >= self.first_session) and (
            self.last_session is None or number <= self.last_session
        )


class KnownEntity(_Strict):
    """A known NPC or place: its name and the other names it goes by."""

    name: Name
    aliases: list[Name] = Field(default_factory=list, max_length=20)


class CampaignSession(_Strict):
    """A session of the campaign: its Notarius session id and its place in the campaign (a
    number, a date, or both). The campaign's order comes from here, never from ids."""

    id: SessionId
    number: int | None = Field(default=None, ge=0)
    date: dt.date | None = None
    title: Name | None = None

    @model_validator(mode="after")
    def _placed(self) -> CampaignSession:
        if self.number is None and self.date is None:
            raise ValueError("a session needs a number or a date")
        return self


class Roster(_Strict):
    """`dnd/roster`: the campaign file."""

    kind: Literal["dnd/roster"] = "dnd/roster"
    schema_version: Literal["v1"] = "v1"
    campaign: SessionId = Field(description="the campaign id: [a-z0-9][a-z0-9_-]{0,63}")
    title: Name | None = None
    party: list[PartyMember] = Field(min_length=1, max_length=20)
    dm: list[Name] = Field(
        default_factory=list,
        max_length=10,
        description="the transcript's labels for the Dungeon Master (e.g. MATT): never a "
        "character, an actor, a caster or an item holder",
    )
    npcs: list[KnownEntity] = Field(default_factory=list, max_length=500)
    places: list[KnownEntity] = Field(default_factory=list, max_length=500)
    sessions: list[CampaignSession] = Field(default_factory=list, max_length=10_000)

    @model_validator(mode="after")
    def _dm_is_no_party_member(self) -> Roster:
        party = {
            name_key(n)
            for m in self.party
            for n in [m.character, m.player, *m.aliases, *m.labels()]
        }
        for label in self.dm:
            if name_key(label) in party:
                raise ValueError(f"dm: {label!r} is also a name or label of a party member")
        return self

    @model_validator(mode="after")
    def _sessions_ordered(self) -> Roster:
        ids = [s.id for s in self.sessions]
        if len(set(ids)) != len(ids):
            raise ValueError("sessions: a session id is listed twice")
        numbered = [s.number for s in self.sessions if s.number is not None]
        if len(numbered) == len(self.sessions):
            if len(set(numbered)) != len(numbered):
                raise ValueError("sessions: two sessions share a number")
        else:
            dates = [s.date for s in self.sessions]
            if None in dates or len(set(dates)) != len(dates):
                raise ValueError(
                    "sessions: give every session a number, or every session a distinct date"
                )
        return self

    def ordered_sessions(self) -> list[CampaignSession]:
        """Sessions in campaign order: by number when every session has one, else by date."""
        if all(s.number is not None for s in self.sessions):
            return sorted(self.sessions, key=lambda s: s.number or 0)
        return sorted(self.sessions, key=lambda s: s.date or dt.date.min)

    def session_number(self, session_id: str) -> int | None:
        return next((s.number for s in self.sessions if s.id == session_id), None)


def _no_refs(_model: BaseModel) -> Iterable[SourceRef]:
    return ()


ROSTER_ARTIFACT = ArtifactKind(
    kind=ROSTER_KIND,
    model=Roster,
    schema_id="notarius.dnd.roster",
    schema_name="dnd_roster_v1",
    schema_version="v1",
    items_field="party",
    project_source_refs=_no_refs,
)
"""The roster's kind: a reference kind of the D&D registry (`notarius_dagster.modules`)."""


def roster_slot() -> ReferenceSlot:
    """The optional `roster` slot of a lane that names people (accepts `dnd/roster`)."""
    return ReferenceSlot(name=ROSTER_SLOT, accepted_kinds=(ROSTER_KIND,), max_bytes=256_000)


@dataclass(frozen=True)
class RosterIndex:
    """What the lanes ask of a roster in one session."""

    roster: Roster
    session_id: str

    @classmethod
    def of(cls, references: Mapping[str, PreparedReference], session_id: str) -> RosterIndex | None:
        """The index of the bound `roster` reference, or None when the slot is unbound."""
        ref = references.get(ROSTER_SLOT)
        if ref is None or not isinstance(ref.typed, Roster):
            return None
        return cls(ref.typed, session_id)

    @cached_property
    def active(self) -> list[PartyMember]:
        number = self.roster.session_number(self.session_id)
        return [m for m in self.roster.party if m.plays_in(number)]

    @cached_property
    def party_keys(self) -> frozenset[str]:
        """Every name of the party (characters, aliases, players, speaker labels), as keys:
        a record of the npcs lane with one of them is a player character, never an NPC."""
        keys: set[str] = set()
        for m in self.roster.party:
            keys.update(name_key(n) for n in [m.character, m.player, *m.aliases, *m.labels()])
        return frozenset(keys - {""})

    @cached_property
    def character_by_label(self) -> Mapping[str, str]:
        """Speaker label key -> the character its player plays in this session. A label two
        active characters share (a player with two characters and no bounds) maps to none."""
        found: dict[str, set[str]] = {}
        for m in self.active:
            for label in m.labels():
                found.setdefault(name_key(label), set()).add(m.character)
        return {k: next(iter(v)) for k, v in found.items() if len(v) == 1 and k}

    @cached_property
    def dm_keys(self) -> frozenset[str]:
        """The DM's labels, as keys: never a character."""
        return frozenset(name_key(n) for n in self.roster.dm) - {""}

    def is_party(self, names: Iterable[str | None]) -> bool:
        return any(name_key(n) in self.party_keys for n in names if n)

    def is_dm(self, name: object) -> bool:
        return isinstance(name, str) and name_key(name) in self.dm_keys

    def character_for(self, name: str | None) -> str | None:
        """The character a speaker label denotes in this session, else None."""
        return self.character_by_label.get(name_key(name)) if name else None

    def aliases_for(self, name: str) -> tuple[str, ...]:
        """Other names that denote the same party member as `name` (a character, alias,
        player or speaker label): the character, its aliases, the player and the labels.
        Empty for a name that is no party member's. The support validator's hook."""
        key = name_key(name)
        out: list[str] = []
        for m in self.roster.party:
            names = [m.character, *m.aliases, m.player, *m.labels()]
            if key in {name_key(n) for n in names}:
                out.extend(n for n in names if name_key(n) != key and n not in out)
        return tuple(out)

    def party_line(self) -> str:
        """The prompt's context line: `The party: Jester (played by LAURA), ...` (names only)."""
        shown = [f"{m.character} (played by {m.labels()[0]})" for m in self.active]
        if not shown:
            return ""
        line = (
            "The party (player characters, never NPCs): " + ", ".join(shown[:MAX_PARTY_LINE]) + "."
        )
        if self.roster.dm:
            line += f" {' and '.join(self.roster.dm)}: the Dungeon Master, never a character."
        return line


def roster_index(
    references: Mapping[str, PreparedReference], session_id: str
) -> RosterIndex | None:
    return RosterIndex.of(references, session_id)


def party_context(references: Mapping[str, PreparedReference], session_id: str) -> str:
    """The party line for a prompt, or "" without a roster."""
    index = roster_index(references, session_id)
    return index.party_line() if index is not None else ""


def drop_party(
    records: Sequence[dict[str, Any]], index: RosterIndex, *, lane: str | None, chunk_id: str | None
) -> tuple[list[dict[str, Any]], list[RunWarning]]:
    """The npcs records that are no party member (by name or alias), and one count-only
    warning when some were dropped."""
    kept = [r for r in records if not index.is_party([r.get("name"), *r.get("aliases", [])])]
    dropped = len(records) - len(kept)
    if not dropped:
        return kept, []
    return kept, [dropped_warning(dropped, lane=lane, chunk_id=chunk_id)]


def dropped_warning(count: int, *, lane: str | None, chunk_id: str | None) -> RunWarning:
    return RunWarning(
        stage="extract",
        code=DROPPED_CODE,
        lane=lane,
        chunk_id=chunk_id,
        message=f"{count} record(s) named a player character or player of the roster; dropped",
    )


def drop_party_side(
    records: Sequence[dict[str, Any]],
    field: str,
    index: RosterIndex,
    *,
    lane: str | None,
    chunk_id: str | None,
) -> tuple[list[dict[str, Any]], list[RunWarning]]:
    """The records whose `field` (the NPC side of an interaction) names no party member, and
    the same count-only warning as `drop_party` when some were dropped."""
    kept = [r for r in records if not index.is_party([r.get(field)])]
    dropped = len(records) - len(kept)
    if not dropped:
        return kept, []
    return kept, [dropped_warning(dropped, lane=lane, chunk_id=chunk_id)]


def drop_dm_labels(
    records: Sequence[dict[str, Any]],
    index: RosterIndex,
    *,
    required: Sequence[str] = (),
    optional: Sequence[str] = (),
    lists: Sequence[str] = (),
    lane: str | None,
    chunk_id: str | None,
) -> tuple[list[dict[str, Any]], list[RunWarning]]:
    """The DM's labels are never a character: a record whose `required` name (an NPC, actor
    or caster) is one is dropped; an `optional` name (an item's from/to) that is one becomes
    null; one is removed from `lists` of names. Records are copied, never changed in place;
    one count-only warning (`dm_label_dropped`) when anything was dropped or removed."""
    if not index.dm_keys:
        return list(records), []
    kept: list[dict[str, Any]] = []
    dropped = removed = 0
    for record in records:
        if any(index.is_dm(record.get(f)) for f in required):
            dropped += 1
            continue
        copy = dict(record)
        for f in optional:
            if index.is_dm(copy.get(f)):
                copy[f] = None
                removed += 1
        for f in lists:
            names = copy.get(f)
            if isinstance(names, list):
                copy[f] = [n for n in names if not index.is_dm(n)]
                removed += len(names) - len(copy[f])
        kept.append(copy)
    if not dropped and not removed:
        return kept, []
    return kept, [
        RunWarning(
            stage="extract",
            code=DM_CODE,
            lane=lane,
            chunk_id=chunk_id,
            message=f"{dropped} record(s) named the DM's label as a character and were dropped; "
            f"{removed} other name(s) that were the DM's label removed",
        )
    ]


_COUNT = re.compile(r"^(\d+) record")


def dropped_count(warnings: Iterable[RunWarning]) -> int:
    """How many records the roster dropped, from a lane's warnings (the asset metadata's
    `party_records_dropped`)."""
    return _counted(warnings, DROPPED_CODE)


def dm_dropped_count(warnings: Iterable[RunWarning]) -> int:
    """How many records named the DM's label as a character (the asset metadata's
    `dm_records_dropped`)."""
    return _counted(warnings, DM_CODE)


def _counted(warnings: Iterable[RunWarning], code: str) -> int:
    total = 0
    for w in warnings:
        if w.code == code and (m := _COUNT.match(w.message)):
            total += int(m.group(1))
    return total


def map_speakers(
    records: Sequence[dict[str, Any]], fields: Sequence[str], index: RosterIndex
) -> int:
    """In place: each of `fields` whose value is a player's speaker label becomes the
    character's name. Returns how many values were mapped."""
    mapped = 0
    for record in records:
        for field in fields:
            character = index.character_for(record.get(field))
            if character is not None and record.get(field) != character:
                record[field] = character
                mapped += 1
    return mapped


_INDEXES: dict[str, RosterIndex] = {}


def speaker_names(references: Mapping[str, object], label: str) -> Sequence[str]:
    """The support validator's speaker hook (`engine/support.py`): the names of the party
    member a speaker label belongs to (`LAURA` -> `Jester`, her aliases, the player), so a
    line Laura speaks counts as a mention of Jester where the supported field is the speaker
    (`speaker_acts`: a combat turn's actor), and nowhere else. Names do not depend on the
    session (a label names its player in every session). One index per roster digest."""
    ref = references.get(ROSTER_SLOT)
    if not isinstance(ref, PreparedReference) or not isinstance(ref.typed, Roster):
        return ()
    index = _INDEXES.get(ref.digest)
    if index is None:
        index = RosterIndex(ref.typed, "")
        _INDEXES[ref.digest] = index
    return index.aliases_for(label)
