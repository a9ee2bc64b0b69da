"""The `campaign_codex` asset and the sensor that keeps it current (docs/campaign.md).

Shape: one code location is one profile, and a profile that binds a roster at the pipeline
level (`pipeline.references.roster`) serves that roster's campaign. The codex is an
unpartitioned asset downstream of every session's `session_bundle` (an `AssetDep` with
`AllPartitionMapping`): one codex for all the partitions. It reads the PUBLISHED lane files of
the sessions the roster lists (never transcripts, prompts or asset values), so a session that
is not published — not run yet, or deleted with `notarius sessions delete` — contributes
nothing, and no session re-runs for it. Its data version is the codex's digest: a rebuild that
changes nothing is a new materialization with the same data version.

The sensor `campaign_codex_sensor` requests one codex run per change of the campaign's
sessions (`codex_decision`): a `session_bundle` materialization of a session the roster lists,
newer than its cursor, whose data version differs from the one the codex last saw. Bundles of
sessions outside the roster, bundles re-published unchanged, and bundles the codex was already
built after (e.g. "Materialize all", which builds the codex in the session's own run) ask for
nothing. When the sessions that have a bundle differ from those the codex lists as published
(`notarius sessions delete`), it asks again. No LLM call is
made, so it runs by default."""

# No `from __future__ import annotations` here: Dagster reads the asset function's annotations
# as real types.
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from dagster import (
    AllPartitionMapping,
    AssetDep,
    AssetExecutionContext,
    AssetKey,
    AssetRecordsFilter,
    AssetsDefinition,
    DagsterInstance,
    DataVersion,
    DefaultSensorStatus,
    EventLogRecord,
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

from assets.dagster_tags import DATA_VERSION_TAG
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


@dataclass(frozen=True)
class CodexCursor:
    """What the codex sensor has seen: the newest roster bundle materialization it acted on
    (`after`, a storage id) and each roster session's bundle data version then (`versions`)."""

    after: int = 0
    versions: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, raw: str | None) -> "CodexCursor":
        """A cursor from its JSON (an older bare storage id is read as `after`)."""
        if not raw:
            return cls()
        if raw.isdigit():
            return cls(after=int(raw))
        data = json.loads(raw)
        return cls(after=int(data.get("after", 0)), versions=dict(data.get("versions", {})))

    def dump(self) -> str:
        return json.dumps({"after": self.after, "versions": self.versions}, sort_keys=True)


def _data_version(record: EventLogRecord) -> str:
    materialization = record.asset_materialization
    return (materialization.tags or {}).get(DATA_VERSION_TAG, "") if materialization else ""


def codex_decision(
    instance: DagsterInstance, sessions: list[str], raw_cursor: str | None
) -> tuple[RunRequest | SkipReason, str | None]:
    """Whether the codex needs a build, and the sensor's next cursor.

    A build is asked for once per change of the roster's sessions: a `session_bundle`
    materialization of a roster session, newer than the cursor, whose data version differs from
    the one the codex last saw. Bundles of sessions outside the roster are never looked at; a
    codex materialized after the newest bundle (e.g. by "Materialize all" in the same run)
    already covers it."""
    cursor = CodexCursor.parse(raw_cursor)
    if not sessions:
        return SkipReason("the roster lists no session"), raw_cursor
    new = instance.fetch_materializations(
        AssetRecordsFilter(BUNDLE_ASSET, asset_partitions=sessions, after_storage_id=cursor.after),
        limit=1000,
        ascending=True,
    ).records
    if not new:
        if not cursor.after:
            return SkipReason("no session of the roster has a published bundle yet"), raw_cursor
        return SkipReason("no bundle of the roster's sessions changed since the last codex"), (
            raw_cursor
        )
    versions = dict(cursor.versions)
    changed = False
    for record in new:
        session = record.partition_key or ""
        version = _data_version(record)
        changed = changed or not version or versions.get(session) != version
        versions[session] = version
    latest = new[-1].storage_id
    advanced = CodexCursor(after=latest, versions=versions).dump()
    if not changed:
        return SkipReason("the roster's bundles were re-published unchanged"), advanced
    codex = instance.fetch_materializations(AssetKey(CODEX_ASSET), limit=1).records
    if codex and codex[0].storage_id > latest:
        return SkipReason("the codex was already built after the latest bundle"), advanced
    return RunRequest(run_key=f"codex-after-{latest}"), advanced


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
        description="Rebuilds the campaign codex once after a session of its roster publishes a "
        "changed bundle (never for sessions outside the roster, never when the codex was "
        "already built after it).",
    )
    def campaign_codex_sensor(context: SensorEvaluationContext) -> RunRequest | SkipReason:
        try:
            sessions = [s.id for s in load_roster(roster_file).ordered_sessions()]
        except (CodexError, ValueError) as exc:
            return SkipReason(f"the roster cannot be read: {exc}")
        decision, cursor = codex_decision(context.instance, sessions, context.cursor)
        if cursor != context.cursor:
            context.update_cursor(cursor)
        if isinstance(decision, SkipReason) and bundles_root is not None:
            existing = published_differs(bundles_root, roster_file)
            if existing is not None:  # a session was deleted: one run per (bundle, set)
                seen = CodexCursor.parse(cursor).after
                return RunRequest(run_key=f"codex-after-{seen}-{'+'.join(existing)}"[:500])
        return decision

    return [campaign_codex], [campaign_codex_sensor]
