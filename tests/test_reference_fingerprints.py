"""Fine-grained reference fingerprints: a consumer chunk's checkpoint fingerprint covers only
what its extraction consumes of a reference, so an unrelated upstream edit asks the model
nothing again. Grounding consumes the NPCs' ids, names and aliases; the combat gate consumes
the chunk's own scene record (id, source id, range, kind)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from notarius_dagster.engine.checkpoints import FileCheckpointStore
from notarius_dagster.engine.chunking import make_chunk
from notarius_dagster.engine.models import Chunk, SourceDocument
from tests.conftest import make_document
from tests.lane_doubles import (
    RecordingClient,
    complete_pipeline,
    npc_artifact,
    run_one_lane,
    scene_artifact,
)

CONSUMERS = ("combat-turns", "spells", "item-events", "npc-interactions")
TEXTS = [f"Gustav talks to Fjord about the road, line {i}." for i in range(6)] + [
    "Gustav attacks Fjord with a dagger and hits.",
    "That is 7 piercing damage.",
    "Fjord casts a spell on Gustav.",
    "Beau picks up a sword.",
    "Beau attacks Gustav and hits for 9 bludgeoning damage.",
    "Gustav falls back.",
]


@pytest.fixture
def doc() -> SourceDocument:
    return make_document(list(range(100, 112)), texts=TEXTS)


@pytest.fixture
def chunks(doc: SourceDocument) -> list[Chunk]:
    return [make_chunk(doc, 0, doc.units[:6]), make_chunk(doc, 1, doc.units[6:])]


def npcs(description: str = "", name: str = "Gustav") -> dict[str, Any]:
    artifact = npc_artifact(
        "s1", [("npc-gustav", name, ["the carnival master"]), ("npc-fjord", "Fjord", [])], cite=100
    )
    artifact["npcs"][0]["description"] = description
    return artifact


def run(
    lane_id: str,
    doc: SourceDocument,
    chunks: list[Chunk],
    payloads: dict[str, Any],
    store: FileCheckpointStore,
) -> tuple[Any, RecordingClient]:
    client = RecordingClient()
    result = run_one_lane(
        complete_pipeline().lane(lane_id), doc, chunks, payloads, client=client, checkpoints=store
    )
    return result, client


@pytest.mark.parametrize("lane_id", CONSUMERS)
def test_an_npc_description_change_asks_no_consumer_chunk_again(
    tmp_path: Path, doc: SourceDocument, chunks: list[Chunk], lane_id: str
) -> None:
    store = FileCheckpointStore(tmp_path / "checkpoints")
    scenes = scene_artifact(chunks, "combat")
    first, client = run(
        lane_id, doc, chunks, {"npcs": npcs("first"), "scene-descriptions": scenes}, store
    )
    assert client.calls == 2 and first.stats.called_model == 2
    edited = {"npcs": npcs("a quite different description"), "scene-descriptions": scenes}
    again, client = run(lane_id, doc, chunks, edited, store)
    assert client.calls == 0
    assert set(again.chunk_status.values()) == {"reused"}
    assert again.payload == first.payload


@pytest.mark.parametrize("lane_id", CONSUMERS)
def test_an_npc_name_change_asks_every_consumer_chunk_again(
    tmp_path: Path, doc: SourceDocument, chunks: list[Chunk], lane_id: str
) -> None:
    store = FileCheckpointStore(tmp_path / "checkpoints")
    scenes = scene_artifact(chunks, "combat")
    run(lane_id, doc, chunks, {"npcs": npcs(), "scene-descriptions": scenes}, store)
    renamed = {"npcs": npcs(name="Gustav the Great"), "scene-descriptions": scenes}
    _, client = run(lane_id, doc, chunks, renamed, store)
    assert client.calls == 2


def test_one_scene_kind_change_asks_only_that_chunk_of_combat_again(
    tmp_path: Path, doc: SourceDocument, chunks: list[Chunk]
) -> None:
    store = FileCheckpointStore(tmp_path / "checkpoints")
    before = scene_artifact(chunks, "combat")
    run("combat-turns", doc, chunks, {"npcs": npcs(), "scene-descriptions": before}, store)
    after = scene_artifact(chunks, {"chunk-0000": "narrative", "chunk-0001": "combat"})
    changed, client = run(
        "combat-turns", doc, chunks, {"npcs": npcs(), "scene-descriptions": after}, store
    )
    assert changed.chunk_status == {"chunk-0000": "skipped", "chunk-0001": "reused"}
    assert client.calls == 0  # the changed chunk is now gated out; the other one is reused
    retitled = scene_artifact(
        chunks,
        {"chunk-0000": "narrative", "chunk-0001": "combat"},
        title="Another title",
        summary="Another summary.",
    )
    again, client = run(
        "combat-turns", doc, chunks, {"npcs": npcs(), "scene-descriptions": retitled}, store
    )
    assert client.calls == 0 and set(again.chunk_status.values()) == {"reused"}
    back = scene_artifact(chunks, "combat")
    _, client = run(
        "combat-turns", doc, chunks, {"npcs": npcs(), "scene-descriptions": back}, store
    )
    assert client.calls == 0  # both records are as in the first run: all reused
    fought = scene_artifact(chunks, {"chunk-0000": "combat", "chunk-0001": "narrative"})
    third, client = run(
        "combat-turns", doc, chunks, {"npcs": npcs(), "scene-descriptions": fought}, store
    )
    assert third.chunk_status == {"chunk-0000": "reused", "chunk-0001": "skipped"}


def test_a_rejected_extraction_is_reused_unless_retried(
    tmp_path: Path, doc: SourceDocument, chunks: list[Chunk]
) -> None:
    from notarius_dagster.engine.checkpoints import RetryRejections

    store = FileCheckpointStore(tmp_path / "checkpoints")
    lane = complete_pipeline().lane("spells")
    bad = RecordingClient(
        lambda messages, schema: '{"spells": [{"caster": "x", "spell": "y", "unit_ids": [99999]}]}'
    )
    first = run_one_lane(lane, doc, chunks, {"npcs": npcs()}, client=bad, checkpoints=store)
    assert first.stats.rejected == 2 and bad.calls > 0
    counting = RecordingClient(bad.responder)
    again = run_one_lane(lane, doc, chunks, {"npcs": npcs()}, client=counting, checkpoints=store)
    assert counting.calls == 0
    assert [r.chunk_id for r in again.rejections] == [r.chunk_id for r in first.rejections]
    assert (again.stats.rejected, again.stats.called_model, again.stats.reused) == (2, 0, 2)
    retried = run_one_lane(
        lane, doc, chunks, {"npcs": npcs()}, client=counting, checkpoints=RetryRejections(store)
    )
    assert counting.calls > 0 and retried.stats.rejected == 2
