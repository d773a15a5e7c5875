"""The Prefect UI's Custom run form drives a real run: a browser (Playwright + Debian's Chromium) fills it.

Setup (once per machine): ``bash .ci/install-browser-test`` installs the ``browser`` extra
(Playwright) and Debian's ``chromium`` package. Playwright's own browser download is not used.
Skipped, with the reason, where either is missing.
"""

from __future__ import annotations

import json
import re
import sys

import pytest
from prefect_server import PrefectServer, log_tail, stop_process, toy_job

FLOW = "privsynth-synthesize"

from browser import CHROMIUM, browser_or_skip  # noqa: E402

pytestmark = pytest.mark.slow



@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = PrefectServer(tmp_path_factory.mktemp("prefect-ui-server")).start()
    try:
        yield server
    finally:
        server.stop()


def _field(form, label: str):
    """The schema-form property whose own label is ``label`` (not an enclosing object's)."""
    return form.locator(
        "xpath=//div[contains(concat(' ', @class, ' '), ' schema-form-property ')]"
        "[./div[contains(@class, 'p-label__header')]//span[contains(@class, 'schema-form-property__label')"
        f" and normalize-space() = '{label} (Optional)']]")


def _fill(form, label: str, value: str, kind: str | None = None) -> None:
    """Fill one field; ``kind`` ("str", "int") first picks that branch of an optional (X | None) field."""
    field = _field(form, label)
    body = field.locator("xpath=./div[contains(@class, 'p-label__body')]")
    if kind:
        body.get_by_role("button", name=kind, exact=True).first.click()
    box = body.locator("input, textarea").first
    box.fill(value)
    box.blur()


def _dropdown_value(form, label: str) -> str:
    """The value shown by a drop-down field (an enum such as the mechanism: no free text to mistype)."""
    body = _field(form, label).locator("xpath=./div[contains(@class, 'p-label__body')]")
    assert body.locator(".p-select").count() == 1 and body.locator("input, textarea").count() == 0
    return body.locator(".p-select-button__value").inner_text().strip()


def test_custom_run_form_starts_a_run_that_completes_with_artifacts(server, tmp_path):
    sync_playwright = browser_or_skip()
    job = toy_job(tmp_path)
    # The form's default mechanism, shown in its drop-down; the dataset gets a budget (no --unlimited, no seed).
    parameters = {k: v for k, v in job["parameters"].items() if k not in ("unlimited", "seed")} | {"mechanism": "aim"}
    from privsynth.privacy.ledger import BudgetLedger

    BudgetLedger(parameters["ledger"]).set_budget("toy", epsilon=10.0)
    log = tmp_path / "serve.log"
    serve = server.spawn([sys.executable, "-m", "flows.serve", "--cron", ""], log, cwd=tmp_path)
    try:
        served = server.wait_for_deployment(FLOW, "adult-served", timeout=180, process=serve, log=log)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.goto(f"{server.url}/deployments/deployment/{served['id']}", timeout=120_000)
                page.get_by_role("button", name="Run", exact=True).click()
                page.get_by_text("Custom run", exact=True).click()
                page.wait_for_url(re.compile(r"/deployments/deployment/[^/]+/run"), timeout=60_000)
                submit = page.get_by_role("button", name="Submit", exact=True)
                submit.wait_for(timeout=60_000)
                form = page.locator("form").first
                _fill(form, "Input", parameters["input"], "str")
                _fill(form, "Schema File", parameters["schema_file"], "str")
                assert _dropdown_value(form, "Mechanism") == parameters["mechanism"]
                _fill(form, "Epsilon", str(parameters["epsilon"]))
                _fill(form, "Rows", str(parameters["rows"]), "int")
                _fill(form, "Output", parameters["output"], "str")
                _fill(form, "Ledger", parameters["ledger"], "str")
                form.locator("xpath=//span[contains(@class, 'schema-form-property__label') and "
                             "normalize-space() = 'release_store (Optional)']").wait_for()
                _fill(form, "release_store", job["release_store"], "str")
                page.screenshot(path=str(tmp_path / "form-filled.png"), full_page=True)  # for a failing run
                submit.click()
                # The UI goes back to the deployment's page once the API has created the run.
                page.wait_for_url(re.compile(r"/deployments/deployment/[^/?]+(\?.*)?$"), timeout=60_000)
            finally:
                browser.close()
        runs = server.post("/flow_runs/filter", {"deployments": {"id": {"any_": [served["id"]]}}})
        assert len(runs) == 1, [r["name"] for r in runs]  # no schedule (--cron ''): only the form's run
        flow_run_id = runs[0]["id"]
        run = server.wait_for_final_state(flow_run_id, timeout=420, watch=[(serve, log)])
    finally:
        stop_process(serve)

    assert run["deployment_id"] == served["id"]
    assert run["state"]["type"] == "COMPLETED", (f"{run['state']['message']}\n{server.run_logs(flow_run_id)[-3000:]}\n"
                                                 f"{log_tail(log, 3000)}")
    # What the form sent is what was typed: the run's parameters, as the API stored them.
    sent = run["parameters"]["parameters"]
    for key, value in parameters.items():
        assert sent[key] == value, key
    assert run["parameters"]["release_store"] == job["release_store"]

    artifacts = server.post("/artifacts/filter", {"artifacts": {"flow_run_id": {"any_": [flow_run_id]}}})
    kinds = {artifact["type"] for artifact in artifacts}
    assert {"table", "markdown"} <= kinds, [(a["key"], a["type"]) for a in artifacts]
    for artifact in artifacts:
        assert artifact["key"].startswith("privsynth-") and artifact["data"], artifact["key"]
    tables = {a["key"]: a for a in artifacts if a["type"] == "table"}  # privacy spent; the synthetic table's checks
    assert any(key.endswith("-privacy") for key in tables) and any(key.endswith("-synthetic-validation")
                                                                   for key in tables)
    for table in tables.values():
        rows = json.loads(table["data"]) if isinstance(table["data"], str) else table["data"]
        assert len(rows) >= 1
    assert (tmp_path / "run" / "synthetic.parquet").is_file()
