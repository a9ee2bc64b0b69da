"""Schemas of the bundle's own documents (not lanes). Filled in as documents gain models."""

from __future__ import annotations

from typing import Any


def bundle_document_schemas() -> dict[str, dict[str, Any]]:
    return {}
