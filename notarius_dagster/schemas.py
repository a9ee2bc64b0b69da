"""Generates the checked-in JSON Schemas (`schemas/<schema_id>.json`) from the pydantic models,
the single source of truth. `python -m notarius_dagster.schemas --write` regenerates them;
`--check` (and the test suite) fails when a checked-in file is stale."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from notarius_dagster.engine.artifact_kinds import registered_kinds
from notarius_dagster.modules import load_modules
from notarius_dagster.settings import REPO_ROOT

SCHEMA_DIR = REPO_ROOT / "schemas"


def extra_schemas() -> dict[str, dict[str, Any]]:
    """Non-lane documents of the bundle that carry a schema (registered by the engine)."""
    from notarius_dagster.engine.bundle_schemas import bundle_document_schemas

    return bundle_document_schemas()


def generated() -> dict[str, str]:
    load_modules()
    out: dict[str, str] = {}
    for kind in registered_kinds().values():
        if kind.schema_id.startswith("test."):
            continue
        out[f"{kind.schema_id}.json"] = (
            json.dumps(kind.json_schema(), indent=2, sort_keys=True) + "\n"
        )
    for schema_id, schema in extra_schemas().items():
        out[f"{schema_id}.json"] = json.dumps(schema, indent=2, sort_keys=True) + "\n"
    return out


def stale(directory: Path = SCHEMA_DIR) -> list[str]:
    return [
        name
        for name, text in generated().items()
        if not (directory / name).exists() or (directory / name).read_text() != text
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args(argv)
    if args.write:
        SCHEMA_DIR.mkdir(exist_ok=True)
        for name, text in generated().items():
            (SCHEMA_DIR / name).write_text(text)
        return 0
    names = stale()
    for name in names:
        print(f"stale schema: schemas/{name}", file=sys.stderr)
    return 1 if names else 0


if __name__ == "__main__":
    sys.exit(main())
