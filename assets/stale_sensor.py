"""`stale_lanes_sensor`: off by default; when switched on it submits one asset backfill of the
lanes whose code version changed (and their dependants), unless one is already running."""

from dagster import (
    DefaultSensorStatus,
    SensorDefinition,
    SensorEvaluationContext,
    SkipReason,
    sensor,
)
from dagster._core.definitions.run_request import RunRequest

from assets.staleness import (
    STALE_BACKFILL_TAG,
    find_stale,
    stale_backfill_in_progress,
    stale_subset,
)


def build_stale_lanes_sensor() -> SensorDefinition:
    @sensor(
        name="stale_lanes_sensor",
        minimum_interval_seconds=60,
        default_status=DefaultSensorStatus.STOPPED,
        description="Re-runs lanes whose prompt, schema or configuration changed, in every "
        "session, as one asset backfill (checkpoints keep it cheap).",
    )
    def stale_lanes_sensor(context: SensorEvaluationContext) -> RunRequest | SkipReason:
        if stale_backfill_in_progress(context.instance):
            return SkipReason("a stale-lane backfill is still running")
        graph = context.repository_def.asset_graph  # type: ignore[union-attr]
        plan = find_stale(context.instance, graph)
        if plan.is_empty():
            return SkipReason("no session has a lane under an old code version")
        context.log.info(f"{len(plan.to_run)} session(s) have stale lanes; requesting a backfill")
        return RunRequest.for_asset_graph_subset(
            stale_subset(plan, graph), tags={STALE_BACKFILL_TAG: "true"}
        )

    return stale_lanes_sensor
