"""One writer per session: publications of one session are serialized by a lock the kernel
releases when its holder dies, and pruning never removes a staging folder, the version the
link points to, or a version a reader may still be inside."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from notarius_dagster.engine.bundle import (
    LogicalFile,
    _prune_versions,
    encode_bundle,
    publish_bundle,
)

FILES = 6


def files(tag: str) -> list[LogicalFile]:
    listed = [f"lanes/l{i}.json" for i in range(FILES)]
    out = [LogicalFile("index.json", "application/json", {"tag": tag, "files": listed})]
    out += [LogicalFile(p, "application/json", {"tag": tag, "i": p}) for p in listed]
    return out


def read_bundle(root: Path, session: str) -> None:
    """What a consumer does (docs/bundle.md): resolve the link once, read index.json and every
    file it lists from the resolved folder; every tag must match."""
    folder = Path(os.path.realpath(root / session))
    index = json.loads((folder / "index.json").read_text())
    for rel in index["files"]:
        assert json.loads((folder / rel).read_text())["tag"] == index["tag"]


@pytest.mark.timeout(120)
def test_concurrent_publishers_of_one_session_never_break_a_reader(tmp_path: Path) -> None:
    publish_bundle(tmp_path, "s1", encode_bundle(files("first")))
    stop = threading.Event()
    failures: list[str] = []
    reads = 0

    def reader() -> None:
        nonlocal reads
        while not stop.is_set():
            try:
                read_bundle(tmp_path, "s1")
                reads += 1
            except Exception as exc:  # any failed read counts
                failures.append(type(exc).__name__)

    def publisher(n: int) -> None:
        for k in range(15):
            publish_bundle(tmp_path, "s1", encode_bundle(files(f"p{n}-{k}")))

    watcher = threading.Thread(target=reader)
    watcher.start()
    writers = [threading.Thread(target=publisher, args=(n,)) for n in range(3)]
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    stop.set()
    watcher.join()
    assert reads > 0 and failures == []
    read_bundle(tmp_path, "s1")
    versions = tmp_path / ".versions" / "s1"
    assert not [p.name for p in versions.iterdir() if p.name.startswith(".staging-")]


def test_pruning_keeps_the_linked_version_and_staging_folders(tmp_path: Path) -> None:
    """Pruning never removes a staging folder (a writer's own). A publication sweeps the ones
    it finds first, since it holds the session's lock and a live writer holds it while it
    stages (tests/test_store_failures.py); pruning alone, as here, keeps them."""
    publish_bundle(tmp_path, "s1", encode_bundle(files("a")))
    versions = tmp_path / ".versions" / "s1"
    old = time.time() - 3600
    for p in versions.iterdir():
        os.utime(p, (old, old))
    for tag in ("b", "c", "d"):
        publish_bundle(tmp_path, "s1", encode_bundle(files(tag)))
        for p in versions.iterdir():
            os.utime(p, (old, old))
    linked = Path(os.path.realpath(tmp_path / "s1"))
    kept = sorted(p.name for p in versions.iterdir() if not p.name.startswith("."))
    assert linked.name in kept and len(kept) == 2  # the current one and the one before it
    staging = versions / ".staging-someone-else"
    staging.mkdir()
    os.utime(staging, (old, old))
    _prune_versions(versions, keep={linked.name})
    assert staging.exists()


HOLDER = """
import sys, time
from pathlib import Path
from notarius_dagster.engine.bundle import publication_lock
with publication_lock(Path(sys.argv[1]), "s1"):
    print("locked", flush=True)
    time.sleep(600)
"""


@pytest.mark.timeout(60)
def test_a_killed_lock_holder_does_not_block_the_next_publisher(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        blocked = threading.Thread(
            target=publish_bundle, args=(tmp_path, "s1", encode_bundle(files("x")))
        )
        blocked.start()
        blocked.join(timeout=1.0)
        assert blocked.is_alive(), "a second publisher must wait for the lock"
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
        blocked.join(timeout=20)
        assert not blocked.is_alive()
    finally:
        if holder.poll() is None:
            holder.kill()
    read_bundle(tmp_path, "s1")
    assert (tmp_path / ".locks").is_dir()
