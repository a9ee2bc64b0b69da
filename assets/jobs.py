"""The one asset job: materialize every asset of a session partition (the `ingest`, `lanes` and
`publish` groups, without the external transcript)."""

from dagster import AssetSelection, define_asset_job

from assets.graph_style import SESSION_GROUPS
from assets.partitions import sessions_partitions

SESSION_JOB_NAME = "materialize_session"

session_selection = AssetSelection.groups(*SESSION_GROUPS) - AssetSelection.assets("transcript")

materialize_session = define_asset_job(
    SESSION_JOB_NAME,
    selection=session_selection,
    partitions_def=sessions_partitions,
    description="Turn one session transcript into its published bundle.",
)
