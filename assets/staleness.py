"""Finds session partitions whose lane assets were materialized under an old code version,
and builds the asset backfill that re-runs exactly those lanes and what depends on them.

Dagster marks a lane stale when its code version changes but does not cascade staleness until
the upstream is re-materialized, and "materialize unsynced" skips stale partitions: this module
is the missing step (`notarius backfill --stale`, and the `stale_lanes_sensor`)."""

from collections.abc import Mapping
from dataclasses import dataclass

from dagster import AssetKey, AssetRecordsFilter, AssetSelection, DagsterInstance
from dagster._core.definitions.assets.graph.asset_graph_subset import AssetGraphSubset
from dagster._core.definitions.assets.graph.base_asset_graph import BaseAssetGraph
from dagster._core.definitions.data_version import CODE_VERSION_TAG
from dagster._core.definitions.events import AssetKeyPartitionKey

from assets.partitions import sessions_partitions

STALE_BACKFILL_TAG = "notarius/stale-backfill"


@dataclass(frozen=True)
class StalePlan:
    """Per partition: the assets whose code version changed, and those plus everything
    downstream (what the backfill materializes)."""

    changed: Mapping[str, frozenset[AssetKey]]
    to_run: Mapping[str, frozenset[AssetKey]]

    def is_empty(self) -> bool:
        return not self.to_run


def _latest_code_version(instance: DagsterInstance, key: AssetKey, partition: str) -> str | None:
    result = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=key, asset_partitions=[partition]), limit=1
    )
    if not result.records:
        return None
    materialization = result.records[0].asset_materialization
    return (materialization.tags or {}).get(CODE_VERSION_TAG) if materialization else None


def find_stale(instance: DagsterInstance, asset_graph: BaseAssetGraph) -> StalePlan:
    """Compare each versioned asset's latest materialization per session with its current
    code version. Never-materialized partitions are missing, not stale, and are left alone."""
    graph = asset_graph
    partitions = instance.get_dynamic_partitions(sessions_partitions.name or "sessions")
    versioned = {
        key: graph.get(key).code_version
        for key in graph.materializable_asset_keys
        if graph.get(key).code_version
    }
    changed: dict[str, frozenset[AssetKey]] = {}
    to_run: dict[str, frozenset[AssetKey]] = {}
    for partition in partitions:
        keys = set()
        for key, version in versioned.items():
            stored = _latest_code_version(instance, key, partition)
            if stored is not None and stored != version:
                keys.add(key)
        if keys:
            changed[partition] = frozenset(keys)
            downstream = AssetSelection.assets(*keys).downstream().resolve(graph)
            to_run[partition] = frozenset(downstream)
    return StalePlan(changed=changed, to_run=to_run)


def stale_subset(plan: StalePlan, asset_graph: BaseAssetGraph) -> AssetGraphSubset:
    pairs = {
        AssetKeyPartitionKey(key, partition)
        for partition, keys in plan.to_run.items()
        for key in keys
    }
    return AssetGraphSubset.from_asset_partition_set(pairs, asset_graph)


def submit_stale_backfill(
    instance: DagsterInstance, asset_graph: BaseAssetGraph, plan: StalePlan
) -> str | None:
    """Submit one asset backfill of the stale lanes and their dependants; the daemon runs it.
    Returns the backfill id, or None when nothing is stale."""
    import time

    from dagster._core.execution.backfill import PartitionBackfill
    from dagster._core.utils import make_new_backfill_id

    if plan.is_empty():
        return None
    backfill_id = make_new_backfill_id()
    backfill = PartitionBackfill.from_asset_graph_subset(
        backfill_id=backfill_id,
        backfill_timestamp=time.time(),
        tags={STALE_BACKFILL_TAG: "true"},
        dynamic_partitions_store=instance,
        asset_graph_subset=stale_subset(plan, asset_graph),
        title="notarius: re-run stale lanes",
        description=f"{len(plan.to_run)} session(s) with lanes under an old code version",
        run_config=None,
    )
    instance.add_backfill(backfill)
    return backfill_id


def stale_backfill_in_progress(instance: DagsterInstance) -> bool:
    from dagster._core.execution.backfill import BulkActionsFilter, BulkActionStatus

    backfills = instance.get_backfills(
        filters=BulkActionsFilter(statuses=[BulkActionStatus.REQUESTED]), limit=50
    )
    return any(b.tags.get(STALE_BACKFILL_TAG) for b in backfills)
