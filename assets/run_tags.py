"""The tags every run of a session carries, however it was launched: `notarius/session`, the
profile's pipeline id and digest, and the model. With them the UI's *Runs* page, filtered by
`notarius/session=<id>`, shows one session's whole history (CLI, inbox sensor, UI clicks,
backfills and automation alike), and a run says which profile and model made it.

Three routes, because Dagster has no single one for every launch:
- static tags where the launcher takes them: the session job (`define_asset_job(tags=...)` is
  not used, the job is shared; see `assets/jobs.py`), `notarius run`/`backfill`
  (`execute_in_process(tags=...)`), the inbox sensor's `RunRequest(tags=...)` and the
  automation sensor's `run_tags`;
- for the rest (a run launched from the UI's Materialize dialog is a run of the implicit asset
  job, with no tags of ours), the first step of the run adds whatever is missing
  (`ensure_run_tags`, called by every session asset)."""

from __future__ import annotations

from collections.abc import Mapping

from dagster import AssetExecutionContext, DagsterError

from notarius_dagster.engine.resolution import ResolvedPipeline

SESSION_TAG = "notarius/session"
PROFILE_TAG = "notarius/profile"
PROFILE_DIGEST_TAG = "notarius/profile_digest"
MODEL_TAG = "notarius/model"
_MAX_TAG_CHARS = 200


def _bounded(value: str) -> str:
    return value[:_MAX_TAG_CHARS]


def pipeline_tags(pipeline: ResolvedPipeline) -> dict[str, str]:
    """The tags that are the same for every run of this code location."""
    return {
        PROFILE_TAG: _bounded(pipeline.pipeline_id),
        PROFILE_DIGEST_TAG: _bounded(pipeline.digest or "unknown"),
        MODEL_TAG: _bounded(str(pipeline.llm_profile.get("model", "unknown"))),
    }


def session_tags(pipeline: ResolvedPipeline, session_id: str) -> dict[str, str]:
    """Every tag of a run of `session_id`."""
    return {SESSION_TAG: _bounded(session_id), **pipeline_tags(pipeline)}


def missing_tags(present: Mapping[str, str], wanted: Mapping[str, str]) -> dict[str, str]:
    """The wanted tags the run does not carry yet (a tag it carries is never overwritten)."""
    return {k: v for k, v in wanted.items() if k not in present}


def ensure_run_tags(context: AssetExecutionContext, pipeline: ResolvedPipeline) -> None:
    """Add this session's tags to the running run where they are missing.

    `DagsterInstance.add_run_tags` is a method of the public `DagsterInstance` (no underscore,
    no private import) but is not listed in Dagster's API docs; the tests run a job without
    tags and assert the tags appear (tests/test_run_tags.py), so its removal would be caught."""
    try:
        present = context.run.tags
    except DagsterError:  # invoked directly (a unit test): there is no run to tag
        return
    wanted = session_tags(pipeline, context.partition_key)
    missing = missing_tags(present, wanted)
    if missing:
        context.instance.add_run_tags(context.run_id, missing)
