"""How the report shows a transcript's speaker labels when the profile binds a roster.

A transcript names the people at the table (`LAURA`, `MATT`); a reader of a D&D report thinks
in characters. With a roster, a label whose player plays one character in this session is shown
as that character with the label beside it (`Jester` `LAURA`), and the DM's labels as the DM
(`MATT` `DM`); the label is always kept, so the page never hides what the transcript says.
Which character a label denotes is the roster's own rule (`dnd/roster.py: RosterIndex`, the
one the lanes use), so the report and the published records never disagree. Without a roster,
or for a label the roster does not know, the label is shown as it is."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from notarius_dagster.dnd.roster import Roster, RosterIndex, name_key
from notarius_dagster.report.markup import text


@dataclass(frozen=True)
class Speakers:
    """Speaker label key -> the character it denotes in this session; the DM's label keys."""

    characters: Mapping[str, str] = field(default_factory=dict)
    dm: frozenset[str] = frozenset()

    @classmethod
    def of(cls, roster: Roster | None, session_id: str) -> Speakers:
        """The speakers of `session_id` as `roster` declares them (none without a roster)."""
        if roster is None:
            return cls()
        index = RosterIndex(roster, session_id)
        return cls(dict(index.character_by_label), index.dm_keys)

    def html(self, label: str) -> str:
        """The speaker as the page shows it (inert HTML)."""
        key = name_key(label)
        character = self.characters.get(key)
        if character is not None:
            return f'{text(character)} <span class="label">{text(label)}</span>'
        if key in self.dm:
            return f'{text(label)} <span class="label">DM</span>'
        return text(label)
