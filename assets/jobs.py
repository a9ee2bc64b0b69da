"""The one asset job: materialize every asset of a session partition (the `ingest`, `lanes` and
`publish` groups, without the external transcript). Its partitions are the selected assets'
own (`sessions_partitions`): Dagster infers them, so the job does not restate them (the job's
`partitions_def` argument is deprecated)."""

from collections.abc import Iterable

from dagster import AssetKey, AssetsDefinition, AssetSelection, Definitions, define_asset_job

from assets.graph_style import SESSION_GROUPS

SESSION_JOB_NAME = "materialize_session"

session_selection = AssetSelection.groups(*SESSION_GROUPS) - AssetSelection.assets("transcript")

materialize_session = define_asset_job(
    SESSION_JOB_NAME,
    selection=session_selection,
    description="Turn one session transcript into its published bundle.",
)


def with_execution_sets(defs: Definitions, keys: Iterable[AssetKey]) -> list[AssetKey]:
    """`keys` and every asset that must be materialized with one of them: the other lanes of
    a selected lane's level (assets/factory.py: `build_lane_level_asset`, not subsettable). What
    `notarius run` and `notarius backfill` select, so a selection Dagster would refuse ("not
    subsettable") is never sent; the added lanes reuse their checkpoints (no model call)."""
    wanted = set(keys)
    for assets_def in defs.assets or []:
        if not isinstance(assets_def, AssetsDefinition) or assets_def.can_subset:
            continue
        if assets_def.keys & wanted:
            wanted |= assets_def.keys
    return sorted(wanted, key=lambda k: k.to_user_string())
