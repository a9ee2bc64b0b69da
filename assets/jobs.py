"""The one asset job: materialize every asset of a session partition."""

from dagster import AssetSelection, define_asset_job

from assets.partitions import sessions_partitions

SESSION_JOB_NAME = "materialize_session"

session_selection = AssetSelection.groups("session") - AssetSelection.assets("transcript")

materialize_session = define_asset_job(
    SESSION_JOB_NAME,
    selection=session_selection,
    partitions_def=sessions_partitions,
    description="Turn one session transcript into its published bundle.",
)
