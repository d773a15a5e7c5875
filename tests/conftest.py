"""Shared fixtures: a tiny schema and frame that exercise every column type, and the bundled Adult paths."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privsynth.discovery import dp_pass as _dp_pass
from privsynth.privacy import ledger as _ledger
from privsynth.privacy.noise import SeededNoise
from privsynth.run import prepare as _prepare
from privsynth.schema import Schema, parse_schema

REPO = Path(__file__).resolve().parents[1]
ADULT_SCHEMA = REPO / "schemas" / "adult.yaml"
ADULT_DATA = REPO / "privsynth" / "data" / "adult.csv.gz"

# Every column type and every domain feature: a nullable categorical with an out-of-domain category,
# a plain categorical, integer bins with clipping, float bins that fail out of domain, a nullable
# boolean, and a dropped identifier.
TINY_SCHEMA = {
    "name": "tiny",
    "description": "unit-test schema",
    "columns": [
        {"name": "id", "type": "categorical", "drop": True},
        {"name": "color", "type": "categorical", "categories": ["red", "green", "blue"], "nullable": True,
         "on_out_of_domain": "category"},
        {"name": "size", "type": "categorical", "categories": ["S", "M", "L", "XL"]},
        {"name": "age", "type": "integer", "bounds": [0, 100], "bins": [0, 18, 40, 65, 100],
         "on_out_of_domain": "clip"},
        {"name": "score", "type": "float", "bounds": [0.0, 1.0], "bins": [0.0, 0.25, 0.5, 1.0], "nullable": True},
        {"name": "member", "type": "boolean", "nullable": True},
    ],
}


@pytest.fixture()
def tiny_schema_dict() -> dict:
    """A fresh, mutable copy of the tiny schema mapping (tests edit it to build invalid cases)."""
    import copy

    return copy.deepcopy(TINY_SCHEMA)


@pytest.fixture()
def tiny_schema() -> Schema:
    return parse_schema(TINY_SCHEMA)


@pytest.fixture()
def tiny_frame() -> pd.DataFrame:
    """Eight rows covering every level, a missing value per nullable column, and bin boundaries."""
    return pd.DataFrame({
        "id": [f"p{i}" for i in range(8)],
        "color": ["red", "green", "blue", None, "purple", "red", "green", "blue"],
        "size": ["S", "M", "L", "XL", "S", "M", "L", "XL"],
        "age": [0, 17, 18, 39, 40, 65, 100, 50],
        "score": [0.0, 0.25, 0.49, 0.5, 1.0, None, 0.75, 0.1],
        "member": [True, False, None, True, False, True, False, True],
    })


@pytest.fixture(scope="session")
def adult_schema_path() -> Path:
    return ADULT_SCHEMA


@pytest.fixture(scope="session")
def adult_data_path() -> Path:
    return ADULT_DATA


# ---------------------------------------------------------------- flow-level fixtures

# A small table with every column type, for flow runs (the flow tests, hostile input, fault injection).
TOY_SCHEMA = {
    "name": "toy",
    "columns": [
        {"name": "id", "type": "integer", "drop": True},
        {"name": "colour", "type": "categorical", "categories": ["red", "green", "blue"], "nullable": True},
        {"name": "size", "type": "integer", "bounds": [0, 100], "bins": [0, 10, 50, 100], "on_out_of_domain": "clip"},
        {"name": "weight", "type": "float", "bounds": [0.0, 1.0], "bins": [0.0, 0.5, 1.0]},
        {"name": "member", "type": "boolean"},
    ],
}


@pytest.fixture(scope="session")
def harness():
    """One temporary Prefect API for every flow test of the session (starting one costs 20-40 s)."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        yield


@pytest.fixture(autouse=True)
def isolated_privsynth_home(tmp_path_factory, monkeypatch):
    """Every test gets its own per-user folder (ledger, release store): never the real one."""
    home = tmp_path_factory.mktemp("privsynth-home")
    monkeypatch.setenv("PRIVSYNTH_HOME", str(home))
    monkeypatch.delenv("PRIVSYNTH_LEDGER_URL", raising=False)
    monkeypatch.delenv("PRIVSYNTH_RELEASE_STORE", raising=False)
    return home


def toy_frame(n: int = 300, seed: int = 0) -> pd.DataFrame:
    """A table for TOY_SCHEMA with dependent columns (colour drives size)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    colour = rng.choice(["red", "green", "blue", None], size=n, p=[0.5, 0.3, 0.15, 0.05])
    size = np.where(colour == "red", rng.integers(0, 30, n), rng.integers(20, 101, n))
    return pd.DataFrame({"id": np.arange(n), "colour": colour, "size": size,
                         "weight": rng.uniform(0, 1, n).round(3), "member": rng.random(n) < 0.4})


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
    """Where the runs' private temporary folders go (in process), to check that none is left behind."""
    import tempfile

    folder = tmp_path / "system-tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def private_leftovers(folder) -> list[str]:
    """Names of the private run folders left in ``folder``."""
    return sorted(p.name for p in folder.glob("privsynth-private-*"))


class Exact:
    """No noise: what a noisy look computes from its counts alone."""

    def add_gaussian(self, values, sigma, *, sensitivity=None):
        return np.asarray(values, dtype=np.float64)


class StatisticNoise(SeededNoise):
    """Seeded noise that allows only the Laplace mechanism applied to a statistic (add_laplace)."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed, "test-key")
        self.added: list[tuple[tuple[int, ...], float]] = []
        self.authorize("test")

    def add_laplace(self, values, scale, *, sensitivity=None):
        self.added.append((np.shape(values), scale))
        return super().add_laplace(values, scale, sensitivity=sensitivity)

    def laplace(self, scale, size, *, sensitivity=None):
        raise AssertionError("noise drawn apart from the statistic: use add_laplace (OpenDP's measurement)")


# ---------------------------------------------------------------- known draws: a test's outcome is fixed

DRAWS_SALT_VARIABLE = "PRIVSYNTH_TEST_DRAWS"
PRODUCTION_DRAWS = {"secret": _ledger.new_release_secret, "nonce": _dp_pass.draft_nonce,
                    "run_id": _prepare.new_run_id}  # as imported, before known_draws patches them
_current_draws: dict = {"test": "", "calls": 0}


def known_hex(digits: int) -> str:
    """The next hex string of the current test's known sequence: keyed by the test's id, the salt in
    PRIVSYNTH_TEST_DRAWS (default 0) and a per-test counter, so each call differs and every run repeats."""
    import hashlib

    salt = os.environ.get(DRAWS_SALT_VARIABLE, "0")
    key = f"{salt}\0{_current_draws['test']}\0{_current_draws['calls']}"
    _current_draws["calls"] += 1
    return hashlib.sha256(key.encode()).hexdigest()[:digits]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Each test (and any module fixture its setup builds) starts its own known sequence."""
    _current_draws.update(test=item.nodeid, calls=0)


@pytest.fixture(scope="session", autouse=True)
def known_draws():
    """A test meets known draws, not fresh ones: ledger secrets, draft nonces and run ids come from the test's
    known sequence (``known_hex``), so a seeded run's noise is a fixed function of the test, and a check of a
    DP outcome passes or fails the same way on every run (CI is a function of the commit). Run with
    PRIVSYNTH_TEST_DRAWS=<salt> to meet another set of draws (how a check's failure rate is explored).
    The production functions draw from the OS CSPRNG; tests/test_known_draws.py checks both."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("privsynth.privacy.ledger.new_release_secret", lambda: known_hex(64))
        patch.setattr("privsynth.discovery.dp_pass.draft_nonce", lambda: known_hex(32))
        patch.setattr("privsynth.run.prepare.new_run_id", lambda: "20260101-000000-" + known_hex(6))
        yield


# ---------------------------------------------------------------- the default run's duration (README states it)

DURATION_RECORD = "privsynth/default-run-seconds"


def _is_default_run(config) -> bool:
    """The README's test command: no file or node arguments, no -k, the default marker expression."""
    args = [a for a in config.invocation_params.args if not str(a).startswith("-")]
    return not args and not config.getoption("keyword") and config.getoption("markexpr") == "not slow"


def pytest_sessionstart(session):
    import time

    session.config._privsynth_started = time.monotonic()


ORDER_SEED = 20261126


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    """A SIGTERM (a timeout's, a scheduler's) stops the test run as Ctrl-C does: pytest ends the session, runs
    the fixtures' teardown (the Prefect harness's server stops) and exits; atexit then kills any process group a
    test started (tests/prefect_server.py). Without it the run died at once and left its servers behind."""
    import signal
    import threading

    def stop(signum, frame):  # noqa: ARG001
        raise KeyboardInterrupt(f"stopped by signal {signum}")

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, stop)
    # One order per commit: pytest-randomly shuffles by ORDER_SEED unless --randomly-seed names another
    if config.pluginmanager.hasplugin("randomly") and config.getoption("randomly_seed", None) == "default":
        config.option.randomly_seed = ORDER_SEED


def pytest_sessionfinish(session, exitstatus):
    """After the README's test command: its wall time, recorded (tests/test_docs.py compares it with the README's
    figure) and said on the last line."""
    import time

    started = getattr(session.config, "_privsynth_started", None)
    if started is None or not _is_default_run(session.config) or session.testscollected < 500:
        return
    seconds = time.monotonic() - started
    if session.config.cache is not None:
        session.config.cache.set(DURATION_RECORD, seconds)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"privsynth: the default test run took {seconds / 60:.1f} min (README.md states its "
                            "expected duration; tests/test_docs.py compares the two)")


PINNED_RUN_ID = "20261126-000000-fixed0"


def pinned_ledger(path: Path) -> str:
    """A ledger URL whose release secret is fixed: with a seed and PINNED_RUN_ID (patched over
    ``privsynth.run.prepare.new_run_id``), a run meets one known draw, so a check of a DP outcome does not
    depend on a fresh draw each test run."""
    import sqlite3

    from privsynth.privacy.ledger import BudgetLedger

    url = f"sqlite:///{path}"
    with BudgetLedger(url) as book:
        book.release_secret()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE privsynth_secrets SET value = ? WHERE name = 'release-key'", ("5e" * 32,))
    return url


def exact_facts(frame, columns: list[tuple[str, str]]) -> dict:
    """The exact DP-facts counts of a frame's columns (``discovery.facts.exact_counts``), read as a run reads its
    source: the private counts the facts' tests release or compare."""
    from privsynth.discovery import facts
    from privsynth.engine.backends import open_table

    opened = open_table(frame, None)
    try:
        return facts.exact_counts(opened.table, columns)
    finally:
        opened.close()


class SeededDraws:
    """Gaussian noise from numpy's generator at ``seed``, in the noise source's ``add_gaussian`` form: the
    discovery functions' draws, many per test, without a ledger charge (these tests count outcomes over draws)."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def add_gaussian(self, x, sigma, *, sensitivity=1.0):
        return np.asarray(x, dtype=float) + self.rng.normal(0.0, sigma * sensitivity, np.shape(x))
