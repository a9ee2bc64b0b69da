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
  name or one of its aliases); a record with no value in them claims nothing and passes.

A speaker label is not a mention (`LAURA:` says nothing about who `Jester` is) unless the kind
says so (`speaker_mentions`), or a speaker-name hook maps the label to names: the party roster
registers one (`register_speaker_names`), so `LAURA` can count as a mention of `Jester`."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from notarius_dagster.engine.artifact_kinds import ArtifactKind
from notarius_dagster.engine.models import SourceDocument, SourceUnit

SpeakerNames = Callable[[Mapping[str, Any], str], Sequence[str]]
"""Given a stage's prepared references (by slot) and a speaker label, the names the label
stands for (e.g. from a party roster); empty when it maps to nothing."""

_SPEAKER_HOOKS: list[SpeakerNames] = []
_POSSESSIVE = re.compile(r"['\u2019\u02bc]s\b")
_NOT_WORD = re.compile(r"[^0-9a-z]+")


def register_speaker_names(hook: SpeakerNames) -> SpeakerNames:
    """Add a speaker-name hook (idempotent for the same function)."""
    if hook not in _SPEAKER_HOOKS:
        _SPEAKER_HOOKS.append(hook)
    return hook


def speaker_names(references: Mapping[str, Any], label: str) -> tuple[str, ...]:
    """Every name the registered hooks say a speaker label stands for, deduplicated."""
    out: list[str] = []
    for hook in _SPEAKER_HOOKS:
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


def field_values(record: Mapping[str, Any], fields: Iterable[str]) -> list[str]:
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
    unit: SourceUnit, *, speaker_mentions: bool, references: Mapping[str, Any]
) -> list[list[str]]:
    """The token lists a unit offers as mentions: its text, its speaker label where the kind
    counts labels, and the names speaker hooks map its label to."""
    texts = [tokens(unit.text)]
    speaker = unit.metadata.get("speaker")
    if isinstance(speaker, str) and speaker.strip():
        if speaker_mentions:
            texts.append(tokens(speaker))
        texts.extend(tokens(name) for name in speaker_names(references, speaker))
    return texts


def cited_units(refs: Any, document: SourceDocument) -> list[SourceUnit]:
    """The units a record's references cover (a list of references or a single one), in
    document order; a unit outside the document is skipped (`refs_in_*` report those)."""
    positions = document.position_index()
    listed = refs if isinstance(refs, list) else [refs] if refs else []
    covered: set[int] = set()
    for ref in listed:
        start = positions.get(ref.get("start_unit_id"))
        end = positions.get(ref.get("end_unit_id"))
        if start is not None and end is not None:
            covered.update(range(start, end + 1))
    return [document.units[p] for p in sorted(covered)]


def unsupported_records(
    kind: ArtifactKind,
    payload: Mapping[str, Any],
    document: SourceDocument,
    references: Mapping[str, Any] | None = None,
) -> dict[int, str]:
    """Record index -> content-safe reason, for every record of `payload` whose support
    fields are not mentioned by the units it cites. A kind without support fields: none."""
    if not kind.support_fields:
        return {}
    references = references or {}
    found: dict[int, str] = {}
    for index, record in enumerate(payload.get(kind.items_field, [])):
        values = [tokens(v) for v in field_values(record, kind.support_fields)]
        if not values:
            continue
        units = cited_units(record.get(kind.refs_field), document)
        texts = [
            t
            for unit in units
            for t in unit_mention_texts(
                unit, speaker_mentions=kind.speaker_mentions, references=references
            )
        ]
        if not any(mentions(v, t) for v in values for t in texts):
            fields = "/".join(kind.support_fields)
            found[index] = (
                f"record {index}: no value of {fields} is mentioned in its "
                f"{len(units)} cited unit(s)"
            )
    return found
