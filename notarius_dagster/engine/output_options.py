"""Options of the `json` output module, checked at resolution: today the evidence-context
policy of docs/internals.md ("Evidence context") (opt-in, explicit lane allowlist)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping

from typing_extensions import TypedDict  # pydantic reads it (ResolvedPipeline) on 3.11

Fail = Callable[[str, str], Exception]
DEFAULT_WINDOW_UNITS = 3


class EvidencePolicy(TypedDict):
    """An enabled evidence context: how many units around each reference, which lanes."""

    enabled: bool
    window_units: int
    lanes: list[str]


class OutputOptions(TypedDict):
    """The json output's canonical options (None: no evidence context)."""

    evidence_context: EvidencePolicy | None


def validate_output_options(
    options: Mapping[str, object],
    *,
    configured_lanes: Collection[str],
    fail: Fail,
) -> OutputOptions:
    """Return canonical options: `{"evidence_context": None | {enabled, window_units, lanes}}`."""
    unknown = sorted(set(options) - {"evidence_context"})
    if unknown:
        raise fail(unknown[0], "unknown key")
    ec = options.get("evidence_context")
    if ec is None:
        return {"evidence_context": None}
    if not isinstance(ec, Mapping):
        raise fail("evidence_context", "expected a mapping")
    extra = sorted(set(ec) - {"enabled", "window_units", "lanes"})
    if extra:
        raise fail(f"evidence_context.{extra[0]}", "unknown key")
    if "enabled" not in ec:
        raise fail("evidence_context.enabled", "required when evidence_context is present")
    if not isinstance(ec["enabled"], bool):
        raise fail("evidence_context.enabled", "must be true or false")
    if not ec["enabled"]:
        for key in ("lanes", "window_units"):
            if key in ec:
                raise fail(
                    f"evidence_context.{key}",
                    "not allowed when enabled is false (it would be silently ignored)",
                )
        return {"evidence_context": None}
    window = ec.get("window_units", DEFAULT_WINDOW_UNITS)
    if not isinstance(window, int) or isinstance(window, bool) or window < 0:
        raise fail("evidence_context.window_units", "must be a non-negative integer")
    lanes = ec.get("lanes")
    if not isinstance(lanes, list) or not lanes:
        raise fail("evidence_context.lanes", "a non-empty list of lane ids is required")
    cleaned: list[str] = []
    for i, lane in enumerate(lanes):
        if not isinstance(lane, str) or not lane.strip():
            raise fail(f"evidence_context.lanes[{i}]", "must be a non-blank lane id")
        lane = lane.strip()
        if lane in cleaned:
            raise fail(f"evidence_context.lanes[{i}]", f"duplicate lane id {lane!r}")
        if lane not in configured_lanes:
            raise fail(
                f"evidence_context.lanes[{i}]",
                f"lane {lane!r} is not configured; configured: {sorted(configured_lanes)}",
            )
        cleaned.append(lane)
    policy = EvidencePolicy(enabled=True, window_units=window, lanes=sorted(cleaned))
    return {"evidence_context": policy}
