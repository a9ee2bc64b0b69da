"""Code loaded for life (notarius_dagster/engine/long_lived.py): while it loads nothing is
collected, afterwards it is frozen if anything new was loaded, and the collector is left as it
was found."""

from __future__ import annotations

import gc
import sys
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


@pytest.fixture
def probes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder on sys.path for modules no test has imported yet; forgotten afterwards."""
    monkeypatch.syspath_prepend(str(tmp_path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        del sys.modules[name]


def test_no_collection_while_loading_and_what_was_loaded_is_frozen(
    unfrozen: None, probes: Path
) -> None:
    (probes / "long_lived_probe.py").write_text(
        "LOADED = []\nfor _ in range(1000):\n    x = []\n    x.append(x)\n    LOADED.append(x)\n"
    )
    gc.enable()
    before = gc.get_freeze_count()
    with loading_for_life():
        assert not gc.isenabled()
        import long_lived_probe  # type: ignore[import-not-found]
    assert gc.isenabled()
    assert gc.get_freeze_count() >= before + len(long_lived_probe.LOADED)


def test_a_disabled_collector_stays_disabled_and_an_error_still_freezes(
    unfrozen: None, probes: Path
) -> None:
    (probes / "long_lived_dependency.py").write_text("VALUE = [[] for _ in range(10)]\n")
    (probes / "long_lived_failing.py").write_text(
        "import long_lived_dependency\nraise ImportError('fails after loading its dependency')\n"
    )
    gc.disable()
    before = gc.get_freeze_count()
    with pytest.raises(ImportError), loading_for_life():
        import long_lived_failing  # type: ignore[import-not-found]  # noqa: F401
    assert not gc.isenabled()
    assert gc.get_freeze_count() > before


def test_a_block_that_loads_nothing_new_freezes_nothing(unfrozen: None) -> None:
    """The second session of one command, a level step after the first: the garbage of the
    work between two such blocks must stay collectable."""
    gc.enable()
    before = gc.get_freeze_count()
    with loading_for_life():
        import notarius_dagster.engine.long_lived  # noqa: F401  (loaded already)

        garbage = [Cycle() for _ in range(1000)]
    assert gc.isenabled()
    assert gc.get_freeze_count() == before
    del garbage
