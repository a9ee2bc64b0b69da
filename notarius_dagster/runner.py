"""Runs the session asset job for one partition on the current Dagster instance (the path
`notarius run` and the tests share): builds the Definitions for the given profile, adds the
partition, executes in process with progress logging.

Runtime references go in as the run config a run launched in the UI would carry
(assets/factory.py: RuntimeReferences), so they are applied by the same code with the same
errors; they are checked by that code before the partition is added, so a bad one fails here
without leaving a failed run behind."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dagster import DagsterInstance, Definitions

from assets.jobs import SESSION_JOB_NAME
from assets.partitions import sessions_partitions
from notarius_dagster.engine.resolution import RuntimeBinding
from notarius_dagster.engine.session_steps import RuntimeOverrides
from notarius_dagster.run_guard import cli_run_tags
from notarius_dagster.settings import Settings
from notarius_dagster.store import store_paths


@dataclass(frozen=True)
class RunOutcome:
    run_id: str
    success: bool
    error: str | None


def run_settings(
    *,
    profile: Path,
    data_root: Path | None = None,
    bundles_root: Path | None = None,
    llm_profile: str | None = None,
) -> Settings:
    """Settings for one run: the store from the options, else the environment
    (notarius_dagster/store.py)."""
    return Settings(
        profile=profile.resolve(),
        llm_profile=llm_profile,
        store=store_paths(data=data_root, bundles=bundles_root),
    )


def build_run_definitions(
    *,
    profile: Path,
    data_root: Path | None = None,
    bundles_root: Path | None = None,
    llm_profile: str | None = None,
    lanes: Sequence[str] | None = None,
) -> Definitions:
    from notarius_dagster.definitions import build_definitions

    settings = run_settings(
        profile=profile, data_root=data_root, bundles_root=bundles_root, llm_profile=llm_profile
    )
    return build_definitions(settings, lanes=lanes)


def run_session(
    *,
    session_id: str,
    profile: Path,
    data_root: Path | None = None,
    bundles_root: Path | None = None,
    llm_profile: str | None = None,
    runtime_references: Sequence[RuntimeBinding] = (),
    runtime_unbinds: Sequence[str] = (),
    lanes: Sequence[str] | None = None,
    instance: DagsterInstance | None = None,
    quiet: bool = False,
    max_calls: int | None = None,
) -> RunOutcome:
    """Materialize one session. Raises NotariusError (before anything runs) for a profile or
    runtime references that do not resolve; a run that fails is an unsuccessful outcome."""
    from assets.factory import runtime_references_config
    from notarius_dagster.definitions import definitions_for, run_pipeline

    settings = run_settings(
        profile=profile, data_root=data_root, bundles_root=bundles_root, llm_profile=llm_profile
    )
    plan = run_pipeline(settings, lanes=lanes)
    overrides = RuntimeOverrides(
        references={b.selector: b.path for b in runtime_references},
        unbind=tuple(runtime_unbinds),
        max_calls=max_calls,
    )
    plan.for_run(overrides)  # the check each asset makes, made once before the run
    defs = definitions_for(settings, plan)
    run_config: dict[str, Any] = {}
    if overrides.active() or max_calls is not None:
        run_config.update(
            runtime_references_config(
                plan.pipeline, overrides.references, overrides.unbind, max_calls
            )
        )
    if not quiet:
        run_config["loggers"] = {"progress": {"config": {"log_level": "INFO"}}}
    instance = instance or DagsterInstance.get()
    instance.add_dynamic_partitions(sessions_partitions.name or "sessions", [session_id])
    job = defs.resolve_job_def(SESSION_JOB_NAME)
    result = job.execute_in_process(
        instance=instance, partition_key=session_id, raise_on_error=False, run_config=run_config,
        tags=cli_run_tags(session_id),
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
