"""The real Dagster servers for the end-to-end tests, shared by every test that asks for them.

`dg dev` (the webserver, the daemon and the code server, exactly as `make ui` starts them)
loads the project pyproject.toml names, on 127.0.0.1 and a free port, in a temporary
DAGSTER_HOME holding a copy of the repository's `configs/dagster.yaml`, with a temporary store
and inbox.
The model is the test double, reached the way a real OpenAI-compatible server is: the
servers' profile (NOTARIUS_PROFILE) is a copy of `configs/offline.yaml` (or the test's own
profile) whose LLM profile `loopback` is `openai/notarius-double` at a loopback server of this
test process answering with `tests.doubles.lane_responder` (or the test's own responder), so the
runs the daemon launches in its own processes call it through litellm's real OpenAI route
(tests/llm_double.py: `ResponderServer`, `loopback_profile_file`).

Use the fixture `dagster_servers` (session-scoped: one set of servers for all of them) after
`pytest_plugins = ["tests.e2e_servers"]`. The servers are always stopped, by killing their
process group, however the tests end. Their combined log is kept in the temporary folder and
its tail is shown when a wait fails. Browser tests take the fixture `page`: a fresh Chromium page
on the servers, the newsletter dialog dismissed, a screenshot kept when the test fails."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.llm_double import (
    Responder,
    ResponderServer,
    loopback_environ,
    loopback_profile_file,
    responder_server,
)

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

UI_TIMEOUT_MS = 30_000
"""How long a browser test waits for the UI to act or show something (loaded 2-core machine)."""

REPO = Path(__file__).resolve().parent.parent
VENV_BIN = REPO / ".venv" / "bin"
OFFLINE = REPO / "configs" / "offline.yaml"
START_TIMEOUT_S = 180.0
RUN_TIMEOUT_S = 240.0

_RUNS_QUERY = """
query PartitionRuns($tags: [ExecutionTag!]) {
  runsOrError(filter: {tags: $tags}) {
    __typename
    ... on Runs { results { runId status tags { key value } } }
    ... on PythonError { message }
  }
}
"""

_WORKSPACE_QUERY = """
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

_RELOAD_MUTATION = """
mutation Reload($name: String!) {
  reloadRepositoryLocation(repositoryLocationName: $name) {
    __typename
    ... on WorkspaceLocationEntry { name loadStatus }
    ... on PythonError { message }
    ... on RepositoryLocationNotFound { message }
  }
}
"""

LOCATION_NAME = "notarius"  # workspace.yaml: location_name


PROMPT_OVERRIDE_HOOK = '''"""Test hook (tests/e2e_servers.py: prompt_override_environ): the lane
of kind KIND reads PROMPT instead of its prompt.md."""
import dataclasses
import os
from pathlib import Path

_spec = os.environ.get("NOTARIUS_E2E_PROMPT_OVERRIDE", "")
if _spec:
    from notarius_dagster.engine import lanes as _lanes

    _kind, _, _path = _spec.partition("=")
    _original = _lanes.load_lane_package

    def load_lane_package(package):
        lane = _original(package)
        if lane.kind == _kind:
            lane = dataclasses.replace(lane, prompt=Path(_path))
        return lane

    _lanes.load_lane_package = load_lane_package
'''


def prompt_override_environ(root: Path, kind: str, prompt: Path) -> dict[str, str]:
    """The servers' environment in which the lane of `kind` reads `prompt` (a copy the test
    may edit; the repository's prompt files are never touched): a `sitecustomize` hook on
    their PYTHONPATH points the lane the registry loads at the copy, as
    tests/lane_doubles.py's `use_prompt` does in process."""
    hook = root / "hook"
    hook.mkdir(parents=True, exist_ok=True)
    (hook / "sitecustomize.py").write_text(PROMPT_OVERRIDE_HOOK)
    python_path = [str(hook), str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {
        "NOTARIUS_E2E_PROMPT_OVERRIDE": f"{kind}={prompt}",
        "PYTHONPATH": os.pathsep.join(python_path),
    }


@contextlib.contextmanager
def automated_servers(
    root: Path, responder: Responder, *, profile: Path, interval_s: int, kind: str, prompt: Path
) -> Iterator[DagsterServers]:
    """Servers for `profile` with the model answered by `responder` on loopback, the automation
    sensor on at `interval_s`, and the lane of `kind` reading `prompt` (a copy the test edits);
    stopped on exit."""
    with responder_server(responder) as loopback:
        servers = start_servers(
            root,
            loopback,
            profile=profile,
            env={
                "NOTARIUS_AUTOMATION": "running",
                "NOTARIUS_AUTOMATION_INTERVAL": str(interval_s),
                **prompt_override_environ(root, kind, prompt),
            },
        )
        try:
            yield servers
        finally:
            servers.stop()


_FINISHED = {"SUCCESS", "FAILURE", "CANCELED"}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class DagsterServers:
    """`dagster dev` running for the tests, and what they need to talk to it."""

    url: str
    home: Path
    data: Path
    inbox: Path
    log_path: Path
    process: subprocess.Popen[bytes]

    @property
    def bundles(self) -> Path:
        return self.data / "bundles"

    @property
    def transcripts(self) -> Path:
        return self.data / "transcripts"

    def warnings(self) -> list[str]:
        """The lines of the servers' log that warn (a deprecation, a misplaced dagster.yaml,
        a mismatched venv): what a person running `make ui` would see."""
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return [line for line in text.splitlines() if "warning" in line.lower()]

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no server log)"
        return "\n".join(text.splitlines()[-lines:])

    def graphql(
        self, query: str, variables: dict[str, Any] | None = None, timeout_s: float = 30.0
    ) -> dict[str, Any]:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(
            f"{self.url}/graphql", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            answer: dict[str, Any] = json.loads(response.read())
        if answer.get("errors"):
            raise AssertionError(f"GraphQL errors: {answer['errors']}")
        return dict(answer["data"])

    def runs_of(self, partition: str) -> list[dict[str, Any]]:
        """The runs of a session partition, as the webserver reports them (newest first), each
        with `runId`, `status` and `tags` as a dict."""
        data = self.graphql(
            _RUNS_QUERY, {"tags": [{"key": "dagster/partition", "value": partition}]}
        )
        runs = data["runsOrError"]
        if runs["__typename"] != "Runs":
            raise AssertionError(f"runs query failed: {runs}")
        return [
            {**run, "tags": {t["key"]: t["value"] for t in run["tags"]}} for run in runs["results"]
        ]

    def wait_for_run(
        self, partition: str, *, besides: Collection[str] = (), timeout_s: float = RUN_TIMEOUT_S
    ) -> dict[str, Any]:
        """Wait for a run of `partition` not in `besides` to finish, and return it; a run that
        fails or a wait that times out fails the test with the server log's tail."""
        deadline = time.monotonic() + timeout_s
        latest: dict[str, Any] | None = None
        while time.monotonic() < deadline:
            self.assert_running()
            fresh = [run for run in self.runs_of(partition) if run["runId"] not in besides]
            if fresh:
                latest = fresh[-1]  # the oldest new one: runs are listed newest first
                if latest["status"] in _FINISHED:
                    if latest["status"] != "SUCCESS":
                        raise AssertionError(
                            f"run {latest['runId']} of {partition!r} ended {latest['status']}"
                            f"\n{self.log_tail()}"
                        )
                    return latest
            time.sleep(1.0)
        raise AssertionError(
            f"no run of {partition!r} finished within {timeout_s:.0f}s "
            f"(last seen: {latest})\n{self.log_tail()}"
        )

    def wait_until(
        self, partition: str, what: str, done: Callable[[], bool], *, timeout_s: float
    ) -> None:
        """Poll `done` every 2 s until it holds; a run of `partition` that fails, a server that
        exits or a wait that times out fails the test with the server log's tail."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.assert_running()
            failed = [r for r in self.runs_of(partition) if r["status"] in {"FAILURE", "CANCELED"}]
            if failed:
                raise AssertionError(
                    f"run {failed[0]['runId']} ended {failed[0]['status']}\n{self.log_tail()}"
                )
            if done():
                return
            time.sleep(2.0)
        raise AssertionError(f"timed out waiting for {what}\n{self.log_tail()}")

    def materializations(self, partition: str) -> dict[str, list[str]]:
        """Asset name -> the run ids of its materializations of `partition`, oldest first,
        read from the instance's storage."""
        from dagster import AssetRecordsFilter, DagsterInstance

        with DagsterInstance.from_config(str(self.home)) as instance:
            out = {}
            for key in instance.get_asset_keys():
                records = instance.fetch_materializations(
                    AssetRecordsFilter(asset_key=key, asset_partitions=[partition]),
                    limit=50,
                    ascending=True,
                ).records
                if records:
                    out[key.to_user_string()] = [r.run_id for r in records]
            return out

    def all_runs_succeeded(self, partition: str) -> bool:
        runs = self.runs_of(partition)
        return bool(runs) and all(r["status"] == "SUCCESS" for r in runs)

    def reload_location(
        self, name: str = LOCATION_NAME, timeout_s: float = START_TIMEOUT_S
    ) -> None:
        """Reload the code location (what the UI's *Reload* does) and wait until it loaded."""
        # The mutation answers once the new code server has loaded: slow on a busy machine.
        answer = self.graphql(_RELOAD_MUTATION, {"name": name}, timeout_s=timeout_s)[
            "reloadRepositoryLocation"
        ]
        if answer["__typename"] != "WorkspaceLocationEntry":
            raise AssertionError(f"reloading {name!r} failed: {answer}")
        _wait_until_loaded(self, timeout_s)

    def assert_running(self) -> None:
        if self.process.poll() is not None:
            raise AssertionError(
                f"dagster dev exited with {self.process.returncode}\n{self.log_tail()}"
            )

    def stop(self) -> None:
        """Stop every process `dagster dev` started: SIGTERM to the group, SIGKILL if needed."""
        if self.process.poll() is None:
            _signal_group(self.process, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=20)
        _signal_group(self.process, signal.SIGKILL)  # stragglers (code servers, run workers)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)


def _signal_group(process: subprocess.Popen[bytes], signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signum)  # the group started with the process (its own session)


def server_environment(
    root: Path, home: Path, data: Path, inbox: Path, profile: Path
) -> dict[str, str]:
    """The servers' environment; `profile` is the pipeline profile (naming its LLM profile)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NOTARIUS_", "DAGSTER_"))}
    python_path = [str(REPO)]
    if os.environ.get("PYTHONPATH"):
        python_path.append(os.environ["PYTHONPATH"])
    env.update(
        {
            "DAGSTER_HOME": str(home),
            "NOTARIUS_DATA": str(data),
            "NOTARIUS_INBOX": str(inbox),
            "NOTARIUS_PROFILE": str(profile),
            **loopback_environ(),
            "NOTARIUS_INBOX_INTERVAL": "1",
            "NOTARIUS_INBOX_SETTLE_SECONDS": "1",
            # Off unless a test turns it on (its default is on): a test that clicks or drops a
            # file must see only the runs it starts.
            "NOTARIUS_AUTOMATION": "stopped",
            "PYTHONPATH": os.pathsep.join(python_path),
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "PYTHONUNBUFFERED": "1",
            "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        }
    )
    return env


def start_servers(
    root: Path,
    loopback: ResponderServer,
    timeout_s: float = START_TIMEOUT_S,
    env: dict[str, str] | None = None,
    profile: Path = OFFLINE,
) -> DagsterServers:
    """Start `dagster dev` under `root` and wait until its code location has loaded. Its
    profile is a copy of `profile` whose LLM profile calls `loopback`; `env` adds to (or
    replaces) the servers' environment (automation on, ...)."""
    home, data, inbox = root / "dagster-home", root / "data", root / "inbox"
    for folder in (home, data, inbox):
        folder.mkdir(parents=True, exist_ok=True)
    served = loopback_profile_file(profile, root / "profile", loopback)
    shutil.copyfile(REPO / "configs" / "dagster.yaml", home / "dagster.yaml")
    port = free_port()
    log_path = root / "dagster-dev.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            # What `make ui` runs: `dg dev` reads the project from pyproject.toml ([tool.dg]).
            [str(VENV_BIN / "dg"), "dev", "--host", "127.0.0.1", "--port", str(port)],
            cwd=REPO,
            env={
                **server_environment(root, home, data, inbox, served),
                "VIRTUAL_ENV": str(VENV_BIN.parent),
                **(env or {}),
            },
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    servers = DagsterServers(
        url=f"http://127.0.0.1:{port}",
        home=home,
        data=data,
        inbox=inbox,
        log_path=log_path,
        process=process,
    )
    try:
        _wait_until_loaded(servers, timeout_s)
    except BaseException:
        servers.stop()
        raise
    return servers


def _wait_until_loaded(servers: DagsterServers, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    last = "webserver not answering yet"
    while time.monotonic() < deadline:
        servers.assert_running()
        try:
            workspace = servers.graphql(_WORKSPACE_QUERY)["workspaceOrError"]
        except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError) as e:
            last = f"webserver not answering yet ({type(e).__name__})"
            time.sleep(1.0)
            continue
        entries = workspace.get("locationEntries", [])
        loaded = [e for e in entries if e["loadStatus"] == "LOADED"]
        if entries and len(loaded) == len(entries):
            errors = [
                e["locationOrLoadError"]
                for e in entries
                if e["locationOrLoadError"]["__typename"] == "PythonError"
            ]
            if errors:
                raise AssertionError(f"the code location failed to load: {errors}")
            return
        last = f"code location loading: {entries}"
        time.sleep(1.0)
    raise AssertionError(
        f"dagster dev not ready within {timeout_s:.0f}s ({last})\n{servers.log_tail()}"
    )


@pytest.fixture(scope="session")
def dagster_servers(
    tmp_path_factory: pytest.TempPathFactory, lane_loopback: ResponderServer
) -> Iterator[DagsterServers]:
    servers = start_servers(tmp_path_factory.mktemp("dagster-e2e"), lane_loopback)
    try:
        yield servers
    finally:
        servers.stop()


@pytest.fixture
def page(
    browser: Browser,
    dagster_servers: DagsterServers,
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Page]:
    """A fresh page; if the test fails, a full-page screenshot is saved and its path shown."""
    # A fresh instance greets the first visitor on localhost with a newsletter dialog that can
    # land on top of another dialog; tell the instance it has been seen, as "Skip" would.
    assert dagster_servers.graphql("mutation { setNuxSeen }")["setNuxSeen"] is True
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(UI_TIMEOUT_MS)
    # Assertions wait as long as actions do: on a loaded 2-core machine a page can take more
    # than Playwright's default 5 s to show what it will show.
    from playwright.sync_api import expect

    expect.set_options(timeout=UI_TIMEOUT_MS)
    # Should the dialog still appear (another Dagster release), dismiss it.
    page.add_locator_handler(
        page.get_by_text("Join the Dagster community"),
        lambda: page.get_by_role("button", name="Skip").click(),
    )
    failures_before = request.session.testsfailed
    try:
        yield page
    finally:
        if request.session.testsfailed > failures_before:  # the call phase has been reported
            shot = tmp_path_factory.mktemp("screenshots") / f"{request.node.name}.png"
            page.screenshot(path=str(shot), full_page=True)
            print(f"\nscreenshot of the failing page: {shot}")
        context.close()
