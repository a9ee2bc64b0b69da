"""The `campaign_codex` asset and the sensor that keeps it current (docs/campaign.md).

Shape: one code location is one profile, and a profile that binds a roster at the pipeline
level (`pipeline.references.roster`) serves that roster's campaign. The codex is an
unpartitioned asset downstream of every session's `session_bundle` (an `AssetDep` with
`AllPartitionMapping`): one codex for all the partitions. It reads the PUBLISHED lane files of
the sessions the roster lists (never transcripts, prompts or asset values), so a session that
is not published — not run yet, or deleted with `notarius sessions delete` — contributes
nothing, and no session re-runs for it. Its data version is the codex's digest: a rebuild that
changes nothing is a new materialization with the same data version.

The sensor `campaign_codex_sensor` requests a codex run whenever a `session_bundle`
materialization newer than its cursor exists (any partition): publishing, or re-publishing
after a prompt edit, updates the codex; and when the sessions that have a bundle differ from
those the codex lists as published (`notarius sessions delete`), it asks again. No LLM call is
made, so it runs by default."""

# No `from __future__ import annotations` here: Dagster reads the asset function's annotations
# as real types.
import time
from pathlib import Path

from dagster import (
    AllPartitionMapping,
    AssetDep,
    AssetExecutionContext,
    AssetKey,
    AssetsDefinition,
    DataVersion,
    DefaultSensorStatus,
    Failure,
    MaterializeResult,
    MetadataValue,
    RunRequest,
    SensorDefinition,
    SensorEvaluationContext,
    SkipReason,
    asset,
    sensor,
)

from notarius_dagster.campaign.store import (
    CodexError,
    load_roster,
    page_path,
    publish_codex,
    read_index,
)
from notarius_dagster.dnd.roster import ROSTER_SLOT
from notarius_dagster.engine.registry import LaneRegistry
from notarius_dagster.engine.resolution import ResolvedPipeline
from resources.bundle_store import BundleStore

CODEX_ASSET = "campaign_codex"
CAMPAIGN_GROUP = "campaign"
CODEX_VERSION = "1"
"""The codex builder's version (bump when the same lane files give a different codex)."""
CODEX_SENSOR = "campaign_codex_sensor"
BUNDLE_ASSET = AssetKey("session_bundle")


def pipeline_roster(pipeline: ResolvedPipeline) -> Path | None:
    """The roster file the profile binds at the pipeline level (None: no campaign)."""
    for lane in pipeline.lanes:
        for binding in lane.extract.references:
            if binding.slot == ROSTER_SLOT and binding.source == "pipeline" and binding.path:
                return Path(binding.path)
    return None


def published_differs(bundles_root: Path, roster_file: Path) -> list[str] | None:
    """The roster's sessions that have a bundle, when they differ from those the codex index
    lists as published (a session deleted, or published elsewhere), else None."""
    try:
        roster = load_roster(roster_file)
        entry = next(
            (c for c in read_index(bundles_root).campaigns if c.campaign == roster.campaign), None
        )
    except (CodexError, ValueError):
        return None
    if entry is None:
        return None
    existing = [s.id for s in roster.ordered_sessions() if (bundles_root / s.id).exists()]
    return existing if existing != entry.published else None


def build_campaign_assets(
    pipeline: ResolvedPipeline, registry: LaneRegistry, bundles_root: Path | None = None
) -> tuple[list[AssetsDefinition], list[SensorDefinition]]:
    """The codex asset and its sensor, or nothing when the profile binds no roster.
    `bundles_root` lets the sensor also notice deleted sessions."""
    roster_file = pipeline_roster(pipeline)
    if roster_file is None:
        return [], []

    @asset(
        name=CODEX_ASSET,
        group_name=CAMPAIGN_GROUP,
        deps=[AssetDep(BUNDLE_ASSET, partition_mapping=AllPartitionMapping())],
        code_version=CODEX_VERSION,
        kinds={"json", "html"},
        description="The campaign codex: NPCs across sessions (merged by name, declared alias "
        "or the roster), the item ledger and holders, spells per caster, scenes in campaign "
        "order, from the published lane files of the roster's sessions. No LLM call; written "
        "beside the bundles (.campaigns/<campaign>/codex.json and codex.html).",
    )
    def campaign_codex(context: AssetExecutionContext, store: BundleStore) -> MaterializeResult:
        started = time.perf_counter()
        try:
            roster = load_roster(roster_file)
            published = publish_codex(store.bundles, roster, registry)
        except CodexError as exc:
            raise Failure(description=f"{CODEX_ASSET}: {exc}") from None
        codex = published.codex
        return MaterializeResult(
            data_version=DataVersion(published.digest),
            metadata={
                "campaign": codex.campaign,
                "path": MetadataValue.path(str(published.path)),
                "page": MetadataValue.path(str(page_path(store.bundles, codex.campaign))),
                "sessions": len(codex.sessions),
                "sessions_published": sum(s.published for s in codex.sessions),
                "npcs": len(codex.npcs),
                "possibly_same": len(codex.possibly_same),
                "item_events": len(codex.item_events),
                "spells_cast": sum(s.count for s in codex.spells),
                "scenes": len(codex.scenes),
                "changed": published.changed,
                "digest": published.digest,
                "seconds": round(time.perf_counter() - started, 3),
            },
        )

    @sensor(
        name=CODEX_SENSOR,
        asset_selection=[AssetKey(CODEX_ASSET)],
        minimum_interval_seconds=30,
        default_status=DefaultSensorStatus.RUNNING,
        description="Rebuilds the campaign codex after any session bundle is published.",
    )
    def campaign_codex_sensor(context: SensorEvaluationContext) -> RunRequest | SkipReason:
        result = context.instance.fetch_materializations(BUNDLE_ASSET, limit=1)
        latest = result.records[0].storage_id if result.records else 0
        if context.cursor and int(context.cursor) >= latest:
            existing = published_differs(bundles_root, roster_file) if bundles_root else None
            if existing is not None:  # a session was deleted: one run per (bundle, set)
                return RunRequest(run_key=f"codex-after-{latest}-{'+'.join(existing)}"[:500])
            return SkipReason("no session bundle published or deleted since the last codex")
        if not latest:
            return SkipReason("no session bundle has been published yet")
        context.update_cursor(str(latest))
        return RunRequest(run_key=f"codex-after-{latest}")

    return [campaign_codex], [campaign_codex_sensor]
