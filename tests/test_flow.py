"""End-to-end flow runs on a small table under prefect_test_harness."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml

from privsynth.config import RunParameters
from privsynth.pipeline import ValidationFailedError
from privsynth.privacy.ledger import BudgetExceededError, BudgetLedger, UnknownDatasetError
from conftest import TOY_SCHEMA

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
    values = dict(input=str(toy["data"]), schema_file=str(toy["schema"]), mechanism="reduced_space", epsilon=1.0,
                  rows=150, seed=7, output=str(toy["tmp"] / "run"), ledger=toy["ledger"],
                  mechanism_options={"points_per_statistic": 2.0})
    values.update(overrides)
    return RunParameters(**values)


def test_full_run_writes_every_artifact_and_reruns_without_a_second_charge(harness, toy):
    from flows.synthesize import synthesize

    result = synthesize(_parameters(toy), release_store=toy["store"])
    run = Path(result["run_dir"])
    for name in ("raw.parquet", "validation.json", "bits.parquet", "encoding.json", "release.parquet",
                 "privacy.json", "synthetic.parquet", "audit.json", "audit.md", "manifest.json"):
        assert (run / name).is_file(), name

    synthetic = pq.read_table(run / "synthetic.parquet").to_pandas()
    assert list(synthetic.columns) == ["colour", "size", "weight", "member"]  # the dropped id is gone
    assert len(synthetic) == 150
    assert set(synthetic["colour"].dropna()) <= {"red", "green", "blue"}
    assert synthetic["size"].between(0, 100).all() and synthetic["weight"].between(0, 1).all()
    assert str(synthetic["member"].dtype) == "boolean"

    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["artifacts"]["raw.parquet"]["visibility"] == "private"
    assert manifest["privacy_spent"]["pure_epsilon"] == pytest.approx(1.0)
    assert len(manifest["input"]["sha256"]) == 64
    privacy = json.loads((run / "privacy.json").read_text())
    assert privacy["noise"]["reproducible"] is True and privacy["noise"]["hardened_against_floating_point_attacks"] is False
    audit = json.loads((run / "audit.json").read_text())
    assert audit["visibility"] == "internal"

    ledger = BudgetLedger(toy["ledger"])
    assert len(ledger.history("toy")) == 1

    again = synthesize(_parameters(toy), release_store=toy["store"])
    assert again["reused_release"] is True
    assert len(ledger.history("toy")) == 1  # the same release is not charged twice
    assert pq.read_table(run / "synthetic.parquet").num_rows == 150


def test_failed_validation_stops_before_the_mechanism(harness, toy):
    from flows.synthesize import synthesize

    bad = toy["frame"].copy()
    bad.loc[3, "colour"] = "purple"  # not a category; the column's out-of-domain rule is "fail"
    bad.to_csv(toy["data"], index=False)
    with pytest.raises(ValidationFailedError, match="colour"):
        synthesize(_parameters(toy), release_store=toy["store"])
    run = toy["tmp"] / "run"
    report = json.loads((run / "validation.json").read_text())
    assert report["success"] is False
    text = (run / "validation.json").read_text()
    assert "purple" not in text and "unexpected_count" not in text and "element_count" not in text
    assert not (run / "release.parquet").exists() and not Path(toy["store"]).exists()
    with pytest.raises(UnknownDatasetError):
        BudgetLedger(toy["ledger"]).history("toy")  # nothing was charged


def test_overspending_run_stops_before_reading_the_data(harness, toy):
    from flows.synthesize import synthesize

    BudgetLedger(toy["ledger"]).set_budget("toy", epsilon=0.5)
    with pytest.raises(BudgetExceededError, match="remain"):
        synthesize(_parameters(toy), release_store=toy["store"])
    assert not (toy["tmp"] / "run" / "raw.parquet").exists()
    assert BudgetLedger(toy["ledger"]).history("toy") == []
