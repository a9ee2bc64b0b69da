"""Shared fixtures: small real documents, isolated stores."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from dagster import DagsterInstance

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from notarius_dagster.engine.inputs import document_digest  # noqa: E402
from notarius_dagster.engine.models import SourceDocument, SourceUnit  # noqa: E402
from tests.browser import launched_chromium  # noqa: E402
from tests.doubles import lane_responder  # noqa: E402
from tests.llm_double import ResponderServer, install_profile, responder_server  # noqa: E402

if TYPE_CHECKING:
    from playwright.sync_api import Browser

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "data"
"""Real, openly licensed transcripts and wiki notes committed with the project (data/README.md)."""


def pytest_configure(config: pytest.Config) -> None:
    """The LLM test double (tests/llm_double.py): its `test-double` LLM profile is known to
    this process's lane registry; the product itself has no such profile."""
    install_profile()


def make_document(
    unit_ids: list[int] | None = None, source_id: str = "s1", texts: list[str] | None = None
) -> SourceDocument:
    unit_ids = unit_ids if unit_ids is not None else list(range(10))
    units = tuple(
        SourceUnit(
            unit_id=u,
            text=(texts[i] if texts else f"line {i}"),
            metadata={"speaker": "DM" if i % 2 == 0 else "Player"},
        )
        for i, u in enumerate(unit_ids)
    )
    return SourceDocument(
        source_id=source_id,
        media_type="application/x-ndjson",
        units=units,
        digest=document_digest(units),
    )


@pytest.fixture
def doc() -> SourceDocument:
    return make_document()


@pytest.fixture
def instance() -> Iterator[DagsterInstance]:
    """An ephemeral Dagster instance, disposed after the test (undisposed instances collected
    at interpreter exit crash CPython 3.11.7's AST constructor)."""
    with DagsterInstance.ephemeral() as inst:
        yield inst


@pytest.fixture
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """DAGSTER_HOME and the store under tmp_path."""
    home = tmp_path / "dagster-home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.setenv("NOTARIUS_DATA", str(tmp_path / "data"))
    yield tmp_path


@pytest.fixture(scope="session")
def lane_loopback() -> Iterator[ResponderServer]:
    """The LLM test double for processes a `scripted_llm` block cannot reach (`notarius run`
    subprocesses, the Dagster servers): an OpenAI-compatible server on 127.0.0.1 answering
    with `tests.doubles.lane_responder` (tests/llm_double.py: `loopback_profile_file`)."""
    with responder_server(lane_responder) as server:
        yield server


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's headless Chromium for the browser tests, one per test module (tests/browser.py
    says how it is launched; it skips, or fails on CI, when Chromium is missing)."""
    with launched_chromium() as launched:
        yield launched
