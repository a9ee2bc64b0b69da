"""The bundle store resource: where transcripts, bundles and checkpoints live."""

from __future__ import annotations

from pathlib import Path

from dagster import ConfigurableResource

from notarius_dagster.engine.checkpoints import FileCheckpointStore


class BundleStore(ConfigurableResource):
    """Root of the store. Bundles under `bundles/`, the transcript store under `transcripts/`,
    checkpoints under `checkpoints/`. On a cluster this must be shared storage."""

    root: str
    bundles_root: str | None = None
    checkpoints_enabled: bool = True

    @property
    def bundles(self) -> Path:
        return Path(self.bundles_root) if self.bundles_root else Path(self.root) / "bundles"

    @property
    def transcripts(self) -> Path:
        return Path(self.root) / "transcripts"

    def checkpoint_store(self) -> FileCheckpointStore | None:
        return (
            FileCheckpointStore(Path(self.root) / "checkpoints")
            if self.checkpoints_enabled
            else None
        )
