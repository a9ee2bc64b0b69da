"""`notarius campaign show CAMPAIGN [--npc NAME]` prints a campaign's codex (or one NPC's
history) as tables; `notarius campaign build ROSTER` builds and publishes the codex from the
bundles published so far (what the `campaign_codex` asset does, without Dagster: for bundles
published with `notarius run --out`). docs/campaign.md describes the codex."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from notarius_dagster.cli_common import EXIT_FAILED, EXIT_OK


def _bundles_root(args: argparse.Namespace) -> Path:
    from notarius_dagster.store import store_paths

    return store_paths(data=args.data, bundles=args.bundles).bundles


def _refs(refs: Any) -> str:
    return ", ".join(
        str(r.start_unit_id)
        if r.start_unit_id == r.end_unit_id
        else f"{r.start_unit_id}-{r.end_unit_id}"
        for r in refs
    )


def cmd_campaign_show(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from notarius_dagster.campaign.store import CodexError, load_codex, page_path
    from notarius_dagster.dnd.roster import name_key

    bundles = _bundles_root(args)
    try:
        codex = load_codex(bundles, args.campaign)
    except CodexError as exc:
        print(
            f"error: {exc}. Build it: materialize `campaign_codex` (a profile that binds the "
            "roster), or `notarius campaign build ROSTER`",
            file=sys.stderr,
        )
        return EXIT_FAILED
    console = Console(width=args.width, soft_wrap=False)
    if args.json:
        print(json.dumps(codex.model_dump(mode="json", by_alias=True), indent=2))
        return EXIT_OK
    if args.npc:
        key = name_key(args.npc)
        found = [
            n for n in codex.npcs if key in {name_key(n.name), *(name_key(a) for a in n.aliases)}
        ]
        if not found:
            print(
                f"error: no NPC of campaign {args.campaign!r} has that name or alias",
                file=sys.stderr,
            )
            return EXIT_FAILED
        for npc in found:
            table = Table(
                title=f"{npc.name} ({npc.id}): first {npc.first_session}, last {npc.last_session}"
            )
            for column in ("session", "npc id", "name", "aliases", "cited units"):
                table.add_column(column)
            for a in npc.appearances:
                table.add_row(
                    a.session, a.npc_id, a.name, ", ".join(a.aliases), _refs(a.source_refs)
                )
            console.print(table)
            for m in npc.merges:
                console.print(
                    f"  merged {m.session} {m.npc_id} -> {m.to_session} "
                    f"{m.to_npc_id}: {m.reason} ({m.key})",
                    markup=False,
                )
        return EXIT_OK
    sessions = Table(title=f"campaign {codex.campaign}: sessions")
    for column in ("#", "session", "number", "date", "published"):
        sessions.add_column(column)
    for s in codex.sessions:
        sessions.add_row(
            str(s.position), s.id, str(s.number or ""), s.date or "", "yes" if s.published else "no"
        )
    npcs = Table(title="NPCs")
    for column in ("id", "name", "aliases", "first", "last", "sessions", "appearances"):
        npcs.add_column(column)
    for n in codex.npcs:
        npcs.add_row(
            n.id,
            n.name,
            ", ".join(n.aliases),
            n.first_session,
            n.last_session,
            str(len(n.sessions)),
            str(len(n.appearances)),
        )
    same = Table(title="possibly the same (not merged)")
    for column in ("a", "b", "signal", "name"):
        same.add_column(column)
    for p in codex.possibly_same:
        same.add_row(p.a, p.b, p.reason, p.key)
    holders = Table(title="items: who has what")
    for column in ("item", "status", "holder", "since", "events"):
        holders.add_column(column)
    for h in codex.item_holders:
        holders.add_row(
            h.item, h.status, h.holder or "", f"{h.session} {h.event_id}", str(h.events)
        )
    spells = Table(title="spells by caster")
    for column in ("caster", "spell", "count", "sessions"):
        spells.add_column(column)
    for c in codex.spells_by_caster:
        spells.add_row(c.caster, c.spell, str(c.count), ", ".join(c.sessions))
    scenes = Table(title="scenes")
    for column in ("session", "scene", "kind", "title", "units"):
        scenes.add_column(column)
    for sc in codex.scenes:
        scenes.add_row(
            sc.session, sc.scene_id, sc.kind, sc.title, f"{sc.start_unit_id}-{sc.end_unit_id}"
        )
    for table in (sessions, npcs, same, holders, spells, scenes):
        console.print(table)
    console.print(f"page: {page_path(bundles, codex.campaign)}", markup=False)
    return EXIT_OK


def cmd_campaign_build(args: argparse.Namespace) -> int:
    from notarius_dagster.campaign.store import CodexError, load_roster, publish_codex
    from notarius_dagster.modules import load_modules

    load_modules()
    try:
        published = publish_codex(_bundles_root(args), load_roster(Path(args.roster)))
    except CodexError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    codex = published.codex
    print(
        f"{published.path} ({'changed' if published.changed else 'unchanged'}): "
        f"{sum(s.published for s in codex.sessions)}/{len(codex.sessions)} session(s) "
        f"published, {len(codex.npcs)} NPC(s), {len(codex.item_events)} item event(s)"
    )
    return EXIT_OK


def _store_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", help="store root (default NOTARIUS_DATA or ./var/data)")
    parser.add_argument("--bundles", help="bundle root (default NOTARIUS_BUNDLES or DATA/bundles)")


def add_campaign_parser(sub: Any) -> None:
    parser = sub.add_parser("campaign", help="a campaign's codex across its sessions")
    commands = parser.add_subparsers(dest="campaign_command", required=True, metavar="COMMAND")
    show = commands.add_parser(
        "show",
        help="print a campaign's codex (or one NPC's history) as tables",
        description="Print the codex of CAMPAIGN (BUNDLES/.campaigns/CAMPAIGN/codex.json).",
    )
    show.add_argument("campaign", metavar="CAMPAIGN", help="the roster's campaign id")
    show.add_argument("--npc", metavar="NAME", help="one NPC's history (by name or alias)")
    show.add_argument("--json", action="store_true", help="print the codex JSON instead")
    show.add_argument("--width", type=int, default=None, help="table width (default: terminal)")
    _store_options(show)
    show.set_defaults(func=cmd_campaign_show)
    build = commands.add_parser(
        "build",
        help="build a campaign's codex from the bundles published so far",
        description="Build and publish the codex of ROSTER's campaign from its published "
        "session bundles (what the campaign_codex asset does).",
    )
    build.add_argument("roster", metavar="ROSTER", help="the campaign's roster file (YAML)")
    _store_options(build)
    build.set_defaults(func=cmd_campaign_build)
