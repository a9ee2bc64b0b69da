"""Is it up to date? The one place that answers, from Dagster's own record of what each
materialization was computed from (its code version and its inputs' data versions, the tags
every materialization carries) compared with the code location as it is now. Three askers:

- `session_staleness`: which assets of one session partition `notarius run` must run again.
  An asset is up to date when its latest materialization in the partition exists, was made by
  the asset's current code version, every upstream asset of the job is up to date too, and the
  input data versions it recorded are the upstream's latest data versions. `source_document`
  also records a digest of what lies outside the graph (the stored transcript's bytes, the
  run's runtime references, every reference file's size and modification time, the resolved
  profile and the LLM profile's fingerprint: `assets/factory.py: external_inputs_digest`); a
  different digest makes it, and so everything downstream, stale. A published bundle that is
  missing from the bundle root makes `session_bundle` stale. Anything else (no record, an
  unreadable one) is stale: when in doubt, run.
- `find_stale`: the session partitions whose assets were materialized under an old code
  version (after a prompt, schema or lane-configuration edit): what `notarius backfill --stale`
  re-runs, for scripts. The UI route is the automation sensor (assets/automation.py), which
  re-runs the same pairs on its own once switched on.
- `lanes_materialized_in_run`: which lanes this run made (the bundle's "this run" usage).

Public Dagster API only: code versions and dependencies from the `Definitions`, the latest
materialization of each (asset, session) from `DagsterInstance.fetch_materializations` with
`AssetRecordsFilter` (`latest_record`, the one instance query), whose tags Dagster writes."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from dagster import (
    AssetKey,
    AssetMaterialization,
    AssetRecordsFilter,
    AssetsDefinition,
    AssetSpec,
    DagsterInstance,
    Definitions,
    EventLogRecord,
)

from assets.dagster_tags import CODE_VERSION_TAG, DATA_VERSION_TAG, INPUT_DATA_VERSION_TAG
from assets.partitions import sessions_partitions

EXTERNAL_INPUTS_KEY = "external_inputs"
"""Metadata key under which `source_document` records `external_inputs_digest`."""


def latest_record(
    instance: DagsterInstance, key: AssetKey, partition: str
) -> EventLogRecord | None:
    """The record of the latest materialization of (key, partition), if any."""
    result = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=key, asset_partitions=[partition]), limit=1
    )
    return result.records[0] if result.records else None


def lanes_materialized_in_run(
    instance: DagsterInstance, run_id: str, session_id: str, keys: Sequence[AssetKey]
) -> set[AssetKey]:
    """The lane assets whose latest materialization of `session_id` was made by `run_id`."""
    ran = set()
    for key in keys:
        record = latest_record(instance, key, session_id)
        if record is not None and record.run_id == run_id:
            ran.add(key)
    return ran


@dataclass(frozen=True)
class Staleness:
    """The job's assets in graph order, split into those to run and those up to date."""

    stale: tuple[AssetKey, ...]
    up_to_date: tuple[AssetKey, ...]


def _session_assets(
    defs: Definitions, groups: Collection[str]
) -> list[tuple[AssetKey, AssetsDefinition]]:
    found: list[tuple[AssetKey, AssetsDefinition]] = []
    for item in defs.assets or ():
        if not isinstance(item, AssetsDefinition) or not item.is_materializable:
            continue
        for key in item.keys:
            if item.group_names_by_key.get(key) in groups:
                found.append((key, item))
    return _upstream_first(
        found, key=lambda pair: pair[0], deps=lambda pair: pair[1].asset_deps.get(pair[0], ())
    )


T = TypeVar("T")


def _upstream_first(
    items: Sequence[T], key: Callable[[T], AssetKey], deps: Callable[[T], Iterable[AssetKey]]
) -> list[T]:
    """`items` upstream first: a stable topological sort by `deps`, where a dependency outside
    `items` does not count."""
    keys = {key(item) for item in items}
    ordered: list[T] = []
    placed: set[AssetKey] = set()
    pending = list(items)
    while pending:
        rest: list[T] = []
        for item in pending:
            if all(dep in placed or dep not in keys for dep in deps(item)):
                ordered.append(item)
                placed.add(key(item))
            else:
                rest.append(item)
        if len(rest) == len(pending):  # a cycle cannot happen in Dagster; stay safe
            ordered.extend(rest)
            break
        pending = rest
    return ordered


def same_input(recorded: str | None, upstream: str | None) -> bool:
    """Whether an input data version a materialization recorded is the upstream partition's
    data version. Dagster records a partitioned input as the sha256 of its partitions' data
    versions joined in key order, here exactly one partition."""
    if recorded is None or upstream is None:
        return False
    return recorded in (upstream, hashlib.sha256(upstream.encode("utf-8")).hexdigest())


def latest_materialization(
    instance: DagsterInstance, key: AssetKey, partition: str
) -> AssetMaterialization | None:
    """The latest materialization of (key, partition), if any."""
    record = latest_record(instance, key, partition)
    return record.asset_materialization if record is not None else None


def session_staleness(
    defs: Definitions,
    instance: DagsterInstance,
    partition: str,
    *,
    groups: Collection[str],
    external_inputs: str,
    extra_checks: Mapping[str, Callable[[], bool]] | None = None,
) -> Staleness:
    """Split the session assets of `defs` into stale and up-to-date ones for `partition`.
    `extra_checks` maps an asset name to a check that must hold for it to be up to date (the
    runner passes "the published bundle exists" for `session_bundle`)."""
    checks = dict(extra_checks or {})
    stale: list[AssetKey] = []
    fresh: list[AssetKey] = []
    data_versions: dict[AssetKey, str | None] = {}
    assets = _session_assets(defs, groups)
    in_job = {key for key, _ in assets}
    for key, item in assets:
        record = latest_materialization(instance, key, partition)
        ok = record is not None
        if record is not None:
            tags = record.tags or {}
            data_versions[key] = tags.get(DATA_VERSION_TAG)
            ok = tags.get(CODE_VERSION_TAG) == item.code_versions_by_key.get(key)
            for dep in item.asset_deps.get(key, ()):
                if dep not in in_job:
                    continue
                recorded = tags.get(INPUT_DATA_VERSION_TAG + dep.to_user_string())
                ok = ok and dep in fresh and same_input(recorded, data_versions.get(dep))
            if key.path[-1] == "source_document":
                held = record.metadata.get(EXTERNAL_INPUTS_KEY)
                ok = ok and getattr(held, "value", held) == external_inputs
            check = checks.get(key.path[-1])
            ok = ok and (check is None or check())
        (fresh if ok else stale).append(key)
    return Staleness(stale=tuple(stale), up_to_date=tuple(fresh))


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
    materialization = latest_materialization(instance, key, partition)
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


CODE_VERSION_CHANGED = "code version changed"


def stale_causes(
    instance: DagsterInstance, specs: Sequence[AssetSpec], partition: str
) -> dict[AssetKey, tuple[str, ...]]:
    """Per asset of `specs` materialized in `partition`, why it is stale (empty: up to date),
    the way Dagster's own per-partition "unsynced" status reasons (what the asset's
    *Partitions* tab shows for one partition): its code version changed since it was
    materialized, an upstream asset's latest data version is not the one it was computed
    from, or an upstream asset is itself stale (it will be re-run, so this one will be too).
    An asset never materialized in the partition is absent: it is missing, not stale. What
    lies outside the graph (a reference file edited in place) is `session_staleness`'s part,
    for `notarius run`; a changed transcript shows here as `source_document`'s upstream."""
    ordered = _upstream_first(
        specs, key=lambda spec: spec.key, deps=lambda spec: (dep.asset_key for dep in spec.deps)
    )
    in_graph = {spec.key for spec in ordered}
    data_versions: dict[AssetKey, str | None] = {}
    causes: dict[AssetKey, tuple[str, ...]] = {}
    for spec in ordered:
        record = latest_materialization(instance, spec.key, partition)
        if record is None:
            continue
        tags = record.tags or {}
        data_versions[spec.key] = tags.get(DATA_VERSION_TAG)
        found: list[str] = []
        if spec.code_version and tags.get(CODE_VERSION_TAG) != spec.code_version:
            found.append(CODE_VERSION_CHANGED)
        for dep in spec.deps:
            name = dep.asset_key.to_user_string()
            if causes.get(dep.asset_key):
                found.append(f"upstream {name} is stale")
                continue
            if dep.asset_key not in in_graph:
                continue
            recorded = tags.get(INPUT_DATA_VERSION_TAG + name)
            current = data_versions.get(dep.asset_key)
            if recorded is not None and current is not None and not same_input(recorded, current):
                found.append(f"upstream {name} changed")
        causes[spec.key] = tuple(found)
    return causes
