"""Which assets of a session partition must run again: Dagster's own record of what each
materialization was computed from (its code version and its inputs' data versions, the tags
every materialization carries), compared with the code location as it is now.

An asset is up to date when its latest materialization in the partition exists, was made by
the asset's current code version, every upstream asset of the job is up to date too, and the
input data versions it recorded are the upstream's latest data versions. `source_document`
also records a digest of what lies outside the graph (the stored transcript's bytes, the run's
runtime references, every reference file's size and modification time, the resolved profile
and the LLM profile's fingerprint: `assets/factory.py: external_inputs_digest`); a different
digest makes it, and so everything downstream, stale. A published bundle that is missing from
the bundle root makes `session_bundle` stale. Anything else (no record, an unreadable one) is stale:
when in doubt, run."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from dagster import (
    AssetKey,
    AssetMaterialization,
    AssetRecordsFilter,
    AssetsDefinition,
    DagsterInstance,
    Definitions,
)

CODE_VERSION_TAG = "dagster/code_version"
DATA_VERSION_TAG = "dagster/data_version"
INPUT_DATA_VERSION_TAG = "dagster/input_data_version/"
EXTERNAL_INPUTS_KEY = "external_inputs"
"""Metadata key under which `source_document` records `external_inputs_digest`."""


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
    return _graph_order(found)


def _graph_order(
    found: Sequence[tuple[AssetKey, AssetsDefinition]],
) -> list[tuple[AssetKey, AssetsDefinition]]:
    """Upstream first (a stable topological sort of the given assets)."""
    keys = {key for key, _ in found}
    ordered: list[tuple[AssetKey, AssetsDefinition]] = []
    placed: set[AssetKey] = set()
    pending = list(found)
    while pending:
        rest = []
        for key, item in pending:
            if all(dep in placed or dep not in keys for dep in item.asset_deps.get(key, ())):
                ordered.append((key, item))
                placed.add(key)
            else:
                rest.append((key, item))
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
    result = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=key, asset_partitions=[partition]), limit=1
    )
    if not result.records:
        return None
    return result.records[0].asset_materialization


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
