"""The bundle store resource: the store layout (`StorePaths`) as Dagster resource config."""

from __future__ import annotations

from pathlib import Path

from dagster import ConfigurableResource

from notarius_dagster.engine.checkpoints import FileCheckpointStore
from notarius_dagster.store import StorePaths


class BundleStore(ConfigurableResource):
    """The folders of `StorePaths`, as strings (resource config must be serializable). On a
    cluster the store must be shared storage."""

    root: str
    bundles_root: str
    inbox: str
    checkpoints_enabled: bool = True

    @classmethod
    def from_paths(cls, paths: StorePaths) -> BundleStore:
        return cls(root=str(paths.root), bundles_root=str(paths.bundles), inbox=str(paths.inbox))

    @property
    def paths(self) -> StorePaths:
        return StorePaths(
            root=Path(self.root), bundles=Path(self.bundles_root), inbox=Path(self.inbox)
        )

    @property
    def bundles(self) -> Path:
        return self.paths.bundles

    @property
    def transcripts(self) -> Path:
        return self.paths.transcripts

    def checkpoint_store(self) -> FileCheckpointStore | None:
        return FileCheckpointStore(self.paths.checkpoints) if self.checkpoints_enabled else None
