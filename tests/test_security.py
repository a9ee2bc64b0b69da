"""Nothing secret and no transcript text escapes (issue 10), shown on the complete profile
against a fake provider on loopback that echoes everything it receives (tests/fake_provider.py):
the request line, the headers with the credentials and the whole body, in its error message
(HTTP 400) or, in the publishing variant, inside otherwise valid JSON answers.

Searched: every published file except `lanes/*.json` and `evidence-context.json` (which quote
the transcript by contract), what `notarius run` printed on stdout and stderr, and the Dagster
event log of the run (every record serialized whole: messages, metadata, error chains).
Searched for: the API key, the endpoint's password (also as the Basic credentials it becomes),
every prompt line of every lane (system prompt and user template, from the lane prompt files)
and every unit text of 20+ characters, as written and JSON-escaped. Nothing may be found, and
the provider error the user saw must still say what happened (status code and class)."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from dagster import DagsterInstance, serialize_value

from notarius_dagster.engine.inputs import parse_transcript
from notarius_dagster.engine.transcripts import register_transcript
from notarius_dagster.run.runner import run_session
from tests.fake_provider import KEY_ENV, FakeProvider, profile_for

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "samples" / "crd3-c2e001-slice.jsonl"
COMPLETE = REPO / "configs" / "dnd-complete.yaml"
PROMPTS = sorted((REPO / "notarius_dagster" / "dnd").glob("*/prompt.md"))
NOTARIUS = Path(sys.executable).with_name("notarius")
KEY = "sk-proj-T3stKey0nly4Notarius9xQ2"
USER, PASSWORD = "operator", "Hunter2-Pa55word-Notarius"
MIN_TEXT = 20
_PLACEHOLDER = re.compile(r"\{[a-z_]+\}")


def transcript(tmp_path: Path) -> Path:
    """The first 80 units of the sample under a name of the user's own."""
    path = tmp_path / "Session One (sample).jsonl"
    path.write_text("\n".join(SAMPLE.read_text().splitlines()[:80]) + "\n")
    return path


def prompt_lines() -> set[str]:
    """Every line of every lane's system prompt and user template, placeholders cut out."""
    lines = set()
    for prompt in PROMPTS:
        for line in prompt.read_text().splitlines():
            for piece in _PLACEHOLDER.split(line.replace("---- user ----", "")):
                if len(piece.strip()) >= MIN_TEXT:
                    lines.add(piece.strip())
    assert len(lines) > 30  # the prompts were found
    return lines


def needles(path: Path) -> dict[str, str]:
    """What must appear nowhere, each with a label for the failure message."""
    document = parse_transcript(path.read_bytes(), file_name=path.name, source_id="s")
    found = {
        KEY: "the API key",
        PASSWORD: "the password",
        base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode(): "the Basic credentials",
    }
    texts = {f"prompt line {line[:30]!r}": line for line in prompt_lines()}
    texts |= {f"unit {u.unit_id}": u.text for u in document.units if len(u.text) >= MIN_TEXT}
    assert sum(1 for label in texts if label.startswith("unit")) > 20
    for label, text in texts.items():
        for form in (text, json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1]):
            found[form] = label
    return found


def leaks(found: dict[str, str], places: dict[str, str]) -> list[str]:
    return sorted(
        f"{label} in {where}"
        for where, text in places.items()
        for needle, label in found.items()
        if needle in text
    )


def published(bundle: Path) -> dict[str, str]:
    """Every published file but the lanes and the evidence context, by logical path."""
    root = bundle.resolve()
    files = {str(p.relative_to(root)): p.read_text() for p in root.rglob("*") if p.is_file()}
    assert "manifest.json" in files
    return {
        rel: text
        for rel, text in files.items()
        if not rel.startswith("lanes/") and rel != "evidence-context.json"
    }


def event_log(instance: DagsterInstance, run_id: str) -> dict[str, str]:
    """Every record of the run's event log, serialized whole."""
    records = instance.all_logs(run_id)
    assert records
    return {
        f"event {n} ({r.dagster_event_type or 'log'})": serialize_value(r)
        for n, r in enumerate(records)
    }


def endpoint(fake: FakeProvider) -> str:
    return fake.api_base.replace("http://", f"http://{USER}:{PASSWORD}@")


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv(KEY_ENV, KEY)
    yield KEY


def notarius_run(tmp_path: Path, profile: Path, path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NOTARIUS_", "DAGSTER_"))}
    env.update(
        {
            "DAGSTER_HOME": str(tmp_path / "home"),
            "PYTHONPATH": str(REPO),
            KEY_ENV: KEY,
            "COLUMNS": "160",
        }
    )
    (tmp_path / "home").mkdir(exist_ok=True)
    return subprocess.run(
        [
            str(NOTARIUS),
            "run",
            str(path),
            "--config",
            str(profile),
            "--out",
            str(tmp_path / "bundles"),
            "--data",
            str(tmp_path / "data"),
            "--session-id",
            "sec",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def cli_event_log(tmp_path: Path) -> dict[str, str]:
    with DagsterInstance.from_config(str(tmp_path / "home")) as instance:
        runs = instance.get_runs(limit=1)
        assert runs
        return event_log(instance, runs[0].run_id)


def test_cli_run_against_an_echoing_provider_leaks_nothing_and_says_what_happened(
    tmp_path: Path,
) -> None:
    path = transcript(tmp_path)
    with FakeProvider("echo", status=400) as fake:
        profile = profile_for(COMPLETE, tmp_path / "profile", endpoint(fake))
        done = notarius_run(tmp_path, profile, path)
        sent = list(fake.headers)
    assert done.returncode == 1, done.stderr
    assert sent and all(h.get("authorization", "").startswith("Basic ") for h in sent)
    places = {"stdout": done.stdout, "stderr": done.stderr, **cli_event_log(tmp_path)}
    assert leaks(needles(path), places) == []
    error = done.stderr.strip().splitlines()[-1]
    assert error.startswith("error: run ") and "HTTP 400" in error and "BadRequestError" in error
    assert not (tmp_path / "bundles" / "sec").exists()


def test_cli_run_that_publishes_against_an_echoing_provider_leaks_nothing(
    tmp_path: Path,
) -> None:
    path = transcript(tmp_path)
    with FakeProvider("echo-ok") as fake:
        # The echoed answers are valid JSON but cite nothing the support check accepts for
        # every lane; publish whatever passes, since this test is about what leaks.
        profile = profile_for(
            COMPLETE, tmp_path / "profile", endpoint(fake), publish={"min_accepted_chunk_share": 0}
        )
        done = notarius_run(tmp_path, profile, path)
        assert fake.requests
    assert done.returncode == 0, done.stderr
    bundle = tmp_path / "bundles" / "sec"
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["llm_profile"]["api_base"] == fake.api_base  # no user, no password
    places = {
        "stdout": done.stdout,
        "stderr": done.stderr,
        **published(bundle),
        **cli_event_log(tmp_path),
    }
    assert leaks(needles(path), places) == []


@pytest.mark.parametrize("with_userinfo", [False, True], ids=["bearer-key", "user-password"])
def test_the_dagster_job_against_an_echoing_provider_leaks_nothing(
    tmp_path: Path, key: str, with_userinfo: bool
) -> None:
    path = transcript(tmp_path)
    register_transcript(tmp_path / "data" / "transcripts", "sec", path)
    with FakeProvider("echo", status=401) as fake, DagsterInstance.ephemeral() as instance:
        api_base = endpoint(fake) if with_userinfo else fake.api_base
        profile = profile_for(COMPLETE, tmp_path / "profile", api_base)
        outcome = run_session(
            session_id="sec",
            profile=profile,
            data_root=tmp_path / "data",
            instance=instance,
            quiet=True,
        )
        places = event_log(instance, outcome.run_id)
        sent = [h.get("authorization", "") for h in fake.headers]
    # the key really was sent (and echoed) when no user:password replaces it
    assert sent and all((key in h) != with_userinfo for h in sent)
    assert not outcome.success and outcome.error is not None
    places["the run's error"] = outcome.error
    assert leaks(needles(path), places) == []
    assert "HTTP 401" in outcome.error and "AuthenticationError" in outcome.error
