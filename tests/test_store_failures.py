"""The store under failure (issue 23): errors that say why without quoting content or paths, and
no leftovers kept for good.

- A stored per-asset value that no longer validates (a lane value of the wrong type, read when
  only the bundle is rebuilt): the error names the asset, the field path and the rule, never
  `input_value=...` (pydantic's way of quoting the transcript text in the value).
- Disk full: while `notarius run` copies the transcript, and while a per-asset value is
  written. A real full file system: a small tmpfs mounted in a private mount namespace
  (`unshare -m`, root only; skipped where that is not allowed). The error names the store, not
  a path, and no temporary file is left.
- Crash leftovers: a publisher killed at the worst moment (just before its staging folder is
  renamed) leaves `.staging-*`; a killed writer of a value or a transcript leaves its `.tmp`.
  The next publication or write of that session sweeps them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dagster import AssetKey, DagsterInstance, build_output_context

from notarius_dagster.engine.bundle import VERSIONS_DIR, publish_bundle
from notarius_dagster.engine.transcripts import register_transcript
from notarius_dagster.run.runner import run_session
from resources.io_managers import JsonAssetIOManager
from tests.conftest import make_document
from tests.doubles import lane_responder
from tests.llm_double import (
    ResponderServer,
    loopback_environ,
    loopback_profile_file,
    scripted_llm,
)

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "samples" / "crd3-c2e001-slice.jsonl"
OFFLINE = REPO / "configs" / "offline.yaml"
NOTARIUS = Path(sys.executable).with_name("notarius")
CANARY = "Gustav hums the song of the seventh canary, zqvx"


def can_mount_tmpfs() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=16k tmpfs /mnt"],
        capture_output=True,
        check=False,
    )
    return probe.returncode == 0


needs_tmpfs = pytest.mark.skipif(
    not can_mount_tmpfs(), reason="needs `unshare -m` and tmpfs mounts (root in a VM or CI)"
)


def on_a_full_disk(folder: Path, size_kb: int, *command: str) -> list[str]:
    """`command` in a private mount namespace where `folder` is a tmpfs of `size_kb` KiB."""
    folder.mkdir(parents=True, exist_ok=True)
    script = f'mount -t tmpfs -o size={size_kb}k tmpfs "$1" && shift && exec "$@"'
    return ["unshare", "-m", "sh", "-c", script, "sh", str(folder), *command]


# --- a stored value that does not validate --------------------------------------------------


def test_a_stored_value_of_the_wrong_type_is_reported_without_its_content(
    tmp_path: Path,
) -> None:
    lines = SAMPLE.read_text().splitlines()[:60]
    lines.insert(3, json.dumps({"unit_id": 99_001, "speaker": "MATT", "text": CANARY}))
    transcript = tmp_path / "s1.jsonl"
    transcript.write_text("\n".join(lines) + "\n")
    register_transcript(tmp_path / "data" / "transcripts", "s1", transcript)
    with DagsterInstance.ephemeral() as instance, scripted_llm(lane_responder):

        def run() -> object:
            return run_session(
                session_id="s1",
                profile=OFFLINE,
                data_root=tmp_path / "data",
                llm_profile="test-double",
                instance=instance,
                quiet=True,
                only_stale=True,
            )

        first = run()
        assert getattr(first, "success", False)
        stored = tmp_path / "data" / "assets" / "s1" / "npcs.json"
        value = json.loads(stored.read_text())
        value["value"]["lane_id"] = {"quoted": CANARY}  # a string expected, text found
        stored.write_text(json.dumps(value))
        bundle = tmp_path / "data" / "bundles" / "s1"
        bundle.unlink()  # only the bundle is rebuilt: it reads the stored npcs value
        second = run()
        records = [r for r in instance.all_logs(second.run_id)]  # type: ignore[attr-defined]
        log = "\n".join(str(r) for r in records)
    assert not second.success  # type: ignore[attr-defined]
    error = second.error or ""  # type: ignore[attr-defined]
    assert "the stored value of npcs (session 's1') is not a valid LaneResult" in error, error
    assert "lane_id: string_type" in error
    for text in (error, log):
        assert CANARY not in text
        assert "input_value=" not in text  # pydantic's quote of the value


# --- disk full ------------------------------------------------------------------------------


@needs_tmpfs
def test_a_full_transcript_store_is_named_and_nothing_is_left(
    tmp_path: Path, lane_loopback: ResponderServer
) -> None:
    big = tmp_path / "big.jsonl"
    line = json.dumps({"speaker": "DM", "text": "x" * 400}) + "\n"
    big.write_text(line * 400)  # 170 KB into a 64 KiB store
    store = tmp_path / "data" / "transcripts"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NOTARIUS_", "DAGSTER_"))}
    env |= {"DAGSTER_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO), **loopback_environ()}
    config = loopback_profile_file(OFFLINE, tmp_path / "profile", lane_loopback)
    command = [str(NOTARIUS), "run", str(big), "--config", str(config)]
    command += ["--data", str(tmp_path / "data")]
    command += ["--out", str(tmp_path / "data" / "bundles")]
    check = "; ".join(
        [
            f"{' '.join(command)}",
            "status=$?",
            f'ls -A "{store}" > "{tmp_path}/left.txt"',
            "exit $status",
        ]
    )
    done = subprocess.run(
        on_a_full_disk(store, 64, "sh", "-c", check),
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and str(tmp_path) not in done.stderr
    assert (
        f"cannot store the transcript of session 'big' ({big.stat().st_size} bytes) in the "
        "transcript store (<store>/transcripts): no space left on device (ENOSPC)" in done.stderr
    )
    assert (tmp_path / "left.txt").read_text().split() == []  # no tmp file, no half copy


@needs_tmpfs
def test_a_full_asset_value_store_is_named_and_no_tmp_is_left(tmp_path: Path) -> None:
    root = tmp_path / "assets"
    script = "\n".join(
        [
            "import os, sys",
            "from dagster import AssetKey, build_output_context",
            "from resources.io_managers import JsonAssetIOManager",
            "from tests.conftest import make_document",
            "manager = JsonAssetIOManager(root=sys.argv[1])",
            "document = make_document(list(range(400)), texts=['x' * 400] * 400)",
            "context = build_output_context(asset_key=AssetKey('source_document'),",
            "                               partition_key='s1')",
            "try:",
            "    manager.handle_output(context, document)",
            "except Exception as exc:",
            "    print(type(exc).__name__, exc)",
            "print('left:', sorted(os.listdir(os.path.join(sys.argv[1], 's1'))))",
        ]
    )
    done = subprocess.run(
        on_a_full_disk(root, 64, sys.executable, "-c", script, str(root)),
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    first, left = done.stdout.strip().splitlines()[-2:]
    assert first == (
        "StoredValueError cannot store the value of source_document (session 's1') in the "
        "asset-value store (<store>/assets): no space left on device (ENOSPC); nothing of it "
        "was kept"
    )
    assert left == "left: []"


# --- crash leftovers ------------------------------------------------------------------------


def test_a_publisher_killed_before_its_rename_leaves_staging_that_the_next_publish_sweeps(
    tmp_path: Path,
) -> None:
    """Each killed publisher used to leave its `.staging-*` folder for good."""
    crash = "\n".join(
        [
            "import os, signal, sys",
            "from pathlib import Path",
            "import notarius_dagster.engine.bundle as bundle",
            "real = os.replace",
            "def killed(src, dst):",
            "    if '.staging-' in str(src):",
            "        os.kill(os.getpid(), signal.SIGKILL)",
            "    return real(src, dst)",
            "bundle.os.replace = killed",
            "bundle.publish_bundle(Path(sys.argv[1]), 's1', {'index.json': b'{}'})",
        ]
    )
    root = tmp_path / "bundles"
    versions = root / VERSIONS_DIR / "s1"
    for _ in range(3):
        killed = subprocess.run(
            [sys.executable, "-c", crash, str(root)],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            capture_output=True,
            timeout=120,
            check=False,
        )
        assert killed.returncode == -9
        # each publisher sweeps its killed predecessors' folders, under the session's lock
        assert len(list(versions.glob(".staging-*"))) == 1
    (root / ".link-s1-0123456789abcdef0123456789abcdef").symlink_to("nowhere")
    (root / ".link-s1-more-0123456789abcdef0123456789abcdef").symlink_to("nowhere")
    publish_bundle(root, "s1", {"index.json": b"{}"})
    assert list(versions.glob(".staging-*")) == []
    # a killed writer's temporary link goes too; session `s1-more`'s is not this session's
    assert [p.name for p in root.glob(".link-*")] == [
        ".link-s1-more-0123456789abcdef0123456789abcdef"
    ]
    assert json.loads((root / "s1" / "index.json").read_text()) == {}


def test_the_next_write_of_a_value_sweeps_what_a_killed_writer_left(tmp_path: Path) -> None:
    manager = JsonAssetIOManager(root=str(tmp_path))
    folder = tmp_path / "s1"
    folder.mkdir()
    ours = folder / ".source_document.json.0123abcd.tmp"  # a killed write of this value
    legacy = folder / "tmpk2j3h4.tmp"  # what earlier versions left, an hour old
    young = folder / "tmpyoung.tmp"  # might be another writer's, minutes old: kept
    other = folder / ".chunk_map.json.0123abcd.tmp"  # another value's: its writer sweeps it
    for leftover in (ours, legacy, young, other):
        leftover.write_text("{half")
    hour_ago = time.time() - 3700
    os.utime(legacy, (hour_ago, hour_ago))
    context = build_output_context(asset_key=AssetKey("source_document"), partition_key="s1")
    manager.handle_output(context, make_document())
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        ["source_document.json", young.name, other.name]
    )


def test_the_next_registration_of_a_transcript_sweeps_what_a_killed_copy_left(
    tmp_path: Path,
) -> None:
    store = tmp_path / "transcripts"
    store.mkdir()
    leftover = store / ".s1.jsonl.0123abcd.tmp"
    leftover.write_text("half a transcript")
    register_transcript(store, "s1", SAMPLE)
    assert sorted(p.name for p in store.iterdir()) == ["s1.jsonl", "s1.name"]
