"""``privsynth schema draft``: declared types only without epsilon; a DP pass charged before any read."""

from __future__ import annotations

import math

import duckdb
import numpy as np
import pandas as pd
import pytest
import yaml
from scipy.stats import norm

import privsynth.schema_draft as sd
import privsynth.schema_draft.dp_pass as dp_pass_module
from flows.cli import EXIT_USAGE, main
from privsynth.privacy.accounting import DEFAULT_DELTA, epsilon_from_rho
from privsynth.privacy.ledger import BudgetLedger
from privsynth.privacy.noise import make_noise_source
from privsynth.privacy.spending import rho_allowance
from privsynth.schema import SchemaError, load_schema

SECRET = "TOPSECRET"
RARE = "PLANTED_RARE_VALUE"


def _frame(n: int = 2000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    colour = rng.choice(["red", "green", "blue"], n, p=[0.5, 0.3, 0.2]).astype(object)
    colour[7] = RARE  # count 1
    # a tenth of the rows share one value, the rest are unique: free text / very high cardinality
    remarks = np.array([f"{SECRET}-{i}" for i in range(n)], dtype=object)
    remarks[: int(0.1 * n)] = "common"
    return pd.DataFrame({
        "customer_id": np.arange(n, dtype=np.int64),
        "age": rng.integers(18, 90, n).astype(np.int64),
        "income": rng.normal(50_000, 10_000, n),
        "colour": colour,
        "memo": remarks,
        "member": rng.random(n) < 0.5,
    })


@pytest.fixture
def parquet(tmp_path):
    path = tmp_path / "customers.parquet"
    _frame().to_parquet(path)
    return path


def _entries(text: str) -> dict[str, dict]:
    return {c["name"]: c for c in yaml.safe_load(text)["columns"]}


def test_parquet_draft_reads_declared_types_only(parquet, tmp_path):
    result = sd.draft_schema(str(parquet), sd.DraftOptions(name="customers"))
    assert SECRET not in result.text and RARE not in result.text and "common" not in result.text
    assert result.cost is None and result.read == 0
    cols = _entries(result.text)
    assert list(cols) == ["customer_id", "age", "income", "colour", "memo", "member"]
    assert cols["customer_id"]["drop"] is True
    assert cols["age"]["type"] == "integer" and cols["age"]["bounds"] is None
    assert cols["income"]["type"] == "float"
    assert cols["colour"]["type"] == "categorical" and cols["colour"]["categories"] == []
    assert cols["member"]["type"] == "boolean"
    assert "a human to review and edit" in result.text.splitlines()[0]
    assert "# TODO" in result.text and "No value of the table was read" in result.text
    assert "its name contains 'id'" in result.text
    # Until filled in, loading names every column and what it misses.
    out = tmp_path / "draft.yaml"
    out.write_text(result.text)
    with pytest.raises(SchemaError) as err:
        load_schema(out)
    message = str(err.value)
    assert "column 'age': an integer column needs public 'bounds'" in message
    assert "column 'colour': a categorical column needs a non-empty 'categories' list" in message


def test_duckdb_table_declared_types(tmp_path):
    db = tmp_path / "w.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE people (person_uuid VARCHAR, emailAddress VARCHAR, score SMALLINT, "
                    "price DECIMAL(10, 2), region VARCHAR, active BOOLEAN, payload BLOB, joined DATE, seen TIMESTAMP)")
        con.execute(f"INSERT INTO people VALUES ('u1', 'a@b.c', 3, 1.50, '{SECRET}', true, 'x'::BLOB, DATE '2031-07-04', "
                    "TIMESTAMP '2031-07-04 10:11:12')")
    result = sd.draft_schema(f"duckdb:{db}?table=people", sd.DraftOptions(name="people"))
    assert SECRET not in result.text and "a@b.c" not in result.text
    cols = _entries(result.text)
    assert cols["person_uuid"]["drop"] and cols["emailAddress"]["drop"]
    assert cols["score"]["type"] == "integer" and cols["price"]["type"] == "float"
    assert cols["region"]["type"] == "categorical" and cols["active"]["type"] == "boolean"
    assert cols["payload"]["drop"] is True and "has no privsynth column type" in result.text
    assert "declared type: int16" in result.text
    assert cols["joined"]["type"] == "date" and cols["seen"]["type"] == "timestamp"
    assert cols["joined"]["bin_by"] == "month" and "2031" not in result.text  # no value read


def test_csv_types_are_labelled_as_sniffed(tmp_path):
    path = tmp_path / "t.csv"
    _frame(50).to_csv(path, index=False)
    text = sd.draft_schema(str(path), sd.DraftOptions(name="t")).text
    assert "INFERRED by DuckDB's sniffer" in text and SECRET not in text
    assert _entries(text)["age"]["type"] == "integer"


@pytest.mark.parametrize("name, flagged", [
    ("customer_id", True), ("customerId", True), ("ID", True), ("first_name", True), ("Notes", True),
    ("home-address", True), ("phone_number", True), ("homepage_url", True), ("job title", True),
    ("paid", False), ("valid", False), ("age", False), ("hours_per_week", False), ("keyboard", False),
])
def test_identifier_names(name, flagged):
    assert (sd.identifier_reason(name) is not None) is flagged


def test_mechanism_accounting_by_hand():
    # Gaussian histogram: rho = Delta_2^2 / (2 sigma^2) with Delta_2^2 = 2 (a value's count and the total).
    assert sd.gaussian_sigma(0.5, 2.0) == pytest.approx(math.sqrt(2.0))
    assert sd.gaussian_sigma(0.02, 2.0) == pytest.approx(1 / math.sqrt(0.02))
    # threshold: a count-1 value passes with probability delta_tau: 1 + sigma * z, z = 3 at delta_tau = Phi(-3)
    assert sd.threshold(2.0, norm.sf(3.0)) == pytest.approx(7.0)
    # report-noisy-max with Gumbel scale b is Delta^2 / (2 b^2)-zCDP: rho = 1/8 -> b = 2
    assert sd.gumbel_scale(0.125) == pytest.approx(2.0)
    # quantile utility: values 1,2,3,3; q = 0.5, n = 4: #{x < g} for g = 0,2,3,4 is 0,1,2,4
    scores = sd.quantile_scores(np.array([1.0, 2.0, 3.0]), np.array([1.0, 1.0, 2.0]), np.array([0.0, 2.0, 3.0, 4.0]), 0.5)
    assert scores.tolist() == [-2.0, -1.0, 0.0, -2.0]
    cost = sd.draft_cost(1.0, DEFAULT_DELTA, 2)
    assert cost.rho == pytest.approx(rho_allowance(1.0, DEFAULT_DELTA))
    assert epsilon_from_rho(cost.rho, DEFAULT_DELTA) == pytest.approx(1.0, rel=1e-6)
    assert cost.pure_epsilon is None and any("1e-12 to delta" in n for n in cost.notes)


def _authorised(seed: int):
    noise = make_noise_source(seed, "test-key")
    noise.authorize("test-charge")
    return noise


def test_threshold_releases_frequent_values_and_never_a_count_one_value():
    rho, delta_tau = 0.001, 1e-12
    sigma = sd.gaussian_sigma(rho)
    tau = sd.threshold(sigma, delta_tau)
    assert tau == pytest.approx(1 + sigma * norm.isf(1e-12))
    for seed in range(200):
        release = sd.dp_categories(["big", "rare", "mid"], np.array([5000.0, 1.0, 2.0]), rho, delta_tau, _authorised(seed))
        assert "rare" not in release.categories and "mid" not in release.categories
        assert release.categories == ("big",) and release.kept_mass > 0.9


def test_quantile_lands_near_the_true_quantile():
    values = np.arange(0.0, 100.0)
    counts = np.full(100, 10.0)
    grid = sd.linear_grid(0, 100, integer=True)
    picks = [sd.dp_quantile(values, counts, grid, 0.5, 0.5, _authorised(s)) for s in range(20)]
    assert all(40 <= p <= 60 for p in picks)


def _ledger(tmp_path, budget: float | None = 5.0) -> str:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    if budget is not None:
        with BudgetLedger(url) as ledger:
            ledger.set_budget("customers", budget)
    return url


def test_dp_pass_charges_once_before_reading_and_loads(parquet, tmp_path, monkeypatch):
    url = _ledger(tmp_path)
    seen = []
    original = dp_pass_module.value_counts

    def spy(table, name):
        with BudgetLedger(url) as ledger:  # the charge and the claim precede every read of values
            history = ledger.history("customers")
            seen.append((name, len(history), ledger.noise_drawn("customers", history[0].release_key)))
        return original(table, name)

    monkeypatch.setattr(dp_pass_module, "value_counts", spy)
    options = sd.DraftOptions(name="customers", epsilon=1.0, ledger=url, bounds={"age": (0, 120), "income": (0, 200_000)})
    out = tmp_path / "draft.yaml"
    result = sd.write_draft(str(parquet), out, options)
    assert sorted(seen) == [(c, 1, True) for c in ("age", "colour", "income", "memo")]
    with BudgetLedger(url) as ledger:
        history = ledger.history("customers")
    assert len(history) == 1
    assert history[0].cost().rho == pytest.approx(rho_allowance(1.0, DEFAULT_DELTA))
    assert result.read == 4  # age, income, colour, memo; never customer_id
    schema = load_schema(out)
    colour = schema.column("colour")
    assert set(colour.categories) == {"red", "green", "blue"} and colour.on_out_of_domain == "category"
    assert schema.column("memo").drop and SECRET not in result.text and RARE not in result.text
    assert "free text or very high cardinality" in result.text
    age = schema.column("age")
    assert age.bounds == (0, 120) and len(age.bins) > 4 and all(float(e).is_integer() for e in age.bins)
    assert "DP (rho " in result.text and "DP PASS" in result.text and "Budget split by need" in result.text


def test_rare_value_never_in_a_small_epsilon_draft(parquet, tmp_path):
    url = _ledger(tmp_path, budget=None)
    for _ in range(3):
        result = sd.draft_schema(str(parquet), sd.DraftOptions(name="customers", epsilon=0.3, ledger=url,
                                                               require_budget=False))
        assert RARE not in result.text and SECRET not in result.text
    with BudgetLedger(url) as ledger:
        assert len(ledger.history("customers")) == 3


def test_cli_draft_and_refusals(parquet, tmp_path, capsys):
    out = tmp_path / "s.yaml"
    assert main(["schema", "draft", "--input", str(parquet), "--output", str(out)]) == 0
    assert yaml.safe_load(out.read_text())["name"] == "customers"
    assert "no value was read" in capsys.readouterr().out
    assert main(["schema", "draft", "--input", str(parquet), "--output", str(out)]) == EXIT_USAGE
    assert "exists" in capsys.readouterr().err
    # no budget set: refused in one line, nothing written, nothing charged
    url = _ledger(tmp_path, budget=None)
    other = tmp_path / "dp.yaml"
    code = main(["schema", "draft", "--input", str(parquet), "--output", str(other), "--epsilon", "1", "--ledger", url])
    assert code == EXIT_USAGE and not other.exists()
    assert "customers" in capsys.readouterr().err
    assert main(["schema", "draft", "--input", str(parquet), "--output", str(other), "--bounds", "colour=0:1"]) == EXIT_USAGE
    assert "not numeric" in capsys.readouterr().err


def test_peek_without_dp_is_explicit_and_labelled(parquet, tmp_path, capsys):
    out = tmp_path / "peek.yaml"
    assert main(["schema", "draft", "--input", str(parquet), "--output", str(out), "--peek-without-dp"]) == 0
    assert "NOT differentially private" in capsys.readouterr().err
    text = out.read_text()
    assert "NOT DIFFERENTIALLY PRIVATE" in text and RARE in text  # exact values: the point, and the danger
    schema = load_schema(out)
    assert schema.column("memo").drop and schema.column("customer_id").drop
    assert SECRET not in text  # a column proposed dropped gets no exact values
    assert schema.column("age").bins[0] >= 18 and schema.column("age").bins[-1] <= 89
    refused = tmp_path / "both.yaml"
    assert main(["schema", "draft", "--input", str(parquet), "--output", str(refused), "--peek-without-dp",
                 "--epsilon", "1"]) == EXIT_USAGE
    assert "exclude each other" in capsys.readouterr().err and not refused.exists()


def test_dp_pass_drafts_every_numeric_column_without_flags(tmp_path):
    db = tmp_path / "w.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE t AS SELECT (i % 50)::SMALLINT AS score, i * 1.5 AS amount, "
                    "CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END AS grp FROM range(4000) r(i)")
    url = f"sqlite:///{tmp_path / 'l.db'}"
    result = sd.draft_schema(f"duckdb:{db}?table=t", sd.DraftOptions(name="t", epsilon=2.0, ledger=url,
                                                                    require_budget=False))
    assert result.read == 3 and "TODO" not in result.text
    cols = _entries(result.text)
    low, high = cols["score"]["bounds"]
    assert -1 <= low <= 1 and 48 <= high <= 64 and cols["score"]["dp_released"] == ["bounds", "bins"]
    low, high = cols["amount"]["bounds"]
    assert 0 <= low < 1000 and 4000 < high <= 8192 and len(cols["amount"]["bins"]) >= 3
    assert sorted(cols["grp"]["categories"]) == ["a", "b"] and cols["grp"]["dp_released"] == ["categories"]
