"""Pipeline profiles: strict parsing, errors naming the profile and key path, defaults,
lane selection, capability checks and a stable digest."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from notarius_dagster.engine.config import parse_profile
from notarius_dagster.engine.errors import ProfileError
from notarius_dagster.engine.resolution import resolve_pipeline, resolve_profile_file

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
    assert lane.extract.validators == ("schema", "refs_in_chunk")
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
