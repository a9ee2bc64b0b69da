"""The one asset job: materialize every asset of a session partition (the `ingest`, `lanes` and
`publish` groups, without the external transcript). Its partitions are the selected assets'
own (`sessions_partitions`): Dagster infers them, so the job does not restate them (the job's
`partitions_def` argument is deprecated)."""

from dagster import AssetSelection, define_asset_job

from assets.graph_style import SESSION_GROUPS

SESSION_JOB_NAME = "materialize_session"

session_selection = AssetSelection.groups(*SESSION_GROUPS) - AssetSelection.assets("transcript")

materialize_session = define_asset_job(
    SESSION_JOB_NAME,
    selection=session_selection,
    description="Turn one session transcript into its published bundle.",
)
