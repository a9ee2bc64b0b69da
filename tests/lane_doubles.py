"""Deterministic model-output doubles for every D&D lane (a test double, not a model).

`complete_responder(messages, response_format)` answers any lane's prompt: it recognises the
lane by a phrase of the prompt's system text and computes the answer from the `[id] Speaker:
text` lines of the user message with fixed keyword rules, so the same prompt always gets the
same answer. Use it with `tests.llm_double.scripted_llm` (litellm's real call
path), or through `RecordingClient`, the unit-test boundary for `run_lane`: a structured
client that counts calls and records every request it received."""

from __future__ import annotations

import dataclasses
import json
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from notarius_dagster import modules
from notarius_dagster.engine.contracts import ExtractRequest
from notarius_dagster.engine.lane_runner import LaneResult, run_lane
from notarius_dagster.engine.llm_contract import LLMUsage, StructuredRequest, StructuredResponse
from notarius_dagster.engine.models import Chunk, SourceDocument
from notarius_dagster.engine.references import prepare_lane_references
from notarius_dagster.engine.resolution import (
    ResolvedLane,
    ResolvedPipeline,
    resolve_profile_file,
)
from notarius_dagster.modules import registry
from tests.doubles import npc_answer, system_of, units_in

Messages = list[dict[str, Any]]

NPC_NAMES = ("Gustav", "Ornna", "Yasha", "Nitar", "Mozzie", "Toya", "Kylre", "Sea Hag")
COMBAT_CUE = re.compile(r"\b(initiative|attacks?|damage|hits?|miss(?:es)?)\b", re.IGNORECASE)
META_CUE = re.compile(r"\b(break|welcome back|sponsor|announcements?)\b", re.IGNORECASE)
RECAP_CUE = re.compile(r"\b(last we left|previously)\b", re.IGNORECASE)
DAMAGE = re.compile(r"\b(\d+d\d+|\d+)\s+(?:\w+\s+)?damage\b", re.IGNORECASE)
CAST = re.compile(r"\bcast(?:s|ing)?\s+([A-Z][\w']*(?:\s+(?:of\s+|the\s+)?[A-Z][\w']*)*)")
LEVEL = re.compile(r"\b([1-9])(?:st|nd|rd|th)[- ]level\b", re.IGNORECASE)
ITEM_VERBS = {
    "give": "given",
    "gives": "given",
    "hand": "given",
    "hands": "given",
    "buy": "bought",
    "buys": "bought",
    "sell": "sold",
    "sells": "sold",
    "lose": "lost",
    "loses": "lost",
    "drop": "lost",
    "drops": "lost",
    "pull out": "used",
    "pulls out": "used",
    "take": "acquired",
    "takes": "acquired",
    "find": "acquired",
    "finds": "acquired",
}
ITEM = re.compile(
    r"\b("
    + "|".join(sorted(ITEM_VERBS, key=len, reverse=True))
    + r")\s+(?:(?:him|her|them|you|me|[A-Z][a-z]+)\s+)?(?:(a|an|the|some|\d+)\s+)?"
    r"([a-z][\w-]*(?:\s+(?:gold|silver|copper)\s+pieces?)?)"
)
MONEY = re.compile(
    r"\b(\d+|five|ten|two|three)\s+(gold|silver|copper)(?:\s+pieces?)?\b", re.IGNORECASE
)
KNOWN_NPCS = re.compile(r"^Known NPCs: (.*)$", re.MULTILINE)


def _user(messages: Messages) -> str:
    return next(m["content"] for m in reversed(messages) if m["role"] == "user")


def _npc_in(text: str, names: tuple[str, ...] = NPC_NAMES) -> str | None:
    """The name that occurs first in `text` (None: no name occurs)."""
    found = [(text.casefold().find(n.casefold()), n) for n in names]
    hits = sorted((at, n) for at, n in found if at >= 0)
    return hits[0][1] if hits else None


def scene_answer(messages: Messages) -> dict[str, Any]:
    """combat if any line has a combat cue (mixed-scene precedence), else meta, recap,
    narrative by cue; title and summary say only ids and counts."""
    units = units_in(messages)
    texts = [t for _, _, t in units]
    if any(COMBAT_CUE.search(t) for t in texts):
        kind = "combat"
    elif any(META_CUE.search(t) for t in texts):
        kind = "meta"
    elif any(RECAP_CUE.search(t) for t in texts):
        kind = "recap"
    else:
        kind = "narrative"
    first = units[0][0] if units else 0
    return {
        "kind": kind,
        "title": f"Scene at unit {first}",
        "summary": f"A {kind} scene of {len(units)} lines.",
    }


def combat_answer(messages: Messages) -> dict[str, Any]:
    """One turn per line with a combat cue: the actor is a named NPC opening the line, else
    the speaker."""
    turns = []
    for unit_id, speaker, text in units_in(messages):
        if not COMBAT_CUE.search(text):
            continue
        npc = _npc_in(text[:40])
        damage = DAMAGE.search(text)
        cast = CAST.search(text)
        hit = (
            True
            if re.search(r"\bhits?\b", text, re.IGNORECASE)
            else (False if re.search(r"\bmiss", text, re.IGNORECASE) else None)
        )
        turns.append(
            {
                "round": None,
                "actor": npc or speaker or "unknown",
                "action": f"casts {cast.group(1)}" if cast else "attack",
                "targets": [],
                "outcome": {
                    "hit": hit,
                    "damage": damage.group(0) if damage else None,
                    "effect": None,
                },
                "unit_ids": [unit_id],
            }
        )
    return {"combat_turns": turns}


def spell_answer(messages: Messages) -> dict[str, Any]:
    """One casting per `cast <Capitalised Name>` phrase; the caster is the speaker."""
    spells = []
    for unit_id, speaker, text in units_in(messages):
        for match in CAST.finditer(text):
            level = LEVEL.search(text)
            spells.append(
                {
                    "caster": _npc_in(text[:40]) or speaker or "unknown",
                    "spell": match.group(1),
                    "level": int(level.group(1)) if level else None,
                    "targets": [],
                    "outcome": None,
                    "unit_ids": [unit_id],
                }
            )
    return {"spells": spells}


def item_answer(messages: Messages) -> dict[str, Any]:
    """Money amounts are `acquired` by the speaker; verbs like gives/buys/drops make events of
    the next word; a named NPC in the line is the other party."""
    events = []
    for unit_id, speaker, text in units_in(messages):
        npc = _npc_in(text)
        for money in MONEY.finditer(text):
            amount = money.group(1)
            events.append(
                {
                    "item": f"{money.group(2).lower()} pieces",
                    "event": "acquired",
                    "from": npc,
                    "to": speaker or None,
                    "quantity": int(amount) if amount.isdigit() else None,
                    "unit_ids": [unit_id],
                }
            )
        for match in ITEM.finditer(text):
            event = ITEM_VERBS[match.group(1)]
            outgoing = event in ("given", "sold")
            giver = (speaker or None) if outgoing else npc
            taker = npc if outgoing else (speaker or None)
            events.append(
                {
                    "item": match.group(3),
                    "event": event,
                    "from": giver,
                    "to": taker,
                    "quantity": None,
                    "unit_ids": [unit_id],
                }
            )
    return {"item_events": events}


def interaction_answer(messages: Messages) -> dict[str, Any]:
    """One `talk` interaction per NPC named in the excerpt (known NPCs from the prompt, else
    the fixed list), citing up to five lines, with the speakers of those lines."""
    known = KNOWN_NPCS.search(_user(messages))
    names = tuple(n.strip() for n in known.group(1).split(";")) if known else ()
    names = tuple(n for n in names if n and n != "(none known)") or NPC_NAMES
    found: dict[str, list[tuple[int, str]]] = {}
    for unit_id, speaker, text in units_in(messages):
        npc = _npc_in(text, names)
        if npc:
            found.setdefault(npc, []).append((unit_id, speaker))
    return {
        "npc_interactions": [
            {
                "npc": npc,
                "participants": sorted({s for _, s in lines if s} - {"MATT", "DM"}),
                "kind": "talk",
                "summary": f"The party deals with {npc}.",
                "unit_ids": [u for u, _ in lines[:5]],
            }
            for npc, lines in found.items()
        ]
    }


ANSWERS: tuple[tuple[str, Callable[[Messages], dict[str, Any]]], ...] = (
    ("You extract non-player characters", npc_answer),
    ("You classify one scene", scene_answer),
    ("You extract combat turns", combat_answer),
    ("You extract spells cast", spell_answer),
    ("You extract item events", item_answer),
    ("You extract NPC interactions", interaction_answer),
)


def complete_responder(messages: Messages, response_format: Any) -> str:
    """Answers every lane's prompt, recognised by the opening phrase of its system text."""
    system = system_of(messages)
    for phrase, answer in ANSWERS:
        if system.startswith(phrase):
            return json.dumps(answer(messages))
    raise AssertionError("the lane double got a prompt it has no answer for")


class RecordingClient:
    """A structured client over a responder: counts calls, records every request, and
    answers as a schema-valid `json_schema` response."""

    def __init__(self, responder: Callable[[Messages, Any], str] = complete_responder) -> None:
        self.responder = responder
        self.requests: list[StructuredRequest] = []
        self._lock = threading.Lock()

    @property
    def calls(self) -> int:
        return len(self.requests)

    def complete_structured(self, request: StructuredRequest) -> StructuredResponse:
        with self._lock:
            self.requests.append(request)
        messages = [
            {"role": "system", "content": request.system},
            {"role": "user", "content": f"{request.user}\n\n{request.instructions}"},
        ]
        data = json.loads(self.responder(messages, request.schema_))
        return StructuredResponse(
            data=data,
            rung="json_schema",
            valid=True,
            usage=LLMUsage.of_call(
                prompt_tokens=len(request.user) // 4, completion_tokens=10, cost_usd=0.0
            ).answered("json_schema", None),
        )


# ---- fixtures for running one lane through the real runner (engine/lane_runner.py) ----

REPO = Path(__file__).resolve().parent.parent
COMPLETE_PROFILE = REPO / "configs" / "dnd-complete.yaml"
MINIMAL_PROFILE = REPO / "configs" / "dnd-minimal.yaml"


def complete_pipeline(**kwargs: Any) -> ResolvedPipeline:
    """The maintained complete profile, resolved on the test-double LLM profile."""
    return resolve_profile_file(
        COMPLETE_PROFILE, llm_profile="test-double", registry=registry(), **kwargs
    )


def run_one_lane(
    lane: ResolvedLane,
    document: SourceDocument,
    chunks: Sequence[Chunk],
    payloads: Mapping[str, Mapping[str, Any] | None] | None = None,
    client: RecordingClient | None = None,
    **kwargs: Any,
) -> LaneResult:
    """Prepare the lane's references from upstream lane payloads (the real handoff
    boundary), then run it with the recording client."""
    lanes = kwargs.pop("registry", None) or registry()
    references, _, _ = prepare_lane_references(lane.stages(), payloads or {}, lanes.kinds())
    return run_lane(
        lane,
        document=document,
        chunks=chunks,
        references=references,
        client=client if client is not None else RecordingClient(),
        session_id=document.source_id,
        llm_fingerprint="test-double",
        registry=lanes,
        **kwargs,
    )


def use_prompt(monkeypatch: pytest.MonkeyPatch, kind: str, prompt: Path) -> None:
    """For one test, the lane of `kind` reads `prompt` instead of its prompt.md, as if the file
    had been edited: every registry built from then on (code versions, runs) has that lane."""
    base = registry()
    spec = base.lane_of_kind(kind)
    assert spec is not None, kind
    edited = base.with_lanes(dataclasses.replace(spec, prompt=prompt))
    monkeypatch.setattr(modules, "_dnd_registry", lambda: edited)


def answer_payload(
    module_key: str, answer: dict[str, Any], request: ExtractRequest
) -> tuple[dict[str, Any], list[Any]]:
    """What a lane's extractor (built from its spec, as the runner does) makes of a
    validated answer: the payload and warnings, without an LLM call (behind a gate: the
    extractor the gate lets through)."""
    spec = next(lane for lane in registry().lanes if lane.module_key("extract") == module_key)
    extractor = spec.extractor()
    inner = getattr(extractor, "inner", extractor)
    payload, warnings = inner.payload(answer, request)
    return payload, list(warnings)


def scene_artifact(
    chunks: Sequence[Chunk],
    kinds: Mapping[str, str] | str,
    title: str = "A scene",
    summary: str = "Something happens.",
) -> dict[str, Any]:
    """A valid scene-description artifact with one exact record per chunk (kind per chunk id,
    or one kind for all)."""
    records = []
    for chunk in chunks:
        kind = kinds if isinstance(kinds, str) else kinds.get(chunk.chunk_id)
        if kind is None:
            continue
        records.append(
            {
                "scene_id": chunk.chunk_id,
                "source_id": chunk.source_id,
                "start_unit_id": chunk.start_unit_id,
                "end_unit_id": chunk.end_unit_id,
                "kind": kind,
                "title": title,
                "summary": summary,
                "source_ref": chunk.source_ref().model_dump(),
            }
        )
    source_id = chunks[0].source_id if chunks else "s1"
    return {
        "kind": "dnd/scene-description-list",
        "schema_version": "v1",
        "source_id": source_id,
        "scene_descriptions": records,
    }


def npc_artifact(
    source_id: str, npcs: Sequence[tuple[str, str, Sequence[str]]] = (), cite: int = 0
) -> dict[str, Any]:
    """A valid, normalized NPC artifact from (id, name, aliases) triples."""
    ref = {"source_id": source_id, "start_unit_id": cite, "end_unit_id": cite}
    return {
        "kind": "dnd/npc-list",
        "schema_version": "v1",
        "source_id": source_id,
        "npcs": [
            {
                "id": npc_id,
                "name": name,
                "aliases": list(aliases),
                "description": "",
                "source_refs": [ref],
            }
            for npc_id, name, aliases in npcs
        ],
    }


def write_lane_folder(folder: Path, *, lane_py: str, model_py: str, prompt: str) -> Path:
    """A lane folder outside the package, as a person adds one (docs/lanes.md): `lane.py`
    declaring `LANE`, `model.py` with its record model (both dedented) and `prompt.md`."""
    import textwrap

    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text('"""A lane folder outside the package."""\n')
    (folder / "lane.py").write_text(textwrap.dedent(lane_py))
    (folder / "model.py").write_text(textwrap.dedent(model_py))
    (folder / "prompt.md").write_text(prompt)
    return folder
