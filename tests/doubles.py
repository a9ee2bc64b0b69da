"""Deterministic model-output doubles for the lanes: answers computed from the prompt the
real client sent (through litellm's real call path into the in-process test double)."""

from __future__ import annotations

import json
import re
from typing import Any

UNIT_LINE = re.compile(r"^\[(-?\d+)\] (?:([^:\n]{1,40}): )?(.*)$", re.MULTILINE)


def units_in(messages: list[dict[str, Any]]) -> list[tuple[int, str, str]]:
    user = next(m["content"] for m in reversed(messages) if m["role"] == "user")
    return [(int(u), s or "", t) for u, s, t in UNIT_LINE.findall(user)]


def system_of(messages: list[dict[str, Any]]) -> str:
    """The lane's own instructions: what follows the chunk in the first user message (the
    system message is the preamble every lane shares; docs/lanes.md, "Prompts")."""
    user = next((m["content"] for m in messages if m["role"] == "user"), "")
    if isinstance(user, list):  # content blocks (Anthropic's cache marker)
        user = "\n\n".join(str(block.get("text", "")) for block in user)
    return user.split("\n\n", 1)[1] if "\n\n" in user else ""


def npc_answer(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Every capitalised word after 'Gustav' style NPC names in the chunk: deterministic."""
    found: dict[str, list[int]] = {}
    for unit_id, _speaker, text in units_in(messages):
        for name in ("Gustav", "Ornna", "Yasha", "Nitar", "Mozzie"):
            if name in text:
                found.setdefault(name, []).append(unit_id)
    return {
        "npcs": [
            {"name": n, "aliases": [], "description": f"{n} appears here", "unit_ids": ids[:5]}
            for n, ids in found.items()
        ]
    }


def lane_responder(messages: list[dict[str, Any]], response_format: Any) -> str:
    """Answers by lane, recognised from the system prompt."""
    system = system_of(messages)
    if "non-player characters" in system:
        return json.dumps(npc_answer(messages))
    raise AssertionError("the double got a prompt it has no answer for")
