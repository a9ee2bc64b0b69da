"""Code loaded for life (notarius_dagster/engine/long_lived.py): while it loads nothing is
collected, afterwards it is frozen, and the collector is left as it was found."""

from __future__ import annotations

import gc
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
