"""The Dagster layer and the CLI use Dagster's public API; the one private import left is
listed here with the test that would catch its removal (notarius_dagster/sessions.py says why)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LAYERS = ("assets", "resources", "notarius_dagster")
ALLOWED = {
    # Deleting a session's asset check results: no public API (test_cli_sessions.py,
    # test_delete_removes_one_session_and_leaves_the_others, asserts they are gone).
    ("notarius_dagster/sessions.py", "dagster._core.storage.event_log.schema"),
    ("notarius_dagster/sessions.py", "dagster._core.storage.event_log.sql_event_log"),
}


def private_imports() -> set[tuple[str, str]]:
    found = set()
    for layer in LAYERS:
        for path in sorted((REPO / layer).rglob("*.py")):
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in ast.walk(tree):
                names: list[str] = []
                if isinstance(node, ast.ImportFrom) and node.module:
                    names = [node.module]
                elif isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                for name in names:
                    if name.startswith("dagster._") or name.startswith("dagster_graphql._"):
                        found.add((path.relative_to(REPO).as_posix(), name))
    return found


def test_no_private_dagster_import_beyond_the_justified_ones() -> None:
    assert private_imports() == ALLOWED
