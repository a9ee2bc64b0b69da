"""Runs launched through the Dagster daemon, measured from outside: the real servers a user
starts (`dg dev`: the webserver, the daemon and the code server, as `make ui` starts them) on a
fresh DAGSTER_HOME holding `configs/dagster.yaml`, a session registered with `notarius sessions
add`, and runs of the session job `materialize_session` launched through the webserver's
GraphQL `launchRun` with the session's `dagster/partition` tag, as the UI's launch does. The run
is queued, the daemon dequeues it, the code server starts its run worker.

What is read, and from where: the run's event log on the instance (Dagster's public
`DagsterInstance.all_logs`, in a subprocess with DAGSTER_HOME set, so nothing of the product is
imported here and the benchmark measures the same before and after the product is
restructured), and the latency server's first request time. Every timestamp is wall-clock
(`time.time()`) on the same machine:

- launch -> RUN_STARTING: the queue (the daemon dequeues on its own interval);
- RUN_STARTING -> RUN_START: the run worker process starts and loads the code location;
- RUN_START -> first STEP_START: what the executor does before the first step runs (the
  figure of issue 22's "done when": within 3 s on an idle machine; ideal 0);
- RUN_START -> first model call at the stub (none for a run that calls no model);
- RUN_START -> RUN_SUCCESS.

Needs the `bench` extra (psutil) for stopping the servers' whole tree. Never part of the test
suite; no time-based assertion anywhere."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LOCATION = "notarius"  # workspace.yaml: location_name
REPOSITORY = "__repository__"  # the repository Dagster names a `Definitions` object
SESSION_JOB = "materialize_session"
FINISHED = {"SUCCESS", "FAILURE", "CANCELED"}
START_TIMEOUT_S = 600.0
RUN_TIMEOUT_S = 1800.0

_WORKSPACE = """
{
  workspaceOrError {
    __typename
    ... on Workspace {
      locationEntries {
        name
        loadStatus
        locationOrLoadError { __typename ... on PythonError { message } }
      }
    }
  }
}
"""

_LAUNCH = """
mutation Launch($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on InvalidSubsetError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}
"""

_RUN = """
query Run($id: ID!) {
  runOrError(runId: $id) { __typename ... on Run { runId status } }
}
"""

_EVENTS = """
import json, sys
from dagster import DagsterInstance
out = {}
with DagsterInstance.get() as instance:
    for run_id in sys.argv[1:]:
        out[run_id] = [
            [e.timestamp, e.dagster_event.event_type.name, e.step_key]
            for e in instance.all_logs(run_id)
            if e.dagster_event is not None
        ]
print(json.dumps(out))
"""


class DaemonError(RuntimeError):
    """The servers did not start, a launch was refused or a run did not succeed."""


@dataclass
class Servers:
    """`dg dev` running for the benchmark."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def graphql(
        self, query: str, variables: Mapping[str, Any] | None = None, timeout_s: float = 60.0
    ) -> dict[str, Any]:
        body = json.dumps({"query": query, "variables": dict(variables or {})}).encode()
        request = urllib.request.Request(
            f"{self.url}/graphql", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            answer: dict[str, Any] = json.loads(response.read())
        if answer.get("errors"):
            raise DaemonError(f"GraphQL errors: {answer['errors']}")
        return dict(answer["data"])

    def alive(self) -> None:
        if self.process.poll() is not None:
            raise DaemonError(f"dg dev exited with {self.process.returncode}; log: {self.log}")

    def wait_loaded(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Until the webserver answers and every code location has loaded."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.alive()
            try:
                workspace = self.graphql(_WORKSPACE)["workspaceOrError"]
            except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
                time.sleep(0.5)
                continue
            entries = workspace.get("locationEntries", [])
            if entries and all(e["loadStatus"] == "LOADED" for e in entries):
                errors = [
                    e["locationOrLoadError"]
                    for e in entries
                    if e["locationOrLoadError"]["__typename"] == "PythonError"
                ]
                if errors:
                    raise DaemonError(f"the code location failed to load: {errors}")
                return
            time.sleep(0.5)
        raise DaemonError(f"dg dev not ready within {timeout_s:.0f} s; log: {self.log}")

    def launch(self, partition: str, assets: Sequence[str] | None = None) -> tuple[str, float]:
        """Launch the session job for `partition` (or only `assets` of it) as the UI does;
        (run id, wall-clock time just before the request)."""
        selector: dict[str, Any] = {
            "repositoryLocationName": LOCATION,
            "repositoryName": REPOSITORY,
            "jobName": SESSION_JOB,
        }
        if assets is not None:
            selector["assetSelection"] = [{"path": [name]} for name in assets]
        params = {
            "selector": selector,
            "mode": "default",
            "runConfigData": "{}",
            "executionMetadata": {"tags": [{"key": "dagster/partition", "value": partition}]},
        }
        submitted = time.time()
        answer = self.graphql(_LAUNCH, {"params": params})["launchRun"]
        if answer["__typename"] != "LaunchRunSuccess":
            raise DaemonError(f"launchRun refused: {answer}")
        return str(answer["run"]["runId"]), submitted

    def wait_finished(self, run_id: str, timeout_s: float = RUN_TIMEOUT_S) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.alive()
            run = self.graphql(_RUN, {"id": run_id})["runOrError"]
            if run.get("status") in FINISHED:
                return str(run["status"])
            time.sleep(0.5)
        raise DaemonError(f"run {run_id} did not finish within {timeout_s:.0f} s")

    def stop(self, keep: set[int]) -> None:
        """Stop every process `dg dev` started: SIGTERM to its group, then SIGKILL to whatever
        of it is left, and reap them (the benchmark is their subreaper: an unreaped orphan
        would be counted in the next measured command's CPU). `keep`: the benchmark's other
        children (the latency server)."""
        import psutil

        def ours() -> list[psutil.Process]:
            out = []
            for child in psutil.Process().children(recursive=True):
                if child.pid in keep:
                    continue
                try:
                    if any(p.pid in keep for p in child.parents()):
                        continue
                except psutil.Error:
                    continue
                out.append(child)
            return out

        for signum in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signum)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=30)
        for proc in ours():  # descendants that left the group
            with contextlib.suppress(psutil.Error):
                proc.kill()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            left = ours()
            if not left:
                return
            for proc in left:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(proc.pid, os.WNOHANG)
            time.sleep(0.2)


def start_servers(tree: Path, env: Mapping[str, str], port: int, log: Path) -> Servers:
    """`dg dev` in the product tree `tree` (it reads the project from pyproject.toml), on
    127.0.0.1:`port`, in its own process group."""
    venv_bin = Path(sys.executable).parent
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(venv_bin / "dg"), "dev", "--host", "127.0.0.1", "--port", str(port)],
            cwd=tree,
            env={
                **env,
                "VIRTUAL_ENV": str(venv_bin.parent),
                "PATH": f"{venv_bin}{os.pathsep}{env.get('PATH', '')}",
                "PYTHONUNBUFFERED": "1",
            },
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return Servers(url=f"http://127.0.0.1:{port}", process=process, log=log)


def run_events(env: Mapping[str, str], run_ids: Sequence[str]) -> dict[str, list[list[Any]]]:
    """Per run id: [timestamp, event type, step key] of every Dagster event of the run, read
    from the instance under env's DAGSTER_HOME in a subprocess."""
    out = subprocess.run(
        [sys.executable, "-c", _EVENTS, *run_ids],
        env=dict(env),
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise DaemonError(f"reading the event log failed: {out.stderr[-2000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def timeline(
    events: Sequence[Sequence[Any]], submitted_at: float, first_call_at: float | None
) -> dict[str, Any]:
    """The figures of one run from its events ([timestamp, type, step key], any order) and the
    stub's first request time (None when the run called no model)."""
    first: dict[str, float] = {}
    steps: set[str] = set()
    for timestamp, kind, step in sorted(events, key=lambda e: float(e[0])):
        first.setdefault(str(kind), float(timestamp))
        if kind == "STEP_START" and step:
            steps.add(str(step))

    def span(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else round(b - a, 2)

    start = first.get("RUN_START")
    end = first.get("RUN_SUCCESS", first.get("RUN_FAILURE"))
    return {
        "launch_to_run_starting_s": span(submitted_at, first.get("RUN_STARTING")),
        "run_starting_to_run_start_s": span(first.get("RUN_STARTING"), start),
        "run_start_to_first_step_s": span(start, first.get("STEP_START")),
        "run_start_to_first_call_s": span(start, first_call_at),
        "run_start_to_end_s": span(start, end),
        "launch_to_end_s": span(submitted_at, end),
        "steps": len(steps),
        "events": len(events),
    }
