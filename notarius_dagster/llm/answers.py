"""What the client does to a completion before it reads the answer: a response is untrusted
input like any other, so it is checked for an answer at all, and the secrets the request
carried are taken out of the answer's text before anything validates, stores, re-asks with or
publishes it (the rules live in `engine/redaction.py`, shared with provider errors).

Kept apart from `client.py` so the client calls it in one place, where the answer is taken."""

from __future__ import annotations

import dataclasses
from typing import Protocol, TypeVar

from notarius_dagster.engine.errors import LLMError
from notarius_dagster.engine.redaction import redact_sent, sent_secrets
from notarius_dagster.llm._litellm import ModelResponse


class _WithContent(Protocol):
    @property
    def content(self) -> str | None: ...


A = TypeVar("A", bound=_WithContent)


def require_choices(response: object, model: str) -> ModelResponse:
    """`response`, once it is shown to hold an answer. An HTTP 200 whose `choices` list is
    empty (or missing) carries none: a provider error, said as one, never an IndexError three
    layers down. Not transient: the same request gets the same nothing (a content filter, a
    proxy that drops the body)."""
    if not isinstance(response, ModelResponse) or not response.choices:
        raise LLMError(
            f"LLM call to {model} failed: the provider answered without any choice (an empty "
            "`choices` list), so there is no answer to use"
        )
    return response


def without_sent_secrets(answer: A, api_key: str | None, api_base: str | None) -> A:
    """`answer` with the API key and the endpoint's credentials that were sent replaced by
    `[redacted]` in its content (see `engine/redaction.py: sent_secrets`)."""
    content = redact_sent(answer.content, sent_secrets(api_key, api_base))
    if content == answer.content:
        return answer
    return dataclasses.replace(answer, content=content)  # type: ignore[type-var]  # a dataclass instance (client._Answer)
