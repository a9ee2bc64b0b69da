"""Reads one published bundle into the report's typed inputs.

`load_bundle` is the only place that opens bundle files, so the index and manifest models being
introduced elsewhere can replace the raw reads here without touching the renderer. It follows
bundle.md: resolve the session's symlink once and read every file from that version, discover
files through `index.json`, check that index and manifest come from the same run, dispatch lane
files on their descriptor's kind and schema version."""

from __future__ import annotations

import json
import os
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from notarius_dagster.engine.registry import LaneRegistry
from notarius_dagster.report.errors import ReportError
from notarius_dagster.report.inputs import (
    Evidence,
    LaneOutput,
    LaneSummary,
    RejectionEntry,
    ReportInputs,
    WarningEntry,
)

M = TypeVar("M", bound=BaseModel)


def _read_json(folder: Path, name: str) -> Any:
    rel = PurePosixPath(name)
    if rel.is_absolute() or ".." in rel.parts or "\\" in name:
        raise ReportError(f"index.json names an unsafe file {name!r}")
    try:
        return json.loads((folder / rel).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReportError(f"{name}: missing from the bundle") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReportError(f"{name}: unreadable ({type(exc).__name__})") from None


def _parse(model: type[M], value: Any, where: str) -> M:
    """Validate with a content-safe error: key path and error type, never the value."""
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        path = ".".join(str(part) for part in first["loc"]) or "(top level)"
        raise ReportError(
            f"{where}: {path}: {first['type']} ({exc.error_count()} problem(s))"
        ) from None


def _get(document: Any, key: str, where: str) -> Any:
    if not isinstance(document, dict) or key not in document:
        raise ReportError(f"{where}: missing key {key!r}")
    return document[key]


def _unit_order(chunk_map: Any) -> tuple[int, ...]:
    """Every unit id of the chunk map in document order (chunks may overlap: first seen wins)."""
    seen: dict[int, None] = {}
    for chunk in _get(chunk_map, "chunks", "chunk-map.json"):
        for unit_id in _get(chunk, "unit_ids", "chunk-map.json: chunks[]"):
            if not isinstance(unit_id, int) or isinstance(unit_id, bool):
                raise ReportError("chunk-map.json: chunks[].unit_ids: not an integer")
            seen.setdefault(unit_id, None)
    return tuple(seen)


def _lane_output(folder: Path, descriptor: object, registry: LaneRegistry) -> LaneOutput:
    """One accepted lane file; read with the registered lane's own list model when the
    registry has its kind at its schema version (a file that is not a valid artifact of it is
    an error naming the file and the key path), else listed unread."""
    lane_id = str(_get(descriptor, "lane_id", "index.json: lanes[]"))
    where = f"index.json: lanes[{lane_id}]"
    kind = str(_get(descriptor, "kind", where))
    version = str(_get(descriptor, "schema_version", where))
    file_name = str(_get(descriptor, "file", where))
    records = descriptor.get("records", 0) if isinstance(descriptor, dict) else 0
    spec = registry.lane_of_kind(kind)
    items = None
    if spec is not None and version == spec.schema_version:
        artifact = _parse(spec.list_model, _read_json(folder, file_name), file_name)
        items = spec.artifact_kind.records(artifact)
    return LaneOutput(
        lane_id=lane_id,
        kind=kind,
        schema_version=version,
        records=records if isinstance(records, int) else 0,
        spec=spec if items is not None else None,
        items=items,
    )


def load_bundle(bundle: Path, registry: LaneRegistry) -> ReportInputs:
    """The report's inputs from the bundle at `bundle` (a session's symlink or a version
    folder), read from one version throughout. Every lane of `registry` gets a section as its
    `LaneSpec` declares (`report_table`); its records are read with the lane's own models."""
    folder = Path(os.path.realpath(bundle))
    if not (folder / "index.json").is_file():
        raise ReportError("no published bundle here (index.json is missing)")
    index = _read_json(folder, "index.json")
    files = _get(index, "files", "index.json")
    manifest = _read_json(folder, str(_get(files, "manifest", "index.json: files")))
    if _get(manifest, "run_id", "manifest.json") != _get(index, "run_id", "index.json"):
        raise ReportError("index.json and manifest.json come from different runs (a mixed read)")
    warnings = _read_json(folder, str(_get(files, "warnings", "index.json: files")))
    rejected = _read_json(folder, str(_get(files, "rejected", "index.json: files")))
    chunk_descriptor = index.get("chunk_map")
    order: tuple[int, ...] = ()
    if chunk_descriptor is not None:
        order = _unit_order(_read_json(folder, str(_get(chunk_descriptor, "file", "index.json"))))
    evidence = None
    evidence_descriptor = index.get("evidence_context")
    if evidence_descriptor is not None:
        if (evidence_descriptor.get("kind"), evidence_descriptor.get("schema_version")) != (
            "source/evidence-context",
            "v1",
        ):
            raise ReportError("index.json: evidence_context: unsupported kind or schema version")
        name = str(_get(evidence_descriptor, "file", "index.json: evidence_context"))
        evidence = _parse(Evidence, _read_json(folder, name), name)
    pipeline = _get(manifest, "pipeline", "manifest.json")
    totals = manifest.get("totals") or {}
    source = _get(manifest, "source", "manifest.json")
    return _parse(
        ReportInputs,
        {
            "session_id": _get(index, "session_id", "index.json"),
            "run_id": _get(index, "run_id", "index.json"),
            "pipeline_id": _get(pipeline, "id", "manifest.json: pipeline"),
            "profile": _get(pipeline, "profile", "manifest.json: pipeline"),
            "pipeline_digest": _get(pipeline, "digest", "manifest.json: pipeline"),
            "status": _get(manifest, "status", "manifest.json"),
            "validation_status": _get(index, "validation_status", "index.json"),
            "source_units": _get(source, "units", "manifest.json: source"),
            "chunks": _get(manifest, "chunks", "manifest.json"),
            "llm_calls": totals.get("llm_calls", 0),
            "prompt_tokens": totals.get("prompt_tokens", 0),
            "completion_tokens": totals.get("completion_tokens", 0),
            "lanes": [
                _parse(LaneSummary, lane, "manifest.json: artifact_lanes[]")
                for lane in _get(manifest, "artifact_lanes", "manifest.json")
            ],
            "outputs": [
                _lane_output(folder, d, registry) for d in _get(index, "lanes", "index.json")
            ],
            "registered": registry.lanes,
            "unit_order": order,
            "evidence": evidence,
            "warnings": [_parse(WarningEntry, w, "warnings.json[]") for w in warnings],
            "rejections": [_parse(RejectionEntry, r, "rejected.json[]") for r in rejected],
        },
        "bundle",
    )
