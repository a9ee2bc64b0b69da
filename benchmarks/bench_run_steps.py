"""Steps, processes and Dagster events of one session run, measured from outside: `notarius run`
of the bundled sample (`samples/crd3-c2e001-slice.jsonl`) with the complete profile
(`configs/dnd-complete.yaml`, six lanes) and the test suite's double reached through its
loopback OpenAI server (`tests/llm_double.py: ResponderServer`, answering with the keyword rules
of `tests/lane_doubles.py`: no model time, so what is left is orchestration), in a fresh
Dagster home and store per repeat.

Per run it counts, from the run's event log on the instance: STEP_START events (each step is
one process of the forkserver under the multiprocess executor `notarius run` uses for one
session), asset check evaluations, materializations and the total of event-log entries (each a
synced write to the instance's storage); and, from outside, the processes of the command's
whole tree over its life, its CPU and wall time (`process_tree.py`, via bench_pipeline's
`run_process`). Counts are exact; times are noisy on a shared machine (min and median).

`--tree` measures another checkout of the product (e.g. the base commit, extracted with
`git archive BASE | tar -x -C /tmp/base`), with this venv: its modules come first on
PYTHONPATH, as bench_pipeline.py's npc-change figure does. Results merge into
benchmarks/results/run-steps.json under `--label`.

    .venv/bin/python benchmarks/bench_run_steps.py --label after
    .venv/bin/python benchmarks/bench_run_steps.py --label before --tree /tmp/base

Needs psutil (the `bench` extra). Never part of the test suite."""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

import bench_pipeline  # noqa: E402

SAMPLE = Path("samples") / "crd3-c2e001-slice.jsonl"
PROFILE = Path("configs") / "dnd-complete.yaml"
RESULTS = ROOT / "benchmarks" / "results" / "run-steps.json"


def one_run(tree: Path, work: Path) -> dict[str, Any]:
    """One `notarius run` of the sample in a fresh store under `work`; its counts and times."""
    from tests.lane_doubles import complete_responder
    from tests.llm_double import loopback_environ, loopback_profile_file, responder_server

    store = bench_pipeline.Store(work)
    env = bench_pipeline.run_env(tree, store)
    env.update(LITELLM_LOCAL_MODEL_COST_MAP="True", **loopback_environ())
    with responder_server(complete_responder) as server:
        profile = loopback_profile_file(tree / PROFILE, work / "profile", server)
        cmd = [*bench_pipeline.notarius_command(), "run", str(tree / SAMPLE)]
        cmd += ["--config", str(profile)]
        cmd += ["--out", str(store.out), "--data", str(store.data)]
        measured = bench_pipeline.run_process(
            cmd, tree=tree, store=store, log=work / "run.log", env=env
        )
    counts = event_counts(store.home)
    return {**counts, "wall_s": round(measured.wall_s, 2), **measured.tree()}


def event_counts(home: Path) -> dict[str, Any]:
    """What the run wrote to the instance in `home` (in a subprocess with DAGSTER_HOME set,
    so this process never opens an instance of its own)."""
    script = (
        "import json\n"
        "from dagster import DagsterInstance\n"
        "with DagsterInstance.get() as instance:\n"
        "    [run] = instance.get_runs()\n"
        "    logs = instance.all_logs(run.run_id)\n"
        "    types = [e.dagster_event.event_type_value for e in logs if e.dagster_event]\n"
        "    steps = sorted({e.step_key for e in logs if e.step_key})\n"
        "    print(json.dumps({'status': run.status.value, 'events': len(logs),\n"
        "                      'types': types, 'steps': steps}))\n"
    )
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    data = json.loads(out.stdout.strip().splitlines()[-1])
    types = Counter(data["types"])
    return {
        "status": data["status"],
        "events": data["events"],
        "step_starts": types["STEP_START"],
        "asset_check_evaluations": types["ASSET_CHECK_EVALUATION"],
        "materializations": types["ASSET_MATERIALIZATION"],
        "steps": data["steps"],
    }


def summary(rows: list[dict[str, Any]], key: str) -> dict[str, float]:
    values = [float(row[key]) for row in rows]
    return {"min": min(values), "median": statistics.median(values)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", required=True, help="the key in run-steps.json")
    parser.add_argument("--tree", type=Path, default=ROOT, help="the product checkout to run")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    tree = args.tree.resolve()
    rows = []
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory(prefix="bench-run-steps-") as work:
            rows.append(one_run(tree, Path(work)))
            print(json.dumps({k: v for k, v in rows[-1].items() if k != "steps"}), flush=True)
    result = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "cores": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "tree": str(tree),
        "command": "notarius run samples/crd3-c2e001-slice.jsonl --config "
        "configs/dnd-complete.yaml, its LLM profile the loopback double (complete_responder)",
        "repeats": rows,
        "summary": {
            key: summary(rows, key)
            for key in (
                "step_starts",
                "asset_check_evaluations",
                "events",
                "tree_processes",
                "tree_cpu_s",
                "wall_s",
            )
        },
    }
    existing = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    existing[args.label] = result
    RESULTS.write_text(json.dumps(existing, indent=2) + "\n")
    print(json.dumps(result["summary"], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
