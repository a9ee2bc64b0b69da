"""Building the codex: a pure function of the roster and the published lane artifacts of the
campaign's sessions (never transcripts, prompts or run metadata), so the same inputs give the
same codex whatever order the sessions were published in. docs/campaign.md states the rules.

NPCs: every record of every session's `npcs` artifact is an appearance. Appearances of
different sessions are linked only by a strong signal — the same normalized name
(`same_name`), one's name being the other's declared alias (`declared_alias`), or both naming
the same known NPC of the roster (`roster_npc`) — and linked appearances form one entry (a
link that would put two records of one session into one entry is refused: that session's npcs
lane said they are two people). Weaker signals (a shared alias only, one name inside the other)
are listed as `possibly_same`, never merged. Names are compared without a leading article
(`person_key`: "The Gentleman" is "Gentleman").

The roster's party and DM labels are the table, not the world: an appearance named by a party
member or the DM's label is left out, an item's `from`/`to` that is the DM's label counts as
unsaid, and a casting whose caster is the DM's label is left out (bundles published before the
lanes applied these rules, or without a roster, may still hold such records)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from pydantic import BaseModel

from notarius_dagster.campaign.model import (
    Appearance,
    CasterSpells,
    Codex,
    CodexNpc,
    CodexPartyMember,
    CodexScene,
    CodexSession,
    HolderStatus,
    ItemEvent,
    ItemHolder,
    Merge,
    MergeReason,
    PossiblyReason,
    PossiblySame,
    SpellTotal,
)
from notarius_dagster.dnd.item_events.model import ItemEvent as ItemEventRecord
from notarius_dagster.dnd.npcs.model import Npc
from notarius_dagster.dnd.roster import Roster, RosterIndex, name_key
from notarius_dagster.dnd.scene_descriptions.model import SceneDescription
from notarius_dagster.dnd.spells.model import SpellCast
from notarius_dagster.engine.digest import digest_of
from notarius_dagster.engine.lanes import LaneSpec
from notarius_dagster.engine.models import SourceRef

CODEX_RECORDS: tuple[type[BaseModel], ...] = (Npc, SceneDescription, ItemEventRecord, SpellCast)
"""The record models the codex reads: a registered lane whose record model is one of these is
read, whatever its id or kind says (combat turns and NPC interactions are not in it yet)."""

R = TypeVar("R", bound=BaseModel)


@dataclass(frozen=True)
class LaneArtifact:
    """One published lane file the codex reads: its kind, the artifact as its lane's list
    model, and the artifact's records (instances of the lane's record model)."""

    kind: str
    artifact: BaseModel
    records: tuple[BaseModel, ...]

    @classmethod
    def of(cls, spec: LaneSpec, artifact: BaseModel) -> LaneArtifact:
        return cls(spec.kind, artifact, spec.artifact_kind.records(artifact))

    def published(self) -> dict[str, object]:
        """The artifact as published (what the session's `lanes_digest` is of)."""
        dumped: dict[str, object] = self.artifact.model_dump(mode="json", by_alias=True)
        return dumped


def codex_lane(spec: LaneSpec | None) -> bool:
    """Whether the codex reads the lane of `spec` (by its record model)."""
    return spec is not None and spec.record_model in CODEX_RECORDS


SessionLanes = Mapping[str, LaneArtifact]
"""One published session: lane kind -> its accepted artifact, typed."""

_ARTICLE = re.compile(r"^(?:a|an|the|some|his|her|their|my|our)\s+")
_PERSON_ARTICLE = re.compile(r"^\s*(?:a|an|the)\s+(?=\S)", re.IGNORECASE)
_STRENGTH: dict[MergeReason, int] = {"roster_npc": 0, "same_name": 1, "declared_alias": 2}
MIN_TOKEN = 3


def item_key(name: str) -> str:
    """An item's ledger key: its normalized name without a leading article or possessive."""
    return _ARTICLE.sub("", name_key(name))


def person_key(name: str) -> str:
    """A character's codex key: its normalized name without a leading article ("The
    Gentleman" and "Gentleman" are one key; "The" alone stays "the", and "A-Bo" keeps its
    "a": the article is a word followed by a space as written)."""
    return name_key(_PERSON_ARTICLE.sub("", name))


def build_codex(roster: Roster, published: Mapping[str, SessionLanes]) -> Codex:
    """The codex of `roster`'s campaign from the published sessions (session id -> lanes).
    Sessions the roster does not list are ignored; listed sessions without a bundle are
    `published: false` and contribute nothing."""
    order = roster.ordered_sessions()
    sessions = []
    for position, session in enumerate(order, start=1):
        lanes = published.get(session.id)
        read = {k: lanes[k].published() for k in sorted(lanes)} if lanes else {}
        sessions.append(
            CodexSession(
                id=session.id,
                position=position,
                number=session.number,
                date=session.date.isoformat() if session.date else None,
                title=session.title,
                published=lanes is not None,
                lanes=sorted(read),
                lanes_digest=digest_of(read) if lanes is not None else None,
            )
        )
    ordered = [(s.id, published[s.id]) for s in order if s.id in published]
    table = RosterIndex(roster, "")
    npcs, possibly = _npcs(roster, ordered, table)
    events = _item_events(ordered, table)
    return Codex(
        campaign=roster.campaign,
        title=roster.title,
        roster_digest=digest_of(roster.model_dump(mode="json")),
        party=[
            CodexPartyMember(character=m.character, aliases=list(m.aliases), labels=m.labels())
            for m in roster.party
        ],
        dm=list(roster.dm),
        sessions=sessions,
        npcs=npcs,
        possibly_same=possibly,
        item_events=events,
        item_holders=_holders(events),
        spells_by_caster=_spells_by_caster(ordered, table),
        spells=_spell_totals(ordered, table),
        scenes=_scenes(ordered),
    )


def _records(lanes: SessionLanes, model: type[R]) -> list[R]:
    """The session's records of one record model, in lane-kind order then record order."""
    return [r for k in sorted(lanes) for r in lanes[k].records if isinstance(r, model)]


def _refs(record: Npc | ItemEventRecord) -> list[SourceRef]:
    return [ref.model_copy() for ref in record.source_refs]


# ---- NPCs ----


@dataclass
class _Seen:
    """One appearance and its keys."""

    index: int
    session: str
    record: Npc
    name: str
    aliases: frozenset[str]
    known: int | None = None

    @property
    def keys(self) -> frozenset[str]:
        return self.aliases | {self.name}


@dataclass
class _Groups:
    """Union-find over appearances that never joins two appearances of one session (except
    through the roster, which declares them one)."""

    seen: Sequence[_Seen]
    parent: list[int] = field(default_factory=list)
    sessions: list[set[str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.parent = list(range(len(self.seen)))
        self.sessions = [{s.session} for s in self.seen]

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def join(self, a: int, b: int, *, across_sessions_only: bool) -> bool | None:
        """True: joined; None: already one; False: refused (would join one session)."""
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return None
        if across_sessions_only and self.sessions[ra] & self.sessions[rb]:
            return False
        low, high = min(ra, rb), max(ra, rb)
        self.parent[high] = low
        self.sessions[low] |= self.sessions[high]
        return True


def _known_index(roster: Roster) -> dict[str, int]:
    """Normalized name -> the known NPC (roster order) it denotes; a name two known NPCs share
    denotes none."""
    found: dict[str, set[int]] = {}
    for i, npc in enumerate(roster.npcs):
        for n in [npc.name, *npc.aliases]:
            if person_key(n):
                found.setdefault(person_key(n), set()).add(i)
    return {k: next(iter(v)) for k, v in found.items() if len(v) == 1}


def _appearances(
    roster: Roster, ordered: Sequence[tuple[str, SessionLanes]], table: RosterIndex
) -> list[_Seen]:
    known = _known_index(roster)
    seen: list[_Seen] = []
    for session, lanes in ordered:
        for record in _records(lanes, Npc):
            if table.is_party([record.name]) or table.is_dm(record.name):
                continue  # the table, not the world
            name = person_key(record.name)
            aliases = frozenset(person_key(a) for a in record.aliases) - {"", name}
            item = _Seen(len(seen), session, record, name, aliases)
            hits = {known[k] for k in item.keys if k in known}
            item.known = next(iter(hits)) if len(hits) == 1 else None
            seen.append(item)
    return seen


def _links(seen: Sequence[_Seen], roster: Roster) -> list[tuple[int, int, int, MergeReason, str]]:
    """Every strong link (a, b, strength, reason, key) with a < b, in a canonical order."""
    by_name: dict[str, list[int]] = {}
    by_known: dict[int, list[int]] = {}
    for s in seen:
        by_name.setdefault(s.name, []).append(s.index)
        if s.known is not None:
            by_known.setdefault(s.known, []).append(s.index)
    links: set[tuple[int, int, int, MergeReason, str]] = set()

    def add(a: int, b: int, reason: MergeReason, key: str) -> None:
        """Within one session only the roster links records (the lane kept them apart)."""
        if a == b or (reason != "roster_npc" and seen[a].session == seen[b].session):
            return
        links.add((min(a, b), max(a, b), _STRENGTH[reason], reason, key))

    for key, members in by_name.items():
        for b in members[1:]:
            for a in members[: members.index(b)]:
                add(a, b, "same_name", key)
    for s in seen:
        for alias in s.aliases:
            for other in by_name.get(alias, []):
                add(s.index, other, "declared_alias", alias)
    for known, members in by_known.items():
        for b in members[1:]:
            add(members[0], b, "roster_npc", person_key(roster.npcs[known].name))
    return sorted(links, key=lambda link: (link[2], link[1], link[0], link[4]))


def _npcs(
    roster: Roster, ordered: Sequence[tuple[str, SessionLanes]], table: RosterIndex
) -> tuple[list[CodexNpc], list[PossiblySame]]:
    seen = _appearances(roster, ordered, table)
    groups = _Groups(seen)
    merges: list[tuple[int, int, MergeReason, str]] = []
    refused: list[tuple[int, int, str]] = []
    for a, b, _, reason, key in _links(seen, roster):
        joined = groups.join(a, b, across_sessions_only=reason != "roster_npc")
        if joined:
            merges.append((b, a, reason, key))
        elif joined is False:
            refused.append((a, b, key))
    members: dict[int, list[int]] = {}
    for s in seen:
        members.setdefault(groups.find(s.index), []).append(s.index)
    entries: list[CodexNpc] = []
    entry_of: dict[int, str] = {}
    used: set[str] = set()
    for root in sorted(members):
        idx = members[root]
        entry = _entry(
            roster,
            [seen[i] for i in idx],
            [m for m in merges if groups.find(m[0]) == root],
            seen,
            used,
        )
        entries.append(entry)
        for i in idx:
            entry_of[i] = entry.id
    return entries, _possibly_same(entries, seen, entry_of, refused)


def _entry(
    roster: Roster,
    members: Sequence[_Seen],
    merges: Sequence[tuple[int, int, MergeReason, str]],
    seen: Sequence[_Seen],
    used: set[str],
) -> CodexNpc:
    first = members[0]
    known = next((m.known for m in members if m.known is not None), None)
    name = roster.npcs[known].name if known is not None else first.record.name
    names: dict[str, str] = {}
    for m in members:
        for n in [m.record.name, *m.record.aliases]:
            names.setdefault(person_key(n), n)
    if known is not None:
        for n in roster.npcs[known].aliases:
            names.setdefault(person_key(n), n)
    aliases = sorted((n for k, n in names.items() if k and k != person_key(name)), key=str.casefold)
    base = "npc-" + (re.sub(r"[^a-z0-9]+", "-", name_key(name)).strip("-")[:50] or "unnamed")
    npc_id, suffix = base, 2
    while npc_id in used:
        npc_id, suffix = f"{base}-{suffix}", suffix + 1
    used.add(npc_id)
    sessions = list(dict.fromkeys(m.session for m in members))
    return CodexNpc(
        id=npc_id,
        name=name,
        aliases=aliases,
        known=known is not None,
        first_session=sessions[0],
        last_session=sessions[-1],
        sessions=sessions,
        appearances=[
            Appearance(
                session=m.session,
                npc_id=m.record.id or "",
                name=m.record.name,
                aliases=list(m.record.aliases),
                source_refs=_refs(m.record),
            )
            for m in members
        ],
        merges=[
            Merge(
                session=seen[b].session,
                npc_id=seen[b].record.id or "",
                to_session=seen[a].session,
                to_npc_id=seen[a].record.id or "",
                reason=reason,
                key=key,
            )
            for b, a, reason, key in sorted(merges)
        ],
    )


def _tokens(key: str) -> frozenset[str]:
    return frozenset(t for t in key.split() if len(t) >= MIN_TOKEN)


def _possibly_same(
    entries: Sequence[CodexNpc],
    seen: Sequence[_Seen],
    entry_of: Mapping[int, str],
    refused: Sequence[tuple[int, int, str]],
) -> list[PossiblySame]:
    """Pairs of entries a weaker signal connects: a shared alias, one name's words inside the
    other's, or a strong link refused because it would join two records of one session."""
    keys: dict[str, set[str]] = {e.id: set() for e in entries}
    names: dict[str, set[str]] = {e.id: set() for e in entries}
    for s in seen:
        keys[entry_of[s.index]] |= s.keys
        names[entry_of[s.index]].add(s.name)
    found: dict[tuple[str, str], PossiblySame] = {}

    def note(x: str, y: str, reason: PossiblyReason, key: str) -> None:
        a, b = sorted((x, y))
        if a != b and (a, b) not in found:
            found[(a, b)] = PossiblySame(a=a, b=b, reason=reason, key=key)

    for a, b, key in refused:
        note(entry_of[a], entry_of[b], "merge_would_join_one_session", key)
    ids = [e.id for e in entries]
    for i, x in enumerate(ids):
        for y in ids[i + 1 :]:
            shared = sorted(keys[x] & keys[y])
            if shared:
                note(x, y, "shared_alias", shared[0])
                continue
            for nx in sorted(names[x]):
                for ny in sorted(names[y]):
                    tx, ty = _tokens(nx), _tokens(ny)
                    if tx and ty and nx != ny and (tx <= ty or ty <= tx):
                        note(x, y, "name_within_name", min(nx, ny, key=len))
    return sorted(found.values(), key=lambda p: (p.a, p.b))


# ---- items ----


def _item_events(
    ordered: Sequence[tuple[str, SessionLanes]], table: RosterIndex
) -> list[ItemEvent]:
    """The ledger; a `from`/`to` that is the DM's label is unsaid (null)."""

    def holder(name: str | None) -> str | None:
        return None if table.is_dm(name) else name

    events: list[ItemEvent] = []
    for session, lanes in ordered:
        for record in _records(lanes, ItemEventRecord):
            events.append(
                ItemEvent.model_validate(
                    {
                        "position": len(events) + 1,
                        "session": session,
                        "event_id": record.id or "",
                        "item": record.item,
                        "item_key": item_key(record.item),
                        "event": record.event,
                        "from": holder(record.from_),
                        "to": holder(record.to),
                        "quantity": record.quantity,
                        "source_refs": _refs(record),
                    }
                )
            )
    return events


def _holders(events: Iterable[ItemEvent]) -> list[ItemHolder]:
    """Each item's state after its events, in campaign order: acquired, given, bought or sold
    moves it to `to` (unknown when `to` is not said); lost and destroyed end its holding;
    used says nothing about who has it (the holder stays, and so does the event that says so)."""
    state: dict[str, _Holding] = {}
    for e in events:
        current = state.setdefault(
            e.item_key, _Holding(e.item, "unknown", None, e.session, e.event_id)
        )
        current.events += 1
        if e.event in ("acquired", "given", "bought", "sold"):
            current.said(e, "held" if e.to else "unknown", e.to)
        elif e.event in ("lost", "destroyed"):
            current.said(e, "lost" if e.event == "lost" else "destroyed", None)
    return [
        ItemHolder(
            item=h.item,
            item_key=key,
            status=h.status,
            holder=h.holder,
            session=h.session,
            event_id=h.event_id,
            events=h.events,
        )
        for key, h in sorted(state.items(), key=lambda kv: kv[0])
    ]


@dataclass
class _Holding:
    """An item's state while its events are read (`ItemHolder` once all are)."""

    item: str
    status: HolderStatus
    holder: str | None
    session: str
    event_id: str
    events: int = 0

    def said(self, event: ItemEvent, status: HolderStatus, holder: str | None) -> None:
        self.status, self.holder = status, holder
        self.session, self.event_id = event.session, event.event_id


# ---- spells ----


def _castings(
    ordered: Sequence[tuple[str, SessionLanes]], table: RosterIndex
) -> list[tuple[str, SpellCast]]:
    """Every casting, but those whose caster is the DM's label (never a caster)."""
    return [
        (s, r)
        for s, lanes in ordered
        for r in _records(lanes, SpellCast)
        if not table.is_dm(r.caster)
    ]


def _spells_by_caster(
    ordered: Sequence[tuple[str, SessionLanes]], table: RosterIndex
) -> list[CasterSpells]:
    rows: dict[tuple[str, str], _Tally] = {}
    for session, r in _castings(ordered, table):
        key = (name_key(r.caster), name_key(r.spell))
        rows.setdefault(key, _Tally(r.caster, r.spell)).add(session, r.caster)
    return [
        CasterSpells(
            caster_key=c,
            spell_key=s,
            caster=row.caster,
            spell=row.spell,
            count=row.count,
            sessions=row.sessions,
        )
        for (c, s), row in sorted(rows.items())
    ]


@dataclass
class _Tally:
    """Castings of one spell (by one caster): the names as first written, how many, in which
    sessions, by whom (one name per caster, as first written)."""

    caster: str
    spell: str
    count: int = 0
    sessions: list[str] = field(default_factory=list)
    casters: list[str] = field(default_factory=list)

    def add(self, session: str, caster: str) -> None:
        self.count += 1
        if session not in self.sessions:
            self.sessions.append(session)
        if name_key(caster) not in {name_key(c) for c in self.casters}:
            self.casters.append(caster)


def _spell_totals(
    ordered: Sequence[tuple[str, SessionLanes]], table: RosterIndex
) -> list[SpellTotal]:
    rows: dict[str, _Tally] = {}
    for session, r in _castings(ordered, table):
        rows.setdefault(name_key(r.spell), _Tally(r.caster, r.spell)).add(session, r.caster)
    return [
        SpellTotal(
            spell_key=k,
            spell=row.spell,
            count=row.count,
            casters=row.casters,
            sessions=row.sessions,
        )
        for k, row in sorted(rows.items())
    ]


# ---- scenes ----


def _scenes(ordered: Sequence[tuple[str, SessionLanes]]) -> list[CodexScene]:
    return [
        CodexScene(
            session=session,
            scene_id=r.scene_id,
            kind=r.kind,
            title=r.title,
            start_unit_id=r.start_unit_id,
            end_unit_id=r.end_unit_id,
        )
        for session, lanes in ordered
        for r in _records(lanes, SceneDescription)
    ]
