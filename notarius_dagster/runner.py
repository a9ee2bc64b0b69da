"""Runs the session asset job for one partition on the current Dagster instance (the path
`notarius run` and the tests share): builds the Definitions for the given profile, adds the
partition, executes in process with progress logging."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dagster import DagsterInstance, Definitions

from assets.jobs import SESSION_JOB_NAME
from assets.partitions import sessions_partitions
from notarius_dagster.engine.resolution import RuntimeBinding


@dataclass(frozen=True)
class RunOutcome:
    run_id: str
    success: bool
    error: str | None


def build_run_definitions(
    *,
    profile: Path,
    data_root: Path,
    bundles_root: Path | None = None,
    llm_profile: str | None = None,
    runtime_references: Sequence[RuntimeBinding] = (),
    runtime_unbinds: Sequence[str] = (),
    lanes: Sequence[str] | None = None,
) -> Definitions:
    from notarius_dagster.definitions import build_definitions
    from notarius_dagster.settings import Settings

    settings = Settings(
        profile=profile.resolve(),
        data_root=data_root,
        inbox=data_root / "inbox",
        llm_profile=llm_profile,
        bundles_root=bundles_root,
    )
    return build_definitions(
        settings,
        runtime_references=runtime_references,
        runtime_unbinds=runtime_unbinds,
        lanes=lanes,
    )


def run_session(
    *,
    session_id: str,
    profile: Path,
    data_root: Path,
    bundles_root: Path | None = None,
    llm_profile: str | None = None,
    runtime_references: Sequence[RuntimeBinding] = (),
    runtime_unbinds: Sequence[str] = (),
    lanes: Sequence[str] | None = None,
    instance: DagsterInstance | None = None,
    quiet: bool = False,
) -> RunOutcome:
    defs = build_run_definitions(
        profile=profile,
        data_root=data_root,
        bundles_root=bundles_root,
        llm_profile=llm_profile,
        runtime_references=runtime_references,
        runtime_unbinds=runtime_unbinds,
        lanes=lanes,
    )
    instance = instance or DagsterInstance.get()
    instance.add_dynamic_partitions(sessions_partitions.name or "sessions", [session_id])
    job = defs.resolve_job_def(SESSION_JOB_NAME)
    run_config = {} if quiet else {"loggers": {"progress": {"config": {"log_level": "INFO"}}}}
    result = job.execute_in_process(
        instance=instance, partition_key=session_id, raise_on_error=False, run_config=run_config
    )
    error = None
    if not result.success:
        failures = [e for e in result.all_events if e.is_step_failure]
        if failures and failures[0].step_failure_data and failures[0].step_failure_data.error:
            err = failures[0].step_failure_data.error
            error = f"{failures[0].step_key}: {err.message.strip()}"
        else:
            error = "the run did not succeed"
    return RunOutcome(run_id=result.run_id, success=result.success, error=error)
