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
from typing import TypeVar

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


def _read_json(folder: Path, name: str) -> object:
    rel = PurePosixPath(name)
    if rel.is_absolute() or ".." in rel.parts or "\\" in name:
        raise ReportError(f"index.json names an unsafe file {name!r}")
    try:
        value: object = json.loads((folder / rel).read_text(encoding="utf-8"))
        return value
    except FileNotFoundError:
        raise ReportError(f"{name}: missing from the bundle") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReportError(f"{name}: unreadable ({type(exc).__name__})") from None


def _parse(model: type[M], value: object, where: str) -> M:
    """Validate with a content-safe error: key path and error type, never the value."""
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        path = ".".join(str(part) for part in first["loc"]) or "(top level)"
        raise ReportError(
            f"{where}: {path}: {first['type']} ({exc.error_count()} problem(s))"
        ) from None


def _get(document: object, key: str, where: str) -> object:
    if not isinstance(document, dict) or key not in document:
        raise ReportError(f"{where}: missing key {key!r}")
    value: object = document[key]
    return value


def _optional(document: object, key: str, default: object = None) -> object:
    """`document[key]` when `document` is an object that has the key, else `default`."""
    value: object = document.get(key, default) if isinstance(document, dict) else default
    return value


def _list(value: object, where: str) -> list[object]:
    if not isinstance(value, list):
        raise ReportError(f"{where}: not a list")
    return list(value)


def _unit_order(chunk_map: object) -> tuple[int, ...]:
    """Every unit id of the chunk map in document order (chunks may overlap: first seen wins)."""
    seen: dict[int, None] = {}
    for chunk in _list(_get(chunk_map, "chunks", "chunk-map.json"), "chunk-map.json: chunks"):
        units = _get(chunk, "unit_ids", "chunk-map.json: chunks[]")
        for unit_id in _list(units, "chunk-map.json: chunks[].unit_ids"):
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
    records = _optional(descriptor, "records", 0)
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
    chunk_descriptor = _optional(index, "chunk_map")
    order: tuple[int, ...] = ()
    if chunk_descriptor is not None:
        order = _unit_order(_read_json(folder, str(_get(chunk_descriptor, "file", "index.json"))))
    evidence = None
    evidence_descriptor = _optional(index, "evidence_context")
    if evidence_descriptor is not None:
        identity = (
            _optional(evidence_descriptor, "kind"),
            _optional(evidence_descriptor, "schema_version"),
        )
        if identity != (
            "source/evidence-context",
            "v1",
        ):
            raise ReportError("index.json: evidence_context: unsupported kind or schema version")
        name = str(_get(evidence_descriptor, "file", "index.json: evidence_context"))
        evidence = _parse(Evidence, _read_json(folder, name), name)
    pipeline = _get(manifest, "pipeline", "manifest.json")
    totals = _optional(manifest, "totals") or {}
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
            "llm_calls": _optional(totals, "llm_calls", 0),
            "prompt_tokens": _optional(totals, "prompt_tokens", 0),
            "completion_tokens": _optional(totals, "completion_tokens", 0),
            "lanes": [
                _parse(LaneSummary, lane, "manifest.json: artifact_lanes[]")
                for lane in _list(
                    _get(manifest, "artifact_lanes", "manifest.json"), "manifest.json"
                )
            ],
            "outputs": [
                _lane_output(folder, d, registry)
                for d in _list(_get(index, "lanes", "index.json"), "index.json: lanes")
            ],
            "registered": registry.lanes,
            "unit_order": order,
            "evidence": evidence,
            "warnings": [
                _parse(WarningEntry, w, "warnings.json[]") for w in _list(warnings, "warnings.json")
            ],
            "rejections": [
                _parse(RejectionEntry, r, "rejected.json[]")
                for r in _list(rejected, "rejected.json")
            ],
        },
        "bundle",
    )
