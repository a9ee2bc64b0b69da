"""`notarius sessions list|delete` on the instance under DAGSTER_HOME, and `--help` everywhere."""

from __future__ import annotations

import io
import json
import uuid
from pathlib import Path

import pytest
from dagster import AssetCheckKey, AssetKey, DagsterInstance, DagsterRun, DagsterRunStatus

from notarius_dagster.cli.main import ensure_dagster_home, main
from notarius_dagster.engine.transcripts import register_transcript
from notarius_dagster.run.runner import run_session
from notarius_dagster.sessions import delete_session, runs_in_progress, session_rows
from notarius_dagster.settings import store_paths
from tests.doubles import lane_responder
from tests.llm_double import scripted_llm

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "samples" / "crd3-c2e001-slice.jsonl"
BUNDLE = AssetKey("session_bundle")


class Terminal(io.StringIO):
    """Standard input that says it is a terminal, with the user's answer already typed."""

    def isatty(self) -> bool:
        return True


def home_instance() -> DagsterInstance:
    ensure_dagster_home()
    return DagsterInstance.get()


def materialize(data: Path, session: str) -> None:
    register_transcript(data / "transcripts", session, SAMPLE)
    with home_instance() as instance, scripted_llm(lane_responder):
        outcome = run_session(
            session_id=session,
            profile=REPO / "configs" / "offline.yaml",
            data_root=data,
            llm_profile="test-double",
            instance=instance,
            quiet=True,
        )
    assert outcome.success, outcome.error


def add_partition(session: str) -> None:
    with home_instance() as instance:
        instance.add_dynamic_partitions("sessions", [session])


def sessions_json(capsys: pytest.CaptureFixture[str]) -> dict[str, dict]:
    capsys.readouterr()
    assert main(["sessions", "list", "--json"]) == 0
    return {row["session_id"]: row for row in json.loads(capsys.readouterr().out)}


@pytest.fixture(scope="module")
def two_sessions(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two materialized sessions ('alpha', 'beta') and one bare partition ('gamma'), built once
    under a module-wide DAGSTER_HOME; tests that change them make their own."""
    root = tmp_path_factory.mktemp("cli")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DAGSTER_HOME", str(root / "home"))
        mp.setenv("NOTARIUS_DATA", str(root / "data"))
        materialize(root / "data", "alpha")
        materialize(root / "data", "beta")
        add_partition("gamma")
    return root


@pytest.fixture
def env(two_sessions: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DAGSTER_HOME", str(two_sessions / "home"))
    monkeypatch.setenv("NOTARIUS_DATA", str(two_sessions / "data"))
    monkeypatch.setenv("NOTARIUS_LLM_PROFILE", "test-double")  # what the sessions ran with
    monkeypatch.delenv("NOTARIUS_PROFILE", raising=False)  # configs/offline.yaml, as they did
    monkeypatch.delenv("NOTARIUS_BUNDLES", raising=False)
    return two_sessions


def test_list_reports_last_run_bundle_time_and_publication(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = sessions_json(capsys)
    assert list(rows)[:3] == ["alpha", "beta", "gamma"]
    alpha = rows["alpha"]
    assert alpha["last_run"]["status"] == "SUCCESS"
    assert alpha["bundle_materialized_at"] and alpha["bundle_published"] is True
    assert rows["gamma"] == {
        "session_id": "gamma",
        "last_run": None,
        "bundle_materialized_at": None,
        "bundle_published": False,
        "stale": [],
    }
    assert alpha["stale"] == []  # materialized under the current code


def test_list_names_the_assets_a_prompt_edit_made_stale(
    env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from notarius_dagster.dnd.npcs.lane import LANE as NPCS
    from tests import lane_doubles

    prompt = env / "npcs-prompt.md"
    prompt.write_text(NPCS.prompt.read_text() + "\nPrefer full names.\n")
    lane_doubles.use_prompt(monkeypatch, NPCS.kind, prompt)
    rows = sessions_json(capsys)
    assert rows["alpha"]["stale"] == ["npcs"] and rows["beta"]["stale"] == ["npcs"]
    assert rows["gamma"]["stale"] == []  # never materialized: missing, not stale
    assert main(["sessions", "list"]) == 0
    out = capsys.readouterr().out
    assert "stale (code changed)" in out and "backfill --stale --dry-run" in out


def test_list_prints_a_table_by_default(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sessions", "list"]) == 0
    out = capsys.readouterr().out
    assert "alpha" in out and "SUCCESS" in out and "published" in out


def test_list_on_a_fresh_instance_says_there_are_none(
    isolated_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sessions", "list"]) == 0
    assert "no sessions yet" in capsys.readouterr().out
    assert main(["sessions", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_delete_removes_one_session_and_leaves_the_others(
    isolated_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = isolated_env / "data"
    materialize(data, "one")
    materialize(data, "two")
    assert (data / "assets" / "one").is_dir() and (data / "bundles" / "one").is_symlink()
    assert (data / "bundles" / ".reports" / "one.html").is_file()

    assert main(["sessions", "delete", "one", "--yes"]) == 0
    assert "deleted session one" in capsys.readouterr().out

    with home_instance() as instance:
        assert instance.get_dynamic_partitions("sessions") == ["two"]
        for key in instance.get_asset_keys():
            assert "one" not in instance.get_materialized_partitions(key), key
        assert instance.get_materialized_partitions(BUNDLE) == {"two"}
        tags = [r.tags.get("dagster/partition") for r in instance.get_runs()]
        assert tags == ["two"]
        check = AssetCheckKey(AssetKey("npcs"), "schema_valid")
        history = instance.event_log_storage.get_asset_check_execution_history(check, limit=10)
        assert [r.partition for r in history] == ["two"]
    assert not (data / "bundles" / "one").exists()
    assert not (data / "bundles" / ".versions" / "one").exists()
    assert not (data / "bundles" / ".reports" / "one.html").exists()  # it may hold unit text
    assert (data / "bundles" / ".reports" / "two.html").is_file()
    assert not list((data / "transcripts").glob("one.*"))
    assert not (data / "assets" / "one").exists()
    assert (data / "bundles" / "two" / "index.json").is_file()
    assert (data / "assets" / "two").is_dir() and list((data / "transcripts").glob("two.*"))


def test_the_sessions_module_lists_and_deletes_what_the_command_prints(isolated_env: Path) -> None:
    data = isolated_env / "data"
    materialize(data, "solo")
    store = store_paths(data=data, environ={})
    with home_instance() as instance:
        [row] = session_rows(instance, store)
        assert (row["session_id"], row["last_run"]["status"], row["bundle_published"]) == (
            "solo",
            "SUCCESS",
            True,
        )
        assert runs_in_progress(instance, "solo") == []
        deletion = delete_session(instance, "solo", store)
        assert deletion.done == [
            "published bundle and its versions",
            "session report",
            "stored transcript",
            "per-asset values",
            "1 run(s) with their materializations, check results and logs",
            "partition 'solo' of 'sessions'",
        ]
        assert deletion.warnings == []
        assert session_rows(instance, store) == []
    assert not store.session_values("solo").exists() and not (store.bundles / "solo").exists()


def test_deleting_an_unknown_session_says_so_without_a_traceback(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sessions", "delete", "nope", "--yes"]) == 1
    err = capsys.readouterr().err
    assert "unknown session 'nope'" in err and "notarius sessions list" in err
    assert "Traceback" not in err


def test_an_invalid_session_id_is_a_usage_error(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sessions", "delete", "Not A Session!", "--yes"]) == 2
    assert "session id must match" in capsys.readouterr().err


def test_delete_without_a_terminal_and_without_yes_refuses(
    isolated_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    add_partition("keep")
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    assert main(["sessions", "delete", "keep"]) == 2
    assert "pass --yes" in capsys.readouterr().err
    with home_instance() as instance:
        assert instance.has_dynamic_partition("sessions", "keep")


def test_delete_asks_on_a_terminal_and_a_no_keeps_the_session(
    isolated_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    add_partition("maybe")
    monkeypatch.setattr("sys.stdin", Terminal("n\n"))
    assert main(["sessions", "delete", "maybe"]) == 1
    assert "[y/N]" in capsys.readouterr().err
    with home_instance() as instance:
        assert instance.has_dynamic_partition("sessions", "maybe")
    monkeypatch.setattr("sys.stdin", Terminal("yes\n"))
    assert main(["sessions", "delete", "maybe"]) == 0
    with home_instance() as instance:
        assert not instance.has_dynamic_partition("sessions", "maybe")


def test_a_run_in_progress_blocks_delete_unless_forced(
    isolated_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    add_partition("busy")
    with home_instance() as instance:
        instance.add_run(
            DagsterRun(
                job_name="materialize_session",
                run_id=str(uuid.uuid4()),
                status=DagsterRunStatus.STARTED,
                tags={"dagster/partition": "busy"},
            )
        )
    assert main(["sessions", "delete", "busy", "--yes"]) == 1
    assert "in progress" in capsys.readouterr().err
    assert main(["sessions", "delete", "busy", "--yes", "--force"]) == 0
    with home_instance() as instance:
        assert not instance.has_dynamic_partition("sessions", "busy")
        assert instance.get_runs() == []


def test_a_broken_instance_config_is_reported_not_raised(
    isolated_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = isolated_env / "dagster-home"
    (home / "dagster.yaml").write_text("storage:\n  nonsense: {}\n")
    assert main(["sessions", "list"]) == 1
    err = capsys.readouterr().err
    assert "cannot open the Dagster instance" in err and "dagster.yaml" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "argv", [[], ["run"], ["validate"], ["sessions"], ["sessions", "list"], ["sessions", "delete"]]
)
def test_every_command_has_help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--help"])
    assert exit_info.value.code == 0
    assert "usage: notarius" in capsys.readouterr().out


def test_the_console_script_lists_sessions(env: Path) -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "notarius_dagster.cli", "sessions", "list", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert {r["session_id"] for r in json.loads(done.stdout)} >= {"alpha", "beta", "gamma"}
