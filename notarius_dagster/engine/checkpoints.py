"""Per-chunk extraction checkpoints, stored under a fingerprint of everything that determines
the extraction (lane, extractor key and version, prompt and schema hashes, options, LLM profile,
chunk digest, reference fingerprints). A hit makes no LLM call; any changed input misses."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from notarius_dagster.engine.contracts import ModuleOutput
from notarius_dagster.engine.digest import digest_of


def extraction_fingerprint(
    *,
    lane_id: str,
    module_key: str,
    module_version: str,
    module_material: Mapping[str, Any],
    options: Mapping[str, Any],
    llm_fingerprint: str,
    chunk_digest: str,
    reference_fingerprints: Mapping[str, str],
) -> str:
    return digest_of(
        {
            "lane": lane_id,
            "module": module_key,
            "version": module_version,
            "material": dict(module_material),
            "options": dict(options),
            "llm": llm_fingerprint,
            "chunk": chunk_digest,
            "references": dict(sorted(reference_fingerprints.items())),
        }
    )


class CheckpointStore(Protocol):
    def get(self, fingerprint: str) -> ModuleOutput | None: ...

    def put(self, fingerprint: str, output: ModuleOutput) -> None: ...


class FileCheckpointStore:
    """One JSON file per fingerprint, written atomically (safe across concurrent runs)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _path(self, fingerprint: str) -> Path:
        digest = fingerprint.split(":", 1)[-1]
        return self.root / digest[:2] / f"{digest}.json"

    def get(self, fingerprint: str) -> ModuleOutput | None:
        path = self._path(fingerprint)
        try:
            return ModuleOutput.model_validate_json(path.read_bytes())
        except FileNotFoundError:
            return None
        except ValueError:
            return None  # a damaged checkpoint is a miss, never a result

    def put(self, fingerprint: str, output: ModuleOutput) -> None:
        path = self._path(fingerprint)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(output.model_dump_json().encode())
        os.replace(tmp, path)
