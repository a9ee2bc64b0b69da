"""Pipeline profiles: the YAML a user writes, parsed into strict pydantic models.

Unknown keys are refused, and every error names the profile file and the key path that is
wrong (for example `pipeline.lanes[0].extract.retries`)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from notarius_dagster.engine.errors import ProfileError
from notarius_dagster.engine.limits import MAX_PROFILE_BYTES, Budget, InputLimits
from notarius_dagster.engine.reading import FileRefused, ParseRefused, load_yaml, read_bounded

DEFAULT_CHUNK_MODULE = "generic"
DEFAULT_OUTPUT_MODULE = "json"
LANE_FORM = "- {id: spells, retries: 1, references: {npcs: npcs}}"
"""How a profile names a lane (docs/configuration.md), quoted by the error for the old form."""


class Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ReferenceBindingConfig(Strict):
    """Where a reference slot's content comes from: a file, or another lane's artifact."""

    path: str | None = None
    lane: str | None = None

    @field_validator("lane")
    @classmethod
    def _lane_not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must not be blank")
        return value

    def model_post_init(self, __context: object) -> None:
        if (self.path is None) == (self.lane is None):
            raise ValueError("a binding needs exactly one of 'path' or 'lane'")


class StageConfig(Strict):
    """The chunker: its key, options, retries, validator override and reference bindings."""

    module: str
    options: dict[str, object] = Field(default_factory=dict)
    retries: int = Field(default=0, ge=0, le=10)
    validators: list[str] | None = Field(
        default=None,
        description="null: the central defaults; a list (even empty) overrides them",
    )
    references: dict[str, ReferenceBindingConfig] = Field(default_factory=dict)


class LaneConfig(Strict):
    """One lane of the registry, by id: how often its extraction is retried, what its
    reference slots are bound to (a lane id, or `{path: FILE}` / `{lane: ID}`) and, rarely,
    a stage's validator chain replaced."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,47}$")
    retries: int = Field(default=0, ge=0, le=10, description="extraction retries per chunk")
    references: dict[str, str | ReferenceBindingConfig] = Field(default_factory=dict)
    validators: dict[Literal["extract", "merge", "normalize"], list[str]] = Field(
        default_factory=dict,
        description="a stage's chain replaced (even by []); a stage not named keeps the "
        "central defaults and the lane's rules",
    )

    def bindings(self) -> dict[str, ReferenceBindingConfig]:
        """The reference bindings, a bare lane id read as `{lane: ID}`."""
        return {
            slot: ReferenceBindingConfig(lane=b) if isinstance(b, str) else b
            for slot, b in self.references.items()
        }


class InputConfig(Strict):
    format: str | None = Field(default=None, description="null: chosen by file extension")


class OutputConfig(Strict):
    module: str = DEFAULT_OUTPUT_MODULE
    options: dict[str, object] = Field(default_factory=dict)


DEFAULT_MIN_ACCEPTED_CHUNK_SHARE = 0.5


class PublishConfig(Strict):
    """What a bundle must meet to be published (docs/configuration.md, "Publish policy")."""

    min_accepted_chunk_share: float = Field(
        default=DEFAULT_MIN_ACCEPTED_CHUNK_SHARE,
        ge=0.0,
        le=1.0,
        description="each lane's accepted chunk extractions (skipped ones count as accepted) "
        "over its chunks must reach this share, or the run fails and the previous bundle stays",
    )
    blocking_checks: bool = Field(
        default=False,
        description="make each lane's rejection_rate asset check blocking (ERROR): a lane "
        "below the share stops its downstream assets in Dagster",
    )


class PipelineConfig(Strict):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,63}$")
    description: str = ""
    input: InputConfig = Field(default_factory=InputConfig)
    chunk: StageConfig = Field(default_factory=lambda: StageConfig(module=DEFAULT_CHUNK_MODULE))
    llm_profile: str
    references: dict[str, ReferenceBindingConfig] = Field(default_factory=dict)
    lanes: list[LaneConfig] = Field(min_length=1)
    output: OutputConfig = Field(default_factory=OutputConfig)
    limits: InputLimits = Field(default_factory=InputLimits)
    budget: Budget = Field(default_factory=Budget)
    publish: PublishConfig = Field(default_factory=PublishConfig)


class ProfileFile(Strict):
    """The whole YAML file: one pipeline and the named LLM profiles it may use."""

    version: Literal[1] = 1
    pipeline: PipelineConfig
    llm_profiles: dict[str, dict[str, object]] = Field(default_factory=dict)


def key_path(loc: tuple[int | str, ...]) -> str:
    """Render a pydantic error location as `a.b[0].c`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


_OLD_LANE_KEYS = frozenset({"extract", "merge", "normalize"})


def parse_profile(data: object, *, profile_name: str) -> ProfileFile:
    """Validate already-loaded YAML data; the first error names its key path. A lane written
    as module triples (the form before lanes were named by id) is refused with the new form."""
    if not isinstance(data, dict):
        raise ProfileError(profile_name, "(top level)", "expected a mapping")
    pipeline = data.get("pipeline")
    lanes = pipeline.get("lanes") if isinstance(pipeline, dict) else None
    for index, lane in enumerate(lanes if isinstance(lanes, list) else []):
        if isinstance(lane, dict) and _OLD_LANE_KEYS & set(lane):
            raise ProfileError(
                profile_name,
                f"pipeline.lanes[{index}]",
                "lanes are named by id, not by extract/merge/normalize modules; write "
                f'`{LANE_FORM}` (docs/configuration.md, "The profile file")',
            )
    try:
        return ProfileFile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = tuple(p for p in first["loc"] if not str(p).startswith("function-after"))
        problem = first["msg"]
        if first["type"] == "extra_forbidden":
            problem = "unknown key"
        raise ProfileError(profile_name, key_path(loc), problem) from None


def load_profile(path: Path) -> ProfileFile:
    """Read and validate a profile file through the one reader (`engine/reading.py`): a
    regular file of at most MAX_PROFILE_BYTES (a 10 MB profile, a device or a FIFO is refused
    before YAML sees it), nesting capped, a repeated key refused. Errors name the line."""
    name = path.name
    try:
        raw = read_bounded(
            path,
            MAX_PROFILE_BYTES,
            allowed=f"a profile may not be larger than {MAX_PROFILE_BYTES} bytes",
        )
    except FileRefused as exc:
        raise ProfileError(name, "(file)", str(exc)) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ProfileError(name, "(file)", "profile is not UTF-8") from None
    try:
        data = load_yaml(text, name)
    except ParseRefused as exc:
        where = f"line {exc.line}" if exc.line is not None else "(file)"
        raise ProfileError(name, where, exc.problem) from None
    return parse_profile(data, profile_name=name)
