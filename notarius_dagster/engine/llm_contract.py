"""The contract between lane modules and any structured LLM client. The engine depends on
this protocol only; `notarius_dagster.llm` implements it over litellm."""

from __future__ import annotations

from typing import Any, Literal, Protocol

from pydantic import Field

from notarius_dagster.engine.models import Frozen

StructuredRung = Literal["json_schema", "json_object", "reask"]


class StructuredRequest(Frozen):
    """One structured completion. `schema` is the JSON Schema the answer must satisfy.

    The prompt is laid out for providers' prompt caches, which reuse the longest prefix a call
    shares with earlier ones: `system` and `user` are what several lanes send alike for one
    chunk (a lane-independent preamble, then the chunk), `instructions` is the lane's own tail
    (its task, its context), sent after them."""

    system: str
    user: str
    instructions: str = ""
    schema_: dict[str, Any] = Field(alias="schema")
    schema_name: str
    session_id: str | None = None
    lane: str | None = None
    chunk_id: str | None = None

    model_config = Frozen.model_config | {"populate_by_name": True}


class StructuredResponse(Frozen):
    """What came back. `data` is set only when the answer validated against the schema.
    `errors` lists schema-validation problems by JSON path (content-safe, no values).
    `cost_usd` is None when the call could not be priced (never a pretended $0).
    `stepped_down_from` names the rung the provider refused for this request (the ladder then
    answered on the next one), with the provider's content-safe reason."""

    data: dict[str, Any] | None
    rung: StructuredRung
    valid: bool
    errors: tuple[str, ...] = ()
    calls: int = 1
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    cost_usd: float | None = 0.0
    model: str = ""
    stepped_down_from: StructuredRung | None = None
    stepdown_reason: str | None = None


class StructuredClient(Protocol):
    """Anything that answers a structured request (the litellm client, in production)."""

    def complete_structured(self, request: StructuredRequest) -> StructuredResponse: ...
