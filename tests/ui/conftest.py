"""Fixtures of the ``keel ui`` tests: a scripted workspace, its server, headless Chromium.

Chromium is the system's (Debian's ``chromium`` package, which CI installs), driven by
Playwright's Python package with ``executable_path``: no browser is downloaded. Without
Playwright or Chromium the browser tests skip with the reason, and fail under
``KEEL_REQUIRE_ALL=1`` (CI). Screenshots of each view go to ``$KEEL_TEST_ARTIFACTS``, else
``tests/ui/artifacts/`` (git-ignored).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ui_support import Server, Tab, Workspace, scripted_workspace

from _support import skip_or_fail

# Read at import: the per-test fixture that cleans KEEL_* variables runs later.
ARTIFACTS = Path(os.environ.get("KEEL_TEST_ARTIFACTS") or Path(__file__).parent / "artifacts")
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="module")
def scripted() -> Iterator[Workspace]:
    """The scripted workspace (``ui_support.scripted_workspace``), once per module.

    Under /tmp with 0755 parents: the plan's probes run as an unprivileged sandbox uid.
    """
    base = Path(tempfile.mkdtemp(prefix="keel-ui-", dir="/tmp"))
    base.chmod(0o755)
    try:
        yield scripted_workspace(base / "ws", base / "state", base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def server(scripted: Workspace) -> Iterator[Server]:
    """``keel ui --no-browser`` on the scripted workspace."""
    running = Server(scripted, scripted.root.parent / "ui.log")
    yield running
    running.stop()


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Headless Chromium (the system's), through Playwright."""
    try:
        from playwright.sync_api import Error, sync_playwright
    except ImportError:
        skip_or_fail("Playwright is not installed (the dev extra: pip install -e '.[dev]')")
    if not os.path.isfile(CHROMIUM):
        skip_or_fail(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    with sync_playwright() as playwright:
        try:
            chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        except Error as exc:
            skip_or_fail(f"Chromium at {CHROMIUM} does not start: {exc}")
        yield chromium
        chromium.close()


@pytest.fixture
def tab(browser: Any, request: pytest.FixtureRequest) -> Iterator[Tab]:
    """A new page (its own cookies) collecting console errors and uncaught exceptions."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    opened = Tab(page, request.node.name.replace("/", "_"), ARTIFACTS)
    page.on("console", lambda m: opened.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: opened.errors.append(f"uncaught: {exc}"))
    yield opened
    context.close()
