"""Reference bindings (pipeline defaults, target-local overrides, runtime overrides and
unbinds, flat names) and materialization of bound files; reference content never leaks."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from dagster import AssetKey, DagsterInstance

from notarius_dagster.engine import references as references_module
from notarius_dagster.engine.chunking import GenericChunker
from notarius_dagster.engine.config import parse_profile
from notarius_dagster.engine.contracts import BaseExtractor, ExtractRequest, ModuleOutput
from notarius_dagster.engine.errors import InvalidReferenceError, ProfileError
from notarius_dagster.engine.lanes import LaneSpec
from notarius_dagster.engine.models import ReferenceSlot
from notarius_dagster.engine.references import prepare_file, prepare_generated
from notarius_dagster.engine.registry import ChunkerSpec
from notarius_dagster.engine.resolution import RuntimeBinding, resolve_pipeline
from notarius_dagster.engine.transcripts import register_transcript
from notarius_dagster.modules import registry
from notarius_dagster.run.runner import RunOutcome, run_session

SECRET = "GLOSSARY-CONTENT-MARKER-7731"
GLOSSARY = ReferenceSlot(
    name="glossary", accepted_media_types=("text/plain", "text/markdown"), max_bytes=200
)
LOOSE = ReferenceSlot(name="notes")
SCENES = ReferenceSlot(name="scenes", accepted_kinds=("dnd/scene-description-list",))
NEEDED = ReferenceSlot(name="needed", required=True)


def cited_word(request: ExtractRequest, unit: int) -> list[str]:
    """An alias the cited unit mentions (its first word), so the record passes the `support`
    check: these modules test reference handling, not grounding."""
    text = next(u.text for u in request.document.units if u.unit_id == unit)
    return text.split()[:1]


class GlossaryExtractor(BaseExtractor):
    """Uses the glossary (counts its lines) without ever echoing it."""

    def __init__(self, options: dict[str, Any]) -> None:
        pass

    def extract(self, request: ExtractRequest) -> ModuleOutput:
        glossary = request.context.references.get("glossary")
        lines = len(glossary.text.splitlines()) if glossary and glossary.text else 0
        name = f"glossary-lines-{lines}"
        unit = request.chunk.unit_ids[0]
        return ModuleOutput(
            payload={
                "kind": "dnd/npc-list",
                "schema_version": "v1",
                "source_id": request.chunk.source_id,
                "npcs": [
                    {
                        "name": name,
                        "aliases": cited_word(request, unit),
                        "description": "",
                        "source_refs": [
                            {
                                "source_id": request.chunk.source_id,
                                "start_unit_id": unit,
                                "end_unit_id": unit,
                            }
                        ],
                    }
                ],
            }
        )


class GlossaryLane(GlossaryExtractor):
    def __init__(self, lane: LaneSpec, options: dict[str, Any]) -> None:
        pass


def _npcs_like(lane_id: str, kind: str, slots: tuple[ReferenceSlot, ...]) -> LaneSpec:
    """The npcs lane with the glossary extractor and `slots`: these tests are about binding
    and preparing references, not about what a lane extracts."""
    npcs = registry().lane("npcs")
    modules = dataclasses.replace(npcs.modules, extract=GlossaryLane)
    return dataclasses.replace(npcs, lane_id=lane_id, kind=kind, slots=slots, modules=modules)


STYLED_CHUNKER = ChunkerSpec(
    key="test.styled-chunker", build=GenericChunker, slots=(ReferenceSlot(name="style"),)
)
REGISTRY = dataclasses.replace(
    registry().with_lanes(
        _npcs_like("npcs", "dnd/npc-list", (GLOSSARY, LOOSE, SCENES)),
        _npcs_like("glossed", "test/glossed-npc-list", (GLOSSARY,)),
        _npcs_like("needy", "test/needy-npc-list", (NEEDED,)),
    ),
    chunkers=(*registry().chunkers, STYLED_CHUNKER),
)


def profile(
    lane_refs: dict[str, Any] | None = None,
    pipeline_refs: dict[str, Any] | None = None,
    lanes: tuple[str, ...] = ("npcs",),
) -> dict[str, Any]:
    return {
        "version": 1,
        "pipeline": {
            "id": "refs",
            "llm_profile": "test-double",
            "references": pipeline_refs or {},
            "lanes": [{"id": lane, "references": lane_refs or {}} for lane in lanes],
        },
    }


def resolve(data: dict[str, Any], base: Path = Path("/cfg"), **kw: Any):
    return resolve_pipeline(
        parse_profile(data, profile_name="refs.yaml"),
        profile_name="refs.yaml",
        base_dir=base,
        registry=REGISTRY,
        **kw,
    )


def bindings(resolved: Any, lane: str = "npcs") -> dict[str, Any]:
    return {b.slot: b for b in resolved.lane(lane).extract.references}


def test_pipeline_binding_is_a_default_for_every_declaring_target() -> None:
    resolved = resolve(
        profile(pipeline_refs={"glossary": {"path": "g.txt"}}, lanes=("npcs", "glossed"))
    )
    for lane in ("npcs", "glossed"):
        b = bindings(resolved, lane)["glossary"]
        assert (b.source, b.path, b.display) == ("pipeline", "/cfg/g.txt", "g.txt")


def test_target_binding_overrides_the_pipeline_default() -> None:
    data = profile(pipeline_refs={"glossary": {"path": "g.txt"}}, lanes=("npcs", "glossed"))
    data["pipeline"]["lanes"][0]["references"] = {"glossary": {"path": "local/l.txt"}}
    resolved = resolve(data)
    assert bindings(resolved)["glossary"].path == "/cfg/local/l.txt"
    assert bindings(resolved)["glossary"].source == "target"
    assert bindings(resolved, "glossed")["glossary"].source == "pipeline"


def test_target_binding_of_an_undeclared_slot_names_the_key_path() -> None:
    with pytest.raises(ProfileError) as info:
        resolve(profile(lane_refs={"nope": {"path": "x.txt"}}))
    assert info.value.key_path == "pipeline.lanes[0].references.nope"


def test_pipeline_binding_nobody_declares_is_refused() -> None:
    with pytest.raises(ProfileError, match="no selected .* declares"):
        resolve(profile(pipeline_refs={"nope": {"path": "x.txt"}}))


def test_runtime_override_resolves_relative_to_working_directory(tmp_path: Path) -> None:
    resolved = resolve(
        profile(lane_refs={"notes": {"path": "cfg.txt"}}),
        runtime_references=[RuntimeBinding(selector="notes", path="run.txt")],
        cwd=tmp_path,
    )
    b = bindings(resolved)["notes"]
    assert (b.source, b.path) == ("runtime", str(tmp_path / "run.txt"))


def test_flat_runtime_name_declared_by_two_targets_needs_a_selector(tmp_path: Path) -> None:
    data = profile(lanes=("npcs", "glossed"))
    with pytest.raises(ProfileError, match="glossed.extract.glossary, npcs.extract.glossary"):
        resolve(data, runtime_references=[RuntimeBinding(selector="glossary", path="g.txt")])
    for selector in ("glossed.glossary", "glossed.extract.glossary"):
        resolved = resolve(
            data, cwd=tmp_path, runtime_references=[RuntimeBinding(selector=selector, path="g.txt")]
        )
        assert "glossary" in bindings(resolved, "glossed")
        assert "glossary" not in bindings(resolved)


def test_unknown_selector_is_refused() -> None:
    with pytest.raises(ProfileError, match="selectors are SLOT, chunk.SLOT"):
        resolve(
            profile(),
            runtime_references=[RuntimeBinding(selector="npcs.normalize.x", path="g.txt")],
        )


def test_runtime_unbind_removes_an_optional_binding() -> None:
    resolved = resolve(profile(lane_refs={"notes": {"path": "n.txt"}}), runtime_unbinds=["notes"])
    assert "notes" not in bindings(resolved)


def test_required_slot_cannot_be_unbound_or_left_unbound() -> None:
    with pytest.raises(ProfileError, match="required reference slot 'needed'"):
        resolve(profile(lanes=("needy",)))
    with pytest.raises(ProfileError, match="required and cannot be unbound"):
        resolve(
            profile(lanes=("needy",), lane_refs={"needed": {"path": "n.txt"}}),
            runtime_unbinds=["needed"],
        )


def prepared(tmp_path: Path, name: str, content: bytes, slot: str = "glossary"):
    path = tmp_path / name
    path.write_bytes(content)
    resolved = resolve(profile(lane_refs={slot: {"path": str(path)}}))
    return prepare_file(bindings(resolved)[slot], REGISTRY.kinds())


def test_file_reference_records_digest_media_type_and_no_content(tmp_path: Path) -> None:
    ref, warnings = prepared(tmp_path, "g.md", SECRET.encode())
    assert ref.digest.startswith("sha256:") and ref.media_type == "text/markdown"
    assert ref.text == SECRET and warnings == []
    assert SECRET not in json.dumps(dict(ref.provenance)) and str(tmp_path) not in json.dumps(
        dict(ref.provenance)
    )


def test_missing_file_is_an_error_naming_the_file(tmp_path: Path) -> None:
    resolved = resolve(profile(lane_refs={"glossary": {"path": str(tmp_path / "gone.txt")}}))
    with pytest.raises(InvalidReferenceError, match="'gone.txt' not found"):
        prepare_file(bindings(resolved)["glossary"])


def test_non_utf8_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidReferenceError, match="not UTF-8"):
        prepared(tmp_path, "g.txt", b"caf\xe9")


def test_file_over_the_slot_limit_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidReferenceError, match="201 bytes; the slot allows 200"):
        prepared(tmp_path, "g.txt", b"x" * 201)


def test_empty_file_is_accepted_with_a_warning(tmp_path: Path) -> None:
    ref, warnings = prepared(tmp_path, "g.txt", b"")
    assert [w.code for w in warnings] == ["empty_reference"]


def test_unknown_extension_is_octet_stream_checked_only_when_declared(tmp_path: Path) -> None:
    ref, _ = prepared(tmp_path, "notes.weird", b"ok", slot="notes")
    assert ref.media_type == "application/octet-stream"
    with pytest.raises(InvalidReferenceError, match="media type 'application/octet-stream'"):
        prepared(tmp_path, "g.weird", b"ok")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{not json", "not valid JSON"),
        (
            b'{"kind": "dnd/npc-list", "schema_version": "v1", "source_id": "s", "npcs": []}',
            "the slot accepts",
        ),
        (b'{"kind": "dnd/scene-description-list", "scene_descriptions": 5}', "malformed external"),
    ],
)
def test_malformed_structured_file_reference_is_an_error(
    tmp_path: Path, content: bytes, message: str
) -> None:
    with pytest.raises(InvalidReferenceError, match=message):
        prepared(tmp_path, "scenes.json", content, slot="scenes")


def test_malformed_generated_reference_is_an_error_never_unbound() -> None:
    resolved = resolve(profile(lane_refs={"scenes": {"path": "s.json"}}))
    binding = bindings(resolved)["scenes"]
    with pytest.raises(InvalidReferenceError, match="produced no accepted artifact"):
        prepare_generated(binding, None, registry().kinds())
    with pytest.raises(InvalidReferenceError, match="malformed generated"):
        prepare_generated(
            binding, {"kind": "dnd/scene-description-list", "x": 1}, registry().kinds()
        )


def add_session(tmp_path: Path, session_id: str, texts: Sequence[str] = ("hello",)) -> None:
    """Register a transcript of DM lines `texts` as `session_id` in the store under tmp_path."""
    transcript = tmp_path / f"{session_id}.jsonl"
    transcript.write_text("".join(json.dumps({"text": t, "speaker": "DM"}) + "\n" for t in texts))
    register_transcript(tmp_path / "data" / "transcripts", session_id, transcript)


def run_profile(
    tmp_path: Path, instance: DagsterInstance, session_id: str, cfg: Path, **kw: Any
) -> RunOutcome:
    """`run_session` of `session_id` with profile `cfg`, the store under tmp_path, this test
    module's registry."""
    return run_session(
        session_id=session_id,
        profile=cfg,
        data_root=tmp_path / "data",
        instance=instance,
        quiet=True,
        registry=REGISTRY,
        **kw,
    )


def test_reference_content_never_reaches_bundle_or_metadata(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    glossary = tmp_path / "glossary.txt"
    glossary.write_text(f"{SECRET}\nsecond line\n")
    cfg = tmp_path / "refs.yaml"
    cfg.write_text(json.dumps(profile(lane_refs={"glossary": {"path": "glossary.txt"}})))
    add_session(tmp_path, "refs", [f"line {i}" for i in range(6)])
    outcome = run_profile(tmp_path, instance, "refs", cfg)
    assert outcome.success, outcome.error
    bundle = tmp_path / "data" / "bundles" / "refs"
    npcs = json.loads((bundle / "lanes" / "npcs.json").read_text())
    assert npcs["npcs"][0]["name"] == "glossary-lines-2"  # the module did receive the content
    manifest = json.loads((bundle / "manifest.json").read_text())
    provenance = manifest["artifact_lanes"][0]["references"]
    assert provenance[0]["file"] == "glossary.txt" and provenance[0]["digest"].startswith("sha256")
    published = "".join(p.read_text() for p in bundle.rglob("*.json"))
    assert SECRET not in published and str(tmp_path) not in published
    event = instance.get_latest_materialization_event(AssetKey("npcs"))
    assert event is not None and event.asset_materialization is not None
    assert SECRET not in json.dumps(
        {k: str(v.value) for k, v in event.asset_materialization.metadata.items()}
    )


def test_runtime_reference_through_dagster_run_config(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    from tests.run_definitions import build_run_definitions

    (tmp_path / "short.txt").write_text("only line\n")
    (tmp_path / "long.txt").write_text("a\nb\nc\n")
    cfg = tmp_path / "refs.yaml"
    cfg.write_text(json.dumps(profile(lane_refs={"glossary": {"path": "short.txt"}})))
    add_session(tmp_path, "rc")
    instance.add_dynamic_partitions("sessions", ["rc"])
    defs = build_run_definitions(profile=cfg, data_root=tmp_path / "data", registry=REGISTRY)
    result = defs.resolve_job_def("materialize_session").execute_in_process(
        instance=instance,
        partition_key="rc",
        run_config={
            "ops": {  # the npcs lane runs in the step of its level, lanes_1
                "lanes_1": {
                    "config": {"references": {"npcs.extract.glossary": str(tmp_path / "long.txt")}}
                }
            }
        },
    )
    assert result.success
    npcs = json.loads((tmp_path / "data" / "bundles" / "rc" / "lanes" / "npcs.json").read_text())
    assert npcs["npcs"][0]["name"] == "glossary-lines-3"
    manifest = json.loads((tmp_path / "data" / "bundles" / "rc" / "manifest.json").read_text())
    assert manifest["artifact_lanes"][0]["references"][0]["binding"] == "runtime"


def test_chunker_reference_provenance_and_warnings_reach_the_bundle(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    (tmp_path / "style.md").write_text("")
    data = profile()
    data["pipeline"]["chunk"] = {
        "module": "test.styled-chunker",
        "references": {"style": {"path": "style.md"}},
    }
    cfg = tmp_path / "refs.yaml"
    cfg.write_text(json.dumps(data))
    add_session(tmp_path, "styled")
    outcome = run_profile(tmp_path, instance, "styled", cfg)
    assert outcome.success, outcome.error
    bundle = tmp_path / "data" / "bundles" / "styled"
    manifest = json.loads((bundle / "manifest.json").read_text())
    (chunk_ref,) = manifest["references"]["chunk"]
    assert (chunk_ref["file"], chunk_ref["bytes"]) == ("style.md", 0)
    warnings = json.loads((bundle / "warnings.json").read_text())
    assert [w["code"] for w in warnings] == ["empty_reference"]
    assert manifest["warnings"] == 1


def test_cli_and_ui_runtime_references_take_one_path_with_one_error(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    """`run_session(runtime_references=...)` (what `notarius run --reference` calls) passes them
    as the run config a UI run gives: the same binding lands in the manifest, and a bad selector
    gets the same message on both paths (refused before anything runs on the first)."""
    from notarius_dagster.engine.errors import NotariusError
    from tests.run_definitions import build_run_definitions

    (tmp_path / "short.txt").write_text("only line\n")
    (tmp_path / "long.txt").write_text("a\nb\nc\n")
    cfg = tmp_path / "refs.yaml"
    cfg.write_text(json.dumps(profile(lane_refs={"glossary": {"path": "short.txt"}})))
    add_session(tmp_path, "cli")
    outcome = run_profile(
        tmp_path,
        instance,
        "cli",
        cfg,
        runtime_references=[RuntimeBinding(selector="glossary", path=str(tmp_path / "long.txt"))],
    )
    assert outcome.success, outcome.error
    bundle = tmp_path / "data" / "bundles" / "cli"
    assert json.loads((bundle / "lanes" / "npcs.json").read_text())["npcs"][0]["name"] == (
        "glossary-lines-3"
    )
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["artifact_lanes"][0]["references"][0]["binding"] == "runtime"
    run = instance.get_run_by_id(outcome.run_id)
    assert run is not None and run.run_config["ops"]["lanes_1"]["config"]["references"] == {
        "glossary": str(tmp_path / "long.txt")
    }

    with pytest.raises(NotariusError) as refused:
        run_profile(
            tmp_path,
            instance,
            "typo",
            cfg,
            runtime_references=[RuntimeBinding(selector="glosary", path="x.txt")],
        )
    message = str(refused.value)
    assert message.startswith("runtime references: profile 'refs.yaml': --reference glosary")
    assert not instance.has_dynamic_partition("sessions", "typo")

    defs = build_run_definitions(profile=cfg, data_root=tmp_path / "data", registry=REGISTRY)
    result = defs.resolve_job_def("materialize_session").execute_in_process(
        instance=instance,
        partition_key="cli",
        raise_on_error=False,
        run_config={"ops": {"lanes_1": {"config": {"references": {"glosary": "x.txt"}}}}},
    )
    assert not result.success
    [failure] = [e for e in result.all_events if e.is_step_failure]
    assert failure.step_key == "lanes_1"
    assert failure.step_failure_data is not None and failure.step_failure_data.error is not None
    assert f"lane npcs: {message}" in failure.step_failure_data.error.message


def test_each_reference_file_is_validated_before_parsing_and_read_once_by_its_user(
    tmp_path: Path, instance: DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    """source_document prepares every file (it fails before the transcript is parsed when the
    file is missing or malformed); the chunker and the lane that use a file read it once more
    each: two reads per file per run, never three."""
    (tmp_path / "glossary.txt").write_text("one\n")
    (tmp_path / "style.md").write_text("style\n")
    data = profile(lane_refs={"glossary": {"path": "glossary.txt"}})
    data["pipeline"]["chunk"] = {
        "module": "test.styled-chunker",
        "references": {"style": {"path": "style.md"}},
    }
    cfg = tmp_path / "refs.yaml"
    cfg.write_text(json.dumps(data))
    add_session(tmp_path, "once")
    reads: list[str] = []
    read_file = references_module.read_regular_file

    def counting(path: Path, limit: int, *, what: str, name: str) -> bytes:
        reads.append(path.name)
        return read_file(path, limit, what=what, name=name)

    monkeypatch.setattr(references_module, "read_regular_file", counting)
    outcome = run_profile(tmp_path, instance, "once", cfg)
    assert outcome.success, outcome.error
    assert (reads.count("glossary.txt"), reads.count("style.md")) == (2, 2)

    (tmp_path / "glossary.txt").unlink()
    (tmp_path / "data" / "transcripts" / "once.jsonl").write_text('{"speaker": "DM"}\n')
    failed = run_profile(tmp_path, instance, "once", cfg)
    assert not failed.success and failed.error is not None
    assert failed.error.startswith("source_document: ")
    assert "reference npcs.extract.glossary: file 'glossary.txt' not found" in failed.error
    (tmp_path / "glossary.txt").write_bytes(b"caf\xe9\n")
    undecodable = run_profile(tmp_path, instance, "once", cfg)
    assert not undecodable.success and undecodable.error is not None
    assert undecodable.error.startswith("source_document: ")
    assert "reference npcs.extract.glossary: file 'glossary.txt' is not UTF-8" in undecodable.error
