"""The `session_report` asset: the session's HTML report, rendered from the bundle that
`session_bundle` just published (notarius_dagster/report/ does the work; docs/report.md).

It is written beside the bundles, at `<bundles root>/.reports/<session>.html`, never inside the
published bundle folder (whose files are exactly what its index lists). Its metadata carries the
report's path and, when `NOTARIUS_REPORT_BASE_URL` says where the reports folder is served, its
URL: a contract of this asset (the page itself is the one place, besides the evidence context,
that holds transcript text; the metadata holds counts, the path and the URL only)."""

# No `from __future__ import annotations` here: Dagster reads the asset function's annotations
# as real types.
from pathlib import Path
from typing import Any

from dagster import (
    AssetExecutionContext,
    AssetKey,
    AssetsDefinition,
    Failure,
    MaterializeResult,
    MetadataValue,
    asset,
)

from assets.automation import session_condition
from assets.graph_style import PUBLISH_GROUP, owners
from assets.partitions import sessions_partitions
from assets.run_tags import ensure_run_tags
from notarius_dagster.dnd.roster import Roster
from notarius_dagster.engine.registry import LaneRegistry
from notarius_dagster.engine.resolution import ResolvedPipeline
from notarius_dagster.report import (
    RENDERER_VERSION,
    ReportError,
    load_bundle,
    report_url,
    write_report,
)
from notarius_dagster.report.render import CampaignLink, render_page
from notarius_dagster.report.speakers import Speakers
from notarius_dagster.settings import load_settings
from resources.bundle_store import BundleStore

REPORT_ASSET = "session_report"
BUNDLE_ASSET = AssetKey("session_bundle")


def bound_roster(roster_file: Path | None) -> Roster | None:
    """The profile's roster, or None: no roster, or one that does not load (the lanes that
    bind it report that, with its reason; the report then shows labels as they are)."""
    from notarius_dagster.campaign.store import CodexError, load_roster

    if roster_file is None:
        return None
    try:
        return load_roster(roster_file)
    except CodexError:
        return None


def campaign_link(roster: Roster | None, session_id: str) -> CampaignLink | None:
    """The campaign page link of a session its roster lists (None: no roster or not listed)."""
    if roster is None or not any(s.id == session_id for s in roster.sessions):
        return None
    return CampaignLink(campaign=roster.campaign, title=roster.title)


def build_report_asset(
    *,
    registry: LaneRegistry,
    base_url: str | None = None,
    pipeline: ResolvedPipeline | None = None,
    roster_file: Path | None = None,
) -> AssetsDefinition:
    """The report asset. `base_url` is where the reports folder is served (a report's URL is
    `<base_url>/<session>.html`); None reads NOTARIUS_REPORT_BASE_URL when the asset runs, and
    no URL is recorded when that is unset too. With `pipeline`, a run that starts here gets
    the session's run tags (assets/run_tags.py). `roster_file` is the profile's campaign roster:
    a session it lists gets a link to the campaign page, and speaker labels are shown as the
    characters they denote (`report/speakers.py`). `registry` gives the report every lane's
    `LaneSpec`: each lane's section as its spec declares, its records read with its own
    models."""

    @asset(
        name=REPORT_ASSET,
        group_name=PUBLISH_GROUP,
        owners=owners(),
        partitions_def=sessions_partitions,
        deps=[BUNDLE_ASSET],
        code_version=RENDERER_VERSION,
        kinds={"python", "html"},
        automation_condition=session_condition(),
        description="A static HTML page of the published bundle: a section per lane as its "
        "LaneSpec declares (scenes, NPC cards, combat rounds, spells, items, NPC "
        "interactions, ...), each record linked to the transcript lines it cites; rejections "
        "and warnings. No LLM call; written beside the bundles "
        "(.reports/<session>.html). Depends on: session_bundle.",
    )
    def session_report(context: AssetExecutionContext, store: BundleStore) -> MaterializeResult:
        if pipeline is not None:
            ensure_run_tags(context, pipeline)
        session_id = context.partition_key
        try:
            inputs = load_bundle(store.bundles / session_id, registry)
            roster = bound_roster(roster_file)
            rendered = render_page(
                inputs, campaign_link(roster, session_id), Speakers.of(roster, session_id)
            )
            path = write_report(store.bundles, session_id, rendered.html)
        except ReportError as exc:
            raise Failure(description=f"{REPORT_ASSET}: {exc}") from None
        metadata: dict[str, Any] = {
            "path": MetadataValue.path(str(path)),
            "bundle_run_id": inputs.run_id,
            "bytes": len(rendered.html.encode("utf-8")),
            "records": rendered.records,
            "units_listed": rendered.units_listed,
            "units_with_text": rendered.units_with_text,
            "evidence_context": inputs.evidence is not None,
        }
        served_at = base_url if base_url is not None else load_settings().report_base_url
        if served_at:
            metadata["url"] = MetadataValue.url(report_url(served_at, session_id))
        return MaterializeResult(metadata=metadata)

    return session_report
