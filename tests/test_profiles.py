"""Pipeline profiles: strict parsing, errors naming the profile and key path, defaults,
lane selection, capability checks and a stable digest."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from notarius_dagster.engine.config import parse_profile
from notarius_dagster.engine.errors import ProfileError, ResolutionError
from notarius_dagster.engine.llm_profiles import LLM_PROFILES, LLMProfileCatalog
from notarius_dagster.engine.resolution import resolve_pipeline, resolve_profile_file
from notarius_dagster.llm.profiles import LLMProfile, canonical_profile, offline_profile

REPO = Path(__file__).resolve().parent.parent


def base() -> dict[str, Any]:
    return {
        "version": 1,
        "pipeline": {
            "id": "p1",
            "llm_profile": "test-double",
            "lanes": [{"id": "npcs", "extract": {"module": "dnd.npcs.extract"}}],
        },
    }


def resolve(data: dict[str, Any], **kwargs: Any):
    profile = parse_profile(data, profile_name="p.yaml")
    return resolve_pipeline(profile, profile_name="p.yaml", base_dir=Path("."), **kwargs)


def error_of(data: dict[str, Any], **kwargs: Any) -> ProfileError:
    with pytest.raises(ProfileError) as info:
        resolve(data, **kwargs)
    return info.value


def test_defaults_fill_chunk_merge_normalize_and_output() -> None:
    resolved = resolve(base())
    lane = resolved.lane("npcs")
    assert resolved.chunk.module == "generic"
    assert lane.merge.module == "appendorder" and lane.normalize.module == "noop"
    assert resolved.output_module == "json"
    assert resolved.output_options == {"evidence_context": None}


def test_unknown_key_is_refused_with_its_path() -> None:
    data = base()
    data["pipeline"]["lanes"][0]["extract"]["retry"] = 2
    err = error_of(data)
    assert err.profile == "p.yaml"
    assert err.key_path == "pipeline.lanes[0].extract.retry"
    assert "unknown key" in str(err)


def test_wrong_type_names_key_path() -> None:
    data = base()
    data["pipeline"]["lanes"][0]["extract"]["retries"] = "many"
    assert error_of(data).key_path == "pipeline.lanes[0].extract.retries"


def test_unknown_module_names_key_path_and_known_modules() -> None:
    data = base()
    data["pipeline"]["lanes"][0]["extract"]["module"] = "dnd.nope"
    err = error_of(data)
    assert err.key_path == "pipeline.lanes[0].extract.module"
    assert "dnd.npcs.extract" in str(err)


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
    resolved = resolve_profile_file(REPO / "configs" / "offline.yaml")
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


def test_the_engine_resolves_llm_profiles_only_through_the_injected_catalog() -> None:
    catalog = LLMProfileCatalog()
    catalog.register_builtin("house", {"model": "openai/house-model"})
    catalog.set_validator(canonical_profile)
    data = base()
    data["pipeline"]["llm_profile"] = "house"
    assert resolve(data, llm_catalog=catalog).llm_profile["model"] == "openai/house-model"
    data["pipeline"]["llm_profile"] = "test-double"  # built in globally, not in this catalog
    err = error_of(data, llm_catalog=catalog)
    assert err.key_path == "pipeline.llm_profile"
    assert str(err) == (
        "profile 'p.yaml': pipeline.llm_profile: unknown LLM profile 'test-double'; "
        "known: ['house']"
    )
    assert "house" not in LLM_PROFILES.builtins()


def test_without_a_registered_validator_resolution_says_so() -> None:
    catalog = LLMProfileCatalog()
    catalog.register_builtin("test-double", {"model": "x/y"})
    with pytest.raises(ResolutionError, match="no LLM profile validator is registered"):
        resolve(base(), llm_catalog=catalog)


def test_a_builtin_llm_profile_cannot_be_registered_twice_with_other_values() -> None:
    catalog = LLMProfileCatalog()
    catalog.register_builtin("a", {"model": "x/y"})
    catalog.register_builtin("a", {"model": "x/y"})  # the same again: a no-op
    with pytest.raises(ValueError, match="'a' registered twice"):
        catalog.register_builtin("a", {"model": "x/z"})


def test_duplicate_lane_ids_are_refused() -> None:
    data = base()
    data["pipeline"]["lanes"].append(data["pipeline"]["lanes"][0])
    assert "appears twice" in str(error_of(data))


def test_lane_selection_keeps_only_selected_and_rejects_unknown() -> None:
    assert resolve(base(), lanes=["npcs"]).lane_ids() == ["npcs"]
    assert "unknown lane" in str(error_of(base(), lanes=["spells"]))


def test_unknown_validator_in_override_is_refused() -> None:
    data = base()
    data["pipeline"]["lanes"][0]["extract"]["validators"] = ["nonsense"]
    assert error_of(data).key_path == "pipeline.lanes[0].extract.validators"


def test_validator_chains_default_and_explicit_empty_override() -> None:
    data = base()
    data["pipeline"]["lanes"][0]["merge"] = {"module": "appendorder", "validators": []}
    lane = resolve(data).lane("npcs")
    assert lane.extract.validators == ("schema", "refs_in_chunk", "support")
    assert lane.extract.validators_source == "default"
    assert lane.merge.validators == () and lane.merge.validators_source == "override"


def test_digest_is_stable_and_changes_with_configuration() -> None:
    assert resolve(base()).digest == resolve(base()).digest
    changed = base()
    changed["pipeline"]["lanes"][0]["extract"]["retries"] = 2
    assert resolve(changed).digest != resolve(base()).digest
    assert resolve(base()).digest.startswith("sha256:")


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("pipeline:\n  id: x\n  lanes: [\n")
    with pytest.raises(ProfileError) as info:
        resolve_profile_file(path)
    assert info.value.profile == "broken.yaml" and info.value.key_path.startswith("line")


def test_shipped_profiles_resolve() -> None:
    for path in sorted((REPO / "configs").glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        if not isinstance(data, dict) or "pipeline" not in data:
            continue
        resolved = resolve_profile_file(path)
        assert resolved.lanes, path.name


def test_unknown_module_option_is_refused_at_resolution_with_its_key_path() -> None:
    data = base()
    data["pipeline"]["lanes"][0]["extract"]["options"] = {"temperatur": 0.2}
    err = error_of(data)
    assert err.key_path == "pipeline.lanes[0].extract.options"
    assert "temperatur" in str(err)


def test_bad_chunker_option_is_refused_at_resolution() -> None:
    data = base()
    data["pipeline"]["chunk"] = {"module": "generic", "options": {"max_units": 0}}
    err = error_of(data)
    assert err.key_path == "pipeline.chunk.options.max_units" and "greater than" in str(err)
