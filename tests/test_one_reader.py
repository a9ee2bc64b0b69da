"""Every file a user hands the product goes through one reader (`engine/reading.py`, issue 23):
regular files only (a FIFO would block, `/dev/zero` never ends, a folder is no file), at most
a limit of bytes with messages that state the real size and the limit, nesting capped, a
repeated key refused; and nothing is copied into the store before it is accepted. Shown for
the roster (`campaign build`), profiles, gold files (`eval`) and transcripts (`run`,
`sessions add`, the parser), as a person meets them: the command in its own process, with a
memory cap so that a reader that reads `/dev/zero` whole fails fast instead of filling RAM."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from notarius_dagster.campaign.store import CodexError, load_roster
from notarius_dagster.engine.config import load_profile
from notarius_dagster.engine.errors import InputError, ProfileError
from notarius_dagster.engine.inputs import parse_transcript

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "samples" / "crd3-c2e001-slice.jsonl"
OFFLINE = REPO / "configs" / "offline.yaml"
NOTARIUS = Path(sys.executable).with_name("notarius")
MAX_NESTING = 64
"""Levels a file may nest (`engine/reading.py: MAX_NESTING`)."""
MEMORY_CAP = 3 * 1024**3
"""Address space a command may use here: enough for Dagster and litellm, not for /dev/zero."""


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def notarius(tmp_path: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The command in its own process; a command that blocks on a FIFO fails the test at
    `timeout` (subprocess kills it)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NOTARIUS_", "DAGSTER_"))}
    env |= {"DAGSTER_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    (tmp_path / "home").mkdir(exist_ok=True)
    return subprocess.run(
        [str(NOTARIUS), *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        preexec_fn=_cap_memory,  # noqa: PLW1509 - only sets a limit in the child
    )


def refused(done: subprocess.CompletedProcess[str], status: int, *phrases: str) -> None:
    assert done.returncode == status, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    for phrase in phrases:
        assert phrase in done.stderr, done.stderr


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe.yaml"
    os.mkfifo(path)
    return path


# --- the roster ----------------------------------------------------------------------------


def test_campaign_build_refuses_a_fifo_roster_at_once(tmp_path: Path, fifo: Path) -> None:
    done = notarius(tmp_path, "campaign", "build", str(fifo), "--bundles", str(tmp_path / "b"))
    refused(done, 1, "roster: 'pipe.yaml' is not a regular file (a device, FIFO or socket)")


def test_campaign_build_refuses_dev_zero_as_a_roster(tmp_path: Path) -> None:
    roster = tmp_path / "roster.yaml"
    roster.symlink_to("/dev/zero")
    done = notarius(tmp_path, "campaign", "build", str(roster), "--bundles", str(tmp_path / "b"))
    refused(done, 1, "roster: 'roster.yaml' is not a regular file")


def test_a_roster_over_its_limit_is_refused_with_its_size(tmp_path: Path) -> None:
    roster = tmp_path / "big.yaml"
    roster.write_text("# " + "x" * 300_000 + "\n")
    with pytest.raises(CodexError, match=r"'big.yaml' is 300003 bytes; a roster may have 256000"):
        load_roster(roster)


def test_a_roster_nested_100000_deep_is_refused_naming_the_line(tmp_path: Path) -> None:
    roster = tmp_path / "deep.yaml"
    roster.write_text("campaign: c\nplayers: " + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(CodexError, match=rf"line 2: nested deeper than {MAX_NESTING} levels"):
        load_roster(roster)


def test_a_roster_with_a_repeated_key_is_refused(tmp_path: Path) -> None:
    roster = tmp_path / "twice.yaml"
    roster.write_text("campaign: c\ncampaign: d\nsessions: []\n")
    with pytest.raises(CodexError, match=r"line 2: key 'campaign' appears twice in one mapping"):
        load_roster(roster)


# --- profiles ------------------------------------------------------------------------------


def test_a_profile_with_a_repeated_key_is_refused_naming_the_line(tmp_path: Path) -> None:
    """The second `llm_profile` used to win silently: the run used another model than the
    reader of the file would think."""
    text = OFFLINE.read_text().replace(
        "  llm_profile: offline\n", "  llm_profile: offline\n  llm_profile: test-double\n"
    )
    assert text.count("llm_profile:") == 2
    profile = tmp_path / "twice.yaml"
    profile.write_text(text)
    with pytest.raises(ProfileError) as caught:
        load_profile(profile)
    line = text.splitlines().index("  llm_profile: test-double") + 1
    assert str(caught.value) == (
        f"profile 'twice.yaml': line {line}: key 'llm_profile' appears twice in one mapping"
    )


def test_a_profile_nested_100000_deep_is_refused_naming_the_line(tmp_path: Path) -> None:
    profile = tmp_path / "deep.yaml"
    profile.write_text("version: 1\npipeline: " + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(ProfileError, match=rf"line 2: nested deeper than {MAX_NESTING} levels"):
        load_profile(profile)


def test_validate_refuses_a_fifo_profile_at_once(tmp_path: Path, fifo: Path) -> None:
    refused(notarius(tmp_path, "validate", str(fifo)), 1, "'pipe.yaml' is not a regular file")


# --- gold files ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "folder"])
def test_eval_says_what_a_gold_argument_is_instead_of_not_found(tmp_path: Path, kind: str) -> None:
    gold = tmp_path / "gold.json"
    if kind == "fifo":
        os.mkfifo(gold)
    elif kind == "dev-zero":
        gold.symlink_to("/dev/zero")
    else:
        gold.mkdir()
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    done = notarius(tmp_path, "eval", str(bundle), "--gold", str(gold))
    said = "is a folder, not a file" if kind == "folder" else "is not a regular file"
    refused(done, 2, f"gold: 'gold.json' {said}")
    assert "not found" not in done.stderr


def test_a_gold_file_with_a_repeated_key_is_refused(tmp_path: Path) -> None:
    from notarius_dagster.engine.gold import GoldError, load_gold

    gold = tmp_path / "g.json"
    gold.write_text('{"session_id": "a", "session_id": "b", "lanes": {}}')
    with pytest.raises(GoldError, match="key 'session_id' appears twice in one object"):
        load_gold(gold)


# --- transcripts ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "folder"])
def test_run_says_what_a_transcript_argument_is_instead_of_not_found(
    tmp_path: Path, kind: str
) -> None:
    path = tmp_path / "s1.jsonl"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    else:
        path.mkdir()
    done = notarius(
        tmp_path, "run", str(path), "--config", str(OFFLINE), "--out", str(tmp_path / "b")
    )
    said = "is a folder, not a file" if kind == "folder" else "is not a regular file"
    refused(done, 2, f"transcript: 's1.jsonl' {said}")
    assert "not found" not in done.stderr


def test_a_transcript_over_the_limit_is_refused_with_its_size_and_never_copied(
    tmp_path: Path,
) -> None:
    """The limit is the profile's (`pipeline.limits.max_transcript_bytes`); the file is
    refused with its real size before anything is written to the transcript store."""
    config = yaml.safe_load(OFFLINE.read_text())
    config["pipeline"]["limits"] = {"max_transcript_bytes": 100_000}
    profile = tmp_path / "small.yaml"
    profile.write_text(yaml.safe_dump(config))
    big = tmp_path / "big.jsonl"
    line = json.dumps({"speaker": "DM", "text": "x" * 400}) + "\n"
    big.write_text(line * 300)
    data = tmp_path / "data"
    done = notarius(
        tmp_path,
        "run",
        str(big),
        "--config",
        str(profile),
        "--out",
        str(data / "bundles"),
        "--data",
        str(data),
        "--llm-profile",
        "test-double",
    )
    size = big.stat().st_size
    refused(
        done,
        1,
        f"'big.jsonl' is {size} bytes; the limit is 100000 (pipeline.limits.max_transcript_bytes)",
    )
    stored = data / "transcripts"
    assert not stored.exists() or not any(stored.iterdir())


def test_a_line_nested_900_deep_is_refused_naming_the_file_and_line() -> None:
    deep = "[" * 900 + "]" * 900
    raw = "\n".join(
        [json.dumps({"speaker": "DM", "text": "hello"}), f'{{"text": "hi", "extra": {deep}}}']
    ).encode()
    with pytest.raises(InputError) as caught:
        parse_transcript(raw, file_name="deep.jsonl", source_id="s1")
    assert str(caught.value) == (
        f"deep.jsonl line 2: nested deeper than {MAX_NESTING} levels of arrays and objects"
    )
