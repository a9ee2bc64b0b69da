"""Checking a bundle against its `index.json`: every listed file exists, parses, and (for the
bundle's own documents) validates against its model; lane files sit where their lane id says
and are of the kind the index names; no file is published that the index does not list; the
manifest belongs to the same run as the index.

One check, two callers: the publish boundary runs it on the encoded files before anything is
written (`session_bundle.py`), and the `files_match_index` asset check runs it on the
published folder. Problems name logical paths, key paths and error types, never values."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from notarius_dagster.engine.bundle import is_safe_logical_path, lane_file
from notarius_dagster.engine.bundle_documents import (
    CHUNK_MAP_TYPE,
    EVIDENCE_TYPE,
    INDEX_FILE,
    INDEX_TYPE,
    MANIFEST_TYPE,
    REJECTED_TYPE,
    WARNINGS_TYPE,
    DocumentType,
    Index,
    Manifest,
)
from notarius_dagster.engine.models import Frozen

MAX_LOCATIONS = 3

# A logical path -> its bytes, or None when there is no such file (may raise OSError).
Reader = Callable[[str], bytes | None]


class BundleCheck(Frozen):
    """The problems found (empty when the bundle is consistent) and how many files the index
    lists, itself included."""

    problems: tuple[str, ...]
    listed_files: int

    @property
    def passed(self) -> bool:
        return not self.problems


def check_published_bundle(bundle: Path) -> BundleCheck:
    """Check the published bundle folder `bundle` (`<bundles>/<session-id>`)."""
    bundle = Path(bundle)

    def read(rel: str) -> bytes | None:
        path = bundle / rel
        return path.read_bytes() if path.is_file() else None

    present = (
        {p.relative_to(bundle).as_posix() for p in bundle.rglob("*") if p.is_file()}
        if bundle.is_dir()
        else set()
    )
    return check_bundle(read, present)


def check_encoded_bundle(encoded: Mapping[str, bytes]) -> BundleCheck:
    """Check a bundle before it is published: logical path -> encoded bytes."""
    return check_bundle(encoded.get, set(encoded))


def check_bundle(read: Reader, present: Collection[str]) -> BundleCheck:
    """Check the bundle `read` gives access to; `present` is every file it holds."""
    try:
        raw = read(INDEX_FILE)
    except OSError as exc:
        return _failed(f"{INDEX_FILE}: does not parse ({type(exc).__name__})")
    if raw is None:
        return _failed(f"{INDEX_FILE}: missing (no bundle is published)")
    try:
        index = Index.model_validate(json.loads(raw))
    except ValueError as exc:  # a JSON syntax error or a ValidationError
        return _failed(_problem(INDEX_FILE, INDEX_TYPE, exc))
    problems: list[str] = []
    for lane in index.lanes:
        expected = lane_file(lane.lane_id)
        if lane.file != expected:
            problems.append(
                f"{INDEX_FILE}: lane {lane.lane_id!r} lists file {lane.file!r}, "
                f"expected {expected!r}"
            )
    listed = index.listed_files()
    values = _read_listed(read, listed, _document_types(index), problems)
    for stray in sorted(set(present) - set(listed) - {INDEX_FILE}):
        what = "lane file" if stray.startswith("lanes/") else "file"
        problems.append(f"{stray}: {what} not listed in {INDEX_FILE}")
    for lane in index.lanes:
        value = values.get(lane.file)
        if isinstance(value, dict) and value.get("kind") != lane.kind:
            problems.append(
                f"{lane.file}: kind {value.get('kind')!r} differs from {INDEX_FILE}'s {lane.kind!r}"
            )
    manifest = values.get(index.files.manifest)
    if isinstance(manifest, Manifest) and (
        (manifest.run_id, manifest.session_id) != (index.run_id, index.session_id)
    ):
        problems.append(
            f"{index.files.manifest}: names another run or session than {INDEX_FILE} "
            "(files of two publications)"
        )
    return BundleCheck(problems=tuple(problems), listed_files=len(listed) + 1)


def _document_types(index: Index) -> dict[str, DocumentType]:
    """The typed documents among the listed files, by the role the index gives them."""
    types = {
        index.files.manifest: MANIFEST_TYPE,
        index.files.warnings: WARNINGS_TYPE,
        index.files.rejected: REJECTED_TYPE,
    }
    if index.chunk_map is not None:
        types[index.chunk_map.file] = CHUNK_MAP_TYPE
    if index.evidence_context is not None:
        types[index.evidence_context.file] = EVIDENCE_TYPE
    return types


def _read_listed(
    read: Reader, listed: list[str], types: Mapping[str, DocumentType], problems: list[str]
) -> dict[str, object]:
    """Read, parse and (typed documents) validate every listed file; returns the parsed value
    of each file that parsed (the model, for a typed document that validated)."""
    values: dict[str, object] = {}
    for rel in listed:
        if not rel:
            problems.append(f"(empty name): listed in {INDEX_FILE} but missing")
            continue
        if not is_safe_logical_path(rel):
            problems.append(f"{rel}: listed in {INDEX_FILE} with an unsafe path")
            continue
        try:
            raw = read(rel)
            if raw is None:
                problems.append(f"{rel}: listed in {INDEX_FILE} but missing")
                continue
            value: Any = json.loads(raw)
        except (OSError, ValueError) as exc:
            problems.append(f"{rel}: does not parse ({type(exc).__name__})")
            continue
        doc = types.get(rel)
        if doc is not None:
            try:
                value = doc.model.model_validate(value)
            except ValidationError as exc:
                problems.append(_problem(rel, doc, exc))
                continue
        values[rel] = value
    return values


def _problem(rel: str, doc: DocumentType, exc: ValueError) -> str:
    if not isinstance(exc, ValidationError):
        return f"{rel}: does not parse ({type(exc).__name__})"
    errors = exc.errors(include_url=False, include_context=False, include_input=False)
    where = "; ".join(
        f"{'.'.join(str(part) for part in e['loc']) or '(root)'}: {e['type']}"
        for e in errors[:MAX_LOCATIONS]
    )
    more = f"; {len(errors) - MAX_LOCATIONS} more" if len(errors) > MAX_LOCATIONS else ""
    return f"{rel}: does not validate as {doc.schema_id} ({where}{more})"


def _failed(problem: str) -> BundleCheck:
    return BundleCheck(problems=(problem,), listed_files=0)
