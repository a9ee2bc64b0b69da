"""The structured-output ladder, without the calls: which rung a request starts on, what the
prompt carries for it, and how an answer is judged.

Rungs, from strongest to weakest guarantee:
- `json_schema`: the provider enforces the schema itself, in the form its family accepts
  (`families.py`: OpenAI strict, Gemini's subset, Anthropic's and Ollama's native modes).
- `json_object`: the provider only promises JSON; the schema travels in the prompt (and, for
  the bundled llama.cpp server, inside `response_format`, which it turns into a grammar).
- `reask`: the first answer failed; the model sees its answer and the validation problems once.

A profile's `structured_output` picks the top rung (`auto`: by provider family); a provider
that refuses a rung's schema or response format steps the lane down one rung (`client.py`).
Answers are never repaired: an answer that fails twice is reported invalid, not patched."""

from __future__ import annotations

import json
from collections.abc import Iterable

from jsonschema import Draft202012Validator, ValidationError
from pydantic import JsonValue

from notarius_dagster.llm.families import FirstRung, ProviderFamily
from notarius_dagster.llm.profiles import LLMProfile

# Enough problems for a model to act on; a longer list only burns context.
MAX_LISTED_ERRORS = 20

LOWER_RUNG: dict[FirstRung, FirstRung | None] = {"json_schema": "json_object", "json_object": None}
"""Where a refused rung steps down to."""


def choose_rung(profile: LLMProfile, family: ProviderFamily) -> FirstRung:
    """The rung a profile starts on: its own choice, or its family's for `auto`."""
    if profile.structured_output != "auto":
        return profile.structured_output
    return family.auto_rung(profile)


def prompt_schema(schema: dict[str, JsonValue]) -> str:
    """The schema as the prompt spells it on `json_object`: compact JSON, and no `enum` of
    integers (the unit ids a chunk may cite): the ids are the transcript's own `[n]` markers,
    already in the prompt, and every answer is validated against the full schema."""
    return json.dumps(_without_int_enums(schema), separators=(",", ":"), ensure_ascii=False)


def _without_int_enums(node: JsonValue) -> JsonValue:
    if isinstance(node, list):
        return [_without_int_enums(item) for item in node]
    if not isinstance(node, dict):
        return node
    int_enum = node.get("type") == "integer" and isinstance(node.get("enum"), list)
    return {k: _without_int_enums(v) for k, v in node.items() if not (int_enum and k == "enum")}


def lane_tail(
    rung: FirstRung, instructions: str, schema: dict[str, JsonValue], *, spell_schema: bool = True
) -> str:
    """The lane's tail of the user message: its instructions and, on `json_object`, the
    schema spelled out (most providers on that rung only promise syntactically valid JSON;
    `spell_schema` is False where the server enforces the schema as a grammar anyway)."""
    parts = [instructions.strip()] if instructions.strip() else []
    if rung == "json_object" and spell_schema:
        parts.append(
            "Answer with exactly one JSON object and nothing else. "
            f"It must satisfy this JSON Schema:\n{prompt_schema(schema)}"
        )
    return "\n\n".join(parts)


def reask_message(errors: Iterable[str]) -> str:
    """The follow-up user message after an invalid answer. It names where and which rule
    failed, never the offending values, so nothing from the answer is echoed back as fact."""
    listing = "\n".join(f"- {error}" for error in errors)
    return (
        "Your previous answer does not satisfy the JSON Schema. Problems (JSON path: rule):\n"
        f"{listing}\n"
        "Answer again with only the corrected JSON object."
    )


class AnswerValidator:
    """A lane schema's validator in two parts, so the compiled part is shared by every chunk:
    `shape` is the schema with its integer `enum`s left out (the unit ids a chunk may cite: the
    only part that differs from chunk to chunk), compiled once per lane schema (client.py:
    `compiled_validator`); `schema` is this chunk's own schema, whose integer enums are checked
    separately by walking the answer along `properties`, `items` and `$ref`. Where a schema puts
    an integer enum anywhere else (under `anyOf`, say), `shape` is the whole schema compiled
    for that chunk and no separate check is made. Problems read as jsonschema's do
    (`$.npcs[0].unit_ids[1]: enum`)."""

    def __init__(
        self, shape: Draft202012Validator, schema: dict[str, JsonValue], *, separate_enums: bool
    ) -> None:
        self.shape = shape
        self.schema = schema
        self.separate_enums = separate_enums

    def problems(self, value: JsonValue) -> list[str]:
        found = [_describe(error) for error in self.shape.iter_errors(value)]
        if self.separate_enums:
            found.extend(_enum_problems(self.schema, self.schema, value, []))
        return found

    def is_valid(self, value: JsonValue) -> bool:
        return not self.problems(value)


def _is_int_enum(node: JsonValue) -> bool:
    return isinstance(node, dict) and node.get("type") == "integer" and "enum" in node


def _enum_problems(
    node: JsonValue, root: dict[str, JsonValue], value: JsonValue, path: list[str | int]
) -> list[str]:
    """`<path>: enum` for every integer in `value` outside the integer enum the schema node
    that governs it allows, following `$ref`, `properties` and `items` only."""
    node = _resolve_ref(node, root)
    if not isinstance(node, dict):
        return []
    if _is_int_enum(node):
        enum = node.get("enum")
        is_int = isinstance(value, int) and not isinstance(value, bool)
        allowed = enum if isinstance(enum, list) else ()
        return [f"{json_path(path)}: enum"] if is_int and value not in allowed else []
    found: list[str] = []
    properties = node.get("properties")
    items = node.get("items")
    if isinstance(value, dict):
        for name, sub in (properties if isinstance(properties, dict) else {}).items():
            if name in value:
                found.extend(_enum_problems(sub, root, value[name], [*path, name]))
    elif isinstance(value, list) and isinstance(items, dict):
        for index, item in enumerate(value):
            found.extend(_enum_problems(items, root, item, [*path, index]))
    return found


def _resolve_ref(node: JsonValue, root: dict[str, JsonValue]) -> JsonValue:
    for _ in range(32):
        ref = node.get("$ref") if isinstance(node, dict) else None
        if not isinstance(ref, str):
            return node
        target: JsonValue = root
        for part in ref.removeprefix("#").strip("/").split("/"):
            target = target.get(part) if isinstance(target, dict) else None
        node = target
    return node


def enums_reachable(schema: dict[str, JsonValue]) -> bool:
    """Whether every integer enum of `schema` sits where `AnswerValidator`'s separate check
    finds it (reached from the root through `$ref`, `properties` and `items` only)."""
    reachable: set[int] = set()
    seen: set[int] = set()

    def walk(node: JsonValue) -> None:
        node = _resolve_ref(node, schema)
        if not isinstance(node, dict) or id(node) in seen:
            return
        seen.add(id(node))
        if _is_int_enum(node):
            reachable.add(id(node))
            return
        properties = node.get("properties")
        for sub in (properties if isinstance(properties, dict) else {}).values():
            walk(sub)
        items = node.get("items")
        if isinstance(items, dict):
            walk(items)

    walk(schema)
    everywhere: set[int] = set()

    def collect(node: JsonValue) -> None:
        if isinstance(node, list):
            for item in node:
                collect(item)
        elif isinstance(node, dict):
            if _is_int_enum(node):
                everywhere.add(id(node))
            for item in node.values():
                collect(item)

    collect(schema)
    return everywhere <= reachable


def check_answer(
    content: str | None,
    validator: Draft202012Validator | AnswerValidator,
    *,
    truncated: bool = False,
) -> tuple[dict[str, JsonValue] | None, tuple[str, ...]]:
    """Parse and validate one answer. Returns the object and no errors, or None and the
    problems as content-safe strings (JSON path and failed keyword, no values)."""
    if content is None or not content.strip():
        return None, ("$: empty answer",)
    try:
        value: JsonValue = json.loads(content)
    except json.JSONDecodeError as exc:
        reason = "answer cut off at max_tokens" if truncated else "not valid JSON"
        return None, (f"$: {reason} (line {exc.lineno}, column {exc.colno})",)
    problems = _schema_problems(validator, value)
    if problems:
        return None, problems
    if not isinstance(value, dict):
        return None, ("$: type (expected object)",)
    return value, ()


def _schema_problems(
    validator: Draft202012Validator | AnswerValidator, value: JsonValue
) -> tuple[str, ...]:
    if isinstance(validator, AnswerValidator):
        found = sorted(set(validator.problems(value)))
    else:
        found = sorted({_describe(error) for error in validator.iter_errors(value)})
    if len(found) > MAX_LISTED_ERRORS:
        extra = len(found) - MAX_LISTED_ERRORS
        found = [*found[:MAX_LISTED_ERRORS], f"... and {extra} more"]
    return tuple(found)


def _describe(error: ValidationError) -> str:
    """`<json path>: <keyword>`, plus what the schema (never the answer) expected for the
    keywords where that makes the re-ask actionable."""
    where = json_path(error.absolute_path)
    keyword = str(error.validator)
    if keyword == "required" and isinstance(error.instance, dict):
        missing = [name for name in error.validator_value or () if name not in error.instance]
        if missing:
            return f"{where}: required ({', '.join(str(name) for name in missing)})"
    if keyword == "type":
        expected = error.validator_value
        shown = " or ".join(expected) if isinstance(expected, list) else str(expected)
        return f"{where}: type (expected {shown})"
    return f"{where}: {keyword}"


def json_path(parts: Iterable[str | int]) -> str:
    """Render a jsonschema path deque as `$.a[0].b` (quoted when a key is not an identifier)."""
    path = "$"
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part.isidentifier():
            path += f".{part}"
        else:
            path += f"[{json.dumps(part, ensure_ascii=False)}]"
    return path
