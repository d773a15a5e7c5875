"""What the browser tests need: Debian's Chromium driven by Playwright (`bash .ci/install-browser-test`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def browser_or_skip():
    """Playwright's sync API, or a skip that says how to install what is missing."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed: run `bash .ci/install-browser-test`")
    if not Path(CHROMIUM).is_file():
        pytest.skip("chromium is not installed (Debian package `chromium`): run `bash .ci/install-browser-test`")
    return sync_playwright
