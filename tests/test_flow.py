"""End-to-end flow runs on a small table under prefect_test_harness."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml
from conftest import TOY_SCHEMA, private_leftovers

from privsynth.engine.datasource import ValidationFailedError
from privsynth.privacy.ledger import BudgetExceededError, BudgetLedger, BudgetNotSetError, UnknownDatasetError
from privsynth.run.parameters import RunParameters

SCHEMA = TOY_SCHEMA


@pytest.fixture
def toy(tmp_path: Path) -> dict:
    rng = np.random.default_rng(0)
    n = 300
    colour = rng.choice(["red", "green", "blue", None], size=n, p=[0.5, 0.3, 0.15, 0.05])
    size = np.where(colour == "red", rng.integers(0, 30, n), rng.integers(20, 101, n))
    frame = pd.DataFrame({"id": np.arange(n), "colour": colour, "size": size,
                          "weight": rng.uniform(0, 1, n).round(3), "member": rng.random(n) < 0.4})
    data = tmp_path / "toy.csv"
    frame.to_csv(data, index=False)
    schema = tmp_path / "toy.yaml"
    schema.write_text(yaml.safe_dump(SCHEMA))
    return {"data": data, "schema": schema, "ledger": f"sqlite:///{tmp_path / 'ledger.sqlite'}",
            "store": str(tmp_path / "releases"), "frame": frame, "tmp": tmp_path}


def _parameters(toy: dict, **overrides) -> RunParameters:
    # The toy dataset has no budget: the spend without a limit is explicit (unlimited=True).
    values = dict(input=str(toy["data"]), schema_file=str(toy["schema"]), mechanism="reduced_space", epsilon=1.0,
                  rows=150, seed=7, output=str(toy["tmp"] / "run"), ledger=toy["ledger"], unlimited=True,
                  mechanism_options={"points_per_statistic": 2.0})
    values.update(overrides)
    return RunParameters(**values)


PUBLIC_ARTIFACTS = {"validation.json", "encoding.json", "release.parquet", "privacy.json", "synthetic.parquet",
                    "synthetic-validation.json", "report.json", "report.md", "report.html"}


def _public_artifact(name: str) -> bool:
    """A run-folder artifact that may be published: the files above and the DP report's pictures."""
    return name in PUBLIC_ARTIFACTS | {"measurements.parquet"} or (name.startswith("figures/")
                                                                   and name.endswith(".png"))




def _nothing_in(folder: Path) -> bool:
    """Nothing written (the parameter check may have made the empty output folder to test it is writable)."""
    return not folder.exists() or not any(folder.iterdir())



def test_full_run_writes_public_artifacts_only_and_reruns_without_a_second_charge(harness, toy, private_tmp):
    from flows.synthesize import synthesize

    result = synthesize(_parameters(toy), release_store=toy["store"])
    run = Path(result["run_dir"])
    names = {p.name for p in run.iterdir()}
    assert PUBLIC_ARTIFACTS | {"manifest.json"} <= names
    # only public artifacts: no private intermediates, and no internal audit unless asked for
    assert names <= PUBLIC_ARTIFACTS | {"manifest.json", "measurements.parquet", "figures",
                                        "internal-validation"}, names
    # the exact validation report, with or without a budget (issue 36.3), is owner-only and never a public artifact
    assert (run / "internal-validation").stat().st_mode & 0o077 == 0
    assert private_leftovers(private_tmp) == []
    # the synthetic table passed its schema's GX suite (kept columns only: 'id' is dropped), shown in Prefect
    assert json.loads((run / "synthetic-validation.json").read_text())["success"] is True
    from prefect.artifacts import Artifact

    shown = Artifact.get("privsynth-toy-synthetic-validation")
    assert shown is not None and shown.type == "table" and "passed" in shown.description

    synthetic = pq.read_table(run / "synthetic.parquet").to_pandas()
    assert list(synthetic.columns) == ["colour", "size", "weight", "member"]  # the dropped id is gone
    assert len(synthetic) == 150
    assert set(synthetic["colour"].dropna()) <= {"red", "green", "blue"}
    assert synthetic["size"].between(0, 100).all() and synthetic["weight"].between(0, 1).all()
    assert str(synthetic["member"].dtype) == "boolean"

    manifest = json.loads((run / "manifest.json").read_text())
    assert all(_public_artifact(name) for name in manifest["artifacts"]), manifest["artifacts"]
    assert all(a["visibility"].startswith("public") for a in manifest["artifacts"].values())
    assert manifest["privacy_spent"]["pure_epsilon"] == pytest.approx(1.0)
    assert "sha256" not in manifest["input"]  # no hash of the private data anywhere
    assert manifest["input"]["source"].startswith("csv:")
    assert manifest["outputs"]["internal_audit"] is None and manifest["outputs"]["report"] == "report.json"
    privacy = json.loads((run / "privacy.json").read_text())
    assert (privacy["noise"]["reproducible"] is True
            and privacy["noise"]["hardened_against_floating_point_attacks"] is False)
    assert "release_key" not in privacy and "release_key" not in json.dumps(privacy)
    report = json.loads((run / "report.json").read_text())
    assert report["visibility"].startswith("public (DP)") and report["synthetic_rows"] == 150
    assert (run / "report.md").read_text().startswith("# privsynth DP report")
    assert result["rows"] == 150 and result["internal_audit"] is None
    assert result["epsilon_statement"] == privacy["spent"]["line"]  # the run's one line, as privacy.json states it

    ledger = BudgetLedger(toy["ledger"])
    assert len(ledger.history("toy")) == 1
    assert ledger.noise_drawn("toy", ledger.history("toy")[0].release_key)

    again = synthesize(_parameters(toy), release_store=toy["store"])
    assert again["reused_release"] is True
    assert len(ledger.history("toy")) == 1  # the same release is not charged twice
    assert pq.read_table(run / "synthetic.parquet").num_rows == 150
    assert private_leftovers(private_tmp) == []


def test_internal_audit_is_opt_in_and_kept_apart(harness, toy, private_tmp):
    from flows.synthesize import synthesize

    result = synthesize(_parameters(toy, audit=True, audit_target="member", output=str(toy["tmp"] / "audited")),
                        release_store=toy["store"])
    run = Path(result["run_dir"])
    audit_dir = run / "internal-audit"
    assert result["internal_audit"] == str(audit_dir)
    audit = json.loads((audit_dir / "audit.json").read_text())
    assert audit["visibility"] == "internal" and audit["differentially_private"] is False
    assert audit["tstr"]["target"] == "member"
    assert (audit_dir / "audit.md").read_text().startswith("# INTERNAL")
    assert list(audit_dir.glob("*.png"))
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["outputs"]["internal_audit"] == "internal-audit/audit.json"
    assert all(_public_artifact(name) for name in manifest["artifacts"])  # no audit file, no audit picture
    assert (audit_dir / "audit.html").is_file() and audit["quality"]["visibility"] == "internal"
    # what the flow returns (and Prefect stores) holds no audit figure, only where it is
    assert "marginals" not in json.dumps(result) and "tstr" not in json.dumps(result)
    assert private_leftovers(private_tmp) == []


def test_failed_validation_stops_before_the_mechanism(harness, toy, private_tmp):
    from flows.synthesize import synthesize

    bad = toy["frame"].copy()
    bad.loc[3, "colour"] = "purple"  # not a category; the column's out-of-domain rule is "fail"
    bad.to_csv(toy["data"], index=False)
    with pytest.raises(ValidationFailedError, match="colour.*--refuse-invalid-records.*not covered"):
        synthesize(_parameters(toy, refuse_invalid_records=True), release_store=toy["store"])  # the owner's option
    run = toy["tmp"] / "run"
    report = json.loads((run / "validation.json").read_text())
    assert report["success"] is False
    text = (run / "validation.json").read_text()
    assert "purple" not in text and "unexpected_count" not in text and "element_count" not in text
    assert not (run / "release.parquet").exists() and not Path(toy["store"]).exists()
    assert {p.name for p in run.iterdir()} == {"validation.json", "manifest.json", "internal-validation"}
    assert (run / "internal-validation").stat().st_mode & 0o077 == 0  # the exact report: owner-only
    assert private_leftovers(private_tmp) == []
    with pytest.raises(UnknownDatasetError):
        BudgetLedger(toy["ledger"]).history("toy")  # nothing was charged


def test_dataset_without_a_budget_is_refused_unless_unlimited(harness, toy, private_tmp):
    from flows.synthesize import synthesize

    with pytest.raises(BudgetNotSetError,
                       match=r"dataset 'toy' has no privacy budget; set one with `privsynth budget "
                             r"set toy --epsilon E` or .*--unlimited \(nothing was read or charged\)"):
        synthesize(_parameters(toy, unlimited=False), release_store=toy["store"])
    assert _nothing_in(toy["tmp"] / "run") and private_leftovers(private_tmp) == []
    with pytest.raises(UnknownDatasetError):
        BudgetLedger(toy["ledger"]).history("toy")


def test_seed_on_a_budgeted_dataset_needs_explicit_consent(harness, toy, private_tmp):
    from flows.synthesize import synthesize

    BudgetLedger(toy["ledger"]).set_budget("toy", epsilon=3.0)
    with pytest.raises(BudgetNotSetError, match=r"has a privacy budget and --seed was given.*--allow-seed-with-budget"):
        synthesize(_parameters(toy, unlimited=False), release_store=toy["store"])
    assert _nothing_in(toy["tmp"] / "run")
    assert BudgetLedger(toy["ledger"]).history("toy") == []
    result = synthesize(_parameters(toy, unlimited=False, allow_seed_with_budget=True), release_store=toy["store"])
    assert result["privacy"]["pure_epsilon"] == pytest.approx(1.0)
    (status,) = BudgetLedger(toy["ledger"]).status("toy")
    assert status.charges == 1 and status.spent_epsilon == pytest.approx(1.0)
    assert private_leftovers(private_tmp) == []


def test_overspending_run_stops_before_reading_the_data(harness, toy, private_tmp):
    from flows.synthesize import synthesize

    BudgetLedger(toy["ledger"]).set_budget("toy", epsilon=0.5)
    with pytest.raises(BudgetExceededError, match="one more run may spend at most epsilon 0.5"):
        synthesize(_parameters(toy, seed=None, unlimited=False), release_store=toy["store"])
    assert _nothing_in(toy["tmp"] / "run")  # refused before the run folder is written or the data opened
    assert private_leftovers(private_tmp) == []
    assert BudgetLedger(toy["ledger"]).history("toy") == []


def test_credentials_come_from_a_prefect_secret_block_never_from_parameters(harness, toy, monkeypatch):
    import os

    from prefect.blocks.system import Secret

    from flows.synthesize import load_credentials
    from privsynth.io.credentials import CredentialError, expand_credentials

    Secret(value="s3cr3t-pw").save("privsynth-test-db", overwrite=True)
    for name in ("PRIVSYNTH_DB_PASSWORD", "PGPASSWORD"):
        monkeypatch.delenv(name, raising=False)
    parameters = _parameters(toy, credentials_block="privsynth-test-db",
                             ledger="postgresql+psycopg://analyst:${PRIVSYNTH_DB_PASSWORD}@db/ledger")
    assert "s3cr3t" not in parameters.model_dump_json()  # what Prefect stores and shows
    load_credentials(parameters.credentials_block)
    assert os.environ["PRIVSYNTH_DB_PASSWORD"] == "s3cr3t-pw" == os.environ["PGPASSWORD"]
    assert expand_credentials(parameters.ledger) == "postgresql+psycopg://analyst:s3cr3t-pw@db/ledger"
    with pytest.raises(CredentialError, match="no Prefect Secret block"):
        load_credentials("no-such-block")


def test_the_mechanisms_rounds_reach_the_prefect_run_logs(harness, toy):
    # Issue 20: nothing of the aim stage was printed; its per-round lines never reached the Prefect run logs.
    import logging

    from flows.synthesize import synthesize

    class Keep(logging.Handler):
        def __init__(self):
            super().__init__(logging.INFO)
            self.records = []

        def emit(self, record):
            self.records.append(record)

    kept = Keep()
    run_logs = logging.getLogger("prefect.flow_runs")  # Prefect's run logger (it does not propagate to root)
    run_logs.addHandler(kept)
    try:
        synthesize(_parameters(toy, mechanism="aim", rows=None, mechanism_options={}))
    finally:
        run_logs.removeHandler(kept)
    rounds = [r for r in kept.records if "aim round" in r.getMessage()]
    assert rounds, [r.getMessage() for r in kept.records][-20:]
    assert all("of rho spent" in r.getMessage() and "measured" in r.getMessage() for r in rounds)
    assert any("s left" in r.getMessage() for r in rounds)  # the time left, once a round has been timed
