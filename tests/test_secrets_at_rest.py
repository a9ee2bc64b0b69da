"""Nothing secret and no transcript text rests where it must not (issue 23), after the attacks a
provider can make: grep, byte for byte, every file of the store (transcripts, asset values,
checkpoints, bundles, reports) and of DAGSTER_HOME (runs.db, the event logs, compute logs).

- A provider that writes what it received into its answers: the Authorization header (the API
  key, or the Basic credentials httpx builds from the endpoint's `user:password`), the password
  and the endpoint's `?api_key=` value, in an NPC's description whose name the cited unit
  supports, so the record is published. The client takes the exact secrets it sent out of the
  answer (`engine/redaction.py: redact_sent`): the record is published with `[redacted]` and
  the secrets are nowhere.
- The endpoint's password and query key are not in runs.db: the `llm` resource names the
  endpoint by an environment variable (Dagster's `EnvVar`), so the job snapshot holds its name.
- A provider that echoes the whole request in its errors (tests/fake_provider.py, `echo`): no
  key, password or transcript canary anywhere in DAGSTER_HOME.

Tests double: `tests/fake_provider.py` (an OpenAI-compatible server on loopback, real HTTP)."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

from tests.doubles import UNIT_LINE
from tests.fake_provider import KEY_ENV, FakeProvider, profile_for, schema_of

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "samples" / "crd3-c2e001-slice.jsonl"
OFFLINE = REPO / "configs" / "offline.yaml"
NOTARIUS = Path(sys.executable).with_name("notarius")
KEY = "sk-proj-AtRestKey0nly4Notarius7Qw3"
USER, PASSWORD = "operator", "Hunter2-AtRest-Pa55word"
QUERY_KEY = "QueryKey-AtRest-9f3k2m1"
CANARY = "The canary Zqwerty sings of the quartz vault at midnight"


def transcript(tmp_path: Path) -> Path:
    """The first 60 units of the sample with a canary line of transcript text among them."""
    lines = SAMPLE.read_text().splitlines()[:60]
    lines.insert(5, json.dumps({"unit_id": 999_001, "speaker": "MATT", "text": CANARY}))
    path = tmp_path / "leak.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def basic() -> str:
    return base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


def secrets() -> dict[str, str]:
    return {KEY: "the API key", PASSWORD: "the password", basic(): "the Basic credentials"}


def leaking_answer(request: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
    """An NPC named by the first capitalised word of the chunk's first unit (so the cited unit
    supports it), whose description is everything secret the request carried."""
    if "npcs" not in schema_of(request).get("properties", {}):
        return {}
    user = next(m["content"] for m in request["messages"] if m["role"] == "user")
    named = [
        (int(unit), words[0])
        for unit, _speaker, text in UNIT_LINE.findall(user)
        if (words := [w.strip(".,!?") for w in text.split() if w[:1].isupper() and len(w) > 3])
    ]
    if not named:
        return {"npcs": []}
    unit_id, name = named[0]
    authorization = headers.get("authorization", "")
    leaked = f"auth {authorization} key {KEY} pw {PASSWORD} q {QUERY_KEY}"
    if authorization.startswith("Basic "):
        leaked += f" decoded {base64.b64decode(authorization[6:]).decode()}"
    return {"npcs": [{"name": name, "aliases": [], "description": leaked, "unit_ids": [unit_id]}]}


def run(tmp_path: Path, profile: Path, path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NOTARIUS_", "DAGSTER_"))}
    env |= {"DAGSTER_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO), KEY_ENV: KEY}
    (tmp_path / "home").mkdir(exist_ok=True)
    return subprocess.run(
        [
            str(NOTARIUS),
            "run",
            str(path),
            "--config",
            str(profile),
            "--out",
            str(tmp_path / "data" / "bundles"),
            "--data",
            str(tmp_path / "data"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def database_values(file: Path) -> bytes:
    """Every value of every table of an SQLite database, zlib-compressed ones inflated (Dagster
    stores job snapshots, with the resources' configuration, compressed in `snapshots`)."""
    values = []
    with contextlib.closing(sqlite3.connect(f"file:{file}?mode=ro", uri=True)) as db:
        tables = [t for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            for row in db.execute(f'SELECT * FROM "{table}"'):  # noqa: S608 - its own tables
                for value in row:
                    if isinstance(value, bytes):
                        with contextlib.suppress(zlib.error):
                            value = zlib.decompress(value)
                        values.append(value)
                    elif isinstance(value, str):
                        values.append(value.encode())
    return b"\n".join(values)


def found_at_rest(roots: list[Path], needles: dict[str, str]) -> list[str]:
    """`<what> in <file>` for every needle (as written and JSON-escaped) in any file under the
    roots: its bytes, and for an SQLite database also its values, inflated."""
    forms = {
        form.encode(): label
        for needle, label in needles.items()
        for form in {needle, json.dumps(needle)[1:-1]}
    }
    hits = []
    for root in roots:
        for file in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
            data = file.read_bytes()
            if data.startswith(b"SQLite format 3\x00"):
                data += database_values(file)
            where = file.relative_to(root)
            hits += [f"{label} in {where}" for form, label in forms.items() if form in data]
    return sorted(set(hits))


def test_secrets_a_provider_writes_into_published_answers_rest_nowhere(tmp_path: Path) -> None:
    path = transcript(tmp_path)
    with FakeProvider("script", responder=leaking_answer) as fake:
        endpoint = fake.api_base.replace("http://", f"http://{USER}:{PASSWORD}@")
        profile = profile_for(OFFLINE, tmp_path / "profile", f"{endpoint}?api_key={QUERY_KEY}")
        done = run(tmp_path, profile, path)
        sent = [h.get("authorization", "") for h in fake.headers]
    assert done.returncode == 0, done.stderr
    assert sent and all(h == f"Basic {basic()}" for h in sent)  # what httpx sent
    npcs = json.loads((tmp_path / "data" / "bundles" / "leak" / "lanes" / "npcs.json").read_text())
    descriptions = [n["description"] for n in npcs["npcs"]]
    assert descriptions and all("[redacted]" in d for d in descriptions)  # published, redacted
    needles = {**secrets(), QUERY_KEY: "the endpoint's query key"}
    assert found_at_rest([tmp_path / "data", tmp_path / "home"], needles) == []
    assert not [n for n in needles if n in done.stdout + done.stderr]


def test_a_key_a_provider_writes_into_answers_is_not_stored_or_published(tmp_path: Path) -> None:
    path = transcript(tmp_path)
    with FakeProvider("script", responder=leaking_answer) as fake:
        done = run(tmp_path, profile_for(OFFLINE, tmp_path / "profile", fake.api_base), path)
        sent = [h.get("authorization", "") for h in fake.headers]
    assert done.returncode == 0, done.stderr
    assert sent and all(h == f"Bearer {KEY}" for h in sent)
    published = (tmp_path / "data" / "bundles" / "leak" / "lanes" / "npcs.json").read_text()
    assert "[redacted]" in published
    assert found_at_rest([tmp_path / "data", tmp_path / "home"], {KEY: "the API key"}) == []


def test_an_echoing_provider_leaves_no_secret_or_transcript_in_the_instance(tmp_path: Path) -> None:
    path = transcript(tmp_path)
    with FakeProvider("echo", status=400) as fake:
        endpoint = fake.api_base.replace("http://", f"http://{USER}:{PASSWORD}@")
        done = run(tmp_path, profile_for(OFFLINE, tmp_path / "profile", endpoint), path)
        assert fake.requests
    assert done.returncode == 1 and "HTTP 400" in done.stderr
    home = [tmp_path / "home"]
    assert found_at_rest(home, {**secrets(), CANARY: "the transcript canary"}) == []
    store = [tmp_path / "data"]  # the store holds the transcript by contract, never a secret
    assert found_at_rest(store, secrets()) == []
