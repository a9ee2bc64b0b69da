"""Reference materialization: bound slots become `PreparedReference`s before any LLM work.

External files: UTF-8 only, `sha256:` digest, canonical media type from the extension
(unknown: application/octet-stream), declared byte limit, a warning for an empty file,
accepted media types checked only when the slot declares them; a structured slot's artifact is
decoded and validated. Generated references are other lanes' accepted artifacts, validated at
this boundary. Content never appears in errors, manifests or metadata: provenance does."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from pydantic import BaseModel, ValidationError

from notarius_dagster.engine.artifact_kinds import ArtifactKind
from notarius_dagster.engine.contracts import PreparedReference
from notarius_dagster.engine.digest import digest_of, sha256_digest
from notarius_dagster.engine.errors import InvalidReferenceError
from notarius_dagster.engine.models import RunWarning
from notarius_dagster.engine.reading import (
    FileRefused,
    ParseRefused,
    PlainYamlLoader,
    load_json,
    load_yaml,
    read_bounded,
)
from notarius_dagster.engine.resolution import ResolvedBinding, ResolvedStage
from notarius_dagster.engine.validators import json_schema_problems, model_problems

MEDIA_TYPES = {
    ".json": "application/json",
    ".jsonl": "application/x-ndjson",
    ".txt": "text/plain",
    ".md": "text/markdown",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
    ".csv": "text/csv",
    ".vtt": "text/vtt",
    ".srt": "application/x-subrip",
}
OCTET_STREAM = "application/octet-stream"


def media_type_for(name: str) -> str:
    return MEDIA_TYPES.get(Path(name).suffix.lower(), OCTET_STREAM)


def _where(binding: ResolvedBinding) -> str:
    return f"reference {binding.target}.{binding.slot}"


NO_KINDS: Mapping[str, ArtifactKind] = MappingProxyType({})


def _validated_artifact(
    binding: ResolvedBinding,
    payload: object,
    origin: str,
    kinds: Mapping[str, ArtifactKind],
    file: str | None = None,
) -> _Validated:
    """A structured slot's artifact must be a valid artifact of an accepted kind, one of
    `kinds` (the registry's; `file`: the external file's name, for the error)."""
    if not isinstance(payload, dict) or not isinstance(payload.get("kind"), str):
        raise InvalidReferenceError(f"{_where(binding)}: {origin} artifact has no artifact kind")
    kind_name = str(payload["kind"])
    if binding.accepted_kinds and kind_name not in binding.accepted_kinds:
        raise InvalidReferenceError(
            f"{_where(binding)}: {origin} artifact is {kind_name!r}; the slot "
            f"accepts {list(binding.accepted_kinds)}"
        )
    kind = kinds.get(kind_name)
    if kind is None:
        raise InvalidReferenceError(f"{_where(binding)}: unknown artifact kind {kind_name!r}")
    problems = json_schema_problems(kind, payload)
    typed = None
    if not problems:
        try:
            typed = kind.parse(payload)
        except ValidationError as exc:
            problems = model_problems(exc)
    if typed is None:
        raise InvalidReferenceError(
            f"{_where(binding)}: malformed {origin} artifact"
            + (f" (file {file!r})" if file else "")
            + ": "
            + "; ".join(problems[:5])
        )
    return _Validated(kind, payload, typed)


@dataclass(frozen=True)
class _Validated:
    """A validated structured artifact: its kind, as JSON (what its digest is of) and typed."""

    kind: ArtifactKind
    payload: dict[str, object]
    typed: BaseModel

    @property
    def records(self) -> tuple[BaseModel, ...]:
        return self.kind.records(self.typed)


def _decode_structured(binding: ResolvedBinding, name: str, text: str, media_type: str) -> object:
    """A structured slot's file as a document: JSON, or YAML for a `.yaml`/`.yml` file (a
    hand-written campaign file), through the one reader's parsers (nesting capped, repeated
    keys refused). A YAML mapping without `kind` is of the slot's kind when the slot accepts
    exactly one. Errors name the file and line, never content."""
    try:
        if media_type != "application/yaml":
            return load_json(text, name)
        decoded = load_yaml(text, name, loader=PlainYamlLoader)
    except ParseRefused as exc:
        raise InvalidReferenceError(f"{_where(binding)}: file {exc}") from None
    if isinstance(decoded, dict) and "kind" not in decoded and len(binding.accepted_kinds) == 1:
        decoded = {"kind": binding.accepted_kinds[0], **decoded}
    return decoded


def read_regular_file(path: Path, limit: int, *, what: str, name: str) -> bytes:
    """At most `limit` bytes of a regular file, refused otherwise without reading it (the one
    reader, `engine/reading.py: read_bounded`). `what` prefixes every error; `name` is the
    file's display name (never its full path)."""
    try:
        return read_bounded(path, limit, name=name, allowed=f"the slot allows {limit}")
    except FileRefused as exc:
        raise InvalidReferenceError(f"{what}: {exc}") from None


def prepare_file(
    binding: ResolvedBinding, kinds: Mapping[str, ArtifactKind] = NO_KINDS
) -> tuple[PreparedReference, list[RunWarning]]:
    """A bound file, read within the slot's limit, decoded and, for a structured slot,
    validated as an artifact of one of `kinds`."""
    assert binding.path is not None
    path = Path(binding.path)
    name = binding.display or path.name
    raw = read_regular_file(path, binding.max_bytes, what=_where(binding), name=name)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidReferenceError(
            f"{_where(binding)}: file {name!r} is not UTF-8 (byte {exc.start})"
        ) from None
    media_type = media_type_for(name)
    if binding.accepted_media_types and media_type not in binding.accepted_media_types:
        raise InvalidReferenceError(
            f"{_where(binding)}: file {name!r} has media type {media_type!r};"
            f" the slot accepts {list(binding.accepted_media_types)}"
        )
    warnings = []
    if not raw:
        warnings.append(
            RunWarning(
                stage="input",
                code="empty_reference",
                message=f"{_where(binding)}: file {name!r} is empty",
            )
        )
    validated = None
    digest = sha256_digest(raw)
    if binding.accepted_kinds:
        decoded = _decode_structured(binding, name, text, media_type)
        validated = _validated_artifact(binding, decoded, "external", kinds, file=name)
        digest = digest_of(validated.payload)
    provenance = _provenance(
        binding,
        "file",
        file=name,
        media_type=media_type,
        bytes=len(raw),
        digest=sha256_digest(raw),
    )
    return PreparedReference(
        slot=binding.slot,
        origin="file",
        kind=validated.kind.kind if validated else None,
        media_type=media_type,
        digest=digest,
        text=text,
        artifact=validated.payload if validated else None,
        provenance=provenance,
        typed=validated.typed if validated else None,
        records=validated.records if validated else (),
    ), warnings


def _provenance(binding: ResolvedBinding, origin: str, **details: object) -> dict[str, object]:
    """A reference's provenance as the manifest records it: which slot of which target, bound
    how, then what the origin (`file` or `lane`) adds; keys in that order, as published."""
    return {
        "slot": binding.slot,
        "target": binding.target,
        "origin": origin,
        "binding": binding.source,
        **details,
    }


def prepare_generated(
    binding: ResolvedBinding,
    payload: Mapping[str, object] | None,
    kinds: Mapping[str, ArtifactKind] = NO_KINDS,
) -> PreparedReference:
    if payload is None:
        raise InvalidReferenceError(
            f"{_where(binding)}: lane {binding.lane!r} produced no accepted "
            "artifact, so this lane cannot run"
        )
    validated = _validated_artifact(binding, dict(payload), "generated", kinds)
    digest = digest_of(validated.payload)
    kind = validated.kind.kind
    provenance = _provenance(binding, "lane", lane=binding.lane, kind=kind, digest=digest)
    return PreparedReference(
        slot=binding.slot,
        origin="lane",
        kind=kind,
        media_type="application/json",
        digest=digest,
        artifact=validated.payload,
        provenance=provenance,
        typed=validated.typed,
        records=validated.records,
    )


def prepare_stage_references(
    stage: ResolvedStage,
    lane_payloads: Mapping[str, Mapping[str, object] | None],
    kinds: Mapping[str, ArtifactKind] = NO_KINDS,
) -> tuple[dict[str, PreparedReference], list[RunWarning]]:
    prepared: dict[str, PreparedReference] = {}
    warnings: list[RunWarning] = []
    for binding in stage.references:
        if binding.origin == "file":
            ref, warns = prepare_file(binding, kinds)
            warnings.extend(warns)
        else:
            assert binding.lane is not None
            ref = prepare_generated(binding, lane_payloads.get(binding.lane), kinds)
        prepared[binding.slot] = ref
    return prepared, warnings


def prepare_lane_references(
    stages: Sequence[ResolvedStage],
    lane_payloads: Mapping[str, Mapping[str, object] | None],
    kinds: Mapping[str, ArtifactKind] = NO_KINDS,
) -> tuple[dict[str, dict[str, PreparedReference]], list[RunWarning], list[dict[str, object]]]:
    """Prepared references by stage, the warnings, and the provenance for the manifest."""
    by_stage: dict[str, dict[str, PreparedReference]] = {}
    warnings: list[RunWarning] = []
    provenance: list[dict[str, object]] = []
    for stage in stages:
        refs, warns = prepare_stage_references(stage, lane_payloads, kinds)
        by_stage[stage.stage] = refs
        warnings.extend(warns)
        provenance.extend(dict(r.provenance) for r in refs.values())
    return by_stage, warnings, provenance
