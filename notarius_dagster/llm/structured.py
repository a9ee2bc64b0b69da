"""The structured-output ladder, without the calls: which rung a profile starts on, what is
sent for it, and how an answer is judged.

Rungs, from strongest to weakest guarantee:
- `json_schema`: the provider enforces the schema itself (litellm says the model supports it).
- `json_object`: the provider only promises JSON; the schema also travels in the system prompt
  and inside `response_format` (llama.cpp's server turns it into a grammar; others ignore it).
- `reask`: the first answer failed; the model sees its answer and the validation problems once.

Answers are never repaired: an answer that fails twice is reported invalid, not patched."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Literal

from jsonschema import Draft202012Validator, ValidationError

from notarius_dagster.llm._litellm import litellm
from notarius_dagster.llm.profiles import LLMProfile

FirstRung = Literal["json_schema", "json_object"]

# Enough problems for a model to act on; a longer list only burns context.
MAX_LISTED_ERRORS = 20


def choose_rung(profile: LLMProfile) -> FirstRung:
    """The rung a profile starts on.

    The bundled llama.cpp server accepts only `text` and `json_object` response formats (it
    answers `json_schema` with HTTP 500), but it does constrain generation with a schema given
    inside `json_object`; so a llama-cpp profile always starts there. Other models start on
    `json_schema` when litellm's model map says they support response schemas."""
    if profile.server == "llama-cpp":
        return "json_object"
    if litellm.supports_response_schema(model=profile.model, custom_llm_provider=None):
        return "json_schema"
    return "json_object"


def response_format_for(
    rung: FirstRung, schema_name: str, schema: dict[str, Any]
) -> dict[str, Any]:
    """The `response_format` request parameter for a rung (the re-ask reuses it unchanged)."""
    if rung == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {"name": schema_name, "schema": schema, "strict": False},
        }
    return {"type": "json_object", "schema": schema}


def system_prompt_for(rung: FirstRung, system: str, schema: dict[str, Any]) -> str:
    """The system prompt sent. On `json_object` the schema is spelled out, because most
    providers on that rung only promise syntactically valid JSON."""
    if rung == "json_schema":
        return system
    rendered = json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False)
    return (
        f"{system.rstrip()}\n\n"
        "Answer with exactly one JSON object and nothing else. "
        f"It must satisfy this JSON Schema:\n{rendered}"
    )


def reask_message(errors: Iterable[str]) -> str:
    """The follow-up user message after an invalid answer. It names where and which rule
    failed, never the offending values, so nothing from the answer is echoed back as fact."""
    listing = "\n".join(f"- {error}" for error in errors)
    return (
        "Your previous answer does not satisfy the JSON Schema. Problems (JSON path: rule):\n"
        f"{listing}\n"
        "Answer again with only the corrected JSON object."
    )


def check_answer(
    content: str | None, validator: Draft202012Validator, *, truncated: bool = False
) -> tuple[dict[str, Any] | None, tuple[str, ...]]:
    """Parse and validate one answer. Returns the object and no errors, or None and the
    problems as content-safe strings (JSON path and failed keyword, no values)."""
    if content is None or not content.strip():
        return None, ("$: empty answer",)
    try:
        value = json.loads(content)
    except json.JSONDecodeError as exc:
        reason = "answer cut off at max_tokens" if truncated else "not valid JSON"
        return None, (f"$: {reason} (line {exc.lineno}, column {exc.colno})",)
    problems = _schema_problems(validator, value)
    if problems:
        return None, problems
    if not isinstance(value, dict):
        return None, ("$: type (expected object)",)
    return value, ()


def _schema_problems(validator: Draft202012Validator, value: Any) -> tuple[str, ...]:
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
