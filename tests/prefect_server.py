"""A real Prefect server (``prefect server start``) in a subprocess, for the server tests.

Each server gets a free port on 127.0.0.1, its own PREFECT_HOME and a SQLite database under it,
and Prefect's analytics off. Every wait is bounded; a failed start or run raises with the tail of
the server's log (or the run's logs) in the message. Processes are started in their own process
group and that group alone is stopped on teardown.
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pandas as pd
import yaml
from conftest import TOY_SCHEMA

REPO = Path(__file__).resolve().parents[1]

FINAL_STATES = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}

# Environment every process of these tests gets: no telemetry, no analytics, our worktree first.
QUIET_ENV = {"PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1", "GX_ANALYTICS_ENABLED": "false"}


def free_port() -> int:
    """A port that was free on 127.0.0.1 a moment ago (the server binds it right after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def base_env(home: Path) -> dict[str, str]:
    """os.environ without any Prefect API/profile settings of the caller, plus QUIET_ENV and PYTHONPATH."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PREFECT_API_", "PREFECT_PROFILE", "PREFECT_SERVER_", "PREFECT_UI_"))
           and k not in ("PRIVSYNTH_HOME", "PRIVSYNTH_LEDGER_URL", "PRIVSYNTH_RELEASE_STORE")}
    env.update(QUIET_ENV)
    env["PREFECT_HOME"] = str(home)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return env


# Process groups this test process started and has not stopped: killed at exit (also after Ctrl-C), so no
# server or worker outlives the test run with no parent.
STARTED_GROUPS: set[int] = set()


def _die_with_parent() -> None:
    """In the child, before exec (Linux): SIGKILL it when the test process dies, however it dies (a timeout's
    SIGTERM or a SIGKILL included, when atexit never runs). Elsewhere: nothing (atexit still kills it)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def kill_started_groups() -> None:
    """SIGKILL every process group this test process started and did not stop (registered with atexit)."""
    for group in list(STARTED_GROUPS):
        try:
            os.killpg(group, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        STARTED_GROUPS.discard(group)


atexit.register(kill_started_groups)


def popen_tied(args: list[str], **kwargs: Any) -> subprocess.Popen:
    """subprocess.Popen in a process group of its own (so a stop reaches its children), tied to this test
    process: it dies with it (``_die_with_parent``) and its group is killed at exit (``kill_started_groups``)."""
    process = subprocess.Popen(args, start_new_session=True, preexec_fn=_die_with_parent, **kwargs)
    STARTED_GROUPS.add(process.pid)
    return process


def stop_process(process: subprocess.Popen, timeout: float = 30) -> None:
    """SIGTERM the process group this test started, then SIGKILL it if it is still there after ``timeout``."""
    try:
        _stop_group(process, timeout)
    finally:
        if process.poll() is not None:
            STARTED_GROUPS.discard(process.pid)


def _stop_group(process: subprocess.Popen, timeout: float) -> None:
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait(timeout=10)


def log_tail(path: Path, chars: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except FileNotFoundError:
        return "(no log)"


class PrefectServer:
    """``prefect server start`` on a free port with a temporary PREFECT_HOME and SQLite database."""

    def __init__(self, home: Path, scheduler_loop_seconds: float = 2.0) -> None:
        self.home = home
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.api_url = f"{self.url}/api"
        self.log = home / "server.log"
        self.scheduler_loop_seconds = scheduler_loop_seconds
        self.process: subprocess.Popen | None = None
        self.http = httpx.Client(base_url=self.api_url, timeout=30)

    def start(self, timeout: float = 180) -> PrefectServer:
        """Start the server and wait until /api/health answers (at most ``timeout`` seconds)."""
        server_home = self.home / "server-home"
        server_home.mkdir(parents=True, exist_ok=True)
        env = base_env(server_home)
        env["PREFECT_API_DATABASE_CONNECTION_URL"] = f"sqlite+aiosqlite:///{self.home / 'prefect.db'}"
        # The UI asks the API at the address of these settings (not of the command-line flags).
        env.update(PREFECT_SERVER_API_HOST="127.0.0.1", PREFECT_SERVER_API_PORT=str(self.port),
                   PREFECT_UI_API_URL=self.api_url)
        # The scheduler service creates the runs of scheduled deployments every loop (default 60 s).
        env["PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS"] = str(self.scheduler_loop_seconds)
        with open(self.log, "wb") as log:
            self.process = popen_tied(
                [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(self.port),
                 "--analytics-off"],
                cwd=self.home, env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"prefect server exited with {self.process.returncode}:\n{log_tail(self.log)}")
            try:
                if self.http.get("/health", timeout=5).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.stop()
        raise TimeoutError(f"prefect server did not answer /api/health within {timeout} s:\n{log_tail(self.log)}")

    def stop(self) -> None:
        self.http.close()
        if self.process is not None:
            stop_process(self.process)

    # ------------------------------------------------------------------ clients

    def client_env(self, home: Path | None = None, **extra: str) -> dict[str, str]:
        """Environment for a CLI, worker or serve process talking to this server."""
        client_home = home or self.home / "client-home"
        client_home.mkdir(parents=True, exist_ok=True)
        env = base_env(client_home)
        env["PREFECT_API_URL"] = self.api_url
        env.update(extra)
        return env

    def cli(self, *args: str, cwd: Path = REPO, timeout: float = 180, **extra_env: str) -> subprocess.CompletedProcess:
        """Run ``prefect ARGS`` against this server; raises with its output when it fails."""
        done = subprocess.run([sys.executable, "-m", "prefect", *args], cwd=cwd, env=self.client_env(**extra_env),
                              capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise AssertionError(f"prefect {' '.join(args)} failed ({done.returncode}):\n"
                                 f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        return done

    def spawn(self, args: list[str], log: Path, cwd: Path = REPO, **extra_env: str) -> subprocess.Popen:
        """Start a long-running process (a worker, ``python -m flows.serve``) in its own process group."""
        with open(log, "wb") as out:
            return popen_tied(args, cwd=cwd, env=self.client_env(**extra_env), stdout=out, stderr=subprocess.STDOUT)

    # ------------------------------------------------------------------ API

    def post(self, path: str, body: dict | None = None) -> Any:
        response = self.http.post(path, json=body or {})
        response.raise_for_status()
        return response.json()

    def get(self, path: str) -> Any:
        response = self.http.get(path)
        response.raise_for_status()
        return response.json()

    def deployment(self, flow_name: str, name: str) -> dict:
        return self.get(f"/deployments/name/{flow_name}/{name}")

    def wait_for_deployment(self, flow_name: str, name: str, timeout: float = 120,
                            process: subprocess.Popen | None = None, log: Path | None = None) -> dict:
        """The deployment once it exists (e.g. registered by ``flows.serve``); bounded by ``timeout``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process is not None and process.poll() is not None:
                raise RuntimeError(f"process exited with {process.returncode} before deployment {name!r} "
                                   f"appeared:\n{log_tail(log) if log else ''}")
            response = self.http.get(f"/deployments/name/{flow_name}/{name}")
            if response.status_code == 200:
                return response.json()
            time.sleep(1)
        raise TimeoutError(f"deployment {flow_name}/{name} did not appear within {timeout} s:\n"
                           f"{log_tail(log) if log else ''}")

    def scheduled_runs(self, deployment_id: str) -> list[dict]:
        return self.post("/flow_runs/filter", {
            "deployments": {"id": {"any_": [deployment_id]}},
            "flow_runs": {"state": {"type": {"any_": ["SCHEDULED"]}}},
            "sort": "EXPECTED_START_TIME_ASC", "limit": 50})

    def run_deployment(self, deployment_id: str, parameters: dict) -> dict:
        """Create a flow run of the deployment now (what the UI's Custom run and ``prefect deployment run`` do)."""
        return self.post(f"/deployments/{deployment_id}/create_flow_run", {"parameters": parameters})

    def run_logs(self, flow_run_id: str, limit: int = 200) -> str:
        logs = self.post("/logs/filter", {"logs": {"flow_run_id": {"any_": [flow_run_id]}}, "sort": "TIMESTAMP_ASC",
                                          "limit": limit})
        return "\n".join(f"{entry['level']:>2} {entry['message']}" for entry in logs)

    def wait_for_final_state(self, flow_run_id: str, timeout: float = 420,
                             watch: list[tuple[subprocess.Popen, Path]] = ()) -> dict:
        """The flow run once it reaches a final state; bounded by ``timeout``; fails early if a watched process dies."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            run = self.get(f"/flow_runs/{flow_run_id}")
            if run["state"] and run["state"]["type"] in FINAL_STATES:
                return run
            for process, log in watch:
                if process.poll() is not None:
                    raise RuntimeError(f"{process.args[:4]} exited with {process.returncode} while run "
                                       f"{flow_run_id} was {run['state']['type']}:\n{log_tail(log)}")
            time.sleep(2)
        raise TimeoutError(f"flow run {flow_run_id} not finished within {timeout} s (state "
                           f"{run['state']['type']}):\n{self.run_logs(flow_run_id)[-4000:]}\n"
                           + "\n".join(log_tail(log, 2000) for _, log in watch))


def toy_job(tmp: Path) -> dict:
    """A 300-row table of every column type, and run parameters that keep every output under ``tmp``."""
    rng = np.random.default_rng(1)
    n = 300
    frame = pd.DataFrame({"id": np.arange(n), "colour": rng.choice(["red", "green", "blue"], size=n),
                          "size": rng.integers(0, 101, n), "weight": rng.uniform(0, 1, n).round(3),
                          "member": rng.random(n) < 0.4})
    frame.to_csv(tmp / "toy.csv", index=False)
    (tmp / "toy.yaml").write_text(yaml.safe_dump(TOY_SCHEMA))
    parameters = {"input": str(tmp / "toy.csv"), "schema_file": str(tmp / "toy.yaml"), "mechanism": "microaggregation",
                  "epsilon": 1.0, "rows": 50, "seed": 3, "output": str(tmp / "run"),
                  "ledger": f"sqlite:///{tmp / 'ledger.sqlite'}", "unlimited": True}
    return {"parameters": parameters, "release_store": str(tmp / "releases")}
