"""report.html in a real browser (Playwright + Debian's Chromium, as the UI test): offline, every figure
decodes and has a size, and the accuracy tables are there.

Setup (once per machine): ``bash .ci/install-browser-test``. Skipped, with the reason, where Playwright or
Chromium is missing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from browser import CHROMIUM, browser_or_skip  # noqa: E402
from conftest import TOY_SCHEMA, toy_frame

import privsynth
from privsynth.schema import parse_schema

pytestmark = pytest.mark.slow



def test_report_html_renders_every_figure_offline(tmp_path):
    sync_playwright = browser_or_skip()
    release = privsynth.synthesize(toy_frame(400, seed=2), parse_schema(TOY_SCHEMA), epsilon=2.0, seed=4, rows=300,
                                   unlimited=True, output=tmp_path / "run", mechanism="aim",
                                   options={"max_rounds": 6, "iterations_per_round": 20, "final_iterations": 50},
                                   ledger=f"sqlite:///{tmp_path / 'ledger.sqlite'}", release_store=tmp_path / "store")
    run = Path(release.run_dir)
    report = json.loads((run / "report.json").read_text())
    # A copy alone in an empty folder: the page needs no file beside it.
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(run / "report.html", alone / "report.html")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            requests = []
            page.on("request", lambda r: requests.append(r.url))
            page.goto((alone / "report.html").as_uri())
            page.wait_for_load_state("load")
            figures = page.locator("img.report-figure")
            assert figures.count() == len(report["columns"]) + 2
            sizes = page.eval_on_selector_all(
                "img.report-figure", "els => els.map(e => [e.complete, e.naturalWidth, e.naturalHeight])")
            assert all(done and w > 100 and h > 100 for done, w, h in sizes), sizes
            assert page.locator("#figure-pairs img").is_visible() and page.locator("#figure-budget img").is_visible()
            text = page.inner_text("body")
            assert "Which columns and pairs can I trust?" in text
            for column in report["columns"]:
                assert column["column"] in text
            assert all(url.startswith(("file:", "data:")) for url in requests), requests  # nothing fetched online
        finally:
            browser.close()
