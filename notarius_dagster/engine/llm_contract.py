"""The contract between lane modules and any structured LLM client. The engine depends on
this protocol only; `notarius_dagster.llm` implements it over litellm."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal, Protocol

from pydantic import Field

from notarius_dagster.engine.models import Frozen

StructuredRung = Literal["json_schema", "json_object", "reask"]


class LLMUsage(Frozen):
    """LLM accounting, the one usage type from the client to the manifest and the UI: one
    call (`of_call`), one structured request (`StructuredResponse.usage`), one module output,
    a lane (`LaneStats.usage`), a bundle or one run's share of it (`LLMUsage.total`). The
    manifest publishes it as `artifact_lanes[].llm` and `totals` (`engine/manifest.py`).

    `cost_usd` sums the calls that were priced; `unpriced_calls` counts those that could not be
    (a model missing from litellm's price map with no price in its profile), so a total is
    never shown as complete when it is not. `stepdowns` counts, by the rung refused, the
    requests the provider made step down the structured-output ladder."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    cost_usd: float = 0.0
    unpriced_calls: int = 0
    rungs: dict[str, int] = Field(default_factory=dict)
    stepdowns: dict[str, int] = Field(default_factory=dict)

    @classmethod
    def of_call(
        cls,
        *,
        prompt_tokens: int,
        completion_tokens: int,
        cached_prompt_tokens: int = 0,
        cost_usd: float | None,
    ) -> LLMUsage:
        """One completion call; `cost_usd` None when it could not be priced."""
        return cls(
            calls=1,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cached_prompt_tokens=cached_prompt_tokens,
            cost_usd=cost_usd or 0.0,
            unpriced_calls=0 if cost_usd is not None else 1,
        )

    def answered(self, rung: str, stepped_down_from: str | None) -> LLMUsage:
        """These calls as one structured request answered on `rung` (recorded once), after
        the provider refused `stepped_down_from` (if any)."""
        return self.model_copy(
            update={
                "rungs": {rung: 1},
                "stepdowns": {stepped_down_from: 1} if stepped_down_from else {},
            }
        )

    @classmethod
    def total(cls, usages: Iterable[LLMUsage]) -> LLMUsage:
        """The sum of `usages` (zero for none)."""
        total = cls()
        for usage in usages:
            total = total + usage
        return total

    @property
    def priced_cost_usd(self) -> float | None:
        """The cost as published: None when any call was unpriced."""
        return None if self.unpriced_calls else self.cost_usd

    def __add__(self, other: LLMUsage) -> LLMUsage:
        return LLMUsage(
            calls=self.calls + other.calls,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cached_prompt_tokens=self.cached_prompt_tokens + other.cached_prompt_tokens,
            cost_usd=round(self.cost_usd + other.cost_usd, 8),
            unpriced_calls=self.unpriced_calls + other.unpriced_calls,
            rungs=_summed(self.rungs, other.rungs),
            stepdowns=_summed(self.stepdowns, other.stepdowns),
        )


def _summed(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    total = dict(a)
    for key, count in b.items():
        total[key] = total.get(key, 0) + count
    return total


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
    `usage` counts every call the request made (a re-ask is a second one), its rung and any
    step-down; a call that could not be priced is counted in `unpriced_calls`, never as $0.
    `stepped_down_from` names the rung the provider refused for this request (the ladder then
    answered on the next one), with the provider's content-safe reason."""

    data: Mapping[str, object] | None
    rung: StructuredRung
    valid: bool
    errors: tuple[str, ...] = ()
    usage: LLMUsage = Field(default_factory=LLMUsage)
    model: str = ""
    stepped_down_from: StructuredRung | None = None
    stepdown_reason: str | None = None


class StructuredClient(Protocol):
    """Anything that answers a structured request (the litellm client, in production)."""

    def complete_structured(self, request: StructuredRequest) -> StructuredResponse: ...
