"""Error types. Every message is content-safe: it names what is wrong and where (file name,
line, key path, lane, chunk), never transcript text, prompts, responses or credentials."""

from __future__ import annotations


class NotariusError(Exception):
    """Base of every error the engine raises on purpose."""


class InputError(NotariusError):
    """A transcript could not be parsed into a source document."""


class SessionIdError(NotariusError):
    """A session id is not usable as a partition key and folder name."""


class ProfileError(NotariusError):
    """A pipeline profile is invalid; the message names the profile and the key path."""

    def __init__(self, profile: str, key_path: str, problem: str) -> None:
        self.profile = profile
        self.key_path = key_path
        self.problem = problem
        super().__init__(f"profile {profile!r}: {key_path}: {problem}")


class ResolutionError(NotariusError):
    """The profile parsed but cannot be resolved against the module catalog."""


class InvalidReferenceError(NotariusError):
    """A reference binding or a bound reference is invalid."""


class ChunkingError(NotariusError):
    """A chunker failed at framework level (not a validator rejection)."""


class LaneError(NotariusError):
    """A lane stage failed at framework level after its retries."""


class LLMError(NotariusError):
    """An LLM call failed; the message carries the provider's own words, never the prompt."""


class LLMUnavailableError(LLMError):
    """A chosen LLM tier cannot be used here (missing key, missing server); never substituted."""


class TransientLLMError(LLMError):
    """The provider failed in a way that may pass (rate limit, timeout, connection, 5xx) and
    still failed after the profile's retries. Declared here, raised by the LLM layer: the lane
    runner lets it escape unchanged so that the orchestration layer may retry the step."""

    transient: bool = True


class StoreError(NotariusError):
    """The store could not be written (disk full, read-only): names the store, never a path.
    `cause` is the reason alone (`no space left on device (ENOSPC)`)."""

    def __init__(self, message: str, cause: str = "") -> None:
        super().__init__(message)
        self.cause = cause


class OutputError(NotariusError):
    """The output encoder refused the bundle; nothing was written."""


class EvidenceError(NotariusError):
    """Evidence projection met an invalid reference; nothing is published."""
