"""Pipeline profiles: strict parsing, errors naming the profile and key path, defaults,
lanes named by id (the old module-triple form refused with the new one), lane selection and a
stable digest."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml

from notarius_dagster.engine.config import parse_profile
from notarius_dagster.engine.errors import ProfileError, ResolutionError
from notarius_dagster.engine.llm_profiles import LLMProfileCatalog
from notarius_dagster.engine.registry import LaneRegistry
from notarius_dagster.engine.resolution import resolve_pipeline, resolve_profile_file
from notarius_dagster.llm.profiles import LLMProfile, canonical_profile, offline_profile
from notarius_dagster.modules import registry

REPO = Path(__file__).resolve().parent.parent


def base() -> dict[str, Any]:
    return {
        "version": 1,
        "pipeline": {
            "id": "p1",
            "llm_profile": "test-double",
            "lanes": [{"id": "npcs"}],
        },
    }


def resolve(data: dict[str, Any], **kwargs: Any):
    profile = parse_profile(data, profile_name="p.yaml")
    kwargs.setdefault("registry", registry())
    return resolve_pipeline(profile, profile_name="p.yaml", base_dir=Path("."), **kwargs)


def error_of(data: dict[str, Any], **kwargs: Any) -> ProfileError:
    with pytest.raises(ProfileError) as info:
        resolve(data, **kwargs)
    return info.value


def test_defaults_fill_chunk_and_output_and_a_lane_brings_its_own_modules() -> None:
    resolved = resolve(base())
    lane = resolved.lane("npcs")
    assert resolved.chunk.module == "generic"
    assert (lane.extract.module, lane.merge.module, lane.normalize.module) == (
        "dnd.npcs.extract",
        "dnd.npcs.merge",
        "dnd.npcs.normalize",
    )
    assert lane.kind == "dnd/npc-list" and lane.extract.retries == 0
    assert resolved.output_module == "json"
    assert resolved.output_options == {"evidence_context": None}


def test_unknown_key_is_refused_with_its_path() -> None:
    data = base()
    data["pipeline"]["lanes"][0]["retry"] = 2
    err = error_of(data)
    assert err.profile == "p.yaml"
    assert err.key_path == "pipeline.lanes[0].retry"
    assert "unknown key" in str(err)


def test_wrong_type_names_key_path() -> None:
    data = base()
    data["pipeline"]["lanes"][0]["retries"] = "many"
    assert error_of(data).key_path == "pipeline.lanes[0].retries"


def test_unknown_lane_id_names_key_path_and_the_registered_lanes() -> None:
    data = base()
    data["pipeline"]["lanes"][0]["id"] = "nope"
    err = error_of(data)
    assert err.key_path == "pipeline.lanes[0].id"
    assert "unknown lane 'nope'" in str(err) and "npcs" in str(err) and "spells" in str(err)


@pytest.mark.parametrize("stage", ["extract", "merge", "normalize"])
def test_a_lane_written_as_module_triples_is_refused_with_the_new_form(stage: str) -> None:
    data = base()
    data["pipeline"]["lanes"].append({"id": "spells", stage: {"module": f"dnd.spells.{stage}"}})
    err = error_of(data)
    assert err.key_path == "pipeline.lanes[1]"
    assert "lanes are named by id" in err.problem
    assert "- {id: spells, retries: 1, references: {npcs: npcs}}" in err.problem


def test_unknown_chunker_names_key_path() -> None:
    data = base()
    data["pipeline"]["chunk"] = {"module": "magic"}
    assert error_of(data).key_path == "pipeline.chunk.module"


def test_unknown_llm_profile_is_refused() -> None:
    data = base()
    data["pipeline"]["llm_profile"] = "gpt-99"
    err = error_of(data)
    assert err.key_path == "pipeline.llm_profile" and "offline" in str(err)


def test_bad_llm_profile_field_names_key_path() -> None:
    data = base()
    data["llm_profiles"] = {"mine": {"model": "openai/x", "temperature": "hot"}}
    data["pipeline"]["llm_profile"] = "mine"
    assert error_of(data).key_path == "llm_profiles.mine.temperature"


def test_the_offline_profile_is_the_one_production_resolves_with_its_published_values() -> None:
    resolved = resolve_profile_file(REPO / "configs" / "offline.yaml", registry=registry())
    assert resolved.llm_profile_name == "offline"
    assert resolved.llm_profile == offline_profile().model_dump(mode="json")
    # These values are in every published manifest and the checkpoint fingerprints.
    assert {
        k: resolved.llm_profile[k]
        for k in (
            "model",
            "server",
            "temperature",
            "max_tokens",
            "timeout_s",
            "retries",
            "max_concurrency",
            "context_tokens",
        )
    } == {
        "model": "openai/smollm2-135m-instruct",
        "server": "llama-cpp",
        "temperature": 0.0,
        "max_tokens": 384,
        "timeout_s": 300.0,
        "retries": 1,
        "max_concurrency": 1,
        "context_tokens": 4096,
    }
    assert LLMProfile.model_validate(resolved.llm_profile).fingerprint() == (
        "sha256:88071713830fe97b12013e8c4707bdf3249a61363584ec32705180cdda92677d"
    )


def test_a_profiles_own_llm_profile_of_a_builtin_name_wins() -> None:
    data = base()
    data["llm_profiles"] = {"offline": {"model": "openai/elsewhere", "max_tokens": 64}}
    data["pipeline"]["llm_profile"] = "offline"
    resolved = resolve(data)
    assert resolved.llm_profile["model"] == "openai/elsewhere"
    assert resolved.llm_profile["max_tokens"] == 64 and resolved.llm_profile["server"] == "none"


def test_the_engine_resolves_llm_profiles_only_through_the_registrys_catalog() -> None:
    catalog = LLMProfileCatalog(
        builtins={"house": {"model": "openai/house-model"}}, validator=canonical_profile
    )
    house = dataclasses.replace(registry(), llm_profiles=catalog)
    data = base()
    data["pipeline"]["llm_profile"] = "house"
    assert resolve(data, registry=house).llm_profile["model"] == "openai/house-model"
    data["pipeline"]["llm_profile"] = "test-double"  # built into the D&D registry, not here
    err = error_of(data, registry=house)
    assert err.key_path == "pipeline.llm_profile"
    assert str(err) == (
        "profile 'p.yaml': pipeline.llm_profile: unknown LLM profile 'test-double'; "
        "known: ['house']"
    )
    assert "house" not in registry().llm_profiles.builtins


def test_without_a_validator_resolution_says_so() -> None:
    catalog = LLMProfileCatalog(builtins={"test-double": {"model": "x/y"}})
    bare = dataclasses.replace(registry(), llm_profiles=catalog)
    with pytest.raises(ResolutionError, match="no LLM profile validator is given"):
        resolve(base(), registry=bare)


def test_a_registry_refuses_a_lane_id_or_a_chunker_twice() -> None:
    npcs = registry().lane("npcs")
    with pytest.raises(ValueError, match=r"lane id registered twice: \['npcs'\]"):
        LaneRegistry(lanes=(npcs, npcs))
    generic = registry().chunker("generic")
    assert generic is not None
    with pytest.raises(ValueError, match=r"chunker registered twice: \['generic'\]"):
        LaneRegistry(chunkers=(generic, generic))


def test_duplicate_lane_ids_are_refused() -> None:
    data = base()
    data["pipeline"]["lanes"].append(data["pipeline"]["lanes"][0])
    assert "appears twice" in str(error_of(data))


def test_lane_selection_keeps_only_selected_and_rejects_unknown() -> None:
    assert resolve(base(), lanes=["npcs"]).lane_ids() == ["npcs"]
    assert "unknown lane" in str(error_of(base(), lanes=["spells"]))


def test_unknown_validator_in_override_is_refused() -> None:
    data = base()
    data["pipeline"]["lanes"][0]["validators"] = {"extract": ["nonsense"]}
    assert error_of(data).key_path == "pipeline.lanes[0].validators.extract"


def test_validator_chains_default_and_explicit_empty_override() -> None:
    data = base()
    data["pipeline"]["lanes"][0]["validators"] = {"merge": []}
    lane = resolve(data).lane("npcs")
    assert lane.extract.validators == ("schema", "refs_in_chunk", "support")
    assert lane.extract.validators_source == "default"
    assert lane.merge.validators == () and lane.merge.validators_source == "override"


def test_digest_is_stable_and_changes_with_configuration() -> None:
    assert resolve(base()).digest == resolve(base()).digest
    changed = base()
    changed["pipeline"]["lanes"][0]["retries"] = 2
    assert resolve(changed).digest != resolve(base()).digest
    assert resolve(base()).digest.startswith("sha256:")


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("pipeline:\n  id: x\n  lanes: [\n")
    with pytest.raises(ProfileError) as info:
        resolve_profile_file(path, registry=registry())
    assert info.value.profile == "broken.yaml" and info.value.key_path.startswith("line")


def test_shipped_profiles_resolve() -> None:
    for path in sorted((REPO / "configs").glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        if not isinstance(data, dict) or "pipeline" not in data:
            continue
        resolved = resolve_profile_file(path, registry=registry())
        assert resolved.lanes, path.name


def test_a_lane_takes_no_options_and_says_so_with_its_key_path() -> None:
    data = base()
    data["pipeline"]["lanes"][0]["options"] = {"temperatur": 0.2}
    err = error_of(data)
    assert err.key_path == "pipeline.lanes[0].options"
    assert "unknown key" in str(err)


def test_bad_chunker_option_is_refused_at_resolution() -> None:
    data = base()
    data["pipeline"]["chunk"] = {"module": "generic", "options": {"max_units": 0}}
    err = error_of(data)
    assert err.key_path == "pipeline.chunk.options.max_units" and "greater than" in str(err)


def test_the_profile_shown_in_the_configuration_docs_resolves() -> None:
    """docs/configuration.md, "The profile file": the example a newcomer copies is a profile
    that resolves (lanes by id, a lane reference, the chunker's options)."""
    doc = (REPO / "docs" / "configuration.md").read_text()
    section = doc.split("## The profile file", 1)[1]
    example = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    resolved = resolve(yaml.safe_load(example))
    assert resolved.lane_ids() == ["npcs", "spells"]
    spells = resolved.lane("spells")
    assert spells.depends_on == ("npcs",) and spells.extract.retries == 1
    assert resolved.chunk.options == {"max_units": 25, "max_chars": 2500, "overlap_units": 0}


def test_validate_prints_the_new_form_for_a_profile_of_module_triples(tmp_path: Path) -> None:
    from tests.test_cli_run import notarius

    old = tmp_path / "old.yaml"
    data = base()
    data["pipeline"]["lanes"] = [
        {
            "id": "spells",
            "extract": {"module": "dnd.spells.extract", "retries": 1},
            "merge": {"module": "dnd.spells.merge"},
            "normalize": {"module": "dnd.spells.normalize"},
        }
    ]
    old.write_text(yaml.safe_dump(data))
    done = notarius(tmp_path, "validate", str(old))
    assert done.returncode == 1
    assert "profile 'old.yaml': pipeline.lanes[0]: lanes are named by id" in done.stderr
    assert "- {id: spells, retries: 1, references: {npcs: npcs}}" in done.stderr
