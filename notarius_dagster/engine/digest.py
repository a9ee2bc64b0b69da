"""Stable digests: sha256 over canonical JSON (sorted keys, no whitespace, UTF-8)."""

from __future__ import annotations

import hashlib
import json

from pydantic import BaseModel


def canonical_json(value: object) -> bytes:
    """Serialize a JSON-able value (or pydantic model) canonically."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def sha256_digest(data: bytes) -> str:
    """`sha256:<hex>` of raw bytes."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def digest_of(value: object) -> str:
    """`sha256:<hex>` of a value's canonical JSON."""
    return sha256_digest(canonical_json(value))
