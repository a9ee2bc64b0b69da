"""Per-chunk extraction checkpoints, stored under a fingerprint of everything that determines
the extraction (lane, extractor key and version, prompt and schema hashes, options, LLM profile,
chunk digest, reference fingerprints). A hit makes no LLM call; any changed input misses.

A rejected extraction is a result too: it is stored under the same fingerprint (as the
rejection, beside where an accepted output would go), so a re-run does not pay again for a
chunk the model already failed on with the same inputs. `RetryRejections` wraps a store to
ask again (`notarius run --retry-rejected`, or the lane's `retry_rejected` run config)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Protocol, runtime_checkable

from notarius_dagster.engine.contracts import ModuleOutput
from notarius_dagster.engine.digest import digest_of
from notarius_dagster.engine.files import write_atomically
from notarius_dagster.engine.models import Rejection


def extraction_fingerprint(
    *,
    lane_id: str,
    module_key: str,
    module_version: str,
    module_material: Mapping[str, object],
    options: Mapping[str, object],
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


@runtime_checkable
class RejectionCheckpoints(Protocol):
    """A store that also keeps rejected extractions (the lane runner uses it when present)."""

    def get_rejection(self, fingerprint: str) -> Rejection | None: ...

    def put_rejection(self, fingerprint: str, rejection: Rejection) -> None: ...


class RetryRejections:
    """A store whose stored rejections are not reused (new ones are still stored, and
    accepted outputs are reused as usual): the chunks rejected before are asked again."""

    def __init__(self, inner: CheckpointStore) -> None:
        self.inner = inner

    def get(self, fingerprint: str) -> ModuleOutput | None:
        return self.inner.get(fingerprint)

    def put(self, fingerprint: str, output: ModuleOutput) -> None:
        self.inner.put(fingerprint, output)

    def get_rejection(self, fingerprint: str) -> Rejection | None:
        return None

    def put_rejection(self, fingerprint: str, rejection: Rejection) -> None:
        if isinstance(self.inner, RejectionCheckpoints):
            self.inner.put_rejection(fingerprint, rejection)


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
        write_atomically(self._path(fingerprint), output.model_dump_json().encode())
        self._rejection_path(fingerprint).unlink(missing_ok=True)

    def _rejection_path(self, fingerprint: str) -> Path:
        path = self._path(fingerprint)
        return path.with_name(f"{path.stem}.rejected.json")

    def get_rejection(self, fingerprint: str) -> Rejection | None:
        try:
            return Rejection.model_validate_json(self._rejection_path(fingerprint).read_bytes())
        except FileNotFoundError:
            return None
        except ValueError:
            return None

    def put_rejection(self, fingerprint: str, rejection: Rejection) -> None:
        write_atomically(self._rejection_path(fingerprint), rejection.model_dump_json().encode())
