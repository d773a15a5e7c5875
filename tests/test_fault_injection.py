"""Fault injection: a run killed at any point after the ledger charge re-runs safely.

The run is killed (``privsynth.pipeline.fault_point``, a test hook driven by the environment
variable PRIVSYNTH_FAULT_INJECT) right after the ledger charge and before the release is stored, right
after the release is stored, during rounding (synthetic.parquet written but not yet vouched for by
the manifest) and before the audit. The same run is then started again (same --output folder, same
seed, same ledger and release store). Each time:

* the budget is charged exactly once, and one release is stored;
* no half-written artifact is read: every artifact the manifest lists is trusted (its hash
  matches), a planted torn file or stale temporary from the killed attempt is replaced or removed;
* the output is complete, and with a seed it is identical to a run that was never interrupted.

The faithful kill is ``os._exit(137)`` in a subprocess running the ``privsynth`` command (no finally
blocks, no Prefect state change); those tests are marked slow. The default run keeps in-process
variants: the hook raises at the same points under prefect_test_harness.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml

from privsynth.config import RunParameters
from privsynth.pipeline import FAULT_ENV, FAULT_POINTS, InjectedFault, fault_point
from privsynth.privacy.ledger import BudgetLedger
from privsynth.runfolder import RunFolder, RunFolderError
from conftest import TOY_SCHEMA

CLI = Path(sys.executable).with_name("privsynth")
SCHEMA = TOY_SCHEMA
ARTIFACTS = ("raw.parquet", "validation.json", "bits.parquet", "encoding.json", "release.parquet", "privacy.json",
             "synthetic.parquet", "audit.json", "audit.md")


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
    return {"data": str(tmp / "toy.csv"), "schema": str(tmp / "toy.yaml")}


def _parameters(toy: dict, tmp: Path, seed: int | None = 7, output: str = "run") -> RunParameters:
    return RunParameters(input=toy["data"], schema_file=toy["schema"], mechanism="reduced_space", epsilon=1.0,
                         rows=60, seed=seed, output=str(tmp / output), ledger=f"sqlite:///{tmp / 'ledger.sqlite'}",
                         mechanism_options={"points_per_statistic": 1.0})


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


def _assert_complete_and_charged_once(tmp: Path, run: Path) -> RunFolder:
    folder = RunFolder.load(run)
    for name in ARTIFACTS:
        assert folder.trusted(name), f"{name} is missing or does not match the manifest"
    for name in folder.manifest["artifacts"]:
        assert folder.trusted(name), name
    assert "finished" in folder.manifest and folder.manifest["attempts"] == 2
    assert not list(run.glob(".*.tmp")), "a stale temporary of the killed attempt is left"
    history = BudgetLedger(f"sqlite:///{tmp / 'ledger.sqlite'}").history("toy")
    assert len(history) == 1, "the budget must be charged exactly once"
    assert history[0].release_key == folder.manifest["stages"]["mechanism"]["release_key"]
    assert len(_stored_releases(tmp / "releases")) == 1
    return folder


def _damage_after_kill(run: Path, point: str) -> None:
    """What a torn write or a killed writer could leave; the re-run must not read any of it."""
    (run / ".synthetic.parquet.deadbeef.tmp").write_bytes(b"PAR1 half a file")
    if point == "after_release_stored":
        (run / "release.parquet").write_bytes(b"PAR1 torn")  # never recorded by the killed attempt
    if point == "during_rounding":
        data = (run / "synthetic.parquet").read_bytes()
        (run / "synthetic.parquet").write_bytes(data[: len(data) // 2])


def _check_state_after_kill(tmp: Path, run: Path, point: str) -> None:
    manifest = json.loads((run / "manifest.json").read_text())
    history = BudgetLedger(f"sqlite:///{tmp / 'ledger.sqlite'}").history("toy")
    assert len(history) == 1, "the charge precedes every fault point"
    assert "finished" not in manifest
    stored = _stored_releases(tmp / "releases")
    assert len(stored) == (0 if point == "after_charge" else 1)
    if point == "during_rounding":
        assert (run / "synthetic.parquet").is_file() and "rounding" not in manifest["stages"]
    if point == "before_audit":
        assert "rounding" in manifest["stages"] and "audit" not in manifest["stages"]


# ---------------------------------------------------------------- unit level: the hook and the trust rules

def test_fault_point_does_nothing_unless_named(monkeypatch):
    monkeypatch.delenv(FAULT_ENV, raising=False)
    fault_point("after_charge")
    monkeypatch.setenv(FAULT_ENV, "raise:before_audit")
    fault_point("after_charge")  # another point: nothing happens
    with pytest.raises(InjectedFault, match="before_audit"):
        fault_point("before_audit")


def test_fault_point_kills_the_process_without_cleanup(tmp_path):
    marker = tmp_path / "finally-ran"
    code = ("import pathlib\nfrom privsynth.pipeline import fault_point\n"
            f"try:\n    fault_point('after_charge')\nfinally:\n    pathlib.Path({str(marker)!r}).write_text('x')\n")
    done = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, **{FAULT_ENV: "after_charge"}), timeout=60)
    assert done.returncode == 137 and not marker.exists()


def test_run_folder_trusts_only_what_the_manifest_vouches_for(tmp_path):
    folder = RunFolder.open(tmp_path / "run", {"k": 1}, "run-1")
    (folder.file("raw.parquet")).write_bytes(b"complete")
    folder.record("ingest", ["raw.parquet"])
    assert folder.require("raw.parquet") == folder.file("raw.parquet")
    (folder.file("raw.parquet")).write_bytes(b"comp")  # torn after it was recorded
    with pytest.raises(RunFolderError, match="raw.parquet is missing or does not match the manifest"):
        folder.require("raw.parquet")
    (folder.file("bits.parquet")).write_bytes(b"never recorded")
    with pytest.raises(RunFolderError):
        folder.require("bits.parquet")
    assert not folder.stage_done("ingest")
    stale = folder.file(".bits.parquet.0123abcd.tmp")
    stale.write_bytes(b"half")
    resumed = RunFolder.open(tmp_path / "run", {"k": 1}, "run-2")
    assert not stale.exists() and resumed.manifest["run_id"] == "run-1" and resumed.manifest["attempts"] == 2
    resumed.discard(["raw.parquet"], "test")
    assert not resumed.file("raw.parquet").exists() and resumed.manifest["discarded"] == {"raw.parquet": "test"}
    assert "raw.parquet" not in RunFolder.load(tmp_path / "run").manifest["artifacts"]


# ---------------------------------------------------------------- in process (default): the hook raises

@pytest.mark.parametrize("point", FAULT_POINTS)
def test_rerun_after_a_fault_is_charged_once_and_complete(point, harness, toy, reference, tmp_path, monkeypatch):
    from flows.synthesize import synthesize

    parameters = _parameters(toy, tmp_path)
    store = str(tmp_path / "releases")
    monkeypatch.setenv(FAULT_ENV, f"raise:{point}")
    with pytest.raises(InjectedFault):
        synthesize(parameters, release_store=store)
    run = tmp_path / "run"
    _check_state_after_kill(tmp_path, run, point)
    _damage_after_kill(run, point)

    monkeypatch.delenv(FAULT_ENV)
    result = synthesize(parameters, release_store=store)
    folder = _assert_complete_and_charged_once(tmp_path, run)
    assert result["reused_release"] is (point != "after_charge")
    privacy = json.loads((run / "privacy.json").read_text())
    # After the charge alone, the re-run finds the charge and adds none; later, the stored release says it was charged.
    assert privacy["ledger"]["charged_now"] is (point != "after_charge")
    assert folder.manifest["stages"]["mechanism"]["reused_stored_release"] is (point != "after_charge")
    assert pq.read_table(run / "release.parquet").equals(reference["release"])
    assert pq.read_table(run / "synthetic.parquet").equals(reference["synthetic"])


def test_unseeded_rerun_reuses_its_release_and_is_charged_once(harness, toy, tmp_path, monkeypatch):
    """Secure (unseeded) noise: the key carries the run id, which the resumed folder keeps."""
    from flows.synthesize import synthesize

    parameters = _parameters(toy, tmp_path, seed=None)
    store = str(tmp_path / "releases")
    monkeypatch.setenv(FAULT_ENV, "raise:after_release_stored")
    with pytest.raises(InjectedFault):
        synthesize(parameters, release_store=store)
    stored = _stored_releases(Path(store))
    monkeypatch.delenv(FAULT_ENV)
    result = synthesize(parameters, release_store=store)
    assert result["reused_release"] is True
    _assert_complete_and_charged_once(tmp_path, tmp_path / "run")
    assert _stored_releases(Path(store)) == stored
    privacy = json.loads((tmp_path / "run" / "privacy.json").read_text())
    assert privacy["noise"]["reproducible"] is False


# ---------------------------------------------------------------- subprocess (slow): a real kill

def _cli_run(toy: dict, tmp: Path, api_url: str, fault: str | None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PREFECT_HOME=str(tmp / "prefect-home"), PREFECT_API_URL=api_url,
               PRIVSYNTH_RELEASE_STORE=str(tmp / "releases"), GX_ANALYTICS_ENABLED="false")
    env.pop(FAULT_ENV, None)
    if fault:
        env[FAULT_ENV] = fault
    args = ["run", "--input", toy["data"], "--schema", toy["schema"], "--mechanism", "reduced_space", "--epsilon", "1",
            "--rows", "60", "--seed", "7", "--output", str(tmp / "run"), "--ledger", f"sqlite:///{tmp / 'ledger.sqlite'}",
            "--option", "points_per_statistic=1"]
    return subprocess.run([str(CLI), *args], cwd=tmp, env=env, capture_output=True, text=True, timeout=400)


@pytest.mark.slow
@pytest.mark.parametrize("point", FAULT_POINTS)
def test_killed_run_reruns_charged_once_and_complete(point, harness, toy, reference, tmp_path):
    from prefect.settings import PREFECT_API_URL

    api = PREFECT_API_URL.value()
    killed = _cli_run(toy, tmp_path, api, point)
    assert killed.returncode == 137, killed.stderr[-3000:]
    run = tmp_path / "run"
    _check_state_after_kill(tmp_path, run, point)
    _damage_after_kill(run, point)

    again = _cli_run(toy, tmp_path, api, None)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "finished" in again.stdout
    assert ("reused the stored release" in again.stdout) is (point != "after_charge")
    _assert_complete_and_charged_once(tmp_path, run)
    assert pq.read_table(run / "release.parquet").equals(reference["release"])
    assert pq.read_table(run / "synthetic.parquet").equals(reference["synthetic"])
