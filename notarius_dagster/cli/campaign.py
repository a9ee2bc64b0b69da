"""`notarius campaign show CAMPAIGN [--npc NAME]` prints a campaign's codex (or one NPC's
history) as tables; `notarius campaign build ROSTER` builds and publishes the codex from the
bundles published so far (what the `campaign_codex` asset does, without Dagster: for bundles
published with `notarius run --out`). docs/campaign.md describes the codex."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from notarius_dagster.cli.common import (
    EXIT_OK,
    CommandError,
    add_command,
    add_store_options,
    bundles_root,
    plain,
)

if TYPE_CHECKING:
    from rich.table import Table

    from notarius_dagster.campaign.model import Codex, CodexNpc
    from notarius_dagster.cli.common import Subcommands
    from notarius_dagster.engine.models import SourceRef


def _refs(refs: Iterable[SourceRef]) -> str:
    return ", ".join(
        str(r.start_unit_id)
        if r.start_unit_id == r.end_unit_id
        else f"{r.start_unit_id}-{r.end_unit_id}"
        for r in refs
    )


def _table(title: str, columns: Sequence[str], rows: Iterable[Sequence[str]]) -> Table:
    """One rich table of the codex: a title, its column headers and its rows of text."""
    from rich.table import Table

    table = Table(title=plain(title))
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*(plain(cell) for cell in row))  # names are transcript text: no markup
    return table


def _npc_history(npc: CodexNpc) -> Table:
    """One NPC's appearances, session by session (`campaign show --npc`)."""
    return _table(
        f"{npc.name} ({npc.id}): first {npc.first_session}, last {npc.last_session}",
        ("session", "npc id", "name", "aliases", "cited units"),
        (
            (a.session, a.npc_id, a.name, ", ".join(a.aliases), _refs(a.source_refs))
            for a in npc.appearances
        ),
    )


def _codex_tables(codex: Codex) -> list[Table]:
    """The whole codex as tables, in the order `campaign show` prints them."""
    return [
        _table(
            f"campaign {codex.campaign}: sessions",
            ("#", "session", "number", "date", "published"),
            (
                (
                    str(s.position),
                    s.id,
                    str(s.number or ""),
                    s.date or "",
                    "yes" if s.published else "no",
                )
                for s in codex.sessions
            ),
        ),
        _table(
            "NPCs",
            ("id", "name", "aliases", "first", "last", "sessions", "appearances"),
            (
                (
                    n.id,
                    n.name,
                    ", ".join(n.aliases),
                    n.first_session,
                    n.last_session,
                    str(len(n.sessions)),
                    str(len(n.appearances)),
                )
                for n in codex.npcs
            ),
        ),
        _table(
            "possibly the same (not merged)",
            ("a", "b", "signal", "name"),
            ((p.a, p.b, p.reason, p.key) for p in codex.possibly_same),
        ),
        _table(
            "items: who has what",
            ("item", "status", "holder", "since", "events"),
            (
                (h.item, h.status, h.holder or "", f"{h.session} {h.event_id}", str(h.events))
                for h in codex.item_holders
            ),
        ),
        _table(
            "spells by caster",
            ("caster", "spell", "count", "sessions"),
            (
                (c.caster, c.spell, str(c.count), ", ".join(c.sessions))
                for c in codex.spells_by_caster
            ),
        ),
        _table(
            "scenes",
            ("session", "scene", "kind", "title", "units"),
            (
                (sc.session, sc.scene_id, sc.kind, sc.title, f"{sc.start_unit_id}-{sc.end_unit_id}")
                for sc in codex.scenes
            ),
        ),
    ]


def _not_an_npc(codex: Codex, key: str) -> str:
    """Why no NPC answers to `key`: a party member or the DM's label is named as the roster
    writes it (never the user's own text); otherwise there is no such NPC."""
    from notarius_dagster.campaign.build import person_key

    for member in codex.party:
        if key in {person_key(n) for n in [member.character, *member.aliases, *member.labels]}:
            return (
                f"{member.character} is a party member of campaign {codex.campaign!r} "
                f"(played by {', '.join(member.labels)}), not an NPC: the codex lists only "
                "non-player characters"
            )
    for label in codex.dm:
        if key == person_key(label):
            return f"{label} is the DM's label in campaign {codex.campaign!r}, never a character"
    return f"no NPC of campaign {codex.campaign!r} has that name or alias"


def cmd_campaign_show(args: argparse.Namespace) -> int:
    """Print the codex of CAMPAIGN (BUNDLES/.campaigns/CAMPAIGN/codex.json)."""
    from rich.console import Console

    from notarius_dagster.campaign.build import person_key
    from notarius_dagster.campaign.store import CodexError, load_codex, page_path

    bundles = bundles_root(args)
    try:
        codex = load_codex(bundles, args.campaign)
    except CodexError as exc:
        raise CommandError(
            f"{exc}. Build it: materialize `campaign_codex` (a profile that binds the "
            "roster), or `notarius campaign build ROSTER`"
        ) from None
    console = Console(width=args.width, soft_wrap=False)
    if args.json:
        print(json.dumps(codex.model_dump(mode="json", by_alias=True), indent=2))
        return EXIT_OK
    if args.npc:
        key = person_key(args.npc)
        found = [
            n
            for n in codex.npcs
            if key in {person_key(n.name), *(person_key(a) for a in n.aliases)}
        ]
        if not found:
            raise CommandError(_not_an_npc(codex, key))
        for npc in found:
            console.print(_npc_history(npc))
            for m in npc.merges:
                console.print(
                    plain(
                        f"  merged {m.session} {m.npc_id} -> {m.to_session} "
                        f"{m.to_npc_id}: {m.reason} ({m.key})"
                    )
                )
        return EXIT_OK
    for table in _codex_tables(codex):
        console.print(table)
    console.print(plain(f"page: {page_path(bundles, codex.campaign)}"))
    return EXIT_OK


def cmd_campaign_build(args: argparse.Namespace) -> int:
    """Build and publish the codex of ROSTER's campaign from its published session bundles
    (what the campaign_codex asset does)."""
    from notarius_dagster.campaign.store import CodexError, load_roster, publish_codex
    from notarius_dagster.modules import registry

    try:
        published = publish_codex(bundles_root(args), load_roster(Path(args.roster)), registry())
    except CodexError as exc:
        raise CommandError(exc) from None
    codex = published.codex
    print(
        f"{published.path} ({'changed' if published.changed else 'unchanged'}): "
        f"{sum(s.published for s in codex.sessions)}/{len(codex.sessions)} session(s) "
        f"published, {len(codex.npcs)} NPC(s), {len(codex.item_events)} item event(s)"
    )
    return EXIT_OK


def add_campaign_parser(sub: Subcommands) -> None:
    parser = sub.add_parser("campaign", help="a campaign's codex across its sessions")
    commands = parser.add_subparsers(dest="campaign_command", required=True, metavar="COMMAND")
    show = add_command(
        commands,
        "show",
        cmd_campaign_show,
        help="print a campaign's codex (or one NPC's history) as tables",
    )
    show.add_argument("campaign", metavar="CAMPAIGN", help="the roster's campaign id")
    show.add_argument("--npc", metavar="NAME", help="one NPC's history (by name or alias)")
    show.add_argument("--json", action="store_true", help="print the codex JSON instead")
    show.add_argument("--width", type=int, default=None, help="table width (default: terminal)")
    add_store_options(show)
    build = add_command(
        commands,
        "build",
        cmd_campaign_build,
        help="build a campaign's codex from the bundles published so far",
    )
    build.add_argument("roster", metavar="ROSTER", help="the campaign's roster file (YAML)")
    add_store_options(build)
