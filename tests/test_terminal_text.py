"""Terminal output never interprets transcript-derived text (issue 23). A name is one line of
text (`dnd/records.py: OneLine`), but it may hold brackets: `[link=http://...]`, `[bold red
blink]` or a stray `[/b]` are names a model can copy out of a transcript. `notarius campaign
show` printed them through rich as markup: a terminal hyperlink, blinking text, a crash. Run
as a person runs it, in its own process, with colours forced (`FORCE_COLOR`, as on a
terminal), so any style or hyperlink would be in the output as its escape sequence."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from notarius_dagster.campaign.model import Appearance, Codex, CodexNpc, CodexSession
from notarius_dagster.campaign.store import codex_path, codex_text
from notarius_dagster.engine.models import SourceRef

REPO = Path(__file__).resolve().parent.parent
NOTARIUS = Path(sys.executable).with_name("notarius")
LINK = "[link=http://127.0.0.1:9/p]Brannoc[/link]"
BLINK = "[bold red blink]Vex the Bright"
STRAY = "Ornna [/b] the Smith"
OSC_HYPERLINK = "\x1b]8;"
SGR_BLINK = "\x1b[5m"


def npc(number: int, name: str) -> CodexNpc:
    ref = SourceRef(source_id="s1", start_unit_id=number, end_unit_id=number)
    return CodexNpc(
        id=f"npc-{number}",
        name=name,
        aliases=[STRAY] if number == 1 else [],
        known=False,
        first_session="s1",
        last_session="s1",
        sessions=["s1"],
        appearances=[
            Appearance(
                session="s1", npc_id=f"npc-{number}", name=name, aliases=[], source_refs=[ref]
            )
        ],
        merges=[],
    )


def codex_with_markup_names(bundles: Path) -> None:
    codex = Codex(
        campaign="c",
        roster_digest="sha256:" + "0" * 64,
        sessions=[CodexSession(id="s1", position=1, published=True, lanes=["dnd/npc-list"])],
        npcs=[npc(1, LINK), npc(2, BLINK), npc(3, STRAY)],
        possibly_same=[],
        item_events=[],
        item_holders=[],
        spells_by_caster=[],
        spells=[],
        scenes=[],
    )
    path = codex_path(bundles, "c")
    path.parent.mkdir(parents=True)
    path.write_text(codex_text(codex))


def show(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NOTARIUS_", "DAGSTER_"))}
    env |= {"PYTHONPATH": str(REPO), "FORCE_COLOR": "1", "DAGSTER_HOME": str(tmp_path)}
    return subprocess.run(
        [
            str(NOTARIUS),
            "campaign",
            "show",
            "c",
            "--bundles",
            str(tmp_path),
            "--width",
            "250",
            *args,
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_campaign_show_prints_names_as_text_never_as_markup(tmp_path: Path) -> None:
    codex_with_markup_names(tmp_path)
    done = show(tmp_path)
    assert done.returncode == 0, done.stderr
    for name in (LINK, BLINK, STRAY):
        assert name in done.stdout  # as written, brackets and all
    assert OSC_HYPERLINK not in done.stdout and SGR_BLINK not in done.stdout


def test_one_npc_history_prints_its_name_as_text(tmp_path: Path) -> None:
    codex_with_markup_names(tmp_path)
    done = show(tmp_path, "--npc", LINK)
    assert done.returncode == 0, done.stderr
    assert LINK in done.stdout and OSC_HYPERLINK not in done.stdout
