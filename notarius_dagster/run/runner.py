"""Runs the session asset job for one partition on the current Dagster instance (the path
`notarius run` and the tests share): builds the Definitions for the given profile, adds the
partition, executes in process with progress logging.

Runtime references go in as the run config a run launched in the UI would carry
(assets/factory.py: RuntimeReferences), so they are applied by the same code with the same
errors; they are checked by that code before the partition is added, so a bad one fails here
without leaving a failed run behind.

`only_stale` (what `notarius run` asks) runs only the assets that are not up to date
(assets/staleness.py): an unchanged re-run launches no run at all. The run executes in this
process (the lanes of one level at the same time inside their level's step, assets/factory.py),
recorded in the instance like any other run."""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from dagster import (
    AssetKey,
    DagsterEvent,
    DagsterInstance,
    Definitions,
    ExecuteInProcessResult,
    JobExecutionResult,
)
from pydantic import JsonValue

from assets.jobs import SESSION_JOB_NAME, with_execution_sets
from assets.partitions import sessions_partitions
from notarius_dagster.engine.errors import LLMUnavailableError, NotariusError
from notarius_dagster.engine.redaction import redact_secrets
from notarius_dagster.engine.registry import LaneRegistry
from notarius_dagster.engine.resolution import RuntimeBinding
from notarius_dagster.engine.session_steps import RunPipeline, RuntimeOverrides
from notarius_dagster.run_guard import cli_run_tags
from notarius_dagster.settings import (
    OFFLINE_SERVER_ENV,
    Settings,
    api_key,
    store_paths,
)

if TYPE_CHECKING:
    from assets.staleness import Staleness


@dataclass(frozen=True)
class RunOutcome:
    """`run_id` is None when everything was up to date (no run was launched)."""

    run_id: str | None
    success: bool
    error: str | None
    up_to_date: tuple[str, ...] = field(default=())
    ran: tuple[str, ...] = field(default=())


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


def adopt_offline_server(address: str | None) -> None:
    """Use the offline model server `address` names (the NOTARIUS_OFFLINE_API_BASE value,
    exported by the process that started it) in this process, so a lane here does not load
    the model again. For processes forked from a forkserver that started before the server
    did: they do not inherit the variable. None: nothing to adopt."""
    if address:
        os.environ[OFFLINE_SERVER_ENV] = address  # handed down: read by `settings.py`


def offline_server_for(
    *, profile: Path, data_root: Path, bundles_root: Path, llm_profile: str | None
) -> str | None:
    """Start (or reuse) this process's offline model server for `profile`'s LLM profile and
    return its address for other processes to adopt (`adopt_offline_server`): what `notarius
    run` does once for the sessions its workers run. None when the profile does not use the
    bundled model, does not resolve (each session's run reports why) or the server cannot
    start (the lanes fail with the reason, as always)."""
    from notarius_dagster.engine.errors import NotariusError
    from notarius_dagster.llm.offline import shared_server_address
    from notarius_dagster.llm.profiles import LLMProfile
    from notarius_dagster.run.definitions import run_pipeline

    settings = run_settings(
        profile=profile, data_root=data_root, bundles_root=bundles_root, llm_profile=llm_profile
    )
    try:
        llm = LLMProfile.model_validate(run_pipeline(settings).pipeline.llm_profile)
    except NotariusError:
        return None
    if llm.server != "llama-cpp":
        return None
    try:
        address = shared_server_address(llm)
    except LLMUnavailableError:
        return None
    adopt_offline_server(address)
    return address


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
    progress_level: str = "INFO",
    max_calls: int | None = None,
    only_stale: bool = False,
    retry_rejected: bool = False,
    registry: LaneRegistry | None = None,
) -> RunOutcome:
    """Materialize one session. Raises NotariusError (before anything runs) for a profile or
    runtime references that do not resolve; a run that fails is an unsuccessful outcome.
    `registry` (default: the D&D one) is the lanes the graph is built from."""
    from assets.factory import runtime_references_config
    from notarius_dagster.run.definitions import definitions_for, run_pipeline

    settings = run_settings(
        profile=profile, data_root=data_root, bundles_root=bundles_root, llm_profile=llm_profile
    )
    plan = run_pipeline(settings, lanes=lanes, registry=registry)
    # A model that cannot be called (no key, no provider package) stops the run here: no
    # partition, no run (notarius_dagster/llm/preflight.py).
    from notarius_dagster.llm.preflight import check_ready
    from notarius_dagster.llm.profiles import LLMProfile

    llm = LLMProfile.model_validate(plan.pipeline.llm_profile)
    check_ready(llm, api_key(llm.api_key_env))
    overrides = RuntimeOverrides(
        references={b.selector: b.path for b in runtime_references},
        unbind=tuple(runtime_unbinds),
        max_calls=max_calls,
    )
    plan.for_run(overrides)  # the check each asset makes, made once before the run
    defs = definitions_for(settings, plan)
    run_config: dict[str, JsonValue] = {}
    if overrides.active() or max_calls is not None or retry_rejected:
        run_config.update(
            runtime_references_config(
                plan.pipeline,
                overrides.references,
                overrides.unbind,
                max_calls,
                retry_rejected=retry_rejected,
            )
        )
    if not quiet:  # progress lines on the terminal (ERROR: errors only), else Dagster's console
        run_config["loggers"] = {"progress": {"config": {"log_level": progress_level}}}
    instance = instance or DagsterInstance.get()
    instance.add_dynamic_partitions(sessions_partitions.name or "sessions", [session_id])
    selection: list[AssetKey] | None = None
    up_to_date: tuple[str, ...] = ()
    if only_stale and not retry_rejected:
        staleness = _staleness(defs, instance, plan, overrides, settings, session_id)
        up_to_date = tuple(k.to_user_string() for k in staleness.up_to_date)
        if not staleness.stale:
            return RunOutcome(run_id=None, success=True, error=None, up_to_date=up_to_date)
        if staleness.up_to_date:
            selection = with_execution_sets(defs, staleness.stale)
            # A level-mate of a stale lane runs with it (from its checkpoints): not "up to date".
            up_to_date = tuple(
                k.to_user_string() for k in staleness.up_to_date if k not in selection
            )
    job = defs.resolve_job_def(SESSION_JOB_NAME)
    result = job.execute_in_process(
        instance=instance,
        partition_key=session_id,
        raise_on_error=False,
        run_config=run_config,
        asset_selection=selection,
        tags=cli_run_tags(session_id),
    )
    ran = tuple(k.to_user_string() for k in (selection or ()))
    return RunOutcome(
        run_id=result.run_id,
        success=result.success,
        error=_first_error(result),
        up_to_date=up_to_date,
        ran=ran,
    )


def _staleness(
    defs: Definitions,
    instance: DagsterInstance,
    plan: RunPipeline,
    overrides: RuntimeOverrides,
    settings: Settings,
    session_id: str,
) -> Staleness:
    from assets.factory import external_inputs_digest
    from assets.graph_style import SESSION_GROUPS
    from assets.staleness import session_staleness
    from notarius_dagster.llm.profiles import LLMProfile

    llm_fingerprint = LLMProfile.model_validate(plan.pipeline.llm_profile).fingerprint()
    inputs = external_inputs_digest(
        plan,
        overrides,
        transcripts=settings.store.transcripts,
        session_id=session_id,
        llm_fingerprint=llm_fingerprint,
    )
    bundle = settings.store.bundles / session_id
    return session_staleness(
        defs,
        instance,
        session_id,
        groups=SESSION_GROUPS,
        external_inputs=inputs,
        extra_checks={"session_bundle": lambda: (bundle / "manifest.json").is_file()},
    )


def _first_error(result: JobExecutionResult | ExecuteInProcessResult) -> str | None:
    """The first step failure's cause (`failure_text`), or a generic line."""
    if result.success:
        return None
    failures = [e for e in result.all_events if e.is_step_failure]
    return failure_text(failures[0]) if failures else "the run did not succeed"


_ERRNO = re.compile(r"\[Errno (\d+)\]")


def failure_text(event: DagsterEvent) -> str:
    """The cause of a step failure, as the CLI prints it: the `Failure` description the asset
    gave (content-safe by construction), else Dagster's message followed by the class of each
    cause it wraps (`Error occurred while executing op ...:` says nothing by itself), with an
    errno's meaning instead of an OSError's own text (which carries a path). Credentials that
    slipped in anyway are redacted."""
    data = event.step_failure_data
    step = event.step_key or "run"
    if data is None:
        return f"{step}: failed"
    user = data.user_failure_data
    if user is not None and user.description:
        description = user.description.strip()
        # Most assets name themselves; a level's step names each lane that failed.
        named = description.startswith((f"{step}:", "lane "))
        return redact_secrets(description if named else f"{step}: {description}")
    if data.error is None:
        return f"{step}: failed"
    parts = [data.error.message.strip().rstrip(":")]
    cause = data.error.cause or data.error.context
    while cause is not None and len(parts) < 6:
        parts.append(_cause_text(cause))
        cause = cause.cause or cause.context
    return redact_secrets(f"{step}: " + ": ".join(p for p in parts if p))


class _ErrorInfo(Protocol):
    """What `_cause_text` reads of Dagster's serialized error info."""

    @property
    def message(self) -> str: ...

    @property
    def cls_name(self) -> str | None: ...


def _cause_text(error: _ErrorInfo) -> str:
    """One wrapped cause (Dagster's serialized error info: `cls_name`, `message`)."""
    found = _ERRNO.search(error.message)
    if found:
        code = int(found.group(1))
        symbol = errno.errorcode.get(code, f"errno {code}")
        return f"{error.cls_name}: {os.strerror(code).lower()} ({symbol})"
    if error.cls_name == "MemoryError":
        return "out of memory (MemoryError)"
    if error.cls_name in _content_safe_errors():  # our own errors: content-safe by contract
        return error.message.strip().splitlines()[0].rsplit(f"{error.cls_name}: ", 1)[-1]
    return error.cls_name or ""


def _content_safe_errors() -> set[str]:
    """The class names of every NotariusError (engine/errors.py: their messages name what and
    where, never content or paths), so a wrapped one is shown with its message."""
    found: set[str] = set()
    todo: list[type] = [NotariusError]
    while todo:
        cls = todo.pop()
        found.add(cls.__name__)
        todo.extend(cls.__subclasses__())
    return found
