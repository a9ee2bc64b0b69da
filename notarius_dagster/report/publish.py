"""Where a session's report lives and how it is written: `<bundles root>/.reports/<session>.html`.

Beside the bundles, never inside one: a bundle version folder holds exactly the files its
`index.json` lists (the `files_match_index` check), and it is replaced as a whole on every
publication. The folder starts with a dot, like `.versions`, so it can never be mistaken for a
session (a session id starts with a letter or digit). The page is written to a temporary file
in the same folder, fsynced and renamed over the previous one: a reader sees the old report or
the new one, never half a page."""

from __future__ import annotations

import re
from pathlib import Path

from notarius_dagster.engine.files import write_atomically
from notarius_dagster.engine.session_ids import validate_session_id
from notarius_dagster.report.errors import ReportError

REPORTS_DIR = ".reports"
_RUN_ID = re.compile(rb'<meta name="notarius-run-id" content="([A-Za-z0-9_-]+)">')


def report_path(bundles_root: Path, session_id: str) -> Path:
    """The report of `session_id` under `bundles_root` (which need not exist yet)."""
    return Path(bundles_root) / REPORTS_DIR / f"{validate_session_id(session_id)}.html"


def report_url(base_url: str, session_id: str) -> str:
    """The report's URL when the reports folder is served at `base_url`."""
    return f"{base_url.rstrip('/')}/{validate_session_id(session_id)}.html"


def write_report(bundles_root: Path, session_id: str, page: str) -> Path:
    """Publish `page` as the session's report, atomically; returns its path."""
    target = report_path(bundles_root, session_id)
    try:
        write_atomically(target, page.encode("utf-8"), durable=True)
    except OSError as exc:
        raise ReportError(
            f"report of session {session_id!r} could not be written ({type(exc).__name__})"
        ) from None
    return target


def remove_report(bundles_root: Path, session_id: str) -> bool:
    """Delete the session's report (it holds transcript text when the evidence context is on);
    True when there was one."""
    path = report_path(bundles_root, session_id)
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True


def report_run_id(path: Path) -> str | None:
    """The run id of the bundle a report was rendered from (None: not a Notarius report)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return None
    found = _RUN_ID.search(head)
    return found.group(1).decode() if found else None
