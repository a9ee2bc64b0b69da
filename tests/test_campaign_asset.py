"""The `campaign_codex` asset and its sensor on a real Dagster instance: a session of the
campaign run through the asset job with the campaign profile (roster bound) publishes its
bundle and report; the codex asset reads the published bundle; the sensor asks for a codex run
after each new bundle; the report links to the campaign page; a profile without a roster has
no codex asset."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
from dagster import (
    AssetKey,
    AssetMaterialization,
    AssetsDefinition,
    DagsterInstance,
    RunRequest,
    SkipReason,
    build_sensor_context,
    materialize,
)

from assets.campaign import CODEX_ASSET, CODEX_SENSOR, codex_decision
from notarius_dagster.engine.bundle import remove_bundle
from notarius_dagster.engine.transcripts import register_transcript
from notarius_dagster.run.definitions import definitions_for, run_pipeline
from notarius_dagster.run.runner import run_session, run_settings
from resources.bundle_store import BundleStore
from tests.campaign_sessions import PROFILE, SESSIONS
from tests.lane_doubles import complete_responder
from tests.llm_double import scripted_llm

REPO = Path(__file__).resolve().parent.parent


def run_slice(
    tmp_path: Path, instance: DagsterInstance, session_id: str, start: int, count: int
) -> None:
    lines = (SESSIONS / f"{session_id}.jsonl").read_text().splitlines()[start : start + count]
    transcript = tmp_path / f"{session_id}.jsonl"
    transcript.write_text("\n".join(lines) + "\n")
    register_transcript(tmp_path / "data" / "transcripts", session_id, transcript)
    with scripted_llm(complete_responder):
        outcome = run_session(
            session_id=session_id,
            profile=PROFILE,
            data_root=tmp_path / "data",
            llm_profile="test-double",
            instance=instance,
            quiet=True,
        )
    assert outcome.success, outcome.error


def test_the_codex_asset_reads_published_bundles_and_the_sensor_follows_them(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    settings = run_settings(profile=PROFILE, data_root=tmp_path / "data")
    defs = definitions_for(settings, run_pipeline(settings))
    codex_asset = next(
        a
        for a in defs.assets or []
        if isinstance(a, AssetsDefinition) and AssetKey(CODEX_ASSET) in a.keys
    )
    sensor = defs.resolve_sensor_def(CODEX_SENSOR)
    assert isinstance(sensor(build_sensor_context(instance=instance)), SkipReason)

    run_slice(tmp_path, instance, "crd3-c2e003", 470, 100)
    context = build_sensor_context(instance=instance)
    request = sensor(context)
    assert isinstance(request, RunRequest)
    assert isinstance(
        sensor(build_sensor_context(instance=instance, cursor=context.cursor)), SkipReason
    )  # nothing new since

    store = BundleStore.from_paths(settings.store)
    result = materialize([codex_asset], instance=instance, resources={"store": store})
    assert result.success
    meta = result.asset_materializations_for_node(CODEX_ASSET)[0].metadata
    assert meta["sessions_published"].value == 1 and meta["sessions"].value == 3
    codex_file = settings.store.bundles / ".campaigns" / "mighty-nein" / "codex.json"
    codex = json.loads(codex_file.read_text())
    assert [(s["id"], s["published"]) for s in codex["sessions"]] == [
        ("crd3-c2e001", False),
        ("crd3-c2e003", True),
        ("crd3-c2e030", False),
    ]
    schema = json.loads((REPO / "schemas" / "notarius.campaign.codex.json").read_text())
    jsonschema.validate(codex, schema)
    assert str(tmp_path) not in codex_file.read_text()
    index = json.loads((settings.store.bundles / ".campaigns" / "index.json").read_text())
    assert index["campaigns"][0]["page"] == "mighty-nein/codex.html"
    report = (settings.store.bundles / ".reports" / "crd3-c2e003.html").read_text()
    assert 'href="../.campaigns/mighty-nein/codex.html"' in report
    # rebuilt with nothing new: the same data version
    again = materialize([codex_asset], instance=instance, resources={"store": store})
    meta2 = again.asset_materializations_for_node(CODEX_ASSET)[0].metadata
    assert meta2["digest"].value == meta["digest"].value and meta2["changed"].value is False
    # `notarius sessions delete` removes the bundle: the sensor asks for a codex run, which
    # drops the session; then there is nothing to do
    remove_bundle(settings.store.bundles, "crd3-c2e003")
    assert isinstance(
        sensor(build_sensor_context(instance=instance, cursor=context.cursor)), RunRequest
    )
    materialize([codex_asset], instance=instance, resources={"store": store})
    codex = json.loads(codex_file.read_text())
    assert not any(s["published"] for s in codex["sessions"]) and codex["npcs"] == []
    assert isinstance(
        sensor(build_sensor_context(instance=instance, cursor=context.cursor)), SkipReason
    )


def test_a_profile_without_a_roster_has_no_codex(tmp_path: Path) -> None:
    settings = run_settings(
        profile=REPO / "configs" / "dnd-complete.yaml", data_root=tmp_path / "data"
    )
    defs = definitions_for(settings, run_pipeline(settings))
    keys = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
    assert CODEX_ASSET not in keys
    assert CODEX_SENSOR not in {s.name for s in defs.sensors or []}


def _bundle_published(instance: DagsterInstance, session: str, version: str) -> None:
    """A `session_bundle` materialization of `session` as Dagster records it (its data version
    is the tag Dagster writes), without running the session."""
    instance.report_runless_asset_event(
        AssetMaterialization(
            "session_bundle", partition=session, tags={"dagster/data_version": version}
        )
    )


def test_the_codex_sensor_builds_once_per_change_of_the_rosters_sessions(
    instance: DagsterInstance,
) -> None:
    roster = ["s1", "s2"]
    # a session outside the roster never asks for a codex
    _bundle_published(instance, "elsewhere", "v1")
    decision, cursor = codex_decision(instance, roster, None)
    assert isinstance(decision, SkipReason)
    assert "no session of the roster" in (decision.skip_message or "")

    _bundle_published(instance, "s1", "v1")
    decision, cursor = codex_decision(instance, roster, cursor)
    assert isinstance(decision, RunRequest)
    decision, cursor = codex_decision(instance, roster, cursor)
    assert isinstance(decision, SkipReason)  # once, not on every tick

    # re-published with the same data version (nothing changed): no build
    _bundle_published(instance, "s1", "v1")
    decision, cursor = codex_decision(instance, roster, cursor)
    assert isinstance(decision, SkipReason)
    assert "unchanged" in (decision.skip_message or "")

    # changed, but the codex was already built after it (e.g. "Materialize all")
    _bundle_published(instance, "s2", "v7")
    instance.report_runless_asset_event(AssetMaterialization(CODEX_ASSET))
    decision, cursor = codex_decision(instance, roster, cursor)
    assert isinstance(decision, SkipReason)
    assert "already built" in (decision.skip_message or "")

    _bundle_published(instance, "s2", "v8")
    decision, _ = codex_decision(instance, roster, cursor)
    assert isinstance(decision, RunRequest)
