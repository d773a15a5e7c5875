"""Spark as users run it: the ``spark:FORMAT:PATH`` form and ``PRIVSYNTH_SPARK_CONF`` (fast), and a real
standalone cluster (slow): a master and one worker as separate processes, the CLI and the API on it. The
counts must be computed by the worker's executor, and only aggregate results may reach the driver."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from conftest import REPO, TOY_SCHEMA, toy_frame
from prefect_server import popen_tied

from privsynth.engine.sources import parse_source
from privsynth.engine.spark import SparkFiles, spark_conf, spark_files
from privsynth.errors import InputError, ParameterError

ROWS = 3000


# ---------------------------------------------------------------- forms and settings (fast)

@pytest.mark.parametrize("rest, files", [
    ("parquet:/data/people", SparkFiles("parquet", "/data/people")),
    ("CSV:s3a://bucket/people.csv", SparkFiles("csv", "s3a://bucket/people.csv")),
    ("orc:hdfs://nn:8020/w/people", SparkFiles("orc", "hdfs://nn:8020/w/people")),
    ("people", None), ("main.sales.people", None), ("?query=SELECT a::int FROM t", None),
])
def test_spark_file_forms_are_told_from_tables_and_queries(rest, files):
    assert spark_files(rest) == files
    assert parse_source("spark:" + rest).kind == "spark"


@pytest.mark.parametrize("spec, message", [
    ("spark:parquet:", r"expected spark:parquet:PATH"),
    ("spark:xml:/data/people", r"unknown file format 'xml'; expected one of \['parquet', 'csv', 'orc', 'json'\]"),
    ("spark:", r"expected spark:TABLE, spark:\?query=SELECT ... or spark:FORMAT:PATH"),
])
def test_a_bad_spark_form_is_an_input_error(spec, message):
    with pytest.raises(InputError, match=message):
        parse_source(spec)


def test_a_described_spark_url_hides_its_password():
    assert parse_source("spark:parquet:s3a://key:hunter2@bucket/p").describe() == "spark:parquet:s3a://key:***@bucket/p"


def test_spark_settings_are_pairs_separated_by_semicolons():
    assert spark_conf(" spark.a.b=1 ; spark.c = x=y ;;") == {"spark.a.b": "1", "spark.c": "x=y"}
    assert spark_conf("") == {}
    for bad, position in [("executor.memory=2g", 1), ("spark.a=1;spark.secret", 2), ("spark.=1", 1),
                          ("spark.a b=1", 1)]:
        with pytest.raises(ParameterError,
                           match=rf"PRIVSYNTH_SPARK_CONF: entry {position} is not spark.KEY=VALUE") as info:
            spark_conf(bad)
        assert "secret" not in str(info.value)


# ---------------------------------------------------------------- a standalone cluster (slow)

@dataclass(frozen=True)
class Cluster:
    """A running standalone master with one worker."""

    master_url: str  # spark://127.0.0.1:PORT
    master_ui: str  # http://127.0.0.1:PORT (its /json/ lists workers and applications)

    def state(self) -> dict:
        with urllib.request.urlopen(f"{self.master_ui}/json/", timeout=5) as response:
            return json.load(response)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def spark_env() -> dict[str, str]:
    """The environment of Spark's processes: this checkout first on the path, loopback only."""
    import pyspark

    return {**os.environ, "SPARK_HOME": str(Path(pyspark.__file__).parent), "SPARK_LOCAL_IP": "127.0.0.1",
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
            "PYSPARK_PYTHON": sys.executable}


def start_daemon(arguments: list[str], log: Path) -> subprocess.Popen:
    """``spark-class ARGUMENTS`` in its own process group (its executors join it), output to ``log``."""
    env = spark_env()
    with log.open("wb") as out:
        return popen_tied([f"{env['SPARK_HOME']}/bin/spark-class", *arguments], env=env, stdout=out,
                          stderr=subprocess.STDOUT)  # dies with the test process (tests/prefect_server.py)


def stop_daemon(process: subprocess.Popen) -> None:
    """SIGTERM to the daemon's process group, SIGKILL after 20 s."""
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def wait_for(predicate, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except OSError:  # the web UI is not up yet
            pass
        time.sleep(1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[Cluster]:
    pytest.importorskip("pyspark")
    logs = tmp_path_factory.mktemp("spark-logs")
    port, ui = free_port(), free_port()
    found = Cluster(f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{ui}")
    daemons = [start_daemon(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                             "--webui-port", str(ui)], logs / "master.log")]
    try:
        wait_for(lambda: found.state()["status"] == "ALIVE", "the master")
        daemons.append(start_daemon(["org.apache.spark.deploy.worker.Worker", found.master_url, "--host", "127.0.0.1",
                                     "--cores", "1", "--memory", "1g", "--webui-port", str(free_port()),
                                     "--work-dir", str(logs / "work")], logs / "worker.log"))
        wait_for(lambda: [w for w in found.state()["workers"] if w["state"] == "ALIVE"], "the worker to register")
        yield found
    finally:
        for daemon in reversed(daemons):
            stop_daemon(daemon)


@pytest.fixture(scope="module")
def people(tmp_path_factory) -> tuple[Path, Path]:
    """A Parquet folder of ROWS rows in two files (with a unique ``id`` the schema drops) and its schema."""
    folder = tmp_path_factory.mktemp("warehouse")
    table = pa.Table.from_pandas(toy_frame(ROWS, seed=7), preserve_index=False)
    (folder / "people").mkdir()
    half = ROWS // 2
    pq.write_table(table.slice(0, half), folder / "people" / "part-0.parquet")
    pq.write_table(table.slice(half), folder / "people" / "part-1.parquet")
    (folder / "people.yaml").write_text(yaml.safe_dump(TOY_SCHEMA))
    return folder / "people", folder / "people.yaml"


def settings(event_logs: Path) -> str:
    """PRIVSYNTH_SPARK_CONF for the runs: event logs (what the executors did) and a small footprint."""
    return ";".join(["spark.eventLog.enabled=true", f"spark.eventLog.dir={event_logs.as_uri()}",
                     "spark.ui.enabled=false", "spark.driver.host=127.0.0.1", "spark.executor.memory=512m",
                     "spark.cores.max=1", "spark.sql.shuffle.partitions=2", "spark.eventLog.compress=false",
                     "spark.eventLog.rolling.enabled=false"])


def events(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def assert_counted_by_executors(log: Path) -> None:
    """Every task ran on an executor of the worker (none in the driver), and every SQL query the driver ran
    over the table was an aggregate: only count tables came back."""
    found = events(log)
    hosts = {e["Executor ID"]: e["Executor Info"]["Host"] for e in found if e["Event"] == "SparkListenerExecutorAdded"}
    tasks = [e["Task Info"] for e in found if e["Event"] == "SparkListenerTaskEnd"]
    assert tasks and all(t["Executor ID"] in hosts and t["Executor ID"] != "driver" for t in tasks), log.name
    assert sum(not t["Failed"] for t in tasks) > 0
    trees = [plan_tree(e["physicalPlanDescription"]) for e in found if e["Event"].endswith("SQLExecutionStart")]
    scans = [tree for tree in trees if "Scan parquet" in tree]
    assert scans, f"{log.name}: no query read the Parquet files"
    for tree in scans:
        assert "HashAggregate" in tree, f"{log.name}: a query collected rows, not counts:\n{tree}"


def plan_tree(description: str) -> str:
    """The operator tree of a formatted physical plan (without the per-operator details that follow)."""
    return description.split("== Physical Plan ==")[-1].strip().split("\n\n")[0]


def completed_apps(cluster: Cluster) -> list[dict]:
    return [app for app in cluster.state()["completedapps"] if app["name"] == "privsynth"]


@pytest.mark.slow
def test_the_cli_and_the_api_count_on_a_standalone_cluster(cluster, people, tmp_path, monkeypatch):
    path, schema = people
    event_logs = tmp_path / "events"
    event_logs.mkdir()
    conf = settings(event_logs)
    env = {**spark_env(), "PRIVSYNTH_SPARK_MASTER": cluster.master_url, "PRIVSYNTH_SPARK_CONF": conf,
           "PREFECT_HOME": str(tmp_path / "prefect")}
    env.pop("PREFECT_API_URL", None)
    cli = subprocess.run([sys.executable, "-m", "privsynth", "run", "--input", f"spark:parquet:{path}", "--schema",
                          str(schema), "--unlimited", "--output", str(tmp_path / "cli"), "--mechanism", "reduced_space",
                          "--rows", "50", "--option", "points_per_statistic=1"], env=env, cwd=REPO, capture_output=True,
                         text=True, timeout=540)
    assert cli.returncode == 0, cli.stderr[-3000:]
    assert pq.read_table(tmp_path / "cli" / "synthetic.parquet").num_rows == 50
    wait_for(lambda: len(completed_apps(cluster)) == 1, "the CLI's application to complete", timeout=60)

    collected = api_run(cluster, path, schema, conf, tmp_path, monkeypatch)
    assert collected
    for result in collected:
        assert_aggregated(result)
    wait_for(lambda: len(completed_apps(cluster)) == 2, "the API's application to complete", timeout=60)

    logs = sorted(event_logs.iterdir())
    assert {log.name for log in logs} == {app["id"] for app in completed_apps(cluster)}
    for log in logs:
        assert_counted_by_executors(log)


CELLS = 4 * 3 * 2 * 2  # TOY_SCHEMA's domain: colour (3 and missing) x size bins x weight bins x member


def assert_aggregated(result: pa.Table) -> None:
    """``result`` holds counts, not rows: one aggregate row, or count tables (one per marginal) of at most
    CELLS cells whose counts add up to ROWS (each row of the table counted once in each)."""
    assert "id" not in result.column_names
    if "privsynth_count" not in result.column_names:
        assert result.num_rows == 1, result.column_names
        return
    groups = result.column("privsynth_marginal").to_pylist() if "privsynth_marginal" in result.column_names \
        else [0] * result.num_rows
    counts = result.column("privsynth_count").to_pylist()
    for group in set(groups):
        mine = [c for g, c in zip(groups, counts) if g == group]
        assert len(mine) <= CELLS and sum(mine) == ROWS, (group, len(mine), sum(mine))


def api_run(cluster: Cluster, path: Path, schema: Path, conf: str, tmp_path: Path, monkeypatch) -> list[pa.Table]:
    """``privsynth.synthesize`` in this process on the cluster; every result that reached it from Spark."""
    import privsynth
    from privsynth.engine import spark_session
    from privsynth.engine.statistics import Source

    collected: list[pa.Table] = []
    run = Source._run

    def spy(source, expr):
        collected.append(run(source, expr))
        return collected[-1]

    monkeypatch.setattr(Source, "_run", spy)
    for name, value in {"PRIVSYNTH_SPARK_MASTER": cluster.master_url, "PRIVSYNTH_SPARK_CONF": conf,
                        "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}.items():
        monkeypatch.setenv(name, value)
    try:
        release = privsynth.synthesize(f"spark:parquet:{path}", schema, mechanism="reduced_space", rows=50,
                                       options={"points_per_statistic": 1}, unlimited=True, output=tmp_path / "api")
        assert len(release.to_pandas()) == 50
        session = spark_session()
        assert session.sparkContext.master == cluster.master_url
        monkeypatch.setenv("PRIVSYNTH_SPARK_CONF", "spark.sql.shuffle.partitions=7")
        assert spark_session() is session and session.conf.get("spark.sql.shuffle.partitions") == "2"
    finally:
        from pyspark.sql import SparkSession

        active = SparkSession.getActiveSession()
        if active is not None:
            active.stop()
    return collected
