"""`notarius eval` as a person uses it: the installed console script in its own process, on a
bundle of the bundled sample published with the complete profile and the lane test double,
against the committed gold file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from dagster import DagsterInstance

from notarius_dagster.engine.evaluation import EvaluationReport, evaluate
from notarius_dagster.engine.transcripts import register_transcript
from notarius_dagster.modules import registry
from notarius_dagster.run.runner import run_session
from tests.conftest import DATA, REPO
from tests.lane_doubles import complete_responder
from tests.llm_double import scripted_llm

MATCH_FIELDS = registry().match_fields()
"""What the scorer matches each D&D lane on: the `gold_match` every lane declares."""

SAMPLE = REPO / "samples" / "crd3-c2e001-slice.jsonl"
GOLD = DATA / "gold" / "crd3-c2e001-slice.json"
NOTARIUS = Path(sys.executable).with_name("notarius")


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample through the complete profile with the double (published once per module)."""
    root = tmp_path_factory.mktemp("eval")
    register_transcript(root / "data" / "transcripts", "sample", SAMPLE)
    with DagsterInstance.ephemeral() as instance, scripted_llm(complete_responder):
        outcome = run_session(
            session_id="sample",
            profile=REPO / "configs" / "dnd-complete.yaml",
            data_root=root / "data",
            llm_profile="test-double",
            instance=instance,
            quiet=True,
        )
    assert outcome.success, outcome.error
    return root / "data" / "bundles" / "sample"


def notarius(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NOTARIUS_", "DAGSTER_"))}
    env.update({"PYTHONPATH": str(REPO), "COLUMNS": "160", "DAGSTER_HOME": str(cwd)})
    return subprocess.run(
        [str(NOTARIUS), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_eval_prints_a_table_per_lane_with_totals(bundle: Path, tmp_path: Path) -> None:
    done = notarius(tmp_path, "eval", str(bundle), "--gold", str(GOLD))
    assert done.returncode == 0, done.stderr
    for lane in (
        "npcs",
        "scene-descriptions",
        "combat-turns",
        "spells",
        "item-events",
        "npc-interactions",
        "total (micro)",
    ):
        assert lane in done.stdout
    assert "against gold crd3-c2e001-slice" in done.stdout
    assert "source digest not checked" not in done.stdout  # the gold carries the digest


def test_eval_json_is_the_report_model_with_the_same_numbers(bundle: Path, tmp_path: Path) -> None:
    done = notarius(tmp_path, "eval", str(bundle), "--gold", str(GOLD), "--json")
    assert done.returncode == 0, done.stderr
    report = EvaluationReport.model_validate_json(done.stdout)
    assert report == evaluate(bundle, GOLD, MATCH_FIELDS)
    assert report.source_checked and report.totals.lanes == sorted(
        ["npcs", "scene-descriptions", "combat-turns", "spells", "item-events", "npc-interactions"]
    )
    spells = next(lane for lane in report.lanes if lane.lane_id == "spells")
    # The double reads "cast Guiding Bolt" and "cast Chromatic Orb" off the sample with the
    # speakers as casters, which the gold accepts: both castings, both grounded.
    assert (spells.predicted, spells.gold, spells.grounded.f1) == (2, 2, 1.0)


def test_eval_scorer_v1_reproduces_the_previous_rules(bundle: Path, tmp_path: Path) -> None:
    done = notarius(tmp_path, "eval", str(bundle), "--gold", str(GOLD), "--json", "--scorer", "v1")
    assert done.returncode == 0, done.stderr
    report = EvaluationReport.model_validate_json(done.stdout)
    assert report.scorer == "v1"
    assert report == evaluate(bundle, GOLD, MATCH_FIELDS, scorer="v1")
    table = notarius(tmp_path, "eval", str(bundle), "--gold", str(GOLD))
    assert "scorer v2" in table.stdout  # the default, named in the table's heading
    wrong = notarius(tmp_path, "eval", str(bundle), "--gold", str(GOLD), "--scorer", "v3")
    assert wrong.returncode == 2 and "invalid choice" in wrong.stderr


def test_eval_refuses_missing_files_as_usage_errors(bundle: Path, tmp_path: Path) -> None:
    done = notarius(tmp_path, "eval", str(bundle), "--gold", str(tmp_path / "nope.json"))
    assert done.returncode == 2 and "gold: file 'nope.json' not found" in done.stderr
    done = notarius(tmp_path, "eval", str(tmp_path / "No Bundle"), "--gold", str(GOLD))
    assert done.returncode == 2
    assert "'No Bundle' is neither a bundle folder nor a session id" in done.stderr
    done = notarius(tmp_path, "eval", str(bundle))
    assert done.returncode == 2 and "--gold" in done.stderr
    store = ["--data", str(tmp_path / "data")]
    done = notarius(tmp_path, "eval", "no-such-session", *store)
    assert done.returncode == 1
    assert "session 'no-such-session' has no published bundle under" in done.stderr


def test_eval_of_a_session_id_finds_its_bundle_and_gold_in_the_store(
    bundle: Path, tmp_path: Path
) -> None:
    data = bundle.parent.parent  # <data>/bundles/sample
    store = ["--data", str(data)]
    done = notarius(tmp_path, "eval", "sample", *store)
    assert done.returncode == 1 and "has no gold file at" in done.stderr and "--gold" in done.stderr
    (data / "gold").mkdir(exist_ok=True)
    (data / "gold" / "sample.json").write_bytes(GOLD.read_bytes())
    by_session = notarius(tmp_path, "eval", "sample", "--json", *store)
    by_path = notarius(tmp_path, "eval", str(bundle), "--gold", str(GOLD), "--json")
    assert by_session.returncode == 0, by_session.stderr
    assert json.loads(by_session.stdout)["totals"] == json.loads(by_path.stdout)["totals"]


def test_eval_fails_on_a_bad_gold_naming_the_file_never_its_content(
    bundle: Path, tmp_path: Path
) -> None:
    bad = tmp_path / "bad-gold.json"
    data = json.loads(GOLD.read_text())
    data["lanes"]["npcs"][0]["unit_ids"] = "Gustav Fletching"
    bad.write_text(json.dumps(data))
    done = notarius(tmp_path, "eval", str(bundle), "--gold", str(bad))
    assert done.returncode == 1
    assert "gold 'bad-gold.json'" in done.stderr and "lanes.npcs[0].unit_ids" in done.stderr
    assert "Gustav" not in done.stderr and "Traceback" not in done.stderr
    assert str(tmp_path) not in done.stderr


def test_eval_fails_when_the_gold_was_read_from_another_transcript(
    bundle: Path, tmp_path: Path
) -> None:
    done = notarius(
        tmp_path, "eval", str(bundle), "--gold", str(DATA / "gold" / "fireball-sea-hag.json")
    )
    assert done.returncode == 1
    assert "another transcript" in done.stderr and "fireball-sea-hag.json" in done.stderr
