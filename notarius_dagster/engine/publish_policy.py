"""Publishing what you can stand behind: a lane whose accepted chunk extractions fall below
the profile's `pipeline.publish.min_accepted_chunk_share` of its chunks (a skipped chunk, one
a gate decided deterministically, counts as accepted; a lane without an accepted payload
counts as none accepted) must not replace a good bundle with an empty artifact. The bundle is
refused before anything is written, with a message naming each lane and its counts; the
previous bundle of the session stays as it was."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from notarius_dagster.engine.config import PublishConfig
from notarius_dagster.engine.errors import OutputError
from notarius_dagster.engine.lane_runner import LaneResult

POLICY_KEY = "pipeline.publish.min_accepted_chunk_share"


class PublishPolicyError(OutputError):
    """A lane is below the publish policy; nothing was written."""


@dataclass(frozen=True)
class LaneShare:
    """One lane's standing against the policy."""

    lane_id: str
    chunks: int
    accepted: int
    skipped: int
    has_payload: bool

    @property
    def share(self) -> float:
        """Accepted chunks over chunks (1.0 for a lane with no chunk: nothing to judge; 0.0
        without an accepted payload: nothing would be published)."""
        if not self.has_payload:
            return 0.0
        return self.accepted / self.chunks if self.chunks else 1.0


def lane_share(result: LaneResult) -> LaneShare:
    stats = result.stats
    return LaneShare(
        lane_id=result.lane_id,
        chunks=stats.chunks,
        accepted=stats.chunks - stats.rejected,
        skipped=stats.skipped,
        has_payload=result.payload is not None,
    )


def below_policy(policy: PublishConfig, result: LaneResult) -> str | None:
    """Why `result` may not be published under `policy` (content-safe), or None."""
    share = lane_share(result)
    if share.share >= policy.min_accepted_chunk_share:
        return None
    skipped = f", {share.skipped} skipped counted as accepted" if share.skipped else ""
    payload = "" if share.has_payload else ", no accepted payload"
    return (
        f"lane {share.lane_id!r}: {share.accepted} of {share.chunks} chunk(s) accepted"
        f"{skipped}{payload} ({share.share:.0%}, below {POLICY_KEY} "
        f"{policy.min_accepted_chunk_share:g})"
    )


def check_publish_policy(
    policy: PublishConfig, lane_results: Sequence[LaneResult], session_id: str
) -> None:
    """Raise `PublishPolicyError` naming every lane below the policy."""
    problems = [p for p in (below_policy(policy, r) for r in lane_results) if p is not None]
    if problems:
        raise PublishPolicyError(
            f"the bundle of session {session_id!r} was not published: "
            + "; ".join(problems)
            + "; the previous bundle stays"
        )
