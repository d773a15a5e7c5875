"""Fault injection: a run killed at any point after the ledger charge re-runs safely, and never draws twice.

The run is killed (``privsynth.run.faults.fault_point``, a test hook driven by the environment
variable PRIVSYNTH_FAULT_INJECT) at each point of ``FAULT_POINTS``: after the ledger charge (before
the noise claim), after the noise claim (before the release is stored), after the release is stored,
during rounding (synthetic.parquet written but not yet vouched for by the manifest) and before the
DP report. The same run is then started again (same --output folder, same seed, same ledger and
release store). Each time the budget is charged exactly once, and:

* killed after the charge: the re-run finds the charge, charges nothing, draws and completes;
* killed after the noise claim (the release's noise journal holds its draws, the release is not stored):
  the re-run replays the journal and completes with no new charge (issue 38); the same kill with the
  journal removed is refused with NoiseAlreadyDrawnError (nothing is drawn twice, nothing is stored);
* killed after the release was stored, during rounding or before the report: the re-run reuses the
  stored release and completes; with a seed its output is identical to an uninterrupted run's;
* no half-written artifact is read: every artifact the manifest lists is trusted (its hash
  matches), a planted torn file or stale temporary from the killed attempt is replaced or removed.

Seeded noise is derived from the seed and the release key, an HMAC under the ledger's secret: every
ledger here is a copy of one template ledger (same secret, no charges), so the reference run and the
interrupted runs draw the same streams while keeping separate charges.

The faithful kill is ``os._exit(137)`` in a subprocess running the ``privsynth`` command (no finally
blocks, no Prefect state change); those tests are marked slow. The default run keeps in-process
variants: the hook raises at the same points under prefect_test_harness.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml
from conftest import TOY_SCHEMA, private_leftovers

from privsynth.privacy.ledger import BudgetLedger, NoiseAlreadyDrawnError
from privsynth.run import phase
from privsynth.run.faults import FAULT_ENV, FAULT_POINTS, InjectedFault, fault_point
from privsynth.run.parameters import RunParameters
from privsynth.run.runfolder import RunFolder, RunFolderError

CLI = Path(sys.executable).with_name("privsynth")
SCHEMA = TOY_SCHEMA
ARTIFACTS = ("validation.json", "encoding.json", "release.parquet", "privacy.json", "synthetic.parquet",
             "report.json", "report.md")
# Points after which the release was stored (a re-run reuses it) and after which noise was drawn.
STORED = ("after_release_stored", "during_rounding", "before_report")


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("toy")
    rng = np.random.default_rng(0)
    n = 200
    colour = rng.choice(["red", "green", "blue", None], size=n, p=[0.5, 0.3, 0.15, 0.05])
    frame = pd.DataFrame({"id": np.arange(n), "colour": colour, "size": rng.integers(0, 101, n),
                          "weight": rng.uniform(0, 1, n).round(3), "member": rng.random(n) < 0.4})
    frame.to_csv(tmp / "toy.csv", index=False)
    (tmp / "toy.yaml").write_text(yaml.safe_dump(SCHEMA))
    template = tmp / "template-ledger.sqlite"
    with BudgetLedger(f"sqlite:///{template}") as ledger:
        ledger.release_secret()  # created once; every copy shares it
    return {"data": str(tmp / "toy.csv"), "schema": str(tmp / "toy.yaml"), "template": template}


def _ledger_url(tmp: Path) -> str:
    return f"sqlite:///{tmp / 'ledger.sqlite'}"


def _ledger(toy: dict, tmp: Path) -> str:
    """A fresh ledger (no budgets, no charges) with the template's release-key secret."""
    if not (tmp / "ledger.sqlite").exists():
        shutil.copyfile(toy["template"], tmp / "ledger.sqlite")
    return _ledger_url(tmp)


def _parameters(toy: dict, tmp: Path, seed: int | None = 7, output: str = "run", **extra) -> RunParameters:
    values = dict(input=toy["data"], schema_file=toy["schema"], mechanism="reduced_space", epsilon=1.0,
                  rows=60, seed=seed, output=str(tmp / output), ledger=_ledger(toy, tmp), unlimited=True,
                  mechanism_options={"points_per_statistic": 1.0})
    values.update(extra)
    return RunParameters(**values)


@pytest.fixture(scope="module")
def reference(harness, toy, tmp_path_factory) -> dict:
    """An uninterrupted run with its own ledger and store: what every resumed run must reproduce."""
    from flows.synthesize import synthesize

    tmp = tmp_path_factory.mktemp("reference")
    result = synthesize(_parameters(toy, tmp), release_store=str(tmp / "releases"))
    run = Path(result["run_dir"])
    return {"release": pq.read_table(run / "release.parquet"), "synthetic": pq.read_table(run / "synthetic.parquet")}





def _stored_releases(store: Path) -> list[str]:
    return sorted(p.name for p in store.iterdir() if not p.name.startswith(".")) if store.exists() else []


def _history(tmp: Path):
    return BudgetLedger(_ledger_url(tmp)).history("toy")


def _assert_complete_and_charged_once(tmp: Path, run: Path, attempts: int = 2) -> RunFolder:
    folder = RunFolder.load(run)
    for name in ARTIFACTS:
        assert folder.trusted(name), f"{name} is missing or does not match the manifest"
    for name in folder.manifest["artifacts"]:
        assert folder.trusted(name), name
    assert "finished" in folder.manifest and folder.manifest["attempts"] == attempts
    assert not list(run.glob(".*.tmp")), "a stale temporary of the killed attempt is left"
    history = _history(tmp)
    assert len(history) == 1, "the budget must be charged exactly once"
    assert history[0].release_key == folder.manifest["facts"]["release_key"]
    assert BudgetLedger(_ledger_url(tmp)).noise_drawn("toy", history[0].release_key)
    assert _stored_releases(tmp / "releases") == [history[0].release_key]
    return folder


def _damage_after_kill(run: Path, point: str) -> None:
    """What a torn write or a killed writer could leave; the re-run must not read any of it."""
    (run / ".synthetic.parquet.deadbeef.tmp").write_bytes(b"PAR1 half a file")
    if point in ("after_noise_claimed", "after_release_stored"):
        (run / "release.parquet").write_bytes(b"PAR1 torn")  # never recorded by the killed attempt
    if point == "during_rounding":
        data = (run / "synthetic.parquet").read_bytes()
        (run / "synthetic.parquet").write_bytes(data[: len(data) // 2])


def _check_state_after_kill(tmp: Path, run: Path, point: str) -> None:
    manifest = json.loads((run / "manifest.json").read_text())
    history = _history(tmp)
    assert len(history) == 1, "the charge precedes every fault point"
    # the mechanism stage is recorded only after the release is stored and copied into the run folder
    assert ("mechanism" in manifest["stages"]) is (point in ("during_rounding", "before_report"))
    assert history[0].release_key == manifest["facts"]["release_key"]
    drawn = BudgetLedger(_ledger_url(tmp)).noise_drawn("toy", history[0].release_key)
    assert drawn is (point != "after_charge"), "the noise claim is recorded before any draw"
    assert len(_stored_releases(tmp / "releases")) == (1 if point in STORED else 0)
    # The noise journal exists from just before the claim until the release is stored, owner-only.
    journal = tmp / "releases" / ".journals" / history[0].release_key
    assert journal.is_file() is (point == "after_noise_claimed")
    if journal.is_file():
        assert stat.S_IMODE(journal.stat().st_mode) == 0o600
    assert "finished" not in manifest
    if point == "during_rounding":
        assert (run / "synthetic.parquet").is_file() and "rounding" not in manifest["stages"]
    if point == "before_report":
        assert "rounding" in manifest["stages"] and "report" not in manifest["stages"]


# ---------------------------------------------------------------- unit level: the hook and the trust rules

def test_fault_points_are_the_documented_ones():
    assert FAULT_POINTS == ("after_charge", "after_noise_claimed", "after_release_stored", "during_rounding",
                            "before_report")


def test_fault_point_does_nothing_unless_named(monkeypatch):
    monkeypatch.delenv(FAULT_ENV, raising=False)
    fault_point("after_charge")
    monkeypatch.setenv(FAULT_ENV, "raise:before_report")
    fault_point("after_charge")  # another point: nothing happens
    with pytest.raises(InjectedFault, match="before_report"):
        fault_point("before_report")


def test_fault_point_kills_the_process_without_cleanup(tmp_path):
    marker = tmp_path / "finally-ran"
    code = ("import pathlib\nfrom privsynth.run.stages import fault_point\n"
            f"try:\n    fault_point('after_charge')\nfinally:\n    pathlib.Path({str(marker)!r}).write_text('x')\n")
    done = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, **{FAULT_ENV: "after_charge"}), timeout=60)
    assert done.returncode == 137 and not marker.exists()


def test_run_folder_trusts_only_what_the_manifest_vouches_for(tmp_path):
    folder = RunFolder.open(tmp_path / "run", {"k": 1}, "run-1")
    (folder.file("release.parquet")).write_bytes(b"complete")
    folder.record("mechanism", ["release.parquet"])
    assert folder.require("release.parquet") == folder.file("release.parquet")
    (folder.file("release.parquet")).write_bytes(b"comp")  # torn after it was recorded
    with pytest.raises(RunFolderError, match="release.parquet is missing or does not match the manifest"):
        folder.require("release.parquet")
    (folder.file("synthetic.parquet")).write_bytes(b"never recorded")
    with pytest.raises(RunFolderError):
        folder.require("synthetic.parquet")
    assert not folder.stage_done("mechanism")
    stale = folder.file(".synthetic.parquet.0123abcd.tmp")
    stale.write_bytes(b"half")
    resumed = RunFolder.open(tmp_path / "run", {"k": 1}, "run-2")
    assert not stale.exists() and resumed.manifest["run_id"] == "run-1" and resumed.manifest["attempts"] == 2
    resumed.discard(["release.parquet"], "test")
    assert not resumed.file("release.parquet").exists() and resumed.manifest["discarded"] == {"release.parquet": "test"}
    assert "release.parquet" not in RunFolder.load(tmp_path / "run").manifest["artifacts"]


# ---------------------------------------------------------------- in process (default): the hook raises

@pytest.mark.parametrize("point", FAULT_POINTS)
def test_rerun_after_a_fault_is_charged_once_and_never_draws_twice(point, harness, toy, reference, tmp_path,
                                                                   private_tmp, monkeypatch):
    from flows.synthesize import synthesize

    parameters = _parameters(toy, tmp_path)
    store = str(tmp_path / "releases")
    monkeypatch.setenv(FAULT_ENV, f"raise:{point}")
    with pytest.raises(InjectedFault):
        synthesize(parameters, release_store=store)
    assert private_leftovers(private_tmp) == [], "a failed run deletes its private intermediates"
    run = tmp_path / "run"
    _check_state_after_kill(tmp_path, run, point)
    _damage_after_kill(run, point)

    monkeypatch.delenv(FAULT_ENV)
    result = synthesize(parameters, release_store=store)
    folder = _assert_complete_and_charged_once(tmp_path, run)
    assert result["reused_release"] is (point in STORED)
    privacy = json.loads((run / "privacy.json").read_text())
    # After the charge alone, the re-run finds the charge and adds none; later, the stored release says it was charged.
    assert privacy["ledger"]["charged_now"] is (point in STORED)
    assert privacy["reused_stored_release"] is (point in STORED)
    assert folder.manifest["stages"]["mechanism"]["reused_stored_release"] is (point in STORED)
    assert pq.read_table(run / "release.parquet").equals(reference["release"])
    assert pq.read_table(run / "synthetic.parquet").equals(reference["synthetic"])
    assert private_leftovers(private_tmp) == []


def test_unseeded_rerun_reuses_its_release_and_is_charged_once(harness, toy, tmp_path, monkeypatch):
    """Secure (unseeded) noise: the key carries the run id, which the resumed folder keeps."""
    from flows.synthesize import synthesize

    parameters = _parameters(toy, tmp_path, seed=None)
    store = str(tmp_path / "releases")
    monkeypatch.setenv(FAULT_ENV, "raise:after_release_stored")
    with pytest.raises(InjectedFault):
        synthesize(parameters, release_store=store)
    # A stop here would say that the release is stored and how to resume it (what happens next).
    assert phase.current() == "stored"
    assert f"re-run with --output {tmp_path / 'run'} to resume with no new charge" in phase.stop_message()
    stored = _stored_releases(Path(store))
    monkeypatch.delenv(FAULT_ENV)
    result = synthesize(parameters, release_store=store)
    assert result["reused_release"] is True
    _assert_complete_and_charged_once(tmp_path, tmp_path / "run")
    assert _stored_releases(Path(store)) == stored
    privacy = json.loads((tmp_path / "run" / "privacy.json").read_text())
    assert privacy["noise"]["reproducible"] is False


def test_resumed_run_on_a_spent_budget_is_not_charged_twice(harness, toy, tmp_path, monkeypatch):
    """The budget holds exactly one run; killed after its charge, the same run still completes on it."""
    from flows.synthesize import synthesize

    parameters = _parameters(toy, tmp_path, seed=None, unlimited=False)
    BudgetLedger(parameters.ledger).set_budget("toy", 1.0)
    store = str(tmp_path / "releases")
    monkeypatch.setenv(FAULT_ENV, "raise:after_charge")
    with pytest.raises(InjectedFault):
        synthesize(parameters, release_store=store)
    assert phase.current() == "charged" and "without a second charge" in phase.stop_message()
    (status,) = BudgetLedger(parameters.ledger).status("toy")
    assert status.remaining_epsilon == pytest.approx(0.0)
    monkeypatch.delenv(FAULT_ENV)
    result = synthesize(parameters, release_store=store)  # the pre-check knows this run's key is charged
    assert result["reused_release"] is False
    _assert_complete_and_charged_once(tmp_path, tmp_path / "run")
    # another run is a new release: refused, the budget is spent
    from privsynth.privacy.ledger import BudgetExceededError

    with pytest.raises(BudgetExceededError):
        synthesize(_parameters(toy, tmp_path, seed=None, unlimited=False, output="run2"), release_store=store)
    assert len(_history(tmp_path)) == 1


def test_after_a_lost_draw_a_new_run_is_a_new_charged_release(harness, toy, tmp_path, monkeypatch):
    """Killed after its draws, a run resumes from its noise journal (the stop line says so); with the journal
    removed (another release store) the re-run is refused, and an unseeded new run (new folder) is a new
    release, charged again."""
    from flows.synthesize import synthesize

    parameters = _parameters(toy, tmp_path, seed=None)
    store = str(tmp_path / "releases")
    monkeypatch.setenv(FAULT_ENV, "raise:after_noise_claimed")
    with pytest.raises(InjectedFault):
        synthesize(parameters, release_store=store)
    assert phase.current() == "noise_drawn"
    message = phase.stop_message()
    assert "noise journal" in message and "to resume without a second charge" in message
    monkeypatch.delenv(FAULT_ENV)
    journals = Path(store) / ".journals"
    assert [p.name for p in journals.iterdir()] == [_history(tmp_path)[0].release_key]
    shutil.rmtree(journals)  # the journal is gone: noise was drawn for this key and nothing can replay it
    with pytest.raises(NoiseAlreadyDrawnError, match="noise journal"):
        synthesize(parameters, release_store=store)
    result = synthesize(_parameters(toy, tmp_path, seed=None, output="run2"), release_store=store)
    assert result["reused_release"] is False
    history = _history(tmp_path)
    assert len(history) == 2 and history[0].release_key != history[1].release_key
    assert _stored_releases(Path(store)) == [history[1].release_key]


# ---------------------------------------------------------------- subprocess (slow): a real kill

def _cli_run(toy: dict, tmp: Path, api_url: str, fault: str | None) -> subprocess.CompletedProcess:
    (tmp / "system-tmp").mkdir(exist_ok=True)
    env = dict(os.environ, PREFECT_HOME=str(tmp / "prefect-home"), PREFECT_API_URL=api_url,
               PRIVSYNTH_RELEASE_STORE=str(tmp / "releases"), GX_ANALYTICS_ENABLED="false",
               TMPDIR=str(tmp / "system-tmp"), PRIVSYNTH_SLOT_WAIT_S="5")  # a killed run's slot: wait 5 s, go on
    env.pop(FAULT_ENV, None)
    if fault:
        env[FAULT_ENV] = fault
    args = ["run", "--input", toy["data"], "--schema", toy["schema"], "--mechanism", "reduced_space", "--epsilon", "1",
            "--rows", "60", "--seed", "7", "--output", str(tmp / "run"), "--ledger", _ledger(toy, tmp), "--unlimited",
            "--option", "points_per_statistic=1"]
    return subprocess.run([str(CLI), *args], cwd=tmp, env=env, capture_output=True, text=True, timeout=400)


@pytest.mark.slow
@pytest.mark.parametrize("point", FAULT_POINTS)
def test_killed_run_reruns_charged_once_and_never_draws_twice(point, harness, toy, reference, tmp_path):
    from prefect.settings import PREFECT_API_URL

    api = PREFECT_API_URL.value()
    killed = _cli_run(toy, tmp_path, api, point)
    assert killed.returncode == 137, killed.stderr[-3000:]
    run = tmp_path / "run"
    _check_state_after_kill(tmp_path, run, point)
    # A SIGKILL runs no cleanup: the killed attempt's private folder stays, owner-only, until the next
    # run sweeps the folders of dead processes.
    system_tmp = tmp_path / "system-tmp"
    for leftover in private_leftovers(system_tmp):
        assert stat.S_IMODE((system_tmp / leftover).stat().st_mode) == 0o700
    _damage_after_kill(run, point)

    again = _cli_run(toy, tmp_path, api, None)
    assert private_leftovers(system_tmp) == [], "the re-run sweeps the killed run's private folder"
    assert again.returncode == 0, again.stderr[-3000:]
    assert "finished" in again.stdout
    assert ("reused the stored release" in again.stdout) is (point in STORED)
    _assert_complete_and_charged_once(tmp_path, run)
    assert pq.read_table(run / "release.parquet").equals(reference["release"])
    assert pq.read_table(run / "synthetic.parquet").equals(reference["synthetic"])
