"""Issue 38 against a real Prefect server and process worker: a flow run whose process is SIGKILLed in the middle
of its mechanism is CRASHED; Prefect's retry of that flow run (the UI's Retry: the same flow run scheduled
again, AwaitingRetry) finishes it on the worker, resuming from the release's noise journal, charged once.

A crash is an infrastructure failure: Prefect's flow ``retries`` retry FAILED runs in the same process, never a
process that is gone, so the retry here is the one an operator (or an automation on the Crashed event) makes.
Slow: a server, a deploy and a worker.
"""

from __future__ import annotations

import json
import sys
import time

import pytest
from prefect_server import PrefectServer, log_tail, stop_process, toy_job

from privsynth.privacy.ledger import BudgetLedger
from privsynth.run.faults import FAULT_ENV, FAULT_ONCE_ENV, draw_point
from privsynth.run.runfolder import RunFolder

pytestmark = pytest.mark.slow

FLOW = "privsynth-synthesize"
POOL = "privsynth-pool"


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    server = PrefectServer(tmp_path_factory.mktemp("prefect-server")).start()
    try:
        server.post("/work_pools/", {"name": POOL, "type": "process"})
        server.cli("--no-prompt", "deploy", "--all", "--prefect-file", "deployments/prefect.yaml")
        yield server
    finally:
        server.stop()


def test_a_killed_flow_run_finishes_on_its_retry_charged_once(deployed, tmp_path):
    job = toy_job(tmp_path)
    job["parameters"].update(mechanism="aim", seed=None, mechanism_options={
        "k": 2, "rounds_cap": 4, "iterations_per_round": 10, "final_iterations": 20})
    nightly = deployed.deployment(FLOW, "adult-nightly")
    log = tmp_path / "worker.log"
    # No --limit: Prefect 3.8's worker keeps a crashed run's limiter token under the run's id, and dies when the
    # same flow run comes back ("this borrower is already holding one of this CapacityLimiter's tokens").
    worker = deployed.spawn([sys.executable, "-m", "prefect", "worker", "start", "--pool", POOL], log,
                            cwd=tmp_path, **{FAULT_ENV: f"kill:{draw_point('mechanism', 3)}",
                                             FAULT_ONCE_ENV: str(tmp_path / "killed-once")})
    try:
        run = deployed.run_deployment(nightly["id"], job)
        first = deployed.wait_for_final_state(run["id"], timeout=420, watch=[(worker, log)])
        assert first["state"]["type"] == "CRASHED", (first["state"], log_tail(log))
        assert (tmp_path / "killed-once").exists()
        journals = list((tmp_path / "releases" / ".journals").iterdir())
        assert len(journals) == 1 and journals[0].stat().st_mode & 0o777 == 0o600
        # The crash is reported twice, by the run's executor and then by the worker: retry after the worker's
        # report, or it lands on the Scheduled state of the retry and crashes it again.
        deadline = time.monotonic() + 90
        while "infrastructure exited" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(1)
        # Prefect's retry of the flow run (what the UI's Retry button sends): the same run, scheduled again.
        deployed.post(f"/flow_runs/{run['id']}/set_state",
                      {"state": {"type": "SCHEDULED", "name": "AwaitingRetry"}, "force": True})
        final = deployed.wait_for_final_state(run["id"], timeout=420, watch=[(worker, log)])
    finally:
        stop_process(worker)
    assert final["state"]["type"] == "COMPLETED", (final["state"], deployed.run_logs(run["id"])[-3000:], log_tail(log))
    assert final["run_count"] >= 2
    logs = deployed.run_logs(run["id"], limit=200)
    assert "resuming run " in logs and "3 noisy measurements and 0 selections replayed" in logs
    folder = RunFolder.load(tmp_path / "run")
    assert "finished" in folder.manifest and folder.trusted("synthetic.parquet") and folder.trusted("report.json")
    charges = BudgetLedger(job["parameters"]["ledger"]).history("toy")
    assert len(charges) == 1 and charges[0].release_key == folder.manifest["facts"]["release_key"]
    assert list((tmp_path / "releases" / ".journals").iterdir()) == []
    assert json.loads((tmp_path / "run" / "privacy.json").read_text())["ledger"]["charged_now"] is False
