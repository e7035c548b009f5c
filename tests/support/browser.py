"""Headless Chromium from Debian's packages (`/usr/bin/chromium`), driven by Playwright.

Playwright rather than Selenium: its locators wait for an element by themselves (no sleeps),
it reports dialogs (the XSS test needs to know that none opened) and response headers, and
it needs no driver process. It is pointed at the system browser (`executable_path`), so
nothing is downloaded: `pip install playwright` brings the library only.

Without a Chromium (or without the playwright package) a browser test skips, naming what is
missing; with AMC_REQUIRE_CHROMIUM=1 (set by .ci/run) it fails instead.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",  # we may run as root, where Chromium's sandbox refuses to start
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _missing() -> str | None:
    if not (Path(CHROMIUM).exists() or shutil.which("chromium")):
        return f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -e '.[test]')"
    return None


def require_chromium() -> None:
    missing = _missing()
    if missing is None:
        return
    if os.environ.get("AMC_REQUIRE_CHROMIUM") == "1":
        pytest.fail(f"AMC_REQUIRE_CHROMIUM=1 but {missing}")
    pytest.skip(missing)


@pytest.fixture(scope="module")
def chromium():
    """A headless Chromium for one test module; its contexts are the tests'. Playwright starts
    it with a new, empty profile directory of its own (and refuses a --user-data-dir)."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    executable = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable,
            headless=True,
            args=ARGS,
        )
        try:
            yield browser
        finally:
            browser.close()
