"""The words a person reads for a published session's outcome.

The manifest's `validation_status` is a contract value (`rejected` as soon as anything was
rejected, docs/bundle.md), so a session whose every lane was accepted, with a few chunks
rejected inside them, reads "rejected" there. Where a person reads a status (the report's
badge, the bundle's metadata in the UI), the words say what happened instead: how many lanes
were published and how many chunk rejections there were, at one of three levels."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from notarius_dagster.engine.bundle_documents import Manifest

Level = Literal["ok", "warn", "bad"]


@dataclass(frozen=True)
class Outcome:
    """A short phrase and its level: `ok` (all lanes accepted, nothing rejected), `warn` (all
    lanes accepted, some chunks rejected), `bad` (a lane rejected, or no lane at all)."""

    words: str
    level: Level


def session_outcome(lane_statuses: Sequence[str], rejections: int) -> Outcome:
    """The outcome of a session whose lanes ended with `lane_statuses` (`accepted` or
    `rejected`, one per configured lane) and `rejections` entries in rejected.json."""
    total = len(lane_statuses)
    accepted = sum(status == "accepted" for status in lane_statuses)
    if total == 0:
        return Outcome("no lane", "bad")
    if accepted < total:
        return Outcome(f"{total - accepted} of {total} lane(s) rejected", "bad")
    if rejections:
        return Outcome(f"all {total} lane(s) accepted, {rejections} chunk rejection(s)", "warn")
    return Outcome(f"all {total} lane(s) accepted", "ok")


def manifest_outcome(manifest: Manifest) -> Outcome:
    """The outcome of a published session, read from its manifest (one entry per configured
    lane in `artifact_lanes`, the rejections as in rejected.json)."""
    return session_outcome(
        [lane.status for lane in manifest.artifact_lanes], len(manifest.rejected)
    )
