"""The inbox sensor: turns transcripts dropped into the inbox folder into session runs.

What a tick finds and copies into the transcript store is decided by `notarius_dagster.inbox`
(plain Python; its docstring has the rules). This module only speaks Dagster: each transcript
taken adds its `sessions` partition and requests a `materialize_session` run for it, with run
key `<session-id>:<sha256 of the content>` and the tags `notarius/inbox_file` and
`notarius/content_sha256`; the tick's log gets the inbox's log lines; the cursor is the inbox
cursor as JSON.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from dagster import (
    DefaultSensorStatus,
    RunRequest,
    RunsFilter,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    sensor,
)

from assets.dagster_tags import PARTITION_NAME_TAG, RUN_KEY_TAG, SENSOR_NAME_TAG
from assets.jobs import materialize_session
from assets.partitions import sessions_partitions
from assets.run_tags import SESSION_TAG
from notarius_dagster.engine.inputs import EXTENSION_FORMATS
from notarius_dagster.inbox import InboxCursor, InboxLimits, InboxTranscript, take_inbox
from notarius_dagster.run_guard import sessions_in_progress
from notarius_dagster.settings import load_settings
from notarius_dagster.store import StorePaths, session_lock

INBOX_SENSOR_NAME = "inbox_sensor"
_MAX_REVISIONS = 100


def run_key_for(
    context: SensorEvaluationContext, transcript: InboxTranscript, *, readded: bool = False
) -> str:
    """`<session>:<sha256>`, so Dagster launches each version of a transcript once.

    Dagster drops a request whose run key this sensor already used. That is right when a tick
    is retried (the latest sensor run of the partition already has this content), but wrong
    when a file goes back to content that ran before (an edit undone) or its deleted partition
    is added again: then the key gets a revision suffix (`:2`, `:3`, ...) so it runs."""
    base = f"{transcript.session_id}:{transcript.sha256}"
    latest = (
        []
        if readded
        else context.instance.get_runs(
            RunsFilter(
                tags={SENSOR_NAME_TAG: INBOX_SENSOR_NAME, PARTITION_NAME_TAG: transcript.session_id}
            ),
            limit=1,
        )
    )
    if latest:
        latest_key = latest[0].tags.get(RUN_KEY_TAG, "")
        if latest_key == base or latest_key.startswith(base + ":"):
            return latest_key
    for revision in range(1, _MAX_REVISIONS + 1):
        key = base if revision == 1 else f"{base}:{revision}"
        used = context.instance.get_runs(
            RunsFilter(tags={SENSOR_NAME_TAG: INBOX_SENSOR_NAME, RUN_KEY_TAG: key}), limit=1
        )
        if not used:
            return key
    return f"{base}:{time.time_ns()}"


LLMReadiness = Callable[[], str | None]
"""Why the code location's model cannot be called now (no key, no provider package), or None."""


def build_inbox_sensor(
    store: StorePaths,
    limits: InboxLimits | None = None,
    *,
    run_tags: dict[str, str] | None = None,
    llm_not_ready: LLMReadiness | None = None,
) -> SensorDefinition:
    """`run_tags`: the code location's tags for every run (assets/run_tags.py); each request
    adds its session's `notarius/session`. While `llm_not_ready` names a problem, the sensor
    takes nothing from the inbox (no partition, no run) and says why on every tick."""
    limits = limits or InboxLimits.from_env(load_settings().inbox_limits)
    static_tags = dict(run_tags or {})

    @sensor(
        name=INBOX_SENSOR_NAME,
        job=materialize_session,
        minimum_interval_seconds=limits.interval_s,
        default_status=DefaultSensorStatus.RUNNING,
        description=(
            "Watches the inbox folder (NOTARIUS_INBOX) for session transcripts "
            f"({', '.join(sorted(EXTENSION_FORMATS))}): a new or changed file adds its session "
            "partition and requests a run; an unchanged file requests nothing."
        ),
    )
    def inbox_sensor(context: SensorEvaluationContext) -> SensorResult:
        problem = llm_not_ready() if llm_not_ready is not None else None
        if problem is not None:
            return SensorResult(skip_reason=f"the model cannot be called: {problem}")
        partitions = context.instance.get_dynamic_partitions(sessions_partitions.name or "sessions")
        intake = take_inbox(
            store.inbox,
            store.transcripts,
            InboxCursor.from_json(context.cursor),
            limits,
            partitions=set(partitions),
            busy=sessions_in_progress(context.instance),
            lock=lambda session: session_lock(store, session, doing="replace its transcript"),
        )
        for line in intake.log:
            (context.log.info if line.level == "info" else context.log.warning)(line.message)
        requests = [
            RunRequest(
                run_key=run_key_for(
                    context, transcript, readded=transcript.session_id in intake.readded
                ),
                partition_key=transcript.session_id,
                tags={
                    **static_tags,
                    SESSION_TAG: transcript.session_id,
                    "notarius/inbox_file": transcript.name[:200],
                    "notarius/content_sha256": transcript.sha256,
                },
            )
            for transcript in intake.taken
        ]
        cursor = intake.cursor.to_json()
        if not requests:
            return SensorResult(skip_reason=intake.summary, cursor=cursor)
        return SensorResult(
            run_requests=requests,
            dynamic_partitions_requests=[
                sessions_partitions.build_add_request(sorted({t.session_id for t in intake.taken}))
            ],
            cursor=cursor,
        )

    return inbox_sensor


def build_sensors(
    store: StorePaths,
    max_transcript_bytes: int | None = None,
    *,
    run_tags: dict[str, str] | None = None,
    llm_not_ready: LLMReadiness | None = None,
) -> list[SensorDefinition]:
    """The inbox sensor; `max_transcript_bytes` is the profile's `pipeline.limits` bound (files
    above it are skipped with a reason instead of starting a run that would be refused);
    `run_tags` go on every run it requests."""
    limits = InboxLimits.from_env(load_settings().inbox_limits)
    if max_transcript_bytes is not None:
        limits = dataclasses.replace(limits, max_transcript_bytes=max_transcript_bytes)
    return [build_inbox_sensor(store, limits, run_tags=run_tags, llm_not_ready=llm_not_ready)]
