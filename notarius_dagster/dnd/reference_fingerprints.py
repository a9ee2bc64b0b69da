"""What of a reference a D&D extraction consumes, as a fingerprint (the lane runner mixes it
into each chunk's checkpoint fingerprint instead of the reference's whole digest):

- the `npcs` artifact, for grounding and the known-names prompt context: each NPC's id, name
  and aliases, in artifact order (not descriptions, not source references), so a changed
  description asks no consumer chunk again;
- the scene artifact, for the combat gate: only the records whose id is the chunk's, with
  their id, source id, unit range and kind (not titles or summaries), so a changed scene
  asks again only the chunks whose own record changed."""

from __future__ import annotations

import threading

from notarius_dagster.dnd.npcs.model import Npc
from notarius_dagster.dnd.scene_descriptions.model import SceneDescription
from notarius_dagster.engine.contracts import PreparedReference
from notarius_dagster.engine.digest import digest_of
from notarius_dagster.engine.models import Chunk

NPCS_SLOT = "npcs"  # grounding.NPCS_SLOT (grounding imports llm_extract, which imports this)
NPC_KIND = "dnd/npc-list"
SCENE_KIND = "dnd/scene-description-list"
SCENE_FIELDS = ("scene_id", "source_id", "start_unit_id", "end_unit_id", "kind")

_npc_cache: dict[str, str] = {}
_npc_lock = threading.Lock()


def npcs_of(reference: PreparedReference | None) -> list[Npc]:
    """The NPC records of a bound `npcs` reference, typed (none without one)."""
    records = reference.records if reference is not None else ()
    return [npc for npc in records if isinstance(npc, Npc)]


def npc_names_fingerprint(reference: PreparedReference) -> str:
    """Digest of the NPCs' ids, names and aliases in order (cached by the reference's digest:
    every chunk of a lane asks for the same one)."""
    with _npc_lock:
        held = _npc_cache.get(reference.digest)
    if held is not None:
        return held
    value = digest_of(
        [{"id": n.id, "name": n.name, "aliases": list(n.aliases)} for n in npcs_of(reference)]
    )
    with _npc_lock:
        if len(_npc_cache) > 256:
            _npc_cache.clear()
        _npc_cache[reference.digest] = value
    return value


def scene_record_fingerprint(reference: PreparedReference, chunk: Chunk) -> str:
    """Digest of the chunk's own scene records (those with its id: the gate reads nothing
    else), each reduced to the fields the gate compares."""
    records = [
        {field: getattr(record, field) for field in SCENE_FIELDS}
        for record in reference.records
        if isinstance(record, SceneDescription) and record.scene_id == chunk.chunk_id
    ]
    return digest_of({"artifact": reference.kind, "records": records})


def consumed_fingerprint(slot: str, reference: PreparedReference, chunk: Chunk) -> str:
    """The default of the D&D LLM extractors: the NPC projection for the `npcs` artifact, the
    whole digest for anything else (a file's text may go into a prompt whole)."""
    if slot == NPCS_SLOT and reference.kind == NPC_KIND and reference.artifact is not None:
        return npc_names_fingerprint(reference)
    return reference.digest
