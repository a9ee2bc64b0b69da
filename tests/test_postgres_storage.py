"""The PostgreSQL instance (configs/dagster-postgres.yaml) against a real server: a session is
materialized in process with the test double, and its run, partition and materializations are
read back through a second instance object, then listed and deleted with the CLI.

Needs NOTARIUS_TEST_PG_URL (`eval "$(scripts/ci-postgres.sh)"` starts a throwaway server).
Without it the tests skip locally; in CI (env CI set) a missing URL is a failure, so CI cannot
skip them silently."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Iterator
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest
from dagster import (
    AssetCheckKey,
    AssetKey,
    AssetRecordsFilter,
    DagsterInstance,
    DagsterRunStatus,
    RunsFilter,
)

from notarius_dagster.cli.main import main
from notarius_dagster.engine.transcripts import register_transcript
from notarius_dagster.run.runner import run_session
from tests.doubles import lane_responder
from tests.llm_double import scripted_llm

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "samples" / "crd3-c2e001-slice.jsonl"
URL_ENV = "NOTARIUS_TEST_PG_URL"


@pytest.fixture
def pg_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A DAGSTER_HOME whose dagster.yaml is configs/dagster-postgres.yaml, pointed at the test
    server through NOTARIUS_PG_URL, the variable that config reads."""
    url = os.environ.get(URL_ENV)
    if not url:
        if os.environ.get("CI"):
            pytest.fail(
                f"{URL_ENV} is not set in CI: start a server with "
                '`eval "$(scripts/ci-postgres.sh)"` before the tests'
            )
        pytest.skip(f'{URL_ENV} is not set (eval "$(scripts/ci-postgres.sh)" starts a server)')
    if url.split("://", 1)[0] in ("postgresql", "postgres") and find_spec("psycopg") is None:
        pytest.fail(
            f"{URL_ENV} must name the driver: postgresql+psycopg2://... (SQLAlchemy "
            "2.1 maps a bare postgresql:// to psycopg 3, which is not installed)"
        )
    home = tmp_path / "dagster-home"
    home.mkdir()
    shutil.copyfile(REPO / "configs" / "dagster-postgres.yaml", home / "dagster.yaml")
    monkeypatch.setenv("NOTARIUS_PG_URL", url)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.setenv("NOTARIUS_DATA", str(tmp_path / "data"))
    monkeypatch.delenv("NOTARIUS_BUNDLES", raising=False)
    yield home


def session_id() -> str:
    """The database outlives the test: every run uses a fresh session."""
    return f"pg-{uuid.uuid4().hex[:12]}"


def materialize(data: Path, session: str) -> str:
    register_transcript(data / "transcripts", session, SAMPLE)
    with DagsterInstance.get() as instance, scripted_llm(lane_responder):
        outcome = run_session(
            session_id=session,
            profile=REPO / "configs" / "offline.yaml",
            data_root=data,
            llm_profile="test-double",
            instance=instance,
            quiet=True,
        )
    assert outcome.success, outcome.error
    return outcome.run_id


def test_a_session_materialized_on_postgres_reads_back(pg_home: Path, tmp_path: Path) -> None:
    session = session_id()
    run_id = materialize(tmp_path / "data", session)

    with DagsterInstance.get() as instance:  # a new connection: nothing is in memory
        assert type(instance.run_storage).__module__.startswith("dagster_postgres")
        assert type(instance.event_log_storage).__module__.startswith("dagster_postgres")

        run = instance.get_run_by_id(run_id)
        assert run is not None and run.status == DagsterRunStatus.SUCCESS
        assert run.job_name == "materialize_session"
        assert run.tags["dagster/partition"] == session
        assert [
            r.run_id
            for r in instance.get_runs(filters=RunsFilter(tags={"dagster/partition": session}))
        ] == [run_id]

        assert session in instance.get_dynamic_partitions("sessions")
        records = instance.fetch_materializations(
            AssetRecordsFilter(asset_key=AssetKey("session_bundle"), asset_partitions=[session]),
            limit=5,
        ).records
        assert len(records) == 1 and records[0].run_id == run_id
        npcs = instance.get_latest_materialization_event(AssetKey("npcs"))
        assert npcs is not None and npcs.asset_materialization is not None
        assert npcs.asset_materialization.partition == session
        records_meta: Any = npcs.asset_materialization.metadata["records"].value
        assert records_meta >= 3
        assert session in instance.get_materialized_partitions(AssetKey("npcs"))
    assert (tmp_path / "data" / "bundles" / session / "index.json").is_file()


def test_the_cli_lists_and_deletes_a_session_on_postgres(
    pg_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = session_id()
    materialize(tmp_path / "data", session)

    assert main(["sessions", "list", "--json"]) == 0
    rows = {r["session_id"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows[session]["last_run"]["status"] == "SUCCESS"
    assert rows[session]["bundle_published"] is True

    assert main(["sessions", "delete", session, "--yes"]) == 0
    with DagsterInstance.get() as instance:
        assert session not in instance.get_dynamic_partitions("sessions")
        assert not instance.get_runs(filters=RunsFilter(tags={"dagster/partition": session}))
        assert session not in instance.get_materialized_partitions(AssetKey("session_bundle"))
        check = AssetCheckKey(AssetKey("npcs"), "schema_valid")
        history = instance.event_log_storage.get_asset_check_execution_history(check, limit=50)
        assert session not in {r.partition for r in history}
    assert not (tmp_path / "data" / "bundles" / session).exists()
