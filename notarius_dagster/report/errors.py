"""The report's one error type: content-safe like every Notarius error (it names the file and
the key path, never a value read from the bundle)."""

from __future__ import annotations

from notarius_dagster.engine.errors import NotariusError


class ReportError(NotariusError):
    """A bundle cannot be read into a report, or the report cannot be written."""
