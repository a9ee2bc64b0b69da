"""The bounds on what one run may read and spend, in one place the CLI, the inbox sensor and
the assets share (docs/operations.md, "Limits and guarantees").

`InputLimits` bounds a transcript (bytes, units, characters per unit); `Budget` bounds a run's
model calls and prompt tokens, estimated after chunking and before the first lane. A profile
may override both (`pipeline.limits`, `pipeline.budget`); `notarius run --max-calls` overrides
the call budget for one run. The other bounds are fixed: a profile file is read only up to
`MAX_PROFILE_BYTES` (it cannot raise its own limit), and unit ids must fit a signed 64-bit
integer (what every JSON consumer and database can hold). Refusals name what and where (file,
line, key), never content."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from notarius_dagster.engine.errors import NotariusError

MAX_PROFILE_BYTES = 256 * 1024
"""A profile is a page of YAML; anything bigger is a mistake (or an attack on the parser)."""

UNIT_ID_MIN = -(2**63)
UNIT_ID_MAX = 2**63 - 1
"""Unit ids are published as JSON numbers: beyond signed 64 bits many readers lose precision."""

PROMPT_OVERHEAD_CHARS = 2_000
"""Characters a lane's prompt adds to each chunk's text (instructions, answer schema,
references), for the estimate only: the shipped prompts are about 1,000 characters."""

CHARS_PER_TOKEN = 4
"""The usual rule of thumb for English text; the estimate says it is one."""


class BudgetError(NotariusError):
    """The run's estimated model calls or prompt tokens exceed its budget."""


class _Bounds(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class InputLimits(_Bounds):
    """What one transcript may hold. Defaults fit a long session with room to spare: a 3-hour
    session is about 2,700 units and 0.5 MB."""

    max_transcript_bytes: int = Field(default=20_000_000, gt=0)
    max_units: int = Field(default=50_000, gt=0)
    max_unit_chars: int = Field(default=8_000, gt=0)


class Budget(_Bounds):
    """What one run may spend before any model call. A 3-hour session is about 70 chunks x 6
    lanes = 420 calls and under a million prompt tokens; the defaults leave room for five."""

    max_calls: int = Field(default=2_000, gt=0)
    max_prompt_tokens: int = Field(default=5_000_000, gt=0)


DEFAULT_INPUT_LIMITS = InputLimits()


class RunEstimate(_Bounds):
    """An upper bound for one pass: one call per chunk per lane (validation retries and the
    client's retries of transient errors come on top), and prompt tokens estimated as the
    characters of the prompts / CHARS_PER_TOKEN."""

    chunks: int
    lanes: int
    calls: int
    prompt_tokens: int


def estimate_run(chunk_chars: Sequence[int], lanes: int) -> RunEstimate:
    """The estimate for chunks of `chunk_chars` characters each, sent to `lanes` lanes."""
    per_lane_chars = sum(chunk_chars) + PROMPT_OVERHEAD_CHARS * len(chunk_chars)
    return RunEstimate(
        chunks=len(chunk_chars),
        lanes=lanes,
        calls=len(chunk_chars) * lanes,
        prompt_tokens=per_lane_chars * lanes // CHARS_PER_TOKEN,
    )


def check_budget(estimate: RunEstimate, budget: Budget, *, source: str) -> None:
    """Refuse a run whose estimate exceeds `budget`; `source` says where the budget was set
    (`the profile's pipeline.budget`, `--max-calls`, `the default`)."""
    over = []
    if estimate.calls > budget.max_calls:
        over.append(f"{estimate.calls} model calls (budget {budget.max_calls})")
    if estimate.prompt_tokens > budget.max_prompt_tokens:
        over.append(
            f"about {estimate.prompt_tokens} prompt tokens (budget {budget.max_prompt_tokens})"
        )
    if over:
        raise BudgetError(
            f"budget exceeded before any model call: {estimate.chunks} chunks x "
            f"{estimate.lanes} lanes would need " + " and ".join(over) + f"; the budget is "
            f"{source}. Tokens are an estimate (characters / {CHARS_PER_TOKEN}). Raise "
            "pipeline.budget in the profile or pass --max-calls, or split the transcript"
        )
