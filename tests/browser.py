"""Debian's Chromium driven through Playwright, shared by the browser tests
(tests/test_e2e_browser.py, tests/test_report_browser.py): one launch recipe and one artifacts
folder, so both suites run the browser the same way and keep their screenshots in one place.

Chromium is Debian's (`apt-get install chromium`); Playwright's own browser download cannot
work here. The `browser` fixture in tests/conftest.py launches it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
REPO = Path(__file__).resolve().parent.parent


def artifacts() -> Path:
    """Where screenshots are kept: $NOTARIUS_TEST_ARTIFACTS, default var/test-artifacts/."""
    folder = Path(os.environ.get("NOTARIUS_TEST_ARTIFACTS") or REPO / "var" / "test-artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextmanager
def launched_chromium() -> Iterator[Browser]:
    """A headless Chromium, closed on exit. Skips the test without it, except on CI (.ci/run
    installs it there, so a missing browser is a failure, not a silent skip)."""
    if not CHROMIUM.exists():
        reason = (
            f"{CHROMIUM} is missing: install Debian's chromium (apt-get install "
            "chromium); Playwright's own browser download is not used"
        )
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
