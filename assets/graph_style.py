"""How the session graph reads in the UI: groups, owners, kinds and descriptions.

Groups follow the flow: `ingest` (transcript, source_document, chunk_map), `lanes` (one asset
per lane), `publish` (evidence_context, session_bundle, session_report). Every asset has the
owner `team:notarius`, or the owner NOTARIUS_OWNER names (an email or `team:<name>`, as
Dagster accepts them). A lane's description says what it extracts (the first sentence of its
record model's docstring, from the lane registry) and what it depends on."""

from __future__ import annotations

from notarius_dagster.engine.errors import NotariusError
from notarius_dagster.engine.lanes import LaneSpec
from notarius_dagster.engine.resolution import ResolvedLane
from notarius_dagster.settings import OWNER_ENV, load_settings

INGEST_GROUP = "ingest"
LANES_GROUP = "lanes"
PUBLISH_GROUP = "publish"
SESSION_GROUPS = (INGEST_GROUP, LANES_GROUP, PUBLISH_GROUP)
DEFAULT_OWNER = "team:notarius"


def owners() -> list[str]:
    """The owners of every asset; a NOTARIUS_OWNER that is neither an email nor
    `team:<name>` is an error naming the variable."""
    owner = load_settings().owner or DEFAULT_OWNER
    is_team = owner.startswith("team:") and len(owner) > len("team:")
    is_email = "@" in owner and " " not in owner
    if not (is_team or is_email):
        raise NotariusError(f"{OWNER_ENV} must be an email or team:<name>, got {owner!r}")
    return [owner]


def _first_sentence(text: str | None) -> str:
    flat = " ".join((text or "").split())
    head = flat.split(". ", 1)[0].rstrip(".")
    return f"{head}." if head else ""


def lane_description(lane: ResolvedLane, spec: LaneSpec) -> str:
    """What the lane extracts and what it depends on, for the asset's description."""
    record = _first_sentence(spec.record_model.__doc__)
    what = f" One record: {record}" if record else ""
    deps = ", ".join(["source_document", "chunk_map", *(f"`{d}`" for d in lane.depends_on)])
    grounded = (
        f" Grounded on the artifact(s) of {', '.join(f'`{d}`' for d in lane.depends_on)}."
        if lane.depends_on
        else ""
    )
    return (
        f"The `{lane.id}` lane ({lane.kind}).{what} The model extracts per chunk; the results "
        f"are merged and normalized.{grounded} Depends on: {deps}."
    )
