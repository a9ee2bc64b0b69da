"""Finds session partitions whose assets were materialized under an old code version (after a
prompt, schema or lane-configuration edit): what `notarius backfill --stale` re-runs, for
scripts. The UI route is the automation sensor (assets/automation.py), which re-runs the same
pairs on its own once switched on.

Public Dagster API only: the code versions and dependencies come from
`Definitions.resolve_all_asset_specs()`, the stored code version of each (asset, session) from
its latest materialization (`DagsterInstance.fetch_materializations` with
`AssetRecordsFilter`), whose `dagster/code_version` tag Dagster writes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from dagster import AssetKey, AssetRecordsFilter, AssetSpec, DagsterInstance

from assets.dagster_tags import CODE_VERSION_TAG
from assets.partitions import sessions_partitions


@dataclass(frozen=True)
class StalePlan:
    """Per partition: the assets whose code version changed, and those plus everything
    downstream (what a re-run materializes)."""

    changed: Mapping[str, frozenset[AssetKey]]
    to_run: Mapping[str, frozenset[AssetKey]]

    def is_empty(self) -> bool:
        return not self.to_run


def latest_code_version(instance: DagsterInstance, key: AssetKey, partition: str) -> str | None:
    """The code version the latest materialization of (key, partition) was made under."""
    result = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=key, asset_partitions=[partition]), limit=1
    )
    if not result.records:
        return None
    materialization = result.records[0].asset_materialization
    return (materialization.tags or {}).get(CODE_VERSION_TAG) if materialization else None


def downstream_closure(specs: Sequence[AssetSpec], roots: Iterable[AssetKey]) -> set[AssetKey]:
    """`roots` and every asset that depends on one of them, transitively."""
    children: dict[AssetKey, set[AssetKey]] = {}
    for spec in specs:
        for dep in spec.deps:
            children.setdefault(dep.asset_key, set()).add(spec.key)
    seen: set[AssetKey] = set()
    todo = list(roots)
    while todo:
        key = todo.pop()
        if key not in seen:
            seen.add(key)
            todo.extend(children.get(key, ()))
    return seen


def find_stale(instance: DagsterInstance, specs: Sequence[AssetSpec]) -> StalePlan:
    """Compare each versioned asset's latest materialization per session with its current
    code version. Never-materialized partitions are missing, not stale, and are left alone."""
    partitions = instance.get_dynamic_partitions(sessions_partitions.name or "sessions")
    versioned = {spec.key: spec.code_version for spec in specs if spec.code_version}
    changed: dict[str, frozenset[AssetKey]] = {}
    to_run: dict[str, frozenset[AssetKey]] = {}
    for partition in partitions:
        keys = set()
        for key, version in versioned.items():
            stored = latest_code_version(instance, key, partition)
            if stored is not None and stored != version:
                keys.add(key)
        if keys:
            changed[partition] = frozenset(keys)
            to_run[partition] = frozenset(downstream_closure(specs, keys))
    return StalePlan(changed=changed, to_run=to_run)
