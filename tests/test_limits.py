"""Size guards and the run budget (engine/limits.py): a transcript, its units and a profile are
bounded, unit ids fit 64 bits, and a run whose estimated calls or prompt tokens exceed its
budget is refused after chunking, before the first model call. Refusals name what and where,
never content."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from dagster import DagsterInstance

from notarius_dagster.engine.config import load_profile, parse_profile
from notarius_dagster.engine.errors import InputError, ProfileError
from notarius_dagster.engine.inputs import parse_transcript
from notarius_dagster.engine.limits import (
    Budget,
    BudgetError,
    InputLimits,
    check_budget,
    estimate_run,
)
from notarius_dagster.engine.transcripts import register_transcript
from notarius_dagster.run.runner import run_session

REPO = Path(__file__).resolve().parent.parent
SECRET = "LIMITS-CONTENT-MARKER-4471"


def jsonl(*texts: str, ids: list[int] | None = None) -> bytes:
    rows = []
    for i, text in enumerate(texts):
        row: dict[str, Any] = {"speaker": "DM", "text": text}
        if ids is not None:
            row["unit_id"] = ids[i]
        rows.append(json.dumps(row))
    return ("\n".join(rows) + "\n").encode()


def test_a_transcript_over_the_byte_limit_is_refused_before_parsing() -> None:
    raw = jsonl("a" * 50, "b")
    with pytest.raises(InputError, match=r"t.jsonl: the transcript is \d+ bytes; the limit is 40"):
        parse_transcript(
            raw, file_name="t.jsonl", source_id="s", limits=InputLimits(max_transcript_bytes=40)
        )


def test_too_many_units_are_refused() -> None:
    with pytest.raises(InputError, match="t.jsonl: 3 units; the limit is 2"):
        parse_transcript(
            jsonl("a", "b", "c"),
            file_name="t.jsonl",
            source_id="s",
            limits=InputLimits(max_units=2),
        )


@pytest.mark.parametrize(
    ("name", "raw", "where"),
    [
        ("t.jsonl", b"\n" + jsonl("short", SECRET * 10), "t.jsonl line 3"),
        ("t.txt", f"DM: short\n\nDM: {SECRET * 10}\n".encode(), "t.txt line 3"),
        (
            "t.srt",
            f"1\n00:00:01,000 --> 00:00:02,000\nshort\n\n2\n00:00:03,000 --> 00:00:04,000\n"
            f"{SECRET * 10}\n".encode(),
            "t.srt cue 2",
        ),
    ],
)
def test_a_unit_over_the_character_limit_is_refused_naming_its_line(
    name: str, raw: bytes, where: str
) -> None:
    with pytest.raises(InputError) as caught:
        parse_transcript(raw, file_name=name, source_id="s", limits=InputLimits(max_unit_chars=100))
    message = str(caught.value)
    assert message.startswith(where) and "260 characters; the limit is 100" in message
    assert SECRET not in message


def test_default_limits_accept_the_sample_and_refuse_a_1mb_unit() -> None:
    sample = (REPO / "samples" / "crd3-c2e001-slice.jsonl").read_bytes()
    assert len(parse_transcript(sample, file_name="s.jsonl", source_id="s").units) == 200
    with pytest.raises(InputError, match="line 1: unit has 1000000 characters; the limit is 8000"):
        parse_transcript(jsonl("x" * 1_000_000), file_name="t.jsonl", source_id="s")


@pytest.mark.parametrize("bad", [10**30, 2**63, -(2**63) - 1])
def test_unit_ids_beyond_signed_64_bits_are_refused_naming_the_line(bad: int) -> None:
    with pytest.raises(InputError, match="t.jsonl line 2: key 'unit_id' must fit a signed 64-bit"):
        parse_transcript(jsonl("a", "b", ids=[1, bad]), file_name="t.jsonl", source_id="s")
    ok = parse_transcript(
        jsonl("a", "b", ids=[-(2**63), 2**63 - 1]), file_name="t.jsonl", source_id="s"
    )
    assert [u.unit_id for u in ok.units] == [-(2**63), 2**63 - 1]


def test_a_profile_over_256_kb_is_refused_without_parsing(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text((REPO / "configs" / "offline.yaml").read_text() + "#" + "x" * 300_000 + "\n")
    with pytest.raises(ProfileError, match="'big.yaml'.*larger than 262144 bytes"):
        load_profile(big)


@pytest.mark.timeout(20)
def test_a_profile_that_is_not_a_regular_file_is_refused(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "p.yaml"
    os.mkfifo(fifo)
    with pytest.raises(ProfileError, match="not a regular file"):
        load_profile(fifo)


def test_limits_and_budget_are_profile_keys_with_checked_values() -> None:
    data = {
        "version": 1,
        "pipeline": {
            "id": "x",
            "llm_profile": "test-double",
            "lanes": [{"id": "npcs"}],
            "limits": {"max_units": 10},
            "budget": {"max_calls": 5},
        },
    }
    parsed = parse_profile(data, profile_name="p.yaml")
    assert parsed.pipeline.limits.max_units == 10 and parsed.pipeline.budget.max_calls == 5
    assert parsed.pipeline.limits.max_unit_chars == 8_000
    data["pipeline"]["budget"] = {"max_calls": 0}
    with pytest.raises(ProfileError, match="pipeline.budget.max_calls"):
        parse_profile(data, profile_name="p.yaml")
    data["pipeline"]["budget"] = {"max_cals": 3}
    with pytest.raises(ProfileError, match="pipeline.budget.max_cals: unknown key"):
        parse_profile(data, profile_name="p.yaml")


def test_the_estimate_and_the_refusal_name_the_figures() -> None:
    estimate = estimate_run([2_000] * 70, lanes=6)
    assert (estimate.calls, estimate.prompt_tokens) == (420, 420 * 4_000 // 4)
    check_budget(estimate, Budget(), source="the default")  # a 3-hour session passes
    with pytest.raises(BudgetError) as caught:
        check_budget(estimate, Budget(max_calls=100), source="--max-calls")
    message = str(caught.value)
    assert "70 chunks x 6 lanes would need 420 model calls (budget 100)" in message
    assert "--max-calls" in message and "estimate" in message


def profile_file(tmp_path: Path, extra: str = "") -> Path:
    text = (REPO / "configs" / "offline.yaml").read_text()
    cfg = tmp_path / "p.yaml"
    cfg.write_text(text.replace("pipeline:\n", "pipeline:\n" + extra, 1))
    return cfg


def test_a_run_over_its_budget_fails_at_chunk_map_before_any_call(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    sample = REPO / "samples" / "crd3-c2e001-slice.jsonl"
    register_transcript(tmp_path / "data" / "transcripts", "s1", sample)
    cfg = profile_file(tmp_path, "  budget: {max_calls: 3}\n")
    outcome = run_session(
        session_id="s1",
        profile=cfg,
        data_root=tmp_path / "data",
        llm_profile="test-double",
        instance=instance,
        quiet=True,
    )
    assert not outcome.success and outcome.error is not None
    assert outcome.error.startswith("chunk_map: ")
    assert "model calls (budget 3)" in outcome.error and "pipeline.budget" in outcome.error
    assert not (tmp_path / "data" / "bundles" / "s1").exists()
    cli = run_session(
        session_id="s1",
        profile=profile_file(tmp_path),
        data_root=tmp_path / "data",
        llm_profile="test-double",
        instance=instance,
        quiet=True,
        max_calls=3,
    )
    assert not cli.success and cli.error is not None and "--max-calls" in cli.error


def test_a_50mb_transcript_is_refused_quickly(tmp_path: Path, instance: DagsterInstance) -> None:
    line = json.dumps({"speaker": "DM", "text": "x" * 400}) + "\n"
    big = tmp_path / "big.jsonl"
    big.write_text(line * (50_000_000 // len(line)))
    # stored under a profile that allows it; run with the default limit: refused with its size
    register_transcript(tmp_path / "data" / "transcripts", "big", big, max_bytes=60_000_000)
    started = time.monotonic()
    outcome = run_session(
        session_id="big",
        profile=profile_file(tmp_path),
        data_root=tmp_path / "data",
        llm_profile="test-double",
        instance=instance,
        quiet=True,
    )
    assert not outcome.success and outcome.error is not None
    size = big.stat().st_size
    assert f"'big.jsonl' is {size} bytes; the limit is 20000000" in outcome.error
    assert time.monotonic() - started < 60
