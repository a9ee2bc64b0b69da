"""Realistic model mistakes injected into the oracle's answers (`benchmarks/oracle.py`) at a known
rate, each labelled by its class, and what became of each one in the published bundle.

The classes (issue 19), each a mistake a real model makes, and what the oracle answers instead
of the gold (list lanes: npcs, combat-turns, spells, item-events, npc-interactions):

- `citation-off-by-one` (list lanes): the record's citations shifted by 1 or 2 units, inside
  the chunk, onto units that are not its gold units;
- `citation-out-of-chunk` (list lanes): one of the record's citations replaced by the unit
  just after the chunk (just before it for the last chunk): what a model whose decoding does
  not honour the schema's `enum` can answer;
- `citation-over-broad` (list lanes): the record cites the whole chunk (at most 50 units);
- `pc-as-npc` (npcs, npc-interactions): an added record naming a party member present in the
  chunk, citing lines that name them, else their player's lines;
- `invented-name` (list lanes): an added record whose name is in no transcript, citing a real
  record's units;
- `alias-spelling` (list lanes): the record's name misspelt (a letter doubled in its longest
  word);
- `dm-or-player-label`: in npcs an added NPC named with a speaker label (the DM's when the DM
  speaks in the chunk, else a player's) citing that speaker's lines; in the other lanes the
  DM's label in place of the actor, caster, interaction partner, or an item event's empty
  (else first) holder;
- `duplicate` (list lanes): the record twice, the copy worded differently (its prose field
  changed where the lane has one);
- `wrong-scene-kind` (scene-descriptions): the other kind (combat <-> narrative);
- `truncated` (every lane): the first half of the answer, with `finish_reason: length`.

Each eligible thing (a record, or a chunk for the classes that add a record or change the
answer) is hit with probability `rate`, decided by a random generator seeded with the seed, the
class, the lane and the chunk's first unit: a re-ask of the same request gets the same mistake,
and a run is reproducible. An `Injection` records what was done; `fate` reads the published
bundle and says whether the mistake reached it, and if not, what stopped it."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmarks.latency_server import items_field, minimal_instance, schema_of_request
from benchmarks.oracle import (
    SCENE_LANE,
    OracleSession,
    Responder,
    item_schema,
    oracle_answer,
)
from notarius_dagster.engine.evaluation import cited_units, normalize_name
from notarius_dagster.engine.models import SourceDocument, SourceUnit

CLASSES = (
    "citation-off-by-one",
    "citation-out-of-chunk",
    "citation-over-broad",
    "pc-as-npc",
    "invented-name",
    "alias-spelling",
    "dm-or-player-label",
    "duplicate",
    "wrong-scene-kind",
    "truncated",
)
LIST_LANES = ("npcs", "combat-turns", "spells", "item-events", "npc-interactions")
NAME_FIELD = {
    "npcs": "name",
    "combat-turns": "actor",
    "spells": "spell",
    "item-events": "item",
    "npc-interactions": "npc",
}
CHARACTER_FIELDS = {
    "combat-turns": ("actor",),
    "spells": ("caster",),
    "item-events": ("from", "to"),
    "npc-interactions": ("npc",),
}
PROSE_FIELD = {
    "npcs": "description",
    "combat-turns": "action",
    "spells": "outcome",
    "npc-interactions": "summary",
}
INVENTED = {
    "npcs": ("Aldric Vane", "Mirela Thornbury", "Oskar Brightwater", "Selka Dunmore"),
    "combat-turns": ("Aldric Vane", "Mirela Thornbury", "Oskar Brightwater"),
    "npc-interactions": ("Aldric Vane", "Mirela Thornbury", "Oskar Brightwater"),
    "spells": ("Arcane Lance", "Veil of Embers", "Frost Lattice"),
    "item-events": ("obsidian key", "silver astrolabe", "amber vial"),
}
CITATION_CLASSES = ("citation-off-by-one", "citation-over-broad")
CAUGHT_MEANS = {
    "citation-off-by-one": (
        "no published record of that name cites, in that chunk, a unit the mistake added "
        "(the record dropped, or its citations trimmed back to its evidence)"
    ),
    "citation-over-broad": (
        "no published record of that name cites, in that chunk, more units outside the gold "
        "record's than inside: the record dropped, or its citations trimmed until at least "
        "half of what it cites there is the gold record's (the grounded share of scorer v2)"
    ),
}
"""What `caught` means for the citation classes, where a mistake may be corrected rather than
dropped (written into the benchmark's results beside the figures)."""
MAX_CITED = 50
SPEAKER_LINES = 3


@dataclass(frozen=True)
class Member:
    """A party member: every name they go by, and their player's speaker labels."""

    character: str
    names: tuple[str, ...]
    labels: tuple[str, ...]


@dataclass(frozen=True)
class Table:
    """What the injector knows about the session besides the gold: the transcript (speakers
    and text of each unit), the party and the DM's speaker labels."""

    document: SourceDocument
    party: tuple[Member, ...]
    dm_labels: tuple[str, ...]
    units: Mapping[int, SourceUnit] = field(default_factory=dict)

    @classmethod
    def of(
        cls, document: SourceDocument, party: Sequence[Member], dm_labels: Sequence[str]
    ) -> Table:
        units = {u.unit_id: u for u in document.units}
        return cls(document, tuple(party), tuple(dm_labels), units)

    def speaker(self, unit: int) -> str:
        found = self.units.get(unit)
        return str(found.metadata.get("speaker") or "") if found else ""

    def text(self, unit: int) -> str:
        found = self.units.get(unit)
        return found.text if found else ""


@dataclass(frozen=True)
class Injection:
    """One mistake: its class, lane, chunk (unit ids), the answer item it concerns (index in
    the answer; -1 for the answer as a whole), the field and wrong value (for a name or label),
    the units the item cites, the gold units it should cite, and the wrong units cited."""

    cls: str
    lane: str
    chunk: tuple[int, ...]
    index: int
    field: str | None = None
    value: str | None = None
    cited: tuple[int, ...] = ()
    gold_units: tuple[int, ...] = ()
    wrong_units: tuple[int, ...] = ()
    name: str | None = None
    """The record's name (gold name for a modified record, the wrong value for an added one)."""
    base: int | None = None
    """The index of the oracle's own item the mistake was made on (a modified or duplicated
    record); None for an added record or a change of the whole answer. The benchmark leaves
    out a mistake made on an item the clean run already lost: its fate says nothing."""

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.cls, self.lane, self.chunk[:1], self.index, self.field, self.value)


# --- building the mistakes ---------------------------------------------------------------------


def misspell(name: str) -> str:
    """One letter doubled in the middle of the name's longest word: `Gustav` -> `Gusstav`."""
    words = name.split(" ")
    longest = max(range(len(words)), key=lambda i: len(words[i]))
    word = words[longest]
    middle = len(word) // 2
    words[longest] = word[:middle] + word[middle] + word[middle:]
    return " ".join(words)


def _shift(units: Sequence[int], chunk: Sequence[int], delta: int) -> list[int]:
    position = {u: i for i, u in enumerate(chunk)}
    out: dict[int, None] = {}
    for unit in units:
        p = min(max(position[unit] + delta, 0), len(chunk) - 1)
        out[chunk[p]] = None
    return list(out)


def _speaker_lines(table: Table, chunk: Sequence[int], labels: Sequence[str]) -> list[int]:
    wanted = {normalize_name(label) for label in labels}
    return [u for u in chunk if normalize_name(table.speaker(u)) in wanted][:SPEAKER_LINES]


def _naming_lines(table: Table, chunk: Sequence[int], names: Sequence[str]) -> list[int]:
    keys = [f" {normalize_name(n)} " for n in names if normalize_name(n)]
    return [u for u in chunk if any(k in f" {normalize_name(table.text(u))} " for k in keys)][
        :SPEAKER_LINES
    ]


@dataclass
class Injector:
    """Turns the oracle into a model that makes one class of mistakes at `rate`."""

    cls: str
    rate: float
    seed: int
    session: OracleSession
    table: Table
    log: dict[tuple[Any, ...], Injection] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.cls not in CLASSES:
            raise ValueError(f"unknown class {self.cls!r}; known: {', '.join(CLASSES)}")

    def responder(self) -> Responder:
        """The server's `respond`: the oracle's answer with this class's mistakes."""

        def respond(body: Mapping[str, Any]) -> tuple[str, list[int], str, str]:
            lane, chunk, answer, _ = oracle_answer(self.session, body)
            schema = schema_of_request(body) or {}
            done = self.inject(lane, chunk, answer, schema)
            content = json.dumps(answer)
            if self.cls == "truncated" and done:
                return lane, chunk, content[: len(content) // 2], "length"
            return lane, chunk, content, "stop"

        return respond

    def _rng(self, lane: str, chunk: Sequence[int]) -> random.Random:
        return random.Random(f"{self.seed}:{self.cls}:{lane}:{chunk[0] if chunk else -1}")

    def _record(self, injection: Injection) -> None:
        self.log.setdefault(injection.key, injection)

    def inject(
        self, lane: str, chunk: Sequence[int], answer: dict[str, Any], schema: Mapping[str, Any]
    ) -> bool:
        """Change `answer` in place; True when something was injected."""
        rng = self._rng(lane, chunk)
        chunk_t = tuple(chunk)
        if self.cls == "truncated":
            if rng.random() < self.rate:
                self._record(Injection(self.cls, lane, chunk_t, -1))
                return True
            return False
        if self.cls == "wrong-scene-kind":
            if lane != SCENE_LANE or "kind" not in answer or rng.random() >= self.rate:
                return False
            wrong = "narrative" if answer["kind"] == "combat" else "combat"
            answer["kind"] = wrong
            self._record(Injection(self.cls, lane, chunk_t, -1, "kind", wrong))
            return True
        if lane not in LIST_LANES:
            return False
        items_name = items_field(schema)
        if items_name is None:
            return False
        items: list[dict[str, Any]] = answer[items_name]
        method = getattr(self, "_" + self.cls.replace("-", "_"))
        before = len(self.log)
        method(rng, lane, chunk_t, items, schema)
        return len(self.log) > before

    # One method per class: (rng, lane, chunk, answer items, schema) -> None, items changed in
    # place, every mistake recorded.

    def _gold_units(self, lane: str, chunk: Sequence[int], item: Mapping[str, Any]) -> list[int]:
        name = normalize_name(str(item.get(NAME_FIELD[lane]) or ""))
        for _, record, units in self.session.records_in(lane, chunk):
            if normalize_name(str(record.value(NAME_FIELD[lane]) or "")) == name:
                return units
        return list(item.get("unit_ids") or [])

    def _citation_off_by_one(
        self, rng: random.Random, lane: str, chunk: tuple[int, ...], items: list[Any], _: Any
    ) -> None:
        for index, item in enumerate(items):
            if rng.random() >= self.rate:
                continue
            gold = list(item["unit_ids"])
            for delta in rng.sample([1, -1, 2, -2], 4):
                shifted = _shift(gold, chunk, delta)
                wrong = [u for u in shifted if u not in set(gold)]
                if wrong:
                    item["unit_ids"] = shifted
                    self._record(
                        Injection(
                            self.cls,
                            lane,
                            chunk,
                            index,
                            cited=tuple(shifted),
                            gold_units=tuple(gold),
                            wrong_units=tuple(wrong),
                            name=str(item[NAME_FIELD[lane]]),
                            base=index,
                        )
                    )
                    break

    def _citation_out_of_chunk(
        self, rng: random.Random, lane: str, chunk: tuple[int, ...], items: list[Any], _: Any
    ) -> None:
        order = [u.unit_id for u in self.table.document.units]
        first, last = order.index(chunk[0]), order.index(chunk[-1])
        outside = order[last + 1] if last + 1 < len(order) else order[first - 1]
        for index, item in enumerate(items):
            if rng.random() >= self.rate:
                continue
            gold = list(item["unit_ids"])
            cited = [*gold[:-1], outside]
            item["unit_ids"] = cited
            self._record(
                Injection(
                    self.cls,
                    lane,
                    chunk,
                    index,
                    cited=tuple(cited),
                    gold_units=tuple(gold),
                    wrong_units=(outside,),
                    name=str(item[NAME_FIELD[lane]]),
                    base=index,
                )
            )

    def _citation_over_broad(
        self,
        rng: random.Random,
        lane: str,
        chunk: tuple[int, ...],
        items: list[Any],
        schema: Mapping[str, Any],
    ) -> None:
        # As broad as a schema-following model can cite: the lane's citation budget (the
        # `maxItems` of its `unit_ids` in the schema sent), at most MAX_CITED.
        budget = min(MAX_CITED, citation_budget(schema))
        for index, item in enumerate(items):
            if rng.random() >= self.rate:
                continue
            gold = list(item["unit_ids"])
            start = max(0, min(chunk.index(gold[0]), len(chunk) - budget))
            broad = list(chunk[start : start + budget])
            wrong = [u for u in broad if u not in set(gold)]
            if len(wrong) <= len(broad) // 2:
                continue  # the record's own units are most of the chunk: not over-broad
            item["unit_ids"] = broad
            self._record(
                Injection(
                    self.cls,
                    lane,
                    chunk,
                    index,
                    cited=tuple(broad),
                    gold_units=tuple(gold),
                    wrong_units=tuple(wrong),
                    name=str(item[NAME_FIELD[lane]]),
                    base=index,
                )
            )

    def _new_item(
        self, schema: Mapping[str, Any], lane: str, name: str, cited: Sequence[int]
    ) -> dict[str, Any]:
        item = minimal_instance(item_schema(schema), schema)
        item[NAME_FIELD[lane]] = name
        if lane == "combat-turns":
            item["action"] = "attacks"
        if lane == "spells":
            item["caster"] = self.table.dm_labels[0] if self.table.dm_labels else "someone"
        if lane == "item-events":
            item["event"] = "acquired"
        item["unit_ids"] = list(cited)
        return dict(item)

    def _pc_as_npc(
        self, rng: random.Random, lane: str, chunk: tuple[int, ...], items: list[Any], schema: Any
    ) -> None:
        if lane not in ("npcs", "npc-interactions") or rng.random() >= self.rate:
            return
        present = []
        for member in self.table.party:
            cited = _naming_lines(self.table, chunk, member.names) or _speaker_lines(
                self.table, chunk, member.labels
            )
            if cited:
                present.append((member, cited))
        if not present:
            return
        member, cited = rng.choice(present)
        items.append(self._new_item(schema, lane, member.character, cited))
        self._record(
            Injection(
                self.cls,
                lane,
                chunk,
                len(items) - 1,
                NAME_FIELD[lane],
                member.character,
                cited=tuple(cited),
                name=member.character,
            )
        )

    def _invented_name(
        self, rng: random.Random, lane: str, chunk: tuple[int, ...], items: list[Any], schema: Any
    ) -> None:
        if rng.random() >= self.rate:
            return
        name = rng.choice(INVENTED[lane])
        cited = list(rng.choice(items)["unit_ids"]) if items else list(chunk[:2])
        items.append(self._new_item(schema, lane, name, cited))
        self._record(
            Injection(
                self.cls,
                lane,
                chunk,
                len(items) - 1,
                NAME_FIELD[lane],
                name,
                cited=tuple(cited),
                name=name,
            )
        )

    def _alias_spelling(
        self, rng: random.Random, lane: str, chunk: tuple[int, ...], items: list[Any], _: Any
    ) -> None:
        key = NAME_FIELD[lane]
        for index, item in enumerate(items):
            if rng.random() >= self.rate:
                continue
            wrong = misspell(str(item[key]))
            gold_name = str(item[key])
            item[key] = wrong
            self._record(
                Injection(
                    self.cls,
                    lane,
                    chunk,
                    index,
                    key,
                    wrong,
                    cited=tuple(item["unit_ids"]),
                    name=gold_name,
                    base=index,
                )
            )

    def _dm_or_player_label(
        self, rng: random.Random, lane: str, chunk: tuple[int, ...], items: list[Any], schema: Any
    ) -> None:
        if lane == "npcs":
            if rng.random() >= self.rate:
                return
            speaking = [
                (label, lines)
                for label in (
                    *self.table.dm_labels,
                    *(label for m in self.table.party for label in m.labels),
                )
                if (lines := _speaker_lines(self.table, chunk, [label]))
            ]
            if not speaking:
                return
            dm = [s for s in speaking if s[0] in self.table.dm_labels]
            label, lines = dm[0] if dm and rng.random() < 0.5 else rng.choice(speaking)
            items.append(self._new_item(schema, lane, label, lines))
            self._record(
                Injection(
                    self.cls,
                    lane,
                    chunk,
                    len(items) - 1,
                    "name",
                    label,
                    cited=tuple(lines),
                    name=label,
                )
            )
            return
        if not self.table.dm_labels:
            return
        label = self.table.dm_labels[0]
        for index, item in enumerate(items):
            # The DM's label is never a right actor, caster, holder or partner: it replaces
            # the record's character (an item event's first empty holder, else its first).
            fields = CHARACTER_FIELDS[lane]
            empty = [f for f in fields if not item.get(f)]
            name_field = empty[0] if lane == "item-events" and empty else fields[0]
            if rng.random() >= self.rate:
                continue
            item[name_field] = label
            self._record(
                Injection(
                    self.cls,
                    lane,
                    chunk,
                    index,
                    name_field,
                    label,
                    cited=tuple(item["unit_ids"]),
                    name=str(item[NAME_FIELD[lane]]),
                    base=index,
                )
            )

    def _duplicate(
        self, rng: random.Random, lane: str, chunk: tuple[int, ...], items: list[Any], _: Any
    ) -> None:
        prose = PROSE_FIELD.get(lane)
        for index in range(len(items)):
            if rng.random() >= self.rate:
                continue
            copy = dict(items[index])
            if prose is not None:
                copy[prose] = ((copy.get(prose) or "") + " (as said above)").strip()
            items.append(copy)
            self._record(
                Injection(
                    self.cls,
                    lane,
                    chunk,
                    len(items) - 1,
                    cited=tuple(copy["unit_ids"]),
                    name=str(copy[NAME_FIELD[lane]]),
                    base=index,
                )
            )


# --- what became of a mistake ------------------------------------------------------------------


@dataclass(frozen=True)
class Published:
    """What `fate` reads from one published bundle."""

    records: Mapping[str, Sequence[Mapping[str, Any]]]
    """lane id -> published records"""
    order: Sequence[int]
    chunk_ids: Mapping[tuple[int, ...], str]
    """a chunk's unit ids -> its chunk id"""
    rejected: Sequence[Mapping[str, Any]]
    warnings: Sequence[Mapping[str, Any]]

    def cited(self, record: Mapping[str, Any], lane: str) -> set[int]:
        positions = {u: p for p, u in enumerate(self.order)}
        refs = record.get("source_ref") if lane == SCENE_LANE else record.get("source_refs")
        listed = [refs] if isinstance(refs, dict) else list(refs or [])
        return set(cited_units(listed, positions, self.order))

    def named(self, lane: str, field_name: str, value: str) -> list[Mapping[str, Any]]:
        """Published records of `lane` whose `field_name` (for NPCs also an alias) is `value`
        (compared as the scorer compares names)."""
        key = normalize_name(value)
        out = []
        for record in self.records.get(lane, ()):
            names = [record.get(field_name)]
            if lane == "npcs" and field_name == "name":
                names += list(record.get("aliases") or [])
            if any(isinstance(n, str) and normalize_name(n) == key for n in names):
                out.append(record)
        return out


def piece_fate(published: Published, lane: str, chunk: tuple[int, ...], position: int) -> str:
    """What became of the answer item at `position` of `lane`'s answer for `chunk`: accepted,
    or the validator that rejected the whole answer or dropped that record."""
    chunk_id = published.chunk_ids.get(chunk)
    for rejection in published.rejected:
        if rejection.get("lane") != lane or rejection.get("chunk_id") != chunk_id:
            continue
        if rejection.get("record_index") is None:
            return f"answer rejected ({rejection.get('validator')})"
        if rejection.get("record_index") == position:
            return f"record dropped ({rejection.get('validator')})"
    return "accepted"


def measurable(injection: Injection, clean: Published) -> bool:
    """False for a mistake made on an item the clean run already lost (its fate says nothing
    about the mistake)."""
    if injection.base is None:
        return True
    return piece_fate(clean, injection.lane, injection.chunk, injection.base) == "accepted"


def _stopped_by(injection: Injection, published: Published) -> str:
    """Why a mistake is not in the bundle: the validator that rejected the chunk's answer or a
    record of it, the party filter, or the merge and normalization."""
    chunk_id = published.chunk_ids.get(injection.chunk)
    found = [
        r
        for r in published.rejected
        if r.get("lane") == injection.lane and r.get("chunk_id") == chunk_id
    ]
    whole = [r for r in found if r.get("record_index") is None]
    if whole:
        return f"answer rejected ({whole[0].get('validator')})"
    if injection.index >= 0 and any(r.get("record_index") == injection.index for r in found):
        record = next(r for r in found if r.get("record_index") == injection.index)
        return f"record dropped ({record.get('validator')})"
    if injection.cls in CITATION_CLASSES and injection.name is not None:
        kept = [
            r
            for r in published.named(injection.lane, NAME_FIELD[injection.lane], injection.name)
            if published.cited(r, injection.lane) & set(injection.chunk)
        ]
        if kept:
            return "citations trimmed to the evidence (the record kept, tight)"
    if any(
        w.get("code") == "party_member_dropped"
        and w.get("lane") == injection.lane
        and w.get("chunk_id") == chunk_id
        for w in published.warnings
    ):
        return "party member dropped"
    return "merged or normalized away"


def reached(injection: Injection, published: Published, clean: Published) -> bool:
    """Whether the mistake is in the published bundle (what a user would publish)."""
    lane, chunk = injection.lane, set(injection.chunk)
    if injection.cls == "truncated":
        chunk_id = published.chunk_ids.get(injection.chunk)
        return not any(
            r.get("lane") == lane
            and r.get("chunk_id") == chunk_id
            and r.get("record_index") is None
            for r in published.rejected
        )
    if injection.cls == "wrong-scene-kind":
        return any(
            r.get("kind") == injection.value and published.cited(r, lane) == chunk
            for r in published.records.get(lane, ())
        )
    if injection.cls in ("citation-off-by-one", "citation-out-of-chunk", "citation-over-broad"):
        assert injection.name is not None
        wrong, gold = set(injection.wrong_units), set(injection.gold_units)
        for record in published.named(lane, NAME_FIELD[lane], injection.name):
            here = published.cited(record, lane) & chunk
            if injection.cls == "citation-out-of-chunk" and published.cited(record, lane) & wrong:
                # The unit may be the record's own in the next chunk: only an accepted answer
                # for this chunk can have carried the out-of-chunk citation into the bundle.
                return not piece_fate(published, lane, injection.chunk, -1).startswith("answer")
            if injection.cls == "citation-off-by-one" and here & wrong:
                return True
            if injection.cls == "citation-over-broad" and here and len(here - gold) > len(here) / 2:
                return True
        return False
    if injection.cls == "duplicate":
        assert injection.name is not None

        def count(bundle: Published) -> int:
            return sum(
                1
                for r in bundle.named(lane, NAME_FIELD[lane], injection.name or "")
                if bundle.cited(r, lane) & chunk
            )

        return count(published) > count(clean)
    assert injection.field is not None and injection.value is not None
    return any(
        published.cited(r, lane) & set(injection.cited)
        for r in published.named(lane, injection.field, injection.value)
    )


def fate(injection: Injection, published: Published, clean: Published) -> tuple[bool, str]:
    """(reached the bundle, and if not, what stopped it)."""
    if reached(injection, published, clean):
        return True, "reached the bundle"
    return False, _stopped_by(injection, published)


def citation_budget(schema: Mapping[str, Any]) -> int:
    """The `maxItems` of the answer items' `unit_ids` in `schema` (MAX_CITED when unset)."""
    items_name = items_field(schema)
    node: Any = ((schema.get("properties") or {}).get(items_name or "") or {}).get("items") or {}
    for _ in range(8):  # follow local `$ref`s
        ref = node.get("$ref") if isinstance(node, dict) else None
        if not ref:
            break
        node = (schema.get("$defs") or {}).get(str(ref).rsplit("/", 1)[-1]) or {}
    cited = ((node.get("properties") or {}) if isinstance(node, dict) else {}).get("unit_ids")
    return int((cited or {}).get("maxItems", MAX_CITED))
