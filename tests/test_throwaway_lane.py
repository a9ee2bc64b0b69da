"""Adding a lane is one folder and one profile entry (docs/lanes.md, "Adding a lane"): a lane
written from scratch in a temporary folder (its prompt, its record model and its `LaneSpec`),
added to the lane registry value and named in a profile, runs through the same asset job as
the D&D lanes, and its records reach the published bundle, the session report and the Dagster
UI metadata without any other file of the project being touched."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from dagster import AssetKey, DagsterInstance

from notarius_dagster.engine.transcripts import register_transcript
from notarius_dagster.modules import registry
from notarius_dagster.report import report_path
from notarius_dagster.run.runner import run_session
from tests.doubles import units_in
from tests.lane_doubles import write_lane_folder
from tests.llm_double import scripted_llm
from tests.run_definitions import build_run_definitions

LANE_PY = '''
    """Owl sightings: a lane that exists only in this test's temporary folder."""

    from notarius_dagster.dnd.event_lists import EventMerger, EventNormalizer
    from notarius_dagster.dnd.llm_extract import llm_extractor
    from notarius_dagster.dnd.records import ids_rule
    from notarius_dagster.engine.lane_models import AnswerSpec
    from notarius_dagster.engine.lanes import LaneModules, LaneSpec, ReportColumn, ReportTable

    from .model import OwlSighting

    LANE = LaneSpec(
        lane_id="owl-sightings",
        kind="test/owl-sighting-list",
        schema_id="test.owl_sighting_list",
        record_model=OwlSighting,
        answer=AnswerSpec("OwlSightingAnswer"),
        modules=LaneModules(
            extract=llm_extractor(),
            merge=EventMerger,
            normalize=EventNormalizer,
            rules=(ids_rule(),),
        ),
        id_prefix="owl",
        support_fields=("owl",),
        preview_fields=("id", "owl", "perch"),
        report=ReportTable(
            title="Owls seen",
            noun="sightings",
            columns=(
                ("Owl", "owl"),
                ReportColumn("Perch", "perch", template="on the {}"),
                ReportColumn("Kind", "owl", labels=(("barn owl", "common"),), template="rare"),
            ),
        ),
    )
'''
MODEL_PY = '''
    from pydantic import Field

    from notarius_dagster.dnd.records import Record


    class OwlSighting(Record):
        """One owl the table talks about, where it perches."""

        id: str | None = Field(default=None, pattern=r"^owl-[0-9]{4,}$")
        owl: str = Field(min_length=1, max_length=80)
        perch: str | None = Field(default=None, max_length=80)
'''
PROMPT_MD = "You list the owls the transcript mentions and where each one perches.\n"
LINES = [
    ("MATT", "A barn owl watches from the rafters."),
    ("LAURA", "I wave at it."),
    ("MATT", "Nothing else moves."),
    ("SAM", "Is that a snowy owl on the fence?"),
]


def write_owl_lane(root: Path) -> Path:
    return write_lane_folder(
        root / "owl_sightings", lane_py=LANE_PY, model_py=MODEL_PY, prompt=PROMPT_MD
    )


def owls(messages: list[dict[str, Any]], response_format: Any) -> str:
    """The lane's answers: the owl each line names, and the rafters for the barn owl."""
    found = []
    for unit, _, text in units_in(messages):
        for owl, perch in (("barn owl", "rafters"), ("snowy owl", None)):
            if owl in text:
                found.append({"owl": owl, "perch": perch, "unit_ids": [unit]})
    return json.dumps({"owl_sightings": found})


def test_a_lane_from_a_temporary_folder_reaches_the_bundle_the_report_and_the_ui(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    lanes = registry([write_owl_lane(tmp_path / "plugins")])
    profile = tmp_path / "owls.yaml"
    profile.write_text(
        yaml.safe_dump(
            {
                "version": 1,
                "pipeline": {
                    "id": "owls",
                    "chunk": {"module": "generic", "options": {"max_units": 2}},
                    "llm_profile": "test-double",
                    "lanes": [{"id": "owl-sightings", "retries": 1}],
                },
            }
        )
    )
    transcript = tmp_path / "owls.jsonl"
    transcript.write_text("".join(json.dumps({"speaker": s, "text": t}) + "\n" for s, t in LINES))
    data = tmp_path / "data"
    register_transcript(data / "transcripts", "owls", transcript)
    with scripted_llm(owls) as double:
        outcome = run_session(
            session_id="owls",
            profile=profile,
            data_root=data,
            instance=instance,
            quiet=True,
            registry=lanes,
        )
    assert outcome.success, outcome.error
    assert {call.metadata.get("lane") for call in double.calls} == {"owl-sightings"}

    # the bundle: listed in the index, its records in their own file, its kind's schema
    bundle = data / "bundles" / "owls"
    index = json.loads((bundle / "index.json").read_text())
    [lane] = index["lanes"]
    assert (lane["lane_id"], lane["kind"], lane["records"]) == (
        "owl-sightings",
        "test/owl-sighting-list",
        2,
    )
    assert lane["schema_id"] == "test.owl_sighting_list"
    records = json.loads((bundle / lane["file"]).read_text())["owl_sightings"]
    assert [(r["id"], r["owl"], r["perch"]) for r in records] == [
        ("owl-0001", "barn owl", "rafters"),
        ("owl-0002", "snowy owl", None),
    ]

    # the report: a section of its own, with the columns the LaneSpec declares, each record a
    # row whose cells are shown as the columns say (a template, labels, a dash for None),
    # listed in the page's contents after the D&D lanes' sections
    page = report_path(data / "bundles", "owls").read_text()
    assert '<section id="lane-owl-sightings"><h2>Owls seen</h2>' in page
    assert "<th>Sightings</th><th>Owl</th><th>Perch</th><th>Kind</th><th>Cites</th>" in page
    rows = re.findall(r'<tr class="record" id="([^"]+)">((?:<td>.*?</td>)+)</tr>', page)
    cells = [(anchor, re.findall(r"<td>(.*?)</td>", row)[:4]) for anchor, row in rows]
    assert cells == [
        ("r-owl-sightings-owl-0001", ["owl-0001", "barn owl", "on the rafters", "common"]),
        (
            "r-owl-sightings-owl-0002",
            ["owl-0002", "snowy owl", '<span class="none">&#8212;</span>', "rare"],
        ),
    ]
    nav = re.findall(r'<li><a href="#([a-z-]+)">', page)
    assert nav.index("lane-owl-sightings") > nav.index("interactions")
    assert "not shown here" not in page  # not relegated to the unknown lanes' list

    # the UI: the lane asset's description and materialization metadata
    defs = build_run_definitions(profile=profile, data_root=data, registry=lanes)
    spec = defs.resolve_assets_def(AssetKey("owl_sightings")).specs_by_key[
        AssetKey("owl_sightings")
    ]
    assert "One owl the table talks about" in (spec.description or "")
    event = instance.get_latest_materialization_event(AssetKey("owl_sightings"))
    assert event is not None and event.asset_materialization is not None
    metadata = {k: v.value for k, v in event.asset_materialization.metadata.items()}
    assert metadata["records"] == 2 and metadata["status"] == "accepted"
    assert "snowy owl" in str(metadata["preview"]) and "rafters" in str(metadata["preview"])
