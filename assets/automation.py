"""Declarative automation: which (asset, session) pairs re-materialize on their own, and the one
sensor that launches them.

Every materializable session asset carries `session_condition()`:

- Dagster's `eager()`: a partition runs when one of its dependencies was updated (or will be
  requested on the same tick), or when the partition is newly missing, and never while a
  dependency is missing or in progress or the asset itself is in progress. A session added
  with `notarius sessions add` reports a materialization of the external `transcript` asset
  (`notarius_dagster/sessions.py: add_session`), so its `source_document` runs and the rest
  of the graph follows. A partition without a transcript never runs: its `transcript` is
  missing, which `eager()` waits for.
- `code_version_changed()`, held until this sensor requests the partition (not merely until
  the next materialization, which may be the old code's): when the code location reloads with a new
  code version (a prompt, schema or lane-configuration edit) the asset re-runs, but only in
  the partitions that were materialized before (`~missing()`), under the same guards. Its
  dependants follow through `eager()` (their dependency will be requested on this tick).

The sensor (`AUTOMATION_SENSOR_NAME`) evaluates these conditions for the whole code location.
It runs by default, so its first evaluation (one interval after the code location loads)
records the code versions a later edit is compared with: `code_version_changed()` has no
baseline before a sensor's first evaluation, so a sensor switched on only after an edit would
never see that edit (measured on Dagster 1.13: "set: never" on the first tick). A prompt edit
therefore re-runs that lane in every session materialized before, which costs model calls for
every changed chunk (checkpoints keep the rest free); NOTARIUS_AUTOMATION=stopped (or the
toggle under *Automation*) opts out, and `notarius backfill --stale` is then the route.
It launches plain runs, one per session (it never emits backfills), tagged like every other
run (`assets/run_tags.py`). The run queue (`dagster.yaml:
concurrency.runs.max_concurrent_runs`) bounds how many of them run at once."""

from __future__ import annotations

from dagster import (
    AssetSelection,
    AutomationCondition,
    AutomationConditionSensorDefinition,
    DefaultSensorStatus,
)

from notarius_dagster.engine.errors import NotariusError
from notarius_dagster.settings import AUTOMATION_ENV, AUTOMATION_INTERVAL_ENV, load_settings

AUTOMATION_SENSOR_NAME = "notarius_automation_sensor"
MINIMUM_INTERVAL_S = 30


def code_version_changed_condition() -> AutomationCondition:
    """Re-run a partition that was materialized under an older code version."""
    # Typed as the base class: the operand's own generic type does not unify with the
    # operators' self type in mypy.
    changed: AutomationCondition = AutomationCondition.code_version_changed()
    # Held until this sensor requests the partition, not until any materialization: Dagster's
    # `since_last_handled()` also resets on `newly_updated()`, and when a materialization made
    # by the old code (a run that ended just before the reload, or was still running) is seen
    # on the same tick as the code change, the reset wins (SinceCondition, Dagster 1.13) and the
    # edit is never re-run. Measured: 2 of 6 runs of tests/test_e2e_automation.py on one
    # machine. The price: a session re-materialized by hand after an edit, before the sensor's
    # next tick, is re-run once more by the sensor (every chunk from its checkpoint, no call).
    handled = (
        AutomationCondition.newly_requested() | AutomationCondition.initial_evaluation()
    ).with_label("requested")
    return (
        changed.since(handled)
        & ~AutomationCondition.missing()
        & ~AutomationCondition.any_deps_missing()
        & ~AutomationCondition.any_deps_in_progress()
        & ~AutomationCondition.in_progress()
    ).with_label("code_version_changed")


def session_condition() -> AutomationCondition:
    """The condition every materializable session asset carries (the module docstring)."""
    return (AutomationCondition.eager() | code_version_changed_condition()).with_label(
        "eager_or_code_version_changed"
    )


def automation_default_status() -> DefaultSensorStatus:
    """RUNNING unless NOTARIUS_AUTOMATION=stopped; any other value is an error naming it."""
    raw = (load_settings().automation or "").lower()
    if raw in ("", "running"):
        return DefaultSensorStatus.RUNNING
    if raw == "stopped":
        return DefaultSensorStatus.STOPPED
    raise NotariusError(f"{AUTOMATION_ENV} must be 'running' or 'stopped', got {raw!r}")


def automation_interval_s() -> int:
    """Seconds between evaluations: NOTARIUS_AUTOMATION_INTERVAL (a whole number of at least
    1), default 30."""
    raw = load_settings().automation_interval or ""
    if not raw:
        return MINIMUM_INTERVAL_S
    if not raw.isdigit() or int(raw) < 1:
        raise NotariusError(
            f"{AUTOMATION_INTERVAL_ENV} must be a whole number of seconds (1 or more), got {raw!r}"
        )
    return int(raw)


def build_automation_sensor(run_tags: dict[str, str]) -> AutomationConditionSensorDefinition:
    """The automation condition sensor over every asset of the code location."""
    return AutomationConditionSensorDefinition(
        AUTOMATION_SENSOR_NAME,
        target=AssetSelection.all(),
        run_tags=run_tags,
        default_status=automation_default_status(),
        minimum_interval_seconds=automation_interval_s(),
        emit_backfills=False,
        description=(
            "Re-materializes what changed: a session registered with `notarius sessions add` "
            "(or whose transcript changed), and, after a prompt/schema/lane-configuration edit "
            "and a reload, that lane and its dependants in every session materialized before. "
            "Never a partition without a transcript; one run per session; checkpoints keep "
            "unchanged chunks free."
        ),
    )
