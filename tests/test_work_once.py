"""Work done once per process: the client compiles each answer schema's validator once (and
still refuses an invalid schema every time), `schema_problems` compiles one validator per
artifact kind, and the IO manager loads the source document once per file version."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from dagster import AssetKey, build_input_context, build_output_context

from notarius_dagster.engine.models import SourceDocument
from notarius_dagster.llm.client import compiled_validator
from notarius_dagster.modules import registry
from resources.io_managers import JsonAssetIOManager
from tests.conftest import make_document

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"n": {"type": "integer"}},
    "required": ["n"],
}


def test_the_client_compiles_a_schema_once_and_refuses_a_bad_one_every_time() -> None:
    first = compiled_validator(SCHEMA)
    assert compiled_validator(dict(SCHEMA)).shape is first.shape
    assert first.is_valid({"n": 1}) and not first.is_valid({"n": "x"})
    for _ in range(2):
        with pytest.raises(jsonschema.SchemaError):
            compiled_validator({"type": "no-such-type"})


def test_schema_problems_compiles_one_validator_per_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    from notarius_dagster.engine import validators

    kind = registry().kind("dnd/npc-list")
    validators._schema_validator.cache_clear()
    payload = {"kind": "dnd/npc-list", "schema_version": "v1", "source_id": "s", "npcs": []}
    for _ in range(3):
        assert validators.schema_problems(kind, payload) == []
    info = validators._schema_validator.cache_info()
    assert (info.misses, info.hits) == (1, 2)


def test_the_source_document_is_loaded_once_per_file_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = JsonAssetIOManager(root=str(tmp_path))
    key = AssetKey("source_document")
    document = make_document([1, 2, 3])
    manager.handle_output(build_output_context(asset_key=key, partition_key="s1"), document)
    reads: list[str] = []
    read_text = Path.read_text

    def counting(path: Path, *args: Any, **kwargs: Any) -> str:
        reads.append(path.name)
        return read_text(path, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", counting)
    from resources.io_managers import VALUE_CACHE

    VALUE_CACHE.clear()  # as in a fresh process
    loaded = [
        manager.load_input(build_input_context(asset_key=key, partition_key="s1")) for _ in range(3)
    ]
    assert reads == ["source_document.json"]
    assert all(isinstance(v, SourceDocument) and v == document for v in loaded)
    stored = next(tmp_path.rglob("source_document.json"))
    os.utime(stored, ns=(1, 1))  # rewritten by another process: read again
    manager.load_input(build_input_context(asset_key=key, partition_key="s1"))
    assert reads == ["source_document.json", "source_document.json"]


def _chunk_schema(unit_ids: list[int]) -> dict[str, Any]:
    """A lane's answer schema as a chunk sends it: citations limited to the chunk's unit ids
    (dnd/llm_extract.py: constrain_citations), under `$defs` as pydantic writes it."""
    from notarius_dagster.dnd.llm_extract import constrain_citations

    base = {
        "$defs": {
            "Item": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "unit_ids": {"type": "array", "items": {"type": "integer"}, "minItems": 1},
                },
                "required": ["name", "unit_ids"],
            }
        },
        "type": "object",
        "properties": {"npcs": {"type": "array", "items": {"$ref": "#/$defs/Item"}}},
        "required": ["npcs"],
    }
    return constrain_citations(base, unit_ids)


def test_chunks_share_one_compiled_validator_and_each_refuses_another_chunks_unit_ids() -> None:
    """The compiled part is shared by every chunk of a lane (the cache hits although each
    chunk's schema carries its own unit-id enum), and the enum is still checked: an answer
    citing a unit outside its chunk is refused with the path of the citation."""
    first, second = (
        compiled_validator(_chunk_schema([1, 2])),
        compiled_validator(_chunk_schema([7, 8])),
    )
    assert first.shape is second.shape
    answer = {"npcs": [{"name": "Yussa", "unit_ids": [1, 7]}]}
    assert first.problems(answer) == ["$.npcs[0].unit_ids[1]: enum"]
    assert second.problems(answer) == ["$.npcs[0].unit_ids[0]: enum"]
    assert first.is_valid({"npcs": [{"name": "Yussa", "unit_ids": [2]}]})
    assert not first.is_valid({"npcs": [{"name": "Yussa", "unit_ids": ["1"]}]})  # the shape


def test_an_enum_the_separate_check_cannot_reach_is_checked_with_the_whole_schema() -> None:
    schema = {
        "type": "object",
        "properties": {"at": {"anyOf": [{"type": "integer", "enum": [3]}, {"type": "null"}]}},
    }
    validator = compiled_validator(schema)
    assert not validator.separate_enums
    assert validator.is_valid({"at": 3}) and validator.is_valid({"at": None})
    assert not validator.is_valid({"at": 4})
