"""Staleness at a glance: an `up_to_date` asset check on every session asset, so the lineage
and the asset pages show what a prompt, schema or profile edit has made stale.

Why a check. Dagster 1.13 shows a partitioned asset as "unsynced" only on one partition's page
(asset -> Partitions -> the partition), never on the lineage graph or the catalog
(dagster-io/dagster#22553, open). A check is what the lineage node does show: its *Checks* row
turns to a warning ("3 / 4 Passed") when one check failed, and the asset's *Checks* tab says
why.

Why unpartitioned. The check's one result answers for every session: "stale in 1 of 2
sessions: s1 (code version changed)". So it is partition-honest by construction: re-running
one session re-evaluates all of them, and another session still stale keeps it failed. (A
partitioned check reported from a sensor does not show at all: Dagster counts a partition's
check result only when it names the materialization it checked, which a runless
`AssetCheckEvaluation` cannot do through the public API, so every materialized partition would
read "not evaluated".)

Who evaluates it, and when:
- `notarius_staleness_sensor` (every STALENESS_INTERVAL_S, on by default; it launches nothing)
  reports it runless (`SensorResult(asset_events=[AssetCheckEvaluation(...)])`) whenever the
  code versions or the session assets' materializations changed since its last report: after
  a code location reload with an edit, the edited asset and everything downstream of it turn
  to "failed" within one interval, whether or not the automation sensor has run yet.
- every run of the session assets evaluates it in one step after them (a `multi_asset_check`
  that Dagster adds to the run, like every check of the selected assets): a re-run ends with a
  fresh answer, so the node does not wait for the sensor to pass again.
- *Execute* on the *Checks* tab runs that step alone (no partition: it reads every session), so
  the UI offers no check run that fails.
The two never disagree on facts: each result is a snapshot of the instance at its time (the
latest one is what the UI shows), and while a session's run is queued or in progress the
result says so ("being re-run"), so the automation's re-run is not misread as a new problem.
Severity WARN: stale output is not wrong output, and nothing blocks on it. Results name
sessions and assets only, never content."""

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TypedDict

from dagster import (
    AssetCheckEvaluation,
    AssetCheckExecutionContext,
    AssetCheckKey,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetKey,
    AssetRecordsFilter,
    AssetsDefinition,
    AssetSpec,
    DagsterInstance,
    DefaultSensorStatus,
    MetadataValue,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    multi_asset_check,
    sensor,
)

from assets.dagster_tags import PARTITION_NAME_TAG
from assets.graph_style import SESSION_GROUPS
from assets.partitions import sessions_partitions
from assets.staleness import stale_causes
from notarius_dagster.run_guard import sessions_in_progress

UP_TO_DATE_CHECK = "up_to_date"
STALENESS_SENSOR_NAME = "notarius_staleness_sensor"
STALENESS_INTERVAL_S = 10
"""Seconds between the sensor's looks. A look that finds nothing changed costs one query per
session asset; one that re-evaluates costs one per (asset, session)."""
MAX_LISTED = 20
"""Sessions named in a result's description and table; the counts are always complete."""


class CheckFields(TypedDict):
    """What an `up_to_date` result says, in the keywords both `AssetCheckResult` (in a run) and
    `AssetCheckEvaluation` (reported by the sensor) take."""

    asset_key: AssetKey
    check_name: str
    passed: bool
    severity: AssetCheckSeverity
    description: str
    metadata: dict[str, MetadataValue]


@dataclass(frozen=True)
class Freshness:
    """One asset's answer over every session: the stale ones with why, and how many sessions
    hold a materialization of it at all (a session never materialized is missing, not stale)."""

    stale: Mapping[str, tuple[str, ...]]
    materialized: int
    rerunning: frozenset[str]

    @property
    def passed(self) -> bool:
        return not self.stale

    def description(self) -> str:
        if self.passed:
            return f"up to date in all {self.materialized} materialized session(s)"
        listed = [
            f"{session} ({'; '.join(why)}{', being re-run' if session in self.rerunning else ''})"
            for session, why in sorted(self.stale.items())[:MAX_LISTED]
        ]
        more = len(self.stale) - len(listed)
        return (
            f"stale in {len(self.stale)} of {self.materialized} materialized session(s): "
            + ", ".join(listed)
            + (f", and {more} more" if more > 0 else "")
        )

    def metadata(self) -> dict[str, MetadataValue]:
        rows = [
            f"| {session} | {'; '.join(why)} | {'yes' if session in self.rerunning else 'no'} |"
            for session, why in sorted(self.stale.items())[:MAX_LISTED]
        ]
        table = "| session | why | being re-run |\n| --- | --- | --- |\n" + "\n".join(rows)
        return {
            "stale_sessions": MetadataValue.int(len(self.stale)),
            "materialized_sessions": MetadataValue.int(self.materialized),
            "being_re_run": MetadataValue.int(len(self.rerunning & set(self.stale))),
            "stale": MetadataValue.md(table if rows else "nothing is stale"),
        }

    def check_fields(self, key: AssetKey) -> CheckFields:
        """This answer as the `up_to_date` result of asset `key` (WARN: stale output is not
        wrong output)."""
        return CheckFields(
            asset_key=key,
            check_name=UP_TO_DATE_CHECK,
            passed=self.passed,
            severity=AssetCheckSeverity.WARN,
            description=self.description(),
            metadata=self.metadata(),
        )

    def digest(self) -> str:
        body = json.dumps(
            [
                sorted((s, list(w)) for s, w in self.stale.items()),
                self.materialized,
                sorted(self.rerunning & set(self.stale)),
            ]
        )
        return hashlib.sha256(body.encode()).hexdigest()[:16]


def session_specs(assets: Sequence[AssetsDefinition | AssetSpec]) -> list[AssetSpec]:
    """The materializable session assets' specs (code versions and dependencies), whatever
    assets definition holds them (one asset, or a multi-asset of several lanes)."""
    return [
        spec
        for item in assets
        if isinstance(item, AssetsDefinition) and item.is_materializable
        for spec in item.specs
        if spec.group_name in SESSION_GROUPS
    ]


def freshness(
    instance: DagsterInstance, specs: Sequence[AssetSpec], *, running: str | None = None
) -> dict[AssetKey, Freshness]:
    """Every session asset's answer, from one pass over the sessions. `running`: the session
    of the run evaluating it, which is not "being re-run" by itself."""
    partitions = instance.get_dynamic_partitions(sessions_partitions.name or "sessions")
    per_session = {session: stale_causes(instance, specs, session) for session in partitions}
    busy = frozenset(sessions_in_progress(instance) - {running})
    out = {}
    for spec in specs:
        held = {s: causes[spec.key] for s, causes in per_session.items() if spec.key in causes}
        out[spec.key] = Freshness(
            stale={s: why for s, why in held.items() if why},
            materialized=len(held),
            rerunning=busy,
        )
    return out


def check_specs(specs: Sequence[AssetSpec]) -> list[AssetCheckSpec]:
    return [
        AssetCheckSpec(
            UP_TO_DATE_CHECK,
            asset=spec.key,
            description="Every session's materialization of this asset is up to date: made by "
            "the current code version (prompt, schemas, lane configuration, output options) "
            "from its upstream assets' latest data. Failed (WARN) names the stale sessions "
            "and why.",
        )
        for spec in specs
    ]


def build_up_to_date_check(specs: Sequence[AssetSpec]) -> AssetChecksDefinition:
    """The check, as one step that evaluates whichever of its checks a run selects."""

    @multi_asset_check(
        specs=check_specs(specs),
        can_subset=True,
        name="up_to_date_checks",
        description="Whether each session asset is up to date in every session.",
    )
    def up_to_date_checks(context: AssetCheckExecutionContext) -> Iterator[AssetCheckResult]:
        selected = {key.asset_key for key in context.selected_asset_check_keys}
        partition = context.run.tags.get(PARTITION_NAME_TAG)
        answers = freshness(
            context.instance, [s for s in specs if s.key in selected], running=partition
        )
        for key, answer in answers.items():
            yield AssetCheckResult(**answer.check_fields(key))

    return up_to_date_checks


def _latest_storage_id(instance: DagsterInstance, key: AssetKey) -> int:
    records = instance.fetch_materializations(AssetRecordsFilter(asset_key=key), limit=1).records
    return records[0].storage_id if records else 0


def build_staleness_sensor(specs: Sequence[AssetSpec]) -> SensorDefinition:
    """Reports `up_to_date` when something its answer depends on changed since its last look:
    the code versions (a reload with an edit), a session asset's or transcript's latest
    materialization, or the sessions with a run queued or in progress."""
    code_versions = hashlib.sha256(
        json.dumps(sorted((s.key.to_user_string(), s.code_version or "") for s in specs)).encode()
    ).hexdigest()[:16]
    watched = [*(s.key for s in specs), AssetKey("transcript")]

    @sensor(
        name=STALENESS_SENSOR_NAME,
        minimum_interval_seconds=STALENESS_INTERVAL_S,
        default_status=DefaultSensorStatus.RUNNING,
        description=(
            "Reports the `up_to_date` check of every session asset after a code location "
            "reload or a new materialization: which sessions are stale and why. Launches "
            "nothing (the automation sensor or `notarius backfill --stale` re-runs them)."
        ),
    )
    def notarius_staleness_sensor(context: SensorEvaluationContext) -> SensorResult:
        cursor = json.loads(context.cursor) if context.cursor else {}
        latest = {
            key.to_user_string(): _latest_storage_id(context.instance, key) for key in watched
        }
        busy = sorted(sessions_in_progress(context.instance))
        if [cursor.get(k) for k in ("code_versions", "latest", "busy")] == [
            code_versions,
            latest,
            busy,
        ]:
            return SensorResult(
                skip_reason="no reload, no new materialization, no run started or ended "
                "since the last look",
                cursor=context.cursor,
            )
        reported: dict[str, str] = dict(cursor.get("reported", {}))
        events = []
        for key, answer in freshness(context.instance, specs).items():
            name = key.to_user_string()
            # Report when the answer changed, or when the asset was materialized since the
            # last report (a result older than the latest materialization reads "not
            # evaluated" in the UI); an asset no session holds has nothing to answer.
            stamp = f"{answer.digest()}:{latest.get(name, 0)}"
            if answer.materialized == 0 or reported.get(name) == stamp:
                continue
            reported[name] = stamp
            events.append(AssetCheckEvaluation(**answer.check_fields(key)))
        new_cursor = json.dumps(
            {"code_versions": code_versions, "latest": latest, "busy": busy, "reported": reported}
        )
        if not events:
            return SensorResult(skip_reason="every up_to_date result is current", cursor=new_cursor)
        return SensorResult(asset_events=events, cursor=new_cursor)

    return notarius_staleness_sensor


def build_staleness_definitions(
    assets: Sequence[AssetsDefinition | AssetSpec],
) -> tuple[AssetChecksDefinition, SensorDefinition]:
    """The `up_to_date` check of every session asset in `assets`, and the sensor reporting it."""
    specs = session_specs(assets)
    return build_up_to_date_check(specs), build_staleness_sensor(specs)


def check_key(asset: str) -> AssetCheckKey:
    return AssetCheckKey(AssetKey(asset), UP_TO_DATE_CHECK)
