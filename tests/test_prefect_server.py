"""The flow against a real Prefect server: deployments, schedules, a worker, ``flows.serve``, the CLI's console.

One ``prefect server start`` (free port, temporary PREFECT_HOME, SQLite) serves the module. The
schedule test is quick and runs by default; runs on a worker or a served deployment are slow.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from prefect_server import REPO, PrefectServer, log_tail, stop_process, toy_job

from privsynth.mechanisms import DEFAULT_MECHANISM

FLOW = "privsynth-synthesize"
POOL = "privsynth-pool"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = PrefectServer(tmp_path_factory.mktemp("prefect-server")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def deployed(server) -> PrefectServer:
    """deployments/prefect.yaml deployed as the README says: a process pool, then ``prefect deploy --all``.

    Deployed from the repository root with no PRIVSYNTH_* variable set (the server's client env drops them).
    """
    server.post("/work_pools/", {"name": POOL, "type": "process"})
    server.cli("--no-prompt", "deploy", "--all", "--prefect-file", "deployments/prefect.yaml")
    return server


def _assert_completed(server: PrefectServer, run: dict, tmp: Path, log: Path) -> None:
    assert run["state"]["type"] == "COMPLETED", (f"{run['state']['type']}: {run['state']['message']}\n"
                                                 f"{server.run_logs(run['id'])[-3000:]}\n{log_tail(log, 3000)}")
    manifest = json.loads((tmp / "run" / "manifest.json").read_text())
    assert manifest["privacy_spent"]["pure_epsilon"] == pytest.approx(1.0)
    assert (tmp / "run" / "synthetic.parquet").is_file()


# ---------------------------------------------------------------- schedules (quick)


def test_nightly_deployment_gets_scheduled_runs_from_the_scheduler(deployed):
    """The scheduler service creates the nightly runs (it did not with SQLAlchemy 2.1)."""
    nightly = deployed.deployment(FLOW, "adult-nightly")
    assert nightly["work_pool_name"] == POOL
    assert [s["schedule"]["cron"] for s in nightly["schedules"]] == ["0 2 * * *"]
    # No PRIVSYNTH_HOME or other variable: the pull step names the folder `prefect deploy` ran in.
    directories = [step["prefect.deployments.steps.set_working_directory"]["directory"]
                   for step in nightly["pull_steps"] if "prefect.deployments.steps.set_working_directory" in step]
    assert directories == [str(REPO)]
    assert nightly["job_variables"]["env"]["DO_NOT_TRACK"] == "1"

    runs: list[dict] = []
    deadline = time.monotonic() + 60
    while not runs and time.monotonic() < deadline:
        runs = deployed.scheduled_runs(nightly["id"])
        time.sleep(0.5)
    assert runs, f"no scheduled run of adult-nightly within 60 s:\n{log_tail(deployed.log)}"
    for run in runs:
        assert run["state"]["name"] == "Scheduled"
        assert run["expected_start_time"].endswith(("T02:00:00Z", "T02:00:00+00:00"))
        assert run["parameters"]["parameters"]["mechanism"] == DEFAULT_MECHANISM  # "the default mechanism"
    assert deployed.deployment(FLOW, "warehouse-table")["schedules"] == []


# ---------------------------------------------------------------- a worker runs the work-pool deployment


@pytest.mark.slow
def test_work_pool_deployment_runs_on_a_process_worker(deployed, tmp_path):
    """prefect.yaml as written: a worker started outside the install (no PRIVSYNTH_HOME) completes a run."""
    job = toy_job(tmp_path)
    nightly = deployed.deployment(FLOW, "adult-nightly")
    log = tmp_path / "worker.log"
    worker = deployed.spawn([sys.executable, "-m", "prefect", "worker", "start", "--pool", POOL, "--limit", "1"],
                            log, cwd=tmp_path)
    try:
        run = deployed.run_deployment(nightly["id"], job)
        final = deployed.wait_for_final_state(run["id"], timeout=420, watch=[(worker, log)])
    finally:
        stop_process(worker)
    _assert_completed(deployed, final, tmp_path, log)
    assert final["work_pool_name"] == POOL


# ---------------------------------------------------------------- python -m flows.serve


@pytest.mark.slow
def test_served_deployment_runs_and_keeps_the_work_pool_deployment(deployed, tmp_path):
    """flows.serve registers its own deployment (the work-pool one is untouched) and its runs validate and complete.

    The served flow is shipped to the run's process by value; the parameter model must survive that
    (a postponed annotation of RunParameters failed every run at parameter validation).
    """
    log = tmp_path / "serve.log"
    serve = deployed.spawn([sys.executable, "-m", "flows.serve"], log, cwd=tmp_path)
    try:
        served = deployed.wait_for_deployment(FLOW, "adult-served", timeout=180, process=serve, log=log)
        run = deployed.run_deployment(served["id"], toy_job(tmp_path))
        final = deployed.wait_for_final_state(run["id"], timeout=420, watch=[(serve, log)])
    finally:
        stop_process(serve)
    _assert_completed(deployed, final, tmp_path, log)
    nightly = deployed.deployment(FLOW, "adult-nightly")
    assert nightly["id"] != served["id"] and nightly["work_pool_name"] == POOL
    assert [s["schedule"]["cron"] for s in nightly["schedules"]] == ["0 2 * * *"]


# ---------------------------------------------------------------- the CLI's console


@pytest.mark.slow
def test_plain_cli_run_prints_no_traceback_and_no_error(tmp_path):
    """``privsynth run`` on Prefect's temporary API: no telemetry heartbeat traceback, no ERROR line.

    Run without any telemetry variable set by the caller, so the settings come from the CLI itself.
    """
    drop = ("PREFECT_API_URL", "PREFECT_SERVER_ANALYTICS_ENABLED", "DO_NOT_TRACK", "GX_ANALYTICS_ENABLED",
            "PRIVSYNTH_LEDGER_URL", "PRIVSYNTH_RELEASE_STORE")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(PREFECT_HOME=str(tmp_path / "prefect-home"), PYTHONPATH=str(REPO),
               PRIVSYNTH_RELEASE_STORE=str(tmp_path / "releases"))
    done = subprocess.run([sys.executable, "-m", "privsynth", "run", "--mechanism", "microaggregation", "--epsilon",
                           "1", "--rows", "100", "--output", str(tmp_path / "run"),
                           "--ledger", f"sqlite:///{tmp_path / 'ledger.sqlite'}"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=420)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert "Traceback" not in output, output[-4000:]
    errors = [line for line in output.splitlines() if "ERROR" in line or "Failed to send telemetry" in line]
    assert errors == [], output[-4000:]
    assert (tmp_path / "run" / "synthetic.parquet").is_file()


@pytest.mark.slow
def test_a_refused_run_is_one_line_and_sigterm_stops_a_run_promptly(tmp_path):
    """A refused run (no budget) prints one error line and no traceback or ERROR line; SIGTERM during a
    run ends it within a minute with status 143, and the same command then resumes or is refused in one line."""
    import signal

    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PRIVSYNTH_LEDGER_URL")}
    env.update(PREFECT_HOME=str(tmp_path / "prefect-home"), PYTHONPATH=str(REPO), PRIVSYNTH_HOME=str(tmp_path / "home"))
    data = tmp_path / "adult.csv.gz"
    data.write_bytes((REPO / "privsynth" / "data" / "adult.csv.gz").read_bytes())
    base = [sys.executable, "-m", "privsynth", "run", "--input", str(data), "--schema",
            str(REPO / "schemas" / "adult.yaml"), "--mechanism", "aim", "--output", str(tmp_path / "run")]
    refused = subprocess.run(base, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=420)
    output = refused.stdout + refused.stderr
    assert refused.returncode == 2 and "has no privacy budget" in refused.stderr, output[-3000:]
    assert "Traceback" not in output and not [line for line in output.splitlines() if "ERROR" in line], output[-3000:]

    process = subprocess.Popen([*base, "--unlimited"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not (tmp_path / "run" / "encoding.json").exists():
        time.sleep(0.5)  # wait until the run is inside its stages
    assert process.poll() is None, process.stdout.read()[-3000:]
    stopped_at = time.monotonic()
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=60)
    finally:
        process.kill()
    assert time.monotonic() - stopped_at < 60 and process.returncode in (143, -signal.SIGTERM)
    again = subprocess.run([*base, "--unlimited"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    # Stopped before the noise was drawn: the re-run resumes and completes. Stopped after: the draw is on
    # record, so the same run is refused in one line (a new run is a new, charged release).
    assert again.returncode == 0 or (again.returncode == 2 and "already drawn" in again.stderr), \
        (again.stdout + again.stderr)[-3000:]
