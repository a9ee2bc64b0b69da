"""Code loaded for life and the console command's exit without teardown
(notarius_dagster/engine/long_lived.py): they change when memory is reclaimed, never what a
command prints, writes or returns."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from notarius_dagster.engine.long_lived import loading_for_life

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def unfrozen() -> Iterator[None]:
    """Whatever a test freezes goes back to the collector afterwards."""
    enabled = gc.isenabled()
    try:
        yield
    finally:
        gc.unfreeze()
        if enabled:
            gc.enable()
        else:
            gc.disable()


class Cycle:
    def __init__(self) -> None:
        self.me = self


def test_no_collection_while_loading_and_what_was_loaded_is_frozen(unfrozen: None) -> None:
    gc.enable()
    before = gc.get_freeze_count()
    with loading_for_life():
        assert not gc.isenabled()
        loaded = [Cycle() for _ in range(1000)]
    assert gc.isenabled()
    assert gc.get_freeze_count() >= before + len(loaded)


def test_a_disabled_collector_stays_disabled_and_an_error_still_freezes(unfrozen: None) -> None:
    gc.disable()
    before = gc.get_freeze_count()
    with pytest.raises(ImportError), loading_for_life():
        import notarius_dagster.no_such_module  # type: ignore[import-not-found]  # noqa: F401
    assert not gc.isenabled()
    assert gc.get_freeze_count() > before


def test_exit_without_teardown_keeps_output_exit_handlers_and_status(tmp_path: Path) -> None:
    """Output still buffered when the command returns reaches a pipe whole, every atexit
    handler runs (as Python's own exit would run Dagster's and litellm's), logging is flushed,
    and the status is the command's."""
    marker = tmp_path / "atexit-ran"
    log = tmp_path / "command.log"
    script = textwrap.dedent(
        f"""
        import atexit, logging, pathlib, sys
        from notarius_dagster.engine.long_lived import exit_without_teardown

        atexit.register(pathlib.Path({str(marker)!r}).write_text, "yes")
        handler = logging.FileHandler({str(log)!r}, delay=True)
        logging.getLogger("cmd").addHandler(handler)
        logging.getLogger("cmd").warning("written at exit")
        sys.stdout.write("x" * 1_000_000)  # more than a pipe holds: written while read
        sys.stderr.write("summary\\n")
        exit_without_teardown(3)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 3
    assert done.stdout == "x" * 1_000_000
    assert done.stderr == "summary\n"
    assert marker.read_text() == "yes"
    assert log.read_text() == "written at exit\n"


def test_the_console_script_exits_with_the_commands_status(tmp_path: Path) -> None:
    """`notarius` ends through `entry`: a command's returned status and its message survive
    the exit (a transcript that does not exist is a usage error, before any model or run)."""
    script = Path(sys.executable).with_name("notarius")
    missing = tmp_path / "no-such-session.jsonl"
    done = subprocess.run(
        [str(script), "run", str(missing), "--config", "configs/offline.yaml"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("error: transcript: ")
    assert "no-such-session.jsonl" in done.stderr
