"""The optional `evidence_context` asset: the transcript units around what the allowlisted lanes
cite, from their accepted artifacts and the source document (engine/evidence.py does the work).

It exists only when the profile's json output enables `evidence_context`; its inputs are the
source document and the allowlisted lanes that are part of this (possibly lane-filtered) run.
Allowlisted lanes left out of the run contribute nothing; the document still records the whole
allowlist. Its metadata counts contexts, units and lanes, never text."""

# No `from __future__ import annotations` here: Dagster checks the `context` annotation of an
# asset without resources as a real type, not a string.
from typing import Any

from dagster import (
    AssetExecutionContext,
    AssetIn,
    AssetsDefinition,
    Failure,
    MetadataValue,
    Output,
    asset,
)

from assets.automation import session_condition
from assets.factory import asset_name
from assets.graph_style import PUBLISH_GROUP, owners
from assets.partitions import sessions_partitions
from assets.run_tags import ensure_run_tags
from notarius_dagster.engine.digest import digest_of
from notarius_dagster.engine.errors import EvidenceError
from notarius_dagster.engine.evidence import EvidenceContext, build_evidence_context
from notarius_dagster.engine.models import SourceDocument
from notarius_dagster.engine.registry import LaneRegistry
from notarius_dagster.engine.resolution import ResolvedPipeline

EVIDENCE_ASSET = "evidence_context"
_CODE_VERSION = "1"


def build_evidence_context_asset(
    pipeline: ResolvedPipeline, registry: LaneRegistry
) -> AssetsDefinition | None:
    """The asset for this pipeline, or None when evidence publication is not enabled."""
    policy = pipeline.output_options["evidence_context"]
    if policy is None:
        return None
    allowlist = list(policy["lanes"])
    window = policy["window_units"]
    in_run = [lane.id for lane in pipeline.lanes if lane.id in set(allowlist)]
    kinds = registry.kinds()
    ins = {"source_document": AssetIn("source_document")}
    ins.update({asset_name(lane_id): AssetIn(asset_name(lane_id)) for lane_id in in_run})
    # The policy is part of the code version: a new window or allowlist makes it stale.
    code_version = f"{_CODE_VERSION}-{digest_of(policy).split(':', 1)[1][:12]}"

    @asset(
        name=EVIDENCE_ASSET,
        group_name=PUBLISH_GROUP,
        owners=owners(),
        partitions_def=sessions_partitions,
        ins=ins,
        code_version=code_version,
        kinds={"python", "json"},
        automation_condition=session_condition(),
        description=f"Transcript units within {window} unit(s) of what the allowlisted lanes "
        f"({', '.join(allowlist)}) cite, deduplicated; published as "
        "evidence-context.json. Depends on: source_document and the "
        "allowlisted lanes in this profile.",
    )
    def evidence_context(
        context: AssetExecutionContext, **upstream: Any
    ) -> Output[EvidenceContext]:
        ensure_run_tags(context, pipeline)
        document: SourceDocument = upstream["source_document"]
        results = [upstream[asset_name(lane_id)] for lane_id in in_run]
        try:
            evidence = build_evidence_context(
                document, results, lanes=allowlist, window_units=window, kinds=kinds
            )
        except EvidenceError as exc:
            raise Failure(description=f"{EVIDENCE_ASSET}: {exc}") from None
        return Output(
            evidence,
            metadata={
                "contexts": len(evidence.contexts),
                "units": evidence.unit_count(),
                "direct_references": evidence.reference_count(),
                "window_units": evidence.window_units,
                "lanes_contributing": MetadataValue.json(evidence.contributing_lanes()),
                "lanes_allowlisted": MetadataValue.json(list(evidence.lanes)),
                "lanes_in_run": MetadataValue.json(in_run),
            },
        )

    return evidence_context
