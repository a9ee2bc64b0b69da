"""Generates the checked-in documents that are derived from code: the JSON Schemas
(`schemas/<schema_id>.json`) from the pydantic models, the single source of truth, and the lane
table of `docs/lanes.md` from the D&D lane registry (`notarius_dagster.modules.registry()`).
`python -m notarius_dagster.schemas --write` regenerates both; without `--write` it exits 1
naming every stale file, and the test suite fails when a checked-in file is stale.

Kinds and lanes whose schema id starts with `test.` are never published."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from notarius_dagster.engine.lanes import LANE_STAGES, LaneSpec
from notarius_dagster.modules import registry
from notarius_dagster.settings import REPO_ROOT

SCHEMA_DIR = REPO_ROOT / "schemas"
LANES_DOC = REPO_ROOT / "docs" / "lanes.md"
TABLE_BEGIN = (
    "<!-- lane table: generated from the lane registry by "
    "`python -m notarius_dagster.schemas --write`; do not edit -->"
)
TABLE_END = "<!-- end of the lane table -->"


def extra_schemas() -> dict[str, dict[str, object]]:
    """Non-lane documents that carry a schema: the bundle's (registered by the engine), the
    campaign codex and its index (`campaign/model.py`), and the gold file and evaluation report
    (`engine/evaluation.py`)."""
    from notarius_dagster.campaign.model import codex_schemas
    from notarius_dagster.engine.bundle_schemas import bundle_document_schemas
    from notarius_dagster.engine.evaluation import evaluation_schemas

    return {**bundle_document_schemas(), **codex_schemas(), **evaluation_schemas()}


def _published(schema_id: str) -> bool:
    return not schema_id.startswith("test.")


def generated() -> dict[str, str]:
    out: dict[str, str] = {}
    for kind in registry().kinds().values():
        if not _published(kind.schema_id):
            continue
        out[f"{kind.schema_id}.json"] = (
            json.dumps(kind.json_schema(), indent=2, sort_keys=True) + "\n"
        )
    for schema_id, schema in extra_schemas().items():
        out[f"{schema_id}.json"] = json.dumps(schema, indent=2, sort_keys=True) + "\n"
    return out


def stale(directory: Path = SCHEMA_DIR) -> list[str]:
    """The schema files (names under `schemas/`) that are missing or differ from the models."""
    return [
        name
        for name, text in generated().items()
        if not (directory / name).exists() or (directory / name).read_text() != text
    ]


# ---- the lane table of docs/lanes.md ----


def _code(names: tuple[str, ...] | list[str]) -> str:
    return ", ".join(f"`{n}`" for n in names) or "—"


def _slots(lane: LaneSpec) -> str:
    parts = []
    for slot in lane.slots:
        accepts = _code(list(slot.accepted_kinds))
        parts.append(f"`{slot.name}` ({'required' if slot.required else 'optional'}, {accepts})")
    return "; ".join(parts) or "—"


def _rules(lane: LaneSpec) -> str:
    parts = [
        f"{stage}: {_code(lane.rule_names(stage))}"
        for stage in LANE_STAGES
        if lane.rule_names(stage)
    ]
    return "; ".join(parts) or "—"


def _gold_match(lane: LaneSpec) -> str:
    match = lane.gold_match
    if match is None:
        return "—"
    parts = [f"`{match.name}`"]
    if match.aliases:
        parts.append(f"aliases `{match.aliases}`")
    if match.also:
        parts.append(f"also {_code(match.also)}")
    parts.append("many-to-one" if match.many_to_one else "one-to-one")
    return "; ".join(parts)


def lane_table() -> str:
    """The Markdown table of every published lane, by lane id."""
    lanes = sorted(
        (lane for lane in registry().lanes if _published(lane.schema_id)),
        key=lambda lane: lane.lane_id,
    )
    rows = [
        "| lane id | kind | schema id | items field | slots | supported fields | "
        "preview fields | rules | gold match |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for lane in lanes:
        cells = [
            f"`{lane.lane_id}`",
            f"`{lane.kind}`",
            f"`{lane.schema_id}`",
            f"`{lane.items_field}`",
            _slots(lane),
            _code(lane.support_fields),
            _code(lane.preview_fields),
            _rules(lane),
            _gold_match(lane),
        ]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def lanes_doc(current: str) -> str:
    """`current` (the text of docs/lanes.md) with its lane table regenerated."""
    if TABLE_BEGIN not in current or TABLE_END not in current:
        raise ValueError("docs/lanes.md lacks the lane table markers")
    head, rest = current.split(TABLE_BEGIN, 1)
    _, tail = rest.split(TABLE_END, 1)
    return f"{head}{TABLE_BEGIN}\n{lane_table()}\n{TABLE_END}{tail}"


def stale_docs(path: Path = LANES_DOC) -> list[str]:
    """`["docs/lanes.md"]` when its lane table differs from the registry, else `[]`."""
    text = path.read_text(encoding="utf-8")
    return [] if lanes_doc(text) == text else ["docs/lanes.md"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args(argv)
    if args.write:
        SCHEMA_DIR.mkdir(exist_ok=True)
        for name, text in generated().items():
            (SCHEMA_DIR / name).write_text(text)
        LANES_DOC.write_text(lanes_doc(LANES_DOC.read_text(encoding="utf-8")), encoding="utf-8")
        return 0
    names = [f"schemas/{name}" for name in stale()] + stale_docs()
    for name in names:
        print(f"stale: {name}", file=sys.stderr)
    return 1 if names else 0


if __name__ == "__main__":
    sys.exit(main())
