"""The attacks of issue 10, each run against the pipeline: every one succeeded on the old code.

Each test plays the adversary with only what a run publishes (privacy.json, the manifest, the
synthetic table, error messages) or what an operator can do (re-run, swap the release store,
kill a run), and checks the guarantee holds.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import TOY_SCHEMA, toy_frame
from postgres_fixture import postgres_url  # noqa: F401  (a fixture)

import privsynth
from privsynth.run.faults import InjectedFault
from privsynth.schema import parse_schema

SCHEMA = parse_schema(TOY_SCHEMA)
FAST = dict(mechanism="reduced_space", options={"points_per_statistic": 2.0}, rows=50)


def _run(frame, tmp_path: Path, name: str, **kw):
    settings = {**FAST, "unlimited": True, **kw}
    return privsynth.synthesize(frame, SCHEMA, output=tmp_path / name, **settings)


# ---------------------------------------------------------------- 1. seeded noise is never shared

def test_two_seeded_runs_at_two_epsilons_do_not_give_n(tmp_path):
    """Old code: one stream per seed, so n = (s2 n1 - s1 n2) / (s2 - s1) exactly."""
    frame = toy_frame(2000)
    n1 = _run(frame, tmp_path, "a", epsilon=1.0, seed=7).privacy["release_facts"]["n_estimate"]
    n2 = _run(frame, tmp_path, "b", epsilon=2.0, seed=7).privacy["release_facts"]["n_estimate"]
    s1, s2 = 1 / 1.0, 1 / 2.0  # the Laplace scale is sensitivity / epsilon
    recovered = (s2 * n1 - s1 * n2) / (s2 - s1)
    assert abs(recovered - 2000) > 1e-6  # the old code gave 2000 to rounding error


def test_neighbouring_tables_with_one_seed_do_not_differ_by_exactly_one_row(tmp_path):
    frame = toy_frame(2000)
    full = _run(frame, tmp_path, "a", epsilon=1.0, seed=7).privacy["release_facts"]["n_estimate"]
    neighbour = _run(frame.iloc[1:], tmp_path, "b", epsilon=1.0, seed=7).privacy["release_facts"]["n_estimate"]
    assert abs((full - neighbour) - 1.0) > 1e-6


# ---------------------------------------------------------------- 2. no fingerprint of the data

HEX64 = re.compile(r"\b[0-9a-f]{64}\b")


def test_no_hash_of_the_data_in_any_public_artifact(tmp_path):
    import hashlib

    release = _run(toy_frame(500), tmp_path, "run", epsilon=1.0, seed=3)
    run = release.run_dir
    privacy = json.loads((run / "privacy.json").read_text())
    assert "release_key" not in json.dumps(privacy)
    manifest = json.loads((run / "manifest.json").read_text())
    assert "sha256" not in manifest["input"]
    public_files = {hashlib.sha256(p.read_bytes()).hexdigest() for p in run.rglob("*") if p.is_file()}  # figures/ too
    allowed = public_files | {SCHEMA.content_hash(), manifest["facts"]["release_key"]}
    for path in run.iterdir():
        if path.suffix in (".json", ".md"):
            for found in HEX64.findall(path.read_text()):
                assert found in allowed, (path.name, found)


def test_the_release_key_is_keyed_by_the_ledger_secret(tmp_path):
    """The one key that is shown is an HMAC: the same data and parameters under another ledger (another
    secret) give another key, so nobody without the ledger can test a guessed table against it."""
    frame = toy_frame(500)
    a = _run(frame, tmp_path, "a", epsilon=1.0, seed=3, ledger=f"sqlite:///{tmp_path / 'one.sqlite'}")
    b = _run(frame, tmp_path, "b", epsilon=1.0, seed=3, ledger=f"sqlite:///{tmp_path / 'two.sqlite'}")
    key_a = json.loads((a.run_dir / "manifest.json").read_text())["facts"]["release_key"]
    key_b = json.loads((b.run_dir / "manifest.json").read_text())["facts"]["release_key"]
    assert key_a != key_b


# ---------------------------------------------------------------- 4. no second release for one charge

def test_a_lost_release_is_never_drawn_again_for_free(tmp_path):
    """Old code: a new store folder made the ledger answer 'reused' and the sampler draw fresh noise."""
    frame = toy_frame(500)
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    _run(frame, tmp_path, "run", epsilon=1.0, seed=5, ledger=ledger, release_store=tmp_path / "store-a")
    with pytest.raises(privsynth.NoiseAlreadyDrawnError, match="already drawn"):
        _run(frame, tmp_path, "run", epsilon=1.0, seed=5, ledger=ledger, release_store=tmp_path / "store-b")
    assert len(privsynth.Ledger(ledger).history("toy")) == 1


def _killed_at(point: str, tmp_path: Path, monkeypatch) -> str:
    """Run until the fault point raises (a kill at that point), and return the ledger URL."""
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    monkeypatch.setenv("PRIVSYNTH_FAULT_INJECT", f"raise:{point}")
    with pytest.raises(InjectedFault):
        _run(toy_frame(500), tmp_path, "run", epsilon=1.0, ledger=ledger)
    monkeypatch.delenv("PRIVSYNTH_FAULT_INJECT")
    return ledger


def test_a_run_killed_after_the_draw_resumes_from_its_journal_and_never_without_it(tmp_path, monkeypatch):
    """Issue 38: the draws are kept in the release store's noise journal, so the same run resumes, charged
    once; in another release store (no journal) the drawn key is refused, never drawn again for free."""
    monkeypatch.setenv("PRIVSYNTH_RELEASE_STORE", str(tmp_path / "store-a"))
    ledger = _killed_at("after_noise_claimed", tmp_path, monkeypatch)
    with pytest.raises(privsynth.NoiseAlreadyDrawnError, match="already drawn"):
        _run(toy_frame(500), tmp_path, "run", epsilon=1.0, ledger=ledger, release_store=tmp_path / "store-b")
    release = _run(toy_frame(500), tmp_path, "run", epsilon=1.0, ledger=ledger)
    assert release.privacy["ledger"]["charged_now"] is False
    assert len(privsynth.Ledger(ledger).history("toy")) == 1


def test_a_run_killed_after_the_charge_but_before_the_draw_completes_once(tmp_path, monkeypatch):
    ledger = _killed_at("after_charge", tmp_path, monkeypatch)
    release = _run(toy_frame(500), tmp_path, "run", epsilon=1.0, ledger=ledger)
    assert release.privacy["ledger"]["charged_now"] is False  # the charge of the first attempt pays for it
    assert len(privsynth.Ledger(ledger).history("toy")) == 1


# ---------------------------------------------------------------- 5-8. budget hygiene

def test_budget_without_delta_takes_the_default_delta_and_fits_zcdp(tmp_path):
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    status = privsynth.Ledger(ledger).set_budget("toy", epsilon=3.0)
    assert status.delta == privsynth.DEFAULT_DELTA
    release = privsynth.synthesize(toy_frame(500), SCHEMA, epsilon=1.0, mechanism="rap", ledger=ledger, rows=50,
                                   options={"rounds": 2, "picks_per_round": 1}, output=tmp_path / "run")
    assert release.privacy["cost"]["epsilon_at_delta"] <= 1.0 + 1e-6
    assert privsynth.Ledger(ledger).status("toy")[0].spent_epsilon <= 1.0 + 1e-6


def test_pure_budget_refuses_a_zcdp_mechanism_in_one_line_before_reading(tmp_path):
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    privsynth.Ledger(ledger).set_budget("toy", epsilon=3.0, pure=True)
    data = tmp_path / "toy.csv"
    toy_frame(50).to_csv(data, index=False)
    with pytest.raises(privsynth.BudgetExceededError, match="pure-DP budget") as err:
        privsynth.synthesize(str(data), SCHEMA, mechanism="rap", ledger=ledger, rows=10, output=tmp_path / "run",
                             options={"rounds": 2, "picks_per_round": 1})
    assert "\n" not in str(err.value)


def test_no_budget_means_no_spending_unless_unlimited_is_explicit(tmp_path):
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    with pytest.raises(privsynth.BudgetNotSetError, match="--unlimited"):
        privsynth.synthesize(toy_frame(100), SCHEMA, ledger=ledger, output=tmp_path / "run", **FAST)
    assert privsynth.Ledger(ledger).status() == []
    privsynth.synthesize(toy_frame(100), SCHEMA, ledger=ledger, output=tmp_path / "run2", unlimited=True, **FAST)
    assert privsynth.Ledger(ledger).status("toy")[0].charges == 1


def test_a_seed_on_a_budgeted_dataset_needs_explicit_consent(tmp_path):
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    privsynth.Ledger(ledger).set_budget("toy", epsilon=3.0)
    with pytest.raises(privsynth.BudgetNotSetError, match="testing feature"):
        privsynth.synthesize(toy_frame(100), SCHEMA, ledger=ledger, seed=1, output=tmp_path / "a", **FAST)
    privsynth.synthesize(toy_frame(100), SCHEMA, ledger=ledger, seed=1, allow_seed_with_budget=True,
                         output=tmp_path / "b", **FAST)


def test_the_default_ledger_is_per_user_not_per_working_folder(tmp_path, monkeypatch, isolated_privsynth_home):
    for folder in ("one", "two"):
        (tmp_path / folder).mkdir()
        monkeypatch.chdir(tmp_path / folder)
        privsynth.synthesize(toy_frame(100), SCHEMA, unlimited=True, **FAST)
    assert privsynth.Ledger().status("toy")[0].charges == 2
    assert str(isolated_privsynth_home) in privsynth.Ledger().url


def test_resuming_a_charged_run_on_a_full_budget_is_not_refused(tmp_path, monkeypatch):
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    privsynth.Ledger(ledger).set_budget("toy", epsilon=1.0, pure=True)
    monkeypatch.setenv("PRIVSYNTH_FAULT_INJECT", "raise:during_rounding")
    with pytest.raises(InjectedFault):
        privsynth.synthesize(toy_frame(300), SCHEMA, epsilon=1.0, ledger=ledger, output=tmp_path / "run", **FAST)
    monkeypatch.delenv("PRIVSYNTH_FAULT_INJECT")
    release = privsynth.synthesize(toy_frame(300), SCHEMA, epsilon=1.0, ledger=ledger, output=tmp_path / "run", **FAST)
    assert release.privacy["reused_stored_release"] is True
    assert privsynth.Ledger(ledger).status("toy")[0].charges == 1


# ---------------------------------------------------------------- 9. nothing private outside the release

def _private_temp_folders() -> set[str]:
    """This process's private folders (named by the owning pid): other runs on the machine make their own."""
    return {p.name for p in Path(tempfile.gettempdir()).glob(f"privsynth-private-{os.getpid()}-*")}


def test_private_intermediates_are_gone_after_a_run_and_after_a_refusal(tmp_path):
    before = _private_temp_folders()
    release = _run(toy_frame(300), tmp_path, "run", epsilon=1.0)
    names = {p.name for p in release.run_dir.iterdir()}
    assert not names & {"raw.parquet", "bits.parquet", "histogram.parquet", "audit.json", "internal-audit"}
    assert release.audit is None
    bad = toy_frame(300)
    bad.loc[3, "colour"] = "purple"  # fails validation: refused with the owner's explicit option
    with pytest.raises(privsynth.ValidationFailedError):
        _run(bad, tmp_path, "bad", epsilon=1.0, refuse_invalid_records=True)
    assert _private_temp_folders() == before


def test_the_internal_audit_is_opt_in_and_kept_apart(tmp_path):
    release = _run(toy_frame(300), tmp_path, "run", epsilon=1.0, audit=True)
    assert (release.run_dir / "internal-audit" / "audit.json").is_file()
    assert release.audit["visibility"] == "internal"
    manifest = json.loads((release.run_dir / "manifest.json").read_text())
    assert "audit.json" not in manifest["artifacts"]


# ---------------------------------------------------------------- 10. credentials

def test_a_password_in_a_url_is_refused_without_echoing_it(tmp_path):
    with pytest.raises(privsynth.ParameterError, match="password") as err:
        privsynth.synthesize("postgresql+psycopg://analyst:hunter2@db/warehouse?table=people", SCHEMA, rows=10)
    assert "hunter2" not in str(err.value)


def test_a_password_reference_is_expanded_only_at_connect_time(monkeypatch):
    from privsynth.io.credentials import expand_credentials, redact_url

    monkeypatch.setenv("WAREHOUSE_PASSWORD", "s3cr3t/+")
    url = "postgresql+psycopg://analyst:${WAREHOUSE_PASSWORD}@db/warehouse"
    privsynth.RunParameters(ledger=url)  # accepted: the parameter holds the variable's name only
    assert expand_credentials(url) == "postgresql+psycopg://analyst:s3cr3t%2F%2B@db/warehouse"
    assert redact_url("postgresql://a:b@h/d") == "postgresql://a:***@h/d"


# ---------------------------------------------------------------- 12. OpenDP adds the noise to the statistic

def test_secure_noise_applies_the_measurement_to_the_statistic_itself(monkeypatch):
    from privsynth.privacy.noise import SecureNoise

    noise = SecureNoise()
    noise.authorize("test")
    seen = []
    real = noise._measurement

    def spy(kind, scale):
        measurement = real(kind, scale)

        def call(values):
            seen.append((kind, list(values)))
            return measurement(values)
        return call

    monkeypatch.setattr(noise, "_measurement", spy)
    counts = np.array([10.0, 20.0, 30.0])
    noisy = noise.add_laplace(counts, 1.0)
    assert seen == [("laplace", [10.0, 20.0, 30.0])] and noisy.shape == counts.shape
    noise.add_gaussian(counts, 1.0)
    assert seen[-1] == ("gaussian", [10.0, 20.0, 30.0])


# ---------------------------------------------------------------- 13. hostile input: limits before the charge

def test_a_column_with_too_many_categories_is_refused_before_anything_is_charged(tmp_path):
    wide = {**TOY_SCHEMA, "columns": [*TOY_SCHEMA["columns"][:1],
                                      {"name": "colour", "type": "categorical",
                                       "categories": [f"c{i}" for i in range(200_000)]},
                                      *TOY_SCHEMA["columns"][2:]]}
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    with pytest.raises(privsynth.LimitError, match="colour"):
        privsynth.synthesize(toy_frame(10), parse_schema(wide), ledger=ledger, unlimited=True, **FAST)
    assert privsynth.Ledger(ledger).status() == []


def test_a_config_its_mechanism_cannot_run_is_refused_before_the_charge(tmp_path):
    """Old code: rap with more selections than a 4-column table has candidates was charged, then failed (the
    defaults now fit such a table: ``rap.configure_for``; a user's rounds are kept, so this one is refused)."""
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    with pytest.raises(privsynth.ParameterError, match="rounds"):
        privsynth.synthesize(toy_frame(50), SCHEMA, mechanism="rap", ledger=ledger, rows=10, unlimited=True,
                             options={"rounds": 20}, output=tmp_path / "run")
    assert privsynth.Ledger(ledger).status() == []


@pytest.mark.parametrize("field", ["output", "sink"])
def test_paths_that_climb_out_of_the_working_folder_are_refused(field):
    value = "../../elsewhere/x.parquet" if field == "sink" else "../../elsewhere"
    with pytest.raises(privsynth.ParameterError, match=r"'\.\.'"):
        privsynth.synthesize(toy_frame(10), SCHEMA, unlimited=True, **{**FAST, field: value})


def test_a_killed_runs_private_folder_is_swept_by_the_next_run(tmp_path, monkeypatch):
    from privsynth.run.context import PRIVATE_PREFIX, sweep_private_leftovers

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = tmp_path / f"{PRIVATE_PREFIX}999999999-abc"  # no process has this id
    live = tmp_path / f"{PRIVATE_PREFIX}{os.getpid()}-def"
    other = tmp_path / f"{PRIVATE_PREFIX}unnamed"
    for folder in (dead, live, other):
        folder.mkdir()
        (folder / "raw.parquet").write_bytes(b"private")
    assert sweep_private_leftovers() == [dead.name]
    assert not dead.exists() and live.exists() and other.exists()


# ================================================================ issue 30: privacy review, round 3

# ---------------------------------------------------------------- a shared ledger under load

_CONCURRENT_RUN = """
import os, sys, time
sys.path.insert(0, sys.argv[4])
import privsynth
from conftest import TOY_SCHEMA, toy_frame
from privsynth.schema import parse_schema

ledger, output, go = sys.argv[1:4]
frame, schema = toy_frame(200), parse_schema(TOY_SCHEMA)
open(output + ".ready", "w").close()
while not os.path.exists(go):  # every process is imported and ready before any run starts
    time.sleep(0.01)
try:
    privsynth.synthesize(frame, schema, epsilon=1.0, ledger=ledger, output=output, mechanism="reduced_space",
                         options={"points_per_statistic": 2.0}, rows=50)
except privsynth.BudgetExceededError:
    print("REFUSED")
else:
    print("RELEASED")
"""


def _fresh_database(server_url: str, name: str) -> str:
    """A new, empty database on the test server: a fresh ledger (no tables, no secret)."""
    import sqlalchemy as sa

    server = sa.create_engine(server_url, isolation_level="AUTOCOMMIT")
    with server.connect() as conn:
        conn.execute(sa.text(f"DROP DATABASE IF EXISTS {name}"))
        conn.execute(sa.text(f"CREATE DATABASE {name}"))
    server.dispose()
    return server_url.rsplit("/", 1)[0] + "/" + name


def test_a_fresh_postgresql_ledger_creates_its_secret_and_charges(postgres_url):  # noqa: F811
    """Old code: the secret's transaction locked on a text name holding a NUL byte, which PostgreSQL refuses."""
    from privsynth.privacy.accounting import PrivacyCost

    url = _fresh_database(postgres_url, "ledger_fresh")
    ledger = privsynth.Ledger(url)
    secret = ledger.release_secret()
    assert len(secret) == 32 and privsynth.Ledger(url).release_secret() == secret
    ledger.set_budget("toy", epsilon=1.0, pure=True)
    ledger.charge("toy", "key-1", PrivacyCost.pure(1.0, "test"))
    with pytest.raises(privsynth.BudgetExceededError):
        ledger.charge("toy", "key-2", PrivacyCost.pure(0.5, "test"))


def _race_eight_runs(ledger: str, tmp_path: Path) -> list[str]:
    """Eight processes (as eight workers would be) each run epsilon 1 against the same ledger at once."""
    import subprocess
    import sys

    privsynth.Ledger(ledger).set_budget("toy", epsilon=5.5, pure=True)  # fits five runs of pure epsilon 1
    tests = str(Path(__file__).resolve().parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(tests).parent), os.environ.get("PYTHONPATH", "")])}
    go = tmp_path / "go"
    runs = [subprocess.Popen([sys.executable, "-c", _CONCURRENT_RUN, ledger, str(tmp_path / f"run-{i}"), str(go),
                              tests], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
            for i in range(8)]
    deadline = time.monotonic() + 120
    while not all((tmp_path / f"run-{i}.ready").exists() for i in range(8)) and time.monotonic() < deadline:
        time.sleep(0.05)
    go.touch()
    results = []
    for run in runs:
        out, err = run.communicate(timeout=300)
        assert run.returncode == 0, err[-2000:]
        results.append(out.strip().splitlines()[-1])
    return results


def _check_five_released_three_refused(ledger: str, results: list[str]) -> None:
    assert sorted(results) == ["REFUSED"] * 3 + ["RELEASED"] * 5
    status = privsynth.Ledger(ledger).status("toy")[0]
    assert status.charges == 5 and status.spent_epsilon <= 5.5


@pytest.mark.slow
def test_eight_concurrent_runs_on_a_sqlite_ledger_release_exactly_what_the_budget_fits(tmp_path,
                                                                                      isolated_privsynth_home):
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    _check_five_released_three_refused(ledger, _race_eight_runs(ledger, tmp_path))


@pytest.mark.slow
def test_eight_concurrent_runs_on_a_fresh_postgresql_ledger_release_exactly_what_the_budget_fits(
        tmp_path, isolated_privsynth_home, postgres_url):  # noqa: F811
    """Old code: every run on PostgreSQL failed (a NUL byte in the advisory lock's text name)."""
    ledger = _fresh_database(postgres_url, "ledger_race")
    _check_five_released_three_refused(ledger, _race_eight_runs(ledger, tmp_path))


def test_the_ledger_lock_keys_are_integers_stable_and_distinct():
    from privsynth.privacy.ledger import advisory_lock_key

    keys = {advisory_lock_key("secret"), advisory_lock_key("dataset", "toy"), advisory_lock_key("dataset", "toy2")}
    assert len(keys) == 3 and all(-2**63 <= k < 2**63 for k in keys)
    assert advisory_lock_key("dataset", "toy") == advisory_lock_key("dataset", "toy")


# ---------------------------------------------------------------- seeds: the public files never rebuild the noise

AIM_FAST = dict(mechanism="aim", rows=50, options={"k": 2, "rounds_cap": 2, "iterations_per_round": 10,
                                                   "final_iterations": 20})


def _counts_rebuilt_from_public_files(run_dir: Path, secret: bytes | None = None) -> list[np.ndarray]:
    """The attacker: the seed (privacy.json) and the release key (manifest.json) rebuild a seeded stream the
    documented way; aim's first draws are the one-way marginals in column order, at the published scale.
    ``secret``: the same with the ledger's secret (what only the owner holds)."""
    import pyarrow.parquet as pq

    from privsynth.privacy.keys import noise_stream_key
    from privsynth.privacy.noise import SeededNoise

    seed = json.loads((run_dir / "privacy.json").read_text())["noise"]["seed"]
    key = json.loads((run_dir / "manifest.json").read_text())["facts"]["release_key"]
    stream = SeededNoise(seed, key if secret is None else noise_stream_key(secret, seed, key))
    stream.authorize("attacker")
    n_attributes = len(json.loads((run_dir / "encoding.json").read_text())["domain"]["names"])
    one_way = pq.read_table(run_dir / "measurements.parquet").to_pylist()[:n_attributes]
    return [np.asarray(r["noisy_counts"]) - stream.gaussian(r["scale"], len(r["noisy_counts"])) for r in one_way]


def test_a_seeded_release_cannot_be_denoised_from_its_public_files(tmp_path):
    """Old code: the stream was sha256(seed, release key), both public: measurements minus the rebuilt
    noise gave the exact one-way counts (integers summing to n)."""
    import shutil

    import pyarrow.parquet as pq

    ledger_file = tmp_path / "ledger.sqlite"
    secret = privsynth.Ledger(f"sqlite:///{ledger_file}").release_secret()  # the ledger and its secret exist
    shutil.copy(ledger_file, tmp_path / "same-owner.sqlite")  # the owner's copy: the same secret, no charges
    frame = toy_frame(500)
    release = _run(frame, tmp_path, "run", epsilon=1.0, seed=11, ledger=f"sqlite:///{ledger_file}", **AIM_FAST)
    rebuilt = _counts_rebuilt_from_public_files(release.run_dir)
    assert len(rebuilt) == 4
    # Exact counts are integers; noise of the published scale leaves almost none within 1e-6 of one.
    assert not all(np.allclose(c, np.round(c), atol=1e-6) for c in rebuilt)
    assert not any(np.isclose(c.sum(), 500, atol=1e-6) for c in rebuilt)
    # The attack itself is sound: with the secret (the owner's ledger) the same steps give the exact counts.
    exact = _counts_rebuilt_from_public_files(release.run_dir, secret)
    assert all(np.allclose(c, np.round(c), atol=1e-6) and np.isclose(c.sum(), 500) for c in exact)
    # The owner (the same secret) still reproduces the seeded release exactly.
    again = _run(frame, tmp_path, "again", epsilon=1.0, seed=11, ledger=f"sqlite:///{tmp_path / 'same-owner.sqlite'}",
                 release_store=tmp_path / "other-store", **AIM_FAST)
    first = pq.read_table(release.run_dir / "measurements.parquet").to_pylist()
    second = pq.read_table(again.run_dir / "measurements.parquet").to_pylist()
    assert first == second


# ---------------------------------------------------------------- the delta check never reads the exact n

def test_bisecting_delta_does_not_reveal_the_row_count(tmp_path):
    """Old code: at delta 0.0019975 (between 1/501 and 1/500) a 500-row table ran and a 501-row one was
    refused with nothing charged; bisecting --delta gave n."""
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    outcomes = []
    for n in (500, 501):
        try:
            release = _run(toy_frame(n), tmp_path, f"run-{n}", epsilon=1.0, delta=0.0019975, ledger=ledger)
        except privsynth.ParameterError as err:
            outcomes.append(f"refused: {err}")
        else:
            outcomes.append("released")
            assert (release.run_dir / "release.parquet").is_file()
    assert outcomes == ["released", "released"]
    assert privsynth.Ledger(ledger).status("toy")[0].charges == 2


def test_delta_is_checked_against_a_declared_public_row_count_before_the_charge(tmp_path):
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    with pytest.raises(privsynth.ParameterError, match="--public-rows 501"):
        _run(toy_frame(500), tmp_path, "run", epsilon=1.0, delta=0.0019975, public_rows=501, ledger=ledger)
    assert privsynth.Ledger(ledger).status() == []
    # Without a public n, a delta far above 1/n is released and warned about from the DP estimate of n.
    release = _run(toy_frame(500), tmp_path, "run", epsilon=1.0, delta=0.05, ledger=ledger)
    assert "not below 1/n" in release.privacy["delta_warning"]


# ---------------------------------------------------------------- the draft's thresholds' delta is inside delta

def _zcdp_delta_at(rho: float, epsilon: float) -> float:
    """delta of rho-zCDP at epsilon (Canonne, Kamath and Steinke 2020, Prop. 12), by hand on a fine alpha grid:
    min over alpha > 1 of exp((alpha - 1)(alpha rho - epsilon)) (1 - 1/alpha)^alpha / (alpha - 1). A grid
    minimum is never below the infimum, so the delta found here is an upper bound (refined twice around it)."""
    def log_delta(t: np.ndarray) -> np.ndarray:  # t = log(alpha - 1)
        alpha = 1.0 + np.exp(t)
        return (alpha - 1) * (alpha * rho - epsilon) + alpha * np.log1p(-1 / alpha) - t

    low, high = -12.0, 12.0
    for _ in range(3):
        grid = np.linspace(low, high, 100_001)
        best = grid[np.argmin(log_delta(grid))]
        step = grid[1] - grid[0]
        low, high = best - 2 * step, best + 2 * step
    return float(np.exp(log_delta(grid).min()))


def test_the_drafts_statement_holds_with_its_thresholds_delta(tmp_path):
    """Old code: rho used all of delta and the thresholds added 1e-3 delta on top: (epsilon, 1.001 delta)."""
    import pandas as pd

    from privsynth.discovery import THRESHOLD_DELTA_FRACTION, DraftOptions, draft_schema

    epsilon, delta = 1.0, 1e-6
    rng = np.random.default_rng(0)
    data = tmp_path / "people.csv"
    pd.DataFrame({"colour": rng.choice(["red", "green", "blue"], 500), "town": rng.choice(["a", "b"], 500)}
                 ).to_csv(data, index=False)
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    privsynth.Ledger(ledger).set_budget("people", epsilon=3.0, delta=delta)
    result = draft_schema(str(data), DraftOptions(name="people", epsilon=epsilon, delta=delta, ledger=ledger))
    (charge,) = privsynth.Ledger(ledger).history("people")
    thresholds = THRESHOLD_DELTA_FRACTION * delta  # two columns, each at half of it
    assert _zcdp_delta_at(charge.rho, epsilon) + thresholds <= delta
    # and no looser than needed: the Gaussian part uses the rest of delta (to the solver's tolerance)
    assert _zcdp_delta_at(charge.rho, epsilon) == pytest.approx(delta - thresholds, rel=1e-4)
    stated = re.search(r"\(epsilon ([0-9.e-]+), delta ([0-9.e-]+)\)-DP in total", result.text)
    assert float(stated.group(1)) == pytest.approx(epsilon, rel=1e-3) and float(stated.group(2)) == delta
    # The ledger's statement is the true one too: it adds the thresholds' delta (approximate zCDP) and
    # converts the rho at the rest of the budget's delta, so it says epsilon 1 spent, not a little less.
    assert charge.extra_delta == pytest.approx(thresholds)
    spent = privsynth.Ledger(ledger).status("people")[0].spent_epsilon
    assert spent == pytest.approx(epsilon, rel=1e-6)
    assert _zcdp_delta_at(charge.rho, spent) + charge.extra_delta <= delta * (1 + 1e-9)


def test_a_number_one_row_holds_alone_never_leaves_discovery(tmp_path):
    """Discovery measures a few-valued number column's own values (``points.value_points``): the values many rows
    hold come back exactly, but a value one row holds alone passes the threshold for unknown values with
    probability at most its delta, as a category would; never with certainty, as an exact look would show it."""
    import pandas as pd
    import yaml

    from privsynth.discovery import DraftOptions, draft_schema

    rng = np.random.default_rng(0)
    speeds = 1.15078 * np.arange(1, 11)  # wind speeds converted from knots: no decimals grid describes them
    secret = 123.45678901
    data = tmp_path / "wind.parquet"
    pd.DataFrame({"speed": np.r_[rng.choice(speeds, 2_999), secret],
                  "site": rng.choice(["a", "b"], 3_000)}).to_parquet(data)
    for seed in range(4):
        result = draft_schema(str(data), DraftOptions(name="wind", epsilon=8.0, ledger=f"sqlite:///{tmp_path}/l.db",
                                                      require_budget=False, seed=seed))
        assert "123.4567" not in result.text and "1.2345678" not in result.text
        speed = {c["name"]: c for c in yaml.safe_load(result.text)["columns"]}["speed"]
        written = speed.get("values") or speed["bins"]
        assert sum(any(abs(w - v) == 0.0 for w in written) for v in speeds) >= 8  # the many rows' values, exactly


# ---------------------------------------------------------------- a seeded draft on a budgeted dataset

def test_a_seeded_draft_on_a_budgeted_dataset_needs_explicit_consent_before_any_charge(tmp_path):
    """Old code: DraftOptions.seed on a budgeted dataset was charged and drawn from a seeded stream silently."""
    import pandas as pd

    from privsynth.discovery import DraftOptions, draft_schema

    data = tmp_path / "people.csv"
    pd.DataFrame({"colour": np.random.default_rng(0).choice(["red", "green"], 300)}).to_csv(data, index=False)
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    privsynth.Ledger(ledger).set_budget("people", epsilon=3.0)
    with pytest.raises(privsynth.BudgetNotSetError, match="testing feature"):
        draft_schema(str(data), DraftOptions(name="people", epsilon=1.0, ledger=ledger, seed=4))
    assert privsynth.Ledger(ledger).history("people") == []
    draft_schema(str(data), DraftOptions(name="people", epsilon=1.0, ledger=ledger, seed=4,
                                         allow_seed_with_budget=True))
    assert len(privsynth.Ledger(ledger).history("people")) == 1


# ---------------------------------------------------------------- the internal audit stays owner-only

def test_everything_under_internal_audit_is_owner_only(tmp_path):
    """Old code: audit.html and the figures were 0644 and figures/ 0755 (inside a 0700 folder)."""
    import stat

    old = os.umask(0o022)  # a common umask: what the files get unless they are created owner-only
    try:
        release = _run(toy_frame(300), tmp_path, "run", epsilon=1.0, audit=True)
    finally:
        os.umask(old)
    audit = release.run_dir / "internal-audit"
    entries = [audit, *audit.rglob("*")]
    assert {"audit.html", "audit.json", "figures"} <= {p.name for p in entries}
    assert any(p.suffix == ".png" for p in entries)
    modes = {p.relative_to(release.run_dir).as_posix(): stat.S_IMODE(p.stat().st_mode) for p in entries}
    assert all(mode == (0o700 if (release.run_dir / name).is_dir() else 0o600) for name, mode in modes.items()), modes


def test_the_internal_audit_is_never_uploaded_to_a_remote_run_folder(tmp_path):
    """Old code: with an fsspec run folder the non-DP audit was uploaded beside the public files."""
    import fsspec

    fs = fsspec.filesystem("memory")
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    remote = dict(FAST, unlimited=True, epsilon=1.0, ledger=ledger, audit=True, output="memory://shared/runs/audited",
                  release_store=tmp_path / "store")
    with pytest.raises(privsynth.ParameterError, match="--audit-location"):
        privsynth.synthesize(toy_frame(300), SCHEMA, **remote)
    assert privsynth.Ledger(ledger).status() == [] and not fs.exists("/shared/runs/audited")
    release = privsynth.synthesize(toy_frame(300), SCHEMA, **remote, audit_location="memory://owner-only/audit")
    assert fs.exists("/shared/runs/audited/synthetic.parquet")
    assert not [p for p in fs.find("/shared") if "audit" in p.rsplit("/", 1)[-1] or "internal-audit" in p]
    assert fs.exists("/owner-only/audit/audit.json") and release.audit["location"] == "memory://owner-only/audit"


# ---------------------------------------------------------------- a draft's types are never sniffed from the values

@pytest.mark.parametrize("extra", ["30.5", "unknown", "true", "2020-01-01"])
def test_one_added_row_never_changes_a_draft_without_a_budget(tmp_path, extra):
    """Old code: DuckDB's CSV sniffer typed `age` integer, float with one "30.5", categorical with one "unknown",
    at no charge and in a file that says nothing was read."""
    import pandas as pd

    from privsynth.discovery import DraftOptions, draft_schema

    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"age": rng.integers(18, 90, 500), "member": rng.choice(["true", "false"], 500)})
    texts = []
    for table in (frame, pd.concat([frame, pd.DataFrame({"age": [extra], "member": ["true"]})])):
        table.to_csv(tmp_path / "people.csv", index=False)  # one path: the file's name is in the draft
        texts.append(draft_schema(str(tmp_path / "people.csv"), DraftOptions(name="people")).text)
    assert texts[0] == texts[1]
    assert "integer" not in texts[0] and "float" not in texts[0]  # no type was read from the values


# ---------------------------------------------------------------- the audit sees a broken category threshold

def test_the_audit_catches_a_category_threshold_that_releases_a_value_held_by_one_record(monkeypatch):
    """Old audit: the canary's value was held by about tau records in both neighbours, so a threshold that
    releases a value held by one record about half of the time (claimed 1e-12) gave a lower bound of 0."""
    from privsynth.discovery import categories
    from privsynth.privacy.audit import TARGETS, run_audit, seeded_noise

    correct = run_audit(TARGETS["schema_draft: singleton"](), 400, seeded_noise(30))
    assert correct.within_claim, correct
    monkeypatch.setattr(categories, "threshold", lambda sigma, delta_tau: 1.0 + sigma * delta_tau)  # Phi^-1 forgotten
    broken = run_audit(TARGETS["schema_draft: singleton"](), 400, seeded_noise(31), variant="threshold broken")
    assert broken.exceeds_claim and broken.best.lower > 1.0, broken


# ---------------------------------------------------------------- validation is no free oracle on a budgeted dataset

def _bounded_schema():
    """The attacker's chosen schema: size must lie in [20, 60], and a value outside fails the input."""
    columns = [dict(c, bounds=[20, 60], bins=[20, 40, 60], on_out_of_domain="fail") if c["name"] == "size" else c
               for c in TOY_SCHEMA["columns"]]
    return parse_schema({**TOY_SCHEMA, "columns": columns})


def test_one_record_outside_a_chosen_bound_does_not_decide_whether_a_release_exists(tmp_path):
    """Old code: D was released, and D plus one record with size 75 was refused with nothing charged, naming
    the column and the bound, and validation.json (public) said which check failed: narrowing the bounds
    found one person's value for free."""
    frame = toy_frame(500)
    frame["size"] = frame["size"].clip(20, 60)
    with_target = frame.copy()
    with_target.loc[len(frame)] = {"id": 10_000, "colour": "red", "size": 75, "weight": 0.5, "member": True}
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    privsynth.Ledger(ledger).set_budget("toy", epsilon=10.0, pure=True)
    public = []
    for name, table in (("d", frame), ("d-plus-one", with_target)):
        release = privsynth.synthesize(table, _bounded_schema(), epsilon=1.0, ledger=ledger, output=tmp_path / name,
                                       **FAST)
        assert (release.run_dir / "release.parquet").is_file()
        public.append((release.run_dir / "validation.json").read_text())
    assert public[0] == public[1] and "size" not in public[0]
    assert privsynth.Ledger(ledger).status("toy")[0].charges == 2
    for name in ("d", "d-plus-one"):
        owner_only = tmp_path / name / "internal-validation" / "validation.json"
        assert owner_only.stat().st_mode & 0o777 == 0o600 and owner_only.parent.stat().st_mode & 0o777 == 0o700
    exact = json.loads((tmp_path / "d-plus-one" / "internal-validation" / "validation.json").read_text())
    assert exact["failed_expectations"] == 1  # the owner still sees it


def test_the_exact_validation_report_never_reaches_a_remote_run_folder(tmp_path):
    import fsspec

    fs = fsspec.filesystem("memory")
    bad = toy_frame(300)
    bad.loc[3, "size"] = 75
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    privsynth.Ledger(ledger).set_budget("toy", epsilon=10.0, pure=True)
    privsynth.synthesize(bad, _bounded_schema(), epsilon=1.0, ledger=ledger, output="memory://shared/runs/validated",
                         release_store=tmp_path / "store", **FAST)
    names = fs.find("/shared/runs/validated")
    assert any(p.endswith("/validation.json") for p in names) and not any("internal-validation" in p for p in names)
    assert b"size" not in fs.cat("/shared/runs/validated/validation.json")


def test_an_unbudgeted_run_drops_a_failing_record_as_a_budgeted_one_does(tmp_path):
    """Issue 36.3: `--unlimited` refused on one failing record and wrote the exact per-check report into the run
    folder (a free, exact test of a candidate record); now one policy with or without a budget: it is dropped."""
    bad = toy_frame(300)
    bad.loc[3, "size"] = 75
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    good = privsynth.synthesize(toy_frame(300), _bounded_schema(), epsilon=1.0, output=tmp_path / "good",
                                unlimited=True, ledger=ledger, **FAST)
    release = privsynth.synthesize(bad, _bounded_schema(), epsilon=1.0, output=tmp_path / "run", unlimited=True,
                                   ledger=ledger, **FAST)
    public = json.loads((release.run_dir / "validation.json").read_text())
    assert public == {**json.loads((good.run_dir / "validation.json").read_text()),
                      "schema_hash": public["schema_hash"]}
    shown = json.dumps({k: v for k, v in public.items() if k != "schema_hash"})  # a hash may hold "75" by chance
    assert "unexpected" not in shown and "75" not in shown
    assert "caveat" not in release.privacy  # covered by the guarantee: no caveat
    owner = json.loads((release.run_dir / "internal-validation" / "validation.json").read_text())
    assert owner["success"] is False  # the owner still learns it, privately


def test_refusing_a_failing_record_is_the_owners_option_and_says_it_is_not_covered(tmp_path):
    bad = toy_frame(300)
    bad.loc[3, "size"] = 75
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    with pytest.raises(privsynth.ValidationFailedError, match="nothing was charged.*--refuse-invalid-records.*not "
                                                              "covered by the DP guarantee") as err:
        privsynth.synthesize(bad, _bounded_schema(), epsilon=1.0, output=tmp_path / "run", unlimited=True,
                             refuse_invalid_records=True, ledger=ledger, **FAST)
    assert "75" not in str(err.value).replace(str(tmp_path), "<tmp>")  # the test's folder may hold "75" by chance
    public = (tmp_path / "run" / "validation.json").read_text()
    shown = HEX64.sub("<hash>", public.replace(str(tmp_path), "<tmp>"))  # the schema's hash may hold "75" by chance
    assert "unexpected" not in shown and "75" not in shown  # the exact report is owner-only
    ok = privsynth.synthesize(toy_frame(300).assign(size=40), _bounded_schema(), epsilon=1.0, output=tmp_path / "ok",
                              unlimited=True, refuse_invalid_records=True, ledger=ledger, **FAST)
    assert "not cover" in ok.privacy["caveat"] and list(ok.privacy)[:3] == ["spent", "epsilon_statement", "caveat"]


def test_a_refusal_after_the_discover_stage_names_its_charge_and_says_it_stays_spent(tmp_path, monkeypatch):
    """Issue 36.4/36.5: "validation failed, nothing was charged" was printed after the discover stage had charged
    its share. Here the file gains a column between the discover and validate stages (a structural refusal)."""
    import privsynth.run.stages as stages
    from privsynth.privacy.ledger import BudgetLedger

    path = tmp_path / "people.csv"
    toy_frame(5000).to_csv(path, index=False)
    real_discover = stages.stage_discover

    def discover_then_the_file_changes(ctx):
        outcome = real_discover(ctx)
        toy_frame(5000).assign(ssn="x").to_csv(path, index=False)
        return outcome

    monkeypatch.setattr(stages, "stage_discover", discover_then_the_file_changes)
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    with pytest.raises(privsynth.ValidationFailedError) as err:
        privsynth.synthesize(str(path), epsilon=3.0, output=tmp_path / "run", unlimited=True, ledger=ledger,
                             rows=50, mechanism="reduced_space", options={"points_per_statistic": 2.0})
    message = str(err.value)
    charges = BudgetLedger(ledger).history("people")
    assert len(charges) == 1 and charges[0].description.startswith("discovery")  # what was charged
    assert "nothing was charged" not in message
    assert "nothing more was charged" in message and "stays spent" in message
    assert f"rho {charges[0].rho:.4g}" in message and "dataset 'people'" in message

def test_a_refusal_inside_the_discover_stage_after_its_charge_names_that_charge(tmp_path):
    """Issue 36.4: a refusal raised by the discover stage after it charged (no column kept: each one's DP facts
    show text of one value per row) must not read as if nothing was spent."""
    import pandas as pd

    from privsynth.privacy.ledger import BudgetLedger

    path = tmp_path / "people.csv"
    pd.DataFrame({"code": [f"c{i:05d}" for i in range(3000)], "ref": [f"r{i + 7}" for i in range(3000)]}).to_csv(
        path, index=False)
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    with pytest.raises(privsynth.ParameterError, match="discovery kept no column") as err:
        privsynth.synthesize(str(path), epsilon=1.0, output=tmp_path / "run", unlimited=True, ledger=ledger,
                             rows=50, mechanism="reduced_space", options={"points_per_statistic": 2.0})
    charges = BudgetLedger(ledger).history("people")
    assert len(charges) == 1 and charges[0].description.startswith("discovery")
    message = str(err.value)
    assert "stays spent" in message and f"rho {charges[0].rho:.4g}" in message and "dataset 'people'" in message
