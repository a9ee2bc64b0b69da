"""Records verified against what they cite: a record's supported fields (declared by its lane,
`LaneSpec.support_fields`, carried by its artifact kind) must be mentioned in the text of the
units it cites. Matching is deterministic and token-level, never an LLM:

- text and values are normalized alike: Unicode NFKD with combining marks dropped
  (`Jérôme` = `Jerome`), case-folded, a possessive `'s` dropped (`Gustav's` = `Gustav`),
  every other non-alphanumeric character a separator;
- a value is mentioned when its tokens appear in order (other words may come between, as in
  `Gustav, the circus master, Fletching`) within one cited unit: a name split across two
  lines is not a mention of it;
- a record is supported when at least one value of its support fields is mentioned (an NPC's
  name or one of its aliases); a record with no value in them claims nothing and passes;
- a value that names a character the stage's references know is also mentioned by any other
  name they know it by (a known-names hook, carried by the lane registry:
  `dnd/grounding.py: npc_names` reads the `npcs` lane's artifact): an interaction "with Bosun"
  is shown by a line saying "Bo the Breaker" when the npcs lane published Bosun with that
  alias. A name the references do not know (an invented or misspelt one) gains nothing.

A speaker label is not a mention (`LAURA:` says nothing about who `Jester` is) unless the kind
says so (`speaker_mentions`). A speaker-name hook maps a label to names (the party roster
gives one, `dnd/roster.py: speaker_names`, carried by the lane registry: `LAURA` -> `Jester`),
and those names count only for a kind whose supported field is the one who speaks
(`speaker_acts`: a combat turn's actor, where LAURA's "I swing at him" shows Jester acting).
Elsewhere a player's own line is never a mention of their character: an NPC interaction "with
Jester" is not supported by LAURA saying anything.

Citations as tight as the evidence (`tighten_citations`): a supported record keeps only the
cited units within `CITATION_WINDOW` units (by document position) of a cited unit that
supports it, and when even those are mostly context (more of them mention nothing than
mention the record: an over-broad citation) only the supporting units themselves; the rest of
what it cited is removed, and the lane runner records a count-only warning
`citations_trimmed`. Units are only ever removed, never added."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from notarius_dagster.engine.artifact_kinds import ArtifactKind
from notarius_dagster.engine.models import SourceDocument, SourceUnit

SpeakerNames = Callable[[Mapping[str, object], str], Sequence[str]]
"""Given a stage's prepared references (by slot) and a speaker label, the names the label
stands for (e.g. from a party roster); empty when it maps to nothing."""

KnownNames = Callable[[Mapping[str, object], str], Sequence[str]]
"""Given a stage's prepared references (by slot) and a value of a support field, the other
names the references know the same character by (e.g. an NPC's name and aliases from the
`npcs` lane); empty when the value names no one they know."""

_POSSESSIVE = re.compile(r"['\u2019\u02bc]s\b")
_NOT_WORD = re.compile(r"[^0-9a-z]+")


def known_names(
    hooks: Sequence[KnownNames], references: Mapping[str, object], value: str
) -> tuple[str, ...]:
    """`value` and every other name `hooks` know its character by."""
    out = [value]
    for hook in hooks:
        out.extend(n for n in hook(references, value) if n not in out)
    return tuple(out)


def speaker_names(
    hooks: Sequence[SpeakerNames], references: Mapping[str, object], label: str
) -> tuple[str, ...]:
    """Every name `hooks` say a speaker label stands for, deduplicated."""
    out: list[str] = []
    for hook in hooks:
        out.extend(n for n in hook(references, label) if n not in out)
    return tuple(out)


def tokens(text: str) -> list[str]:
    """The normalized tokens of `text` (see the module docstring)."""
    decomposed = unicodedata.normalize("NFKD", text)
    plain = "".join(ch for ch in decomposed if not unicodedata.combining(ch)).casefold()
    plain = _POSSESSIVE.sub("", plain)
    return [t for t in _NOT_WORD.split(plain) if t]


def mentions(value_tokens: Sequence[str], text_tokens: Sequence[str]) -> bool:
    """True when `value_tokens` appear in order within `text_tokens` (empty: never)."""
    if not value_tokens:
        return False
    remaining = iter(text_tokens)
    return all(any(t == v for t in remaining) for v in value_tokens)


def field_values(record: Mapping[str, object], fields: Iterable[str]) -> list[str]:
    """The string values of `fields` in a record (a list field gives each of its strings)."""
    values: list[str] = []
    for name in fields:
        value = record.get(name)
        if isinstance(value, str):
            values.append(value)
        elif isinstance(value, list):
            values.extend(v for v in value if isinstance(v, str))
    return values


def unit_mention_texts(
    unit: SourceUnit,
    *,
    speaker_mentions: bool,
    references: Mapping[str, object],
    speaker_acts: bool = False,
    hooks: Sequence[SpeakerNames] = (),
) -> list[list[str]]:
    """The token lists a unit offers as mentions: its text, its speaker label where the kind
    counts labels, and, where the kind's supported field is the speaker (`speaker_acts`), the
    names speaker hooks map its label to."""
    texts = [tokens(unit.text)]
    speaker = unit.metadata.get("speaker")
    if isinstance(speaker, str) and speaker.strip():
        if speaker_mentions:
            texts.append(tokens(speaker))
        if speaker_acts:
            texts.extend(tokens(name) for name in speaker_names(hooks, references, speaker))
    return texts


def _positions(refs: object, document: SourceDocument) -> list[int]:
    """The document positions a record's references cover (a list of references or a single
    one), sorted; a unit outside the document is skipped (`refs_in_*` report those)."""
    positions = document.position_index()
    listed = refs if isinstance(refs, list) else [refs] if refs else []
    covered: set[int] = set()
    for ref in (r for r in listed if isinstance(r, Mapping)):
        first, last = ref.get("start_unit_id"), ref.get("end_unit_id")
        start = positions.get(first) if isinstance(first, int) else None
        end = positions.get(last) if isinstance(last, int) else None
        if start is not None and end is not None:
            covered.update(range(start, end + 1))
    return sorted(covered)


def supporting_positions(
    kind: ArtifactKind,
    record: Mapping[str, object],
    document: SourceDocument,
    references: Mapping[str, object],
    hooks: Sequence[SpeakerNames] = (),
    names: Sequence[KnownNames] = (),
) -> tuple[list[int], list[int]] | None:
    """(cited positions, the cited positions whose unit mentions a value of the record's
    support fields), or None for a record that claims nothing (no value in them)."""
    named = field_values(record, kind.support_fields)
    if not named:
        return None
    values = [tokens(n) for v in named for n in known_names(names, references, v)]
    if not values:
        return None
    cited = _positions(record.get(kind.refs_field), document)
    found = []
    for position in cited:
        texts = unit_mention_texts(
            document.units[position],
            speaker_mentions=kind.speaker_mentions,
            references=references,
            speaker_acts=kind.speaker_acts,
            hooks=hooks,
        )
        if any(mentions(v, t) for v in values for t in texts):
            found.append(position)
    return cited, found


def unsupported_records(
    kind: ArtifactKind,
    payload: Mapping[str, object],
    document: SourceDocument,
    references: Mapping[str, object] | None = None,
    hooks: Sequence[SpeakerNames] = (),
    names: Sequence[KnownNames] = (),
) -> dict[int, str]:
    """Record index -> content-safe reason, for every record of `payload` whose support
    fields are not mentioned by the units it cites. A kind without support fields: none."""
    if not kind.support_fields:
        return {}
    references = references or {}
    found: dict[int, str] = {}
    for index, record in enumerate(record_dicts(payload, kind.items_field)):
        support = supporting_positions(kind, record, document, references, hooks, names)
        if support is not None and not support[1]:
            fields = "/".join(kind.support_fields)
            found[index] = (
                f"record {index}: no value of {fields} is mentioned in its "
                f"{len(support[0])} cited unit(s)"
            )
    return found


def record_dicts(payload: Mapping[str, object], items_field: str) -> list[Mapping[str, object]]:
    """The records of an output's payload as it came (the schema check has approved their
    shape; anything that is no mapping is not a record)."""
    items = payload.get(items_field, [])
    return [r for r in items if isinstance(r, Mapping)] if isinstance(items, list) else []


CITATION_WINDOW = 2
"""Cited units kept on either side of a supporting one (docs/lanes.md, "Citations as tight
as the evidence"): of the units the supported gold records cite, windows 0, 1, 2, 3, 5 keep
54%, 71%, 74%, 77%, 80% (`benchmarks/bench_citation_window.py`); a whole-chunk citation shrinks
to the few lines around its mentions."""


@dataclass(frozen=True)
class Tightened:
    """What `tighten_citations` did: the payload (the same object when nothing changed), how
    many records lost cited units and how many units they lost in all."""

    payload: Mapping[str, object]
    records: int = 0
    units: int = 0


def tighten_citations(
    kind: ArtifactKind,
    payload: Mapping[str, object],
    document: SourceDocument,
    references: Mapping[str, object] | None = None,
    hooks: Sequence[SpeakerNames] = (),
    names: Sequence[KnownNames] = (),
    *,
    window: int = CITATION_WINDOW,
) -> Tightened:
    """`payload` with each supported record's citations cut to the cited units within
    `window` units (document positions) of a cited unit that mentions it, as contiguous
    ranges in document order. Records that claim nothing, that nothing supports (the
    `support` validator drops those), or whose citation is a single reference (it cannot be
    split) are left as they are; so is every record that loses nothing."""
    if not kind.support_fields:
        return Tightened(payload)
    references = references or {}
    records: list[Mapping[str, object]] = record_dicts(payload, kind.items_field)
    trimmed = removed = 0
    for index, record in enumerate(records):
        refs = record.get(kind.refs_field)
        support = supporting_positions(kind, record, document, references, hooks, names)
        if not isinstance(refs, list) or support is None or not support[1]:
            continue
        kept = tight_positions(*support, window=window)
        cited = support[0]
        if len(kept) == len(cited):
            continue
        source_id = refs[0].get("source_id", document.source_id)
        records[index] = {**record, kind.refs_field: _ranges(kept, document, source_id)}
        trimmed += 1
        removed += len(cited) - len(kept)
    if not trimmed:
        return Tightened(payload)
    return Tightened({**payload, kind.items_field: records}, trimmed, removed)


def tight_positions(cited: Sequence[int], found: Sequence[int], *, window: int) -> list[int]:
    """What a supported citation keeps: the cited positions within `window` of a supporting
    one, unless most of those are still context (more kept units that mention nothing than
    units that mention the record): such a citation is over-broad, and only the supporting
    positions themselves are kept. What remains is thus always at least half evidence, the
    share scorer v2 asks of a grounded record (docs/evaluation.md). Measured against the
    alternative that spares citations lying wholly within their windows: that one let 4 of
    26 injected over-broad citations through (dense mentions put a whole chunk within the
    windows) for 1.6 points more of the gold's cited units kept (benchmarks/results/
    citation-window.json)."""
    kept = [p for p in cited if any(abs(p - s) <= window for s in found)]
    if len(kept) - len(found) > len(found):
        return list(found)
    return kept


def _ranges(
    positions: Sequence[int], document: SourceDocument, source_id: str
) -> list[dict[str, object]]:
    """Sorted positions as inclusive references, one per run of consecutive positions."""
    runs: list[list[int]] = []
    for position in positions:
        if runs and position == runs[-1][-1] + 1:
            runs[-1].append(position)
        else:
            runs.append([position])
    return [
        {
            "source_id": source_id,
            "start_unit_id": document.units[run[0]].unit_id,
            "end_unit_id": document.units[run[-1]].unit_id,
        }
        for run in runs
    ]
