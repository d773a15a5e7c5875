"""``--public`` (issue 28): the facts a warehouse's data contracts state are read as PUBLIC facts.

dbt projects (both test syntaxes), GX suites made by GX itself, Frictionless table schemas and the
database's own catalogue (DuckDB, PostgreSQL: ENUM, CHECK, NOT NULL, types). A draft or a run takes
the contract's categories and bounds as written and spends nothing on them; malformed or contradictory
contracts get one clear error naming the file and the entry.
"""

from __future__ import annotations

import json
import textwrap

import duckdb
import numpy as np
import pandas as pd
import pytest
import yaml
from postgres_fixture import postgres_url  # noqa: F401  (a fixture)

import privsynth
from privsynth.cli import EXIT_USAGE, main
from privsynth.discovery import DraftOptions, draft_schema
from privsynth.discovery.checks import check_atoms
from privsynth.discovery.contracts import read_public_sources
from privsynth.errors import ContractError, ParameterError

STATUS = ["placed", "shipped", "completed", "returned", "lost"]

SCHEMA_YML = """\
version: 2
models:
  - name: orders
    description: one row per order (older `tests:` syntax)
    columns:
      - name: order_id
        tests: [unique, not_null]
      - name: status
        data_type: varchar
        tests:
          - not_null
          - accepted_values:
              values: [placed, shipped, completed, returned, lost]
          - relationships:
              to: ref('statuses')
              field: code
      - name: amount
        data_type: numeric(10, 2)
        tests:
          - dbt_utils.accepted_range:
              min_value: 0
              max_value: 500
      - name: qty
        data_type: integer
        tests:
          - dbt_expectations.expect_column_values_to_be_between:
              min_value: 1
              max_value: 5
      - name: priority
        data_type: integer
        tests:
          - accepted_values:
              values: [1, 2, 3]
              quote: false
          - accepted_values:
              values: [1]
              where: "status = 'lost'"
  - name: customers
    description: newer `data_tests:` with `arguments:`
    columns:
      - name: tier
        data_tests:
          - accepted_values:
              arguments:
                values: [gold, silver, bronze]
              config:
                severity: warn
      - name: signup
        data_type: date
        data_tests:
          - dbt_utils.accepted_range:
              arguments:
                min_value: "'2015-01-01'"
                max_value: "cast('2024-12-31' as date)"
          - not_null:
              config:
                severity: warn
"""


@pytest.fixture
def dbt_project(tmp_path):
    (tmp_path / "dbt_project.yml").write_text("name: shop\nversion: '1.0'\nprofile: shop\nmodel-paths: [models]\n")
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "schema.yml").write_text(SCHEMA_YML)
    return tmp_path


def orders(n: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Orders whose rare statuses (3 rows each) a DP threshold would lose; the contract keeps them."""
    rng = np.random.default_rng(seed)
    status = rng.choice(STATUS[:3], n, p=[0.5, 0.3, 0.2]).astype(object)
    status[:3], status[3:6] = "returned", "lost"
    return pd.DataFrame({"order_id": np.arange(n), "status": status,
                         "amount": np.round(rng.uniform(0, 500, n), 2), "qty": rng.integers(1, 6, n),
                         "priority": rng.choice([1, 2, 3], n)})


def _entries(text: str) -> dict[str, dict]:
    return {c["name"]: c for c in yaml.safe_load(text)["columns"]}


def _error(sources, model=None, input_source=None, trust_data_derived=False) -> str:
    with pytest.raises(ContractError) as info:
        read_public_sources(sources, model, input_source, trust_data_derived)
    text = str(info.value)
    assert "\n" not in text
    return text


# ---------------------------------------------------------------- dbt

def test_a_dbt_project_in_both_test_syntaxes(dbt_project):
    schema_yml = str(dbt_project / "models" / "schema.yml")
    old = read_public_sources([schema_yml], "orders")
    assert old.get("status").categories == tuple(STATUS) and old.get("status").nullable is False
    assert old.get("status").type == "categorical"
    assert old.get("status").origin("categories") == f"dbt {schema_yml} accepted_values"
    assert old.get("amount").bounds == (0, 500) and old.get("amount").type == "float"
    assert old.get("qty").bounds == (1, 5) and old.get("qty").type == "integer"
    assert old.get("priority").categories == ("1", "2", "3")  # the `where:` test covers some rows only
    assert old.get("order_id").nullable is False and old.get("order_id").categories is None  # unique: ignored
    new = read_public_sources([str(dbt_project)], "customers")  # the project folder: its model-paths
    assert new.get("tier").categories == ("gold", "silver", "bronze")
    assert new.get("signup").bounds == ("2015-01-01", "2024-12-31") and new.get("signup").type == "date"
    assert new.get("signup").nullable is None  # a not_null warning tolerates nulls
    assert "dbt_utils.accepted_range" in new.get("signup").origin("bounds")


def test_a_dbt_file_with_several_models_needs_one_named(dbt_project):
    schema_yml = str(dbt_project / "models" / "schema.yml")
    text = _error([schema_yml])
    assert schema_yml in text and "--public-model" in text and "customers" in text and "orders" in text
    text = _error([schema_yml], "payments")
    assert schema_yml in text and "'payments'" in text and "not in it" in text


@pytest.mark.parametrize("test, entry, problem", [
    ("accepted_values: {values: placed}", "test accepted_values", "must be a non-empty list"),
    ("dbt_utils.accepted_range: {min_value: 10, max_value: 1}", "test dbt_utils.accepted_range", "min 10 > max 1"),
    ("dbt_utils.accepted_range: {inclusive: true}", "test dbt_utils.accepted_range", "needs min_value or max_value"),
    ("dbt_utils.accepted_range: {min_value: 1, max_value: '2020-01-01'}", "range", "mixes a number and a date"),
    ("accepted_values: [a, b]", "test accepted_values", "arguments must be a mapping"),
])
def test_malformed_dbt_tests_are_refused_naming_file_and_entry(tmp_path, test, entry, problem):
    path = tmp_path / "schema.yml"
    path.write_text("version: 2\nmodels:\n  - name: m\n    columns:\n      - name: c\n        tests:\n          - "
                    f"{test}\n")
    text = _error([str(path)])
    assert str(path) in text and "model 'm', column 'c'" in text and entry in text and problem in text


def test_contradicting_contracts_are_refused_naming_both(dbt_project, tmp_path):
    frictionless = tmp_path / "orders.schema.json"
    frictionless.write_text(json.dumps({"fields": [{"name": "status", "type": "string",
                                                    "constraints": {"enum": ["placed", "shipped"]}}]}))
    text = _error([str(dbt_project / "models" / "schema.yml"), str(frictionless)], "orders")
    assert "'status'" in text and "accepted_values" in text and "constraints.enum" in text


def test_unknown_or_unreadable_sources_are_refused(tmp_path):
    other = tmp_path / "notes.yml"
    other.write_text("title: not a contract\n")
    assert "not a dbt schema.yml" in _error([str(other)]) and str(other) in _error([str(other)])
    assert "no such file" in _error([str(tmp_path / "missing.yml")])
    (tmp_path / "broken.json").write_text("{not json")
    assert "cannot be read" in _error([str(tmp_path / "broken.json")])
    assert "dbt_project.yml" in _error([str(tmp_path)])
    assert "reads the catalogue of a database table" in _error(["db:"], None, str(tmp_path / "orders.csv"))


# ---------------------------------------------------------------- GX and Frictionless

def test_a_suite_saved_by_great_expectations_itself(tmp_path):
    from privsynth.engine.expectations import gx_module

    gx = gx_module()
    suite = gx.ExpectationSuite(name="orders", expectations=[
        gx.expectations.ExpectColumnValuesToBeInSet(column="status", value_set=STATUS),
        gx.expectations.ExpectColumnValuesToBeBetween(column="amount", min_value=0, max_value=500),
        gx.expectations.ExpectColumnValuesToBeBetween(column="qty", min_value=0, max_value=6, strict_min=True,
                                                      strict_max=True),
        gx.expectations.ExpectColumnValuesToNotBeNull(column="status"),
        gx.expectations.ExpectColumnValuesToBeOfType(column="amount", type_="float64"),
        gx.expectations.ExpectColumnValuesToBeInSet(column="priority", value_set=[1, 2], row_condition='status=="lost"',
                                                    condition_parser="pandas"),
        gx.expectations.ExpectColumnValuesToBeUnique(column="order_id"),
    ])
    path = tmp_path / "orders.json"
    path.write_text(json.dumps(suite.to_json_dict(), default=str))
    facts = read_public_sources([str(path)])
    assert facts.get("status").categories == tuple(STATUS) and facts.get("status").nullable is False
    assert facts.get("amount").bounds == (0, 500) and facts.get("amount").type == "float"
    assert facts.get("qty").bounds == (0, 6)  # GX stores the ends as floats: strict float ends stay closed
    assert facts.get("priority") is None and facts.get("order_id") is None
    assert facts.get("status").origin("categories") == f"GX {path} expect_column_values_to_be_in_set"
    bad = json.loads(path.read_text())
    bad["expectations"][1]["kwargs"]["min_value"] = 900
    path.write_text(json.dumps(bad))
    text = _error([str(path)])
    assert str(path) in text and "expectation 1" in text and "'amount'" in text and "min 900 > max 500" in text


def test_the_suite_privsynth_writes_reads_back(tiny_schema, tmp_path):
    from privsynth.engine.expectations import suite_json

    path = tmp_path / "tiny-suite.json"
    path.write_text(json.dumps(suite_json(tiny_schema)))
    facts = read_public_sources([str(path)])
    assert facts.get("size").categories == ("S", "M", "L", "XL") and facts.get("size").nullable is False
    assert facts.get("color").categories == ("red", "green", "blue")  # mostly 0.5: still the listed domain
    assert facts.get("color").nullable is None and facts.get("score").bounds == (0.0, 1.0)
    assert facts.get("member").type == "boolean" and facts.get("member").categories is None
    assert facts.get("age").type is None  # a numeric type list spans integers and floats: no one type
    assert facts.get("id") is None


def test_a_frictionless_table_schema(tmp_path):
    path = tmp_path / "orders.schema.json"
    path.write_text(json.dumps({"fields": [
        {"name": "status", "type": "string", "constraints": {"required": True, "enum": STATUS}},
        {"name": "amount", "type": "number", "constraints": {"minimum": 0, "maximum": 500}},
        {"name": "qty", "type": "integer", "constraints": {"minimum": 1}},
        {"name": "shipped", "type": "date", "constraints": {"minimum": "2020-01-01", "maximum": "2020-12-31"}},
        {"name": "note"},
    ], "primaryKey": "status"}))
    facts = read_public_sources([str(path)])
    assert facts.get("status").categories == tuple(STATUS) and facts.get("status").nullable is False
    assert facts.get("amount").bounds == (0, 500) and facts.get("amount").type == "float"
    assert facts.get("qty").bounds == (1, None) and facts.get("shipped").bounds == ("2020-01-01", "2020-12-31")
    assert facts.get("note") is None
    csv = tmp_path / "orders.csv"
    pd.DataFrame({"status": ["lost"], "amount": [1.5], "qty": [2], "shipped": ["2020-02-02"], "note": ["x"]}).to_csv(
        csv, index=False)
    cols = _entries(draft_schema(str(csv), DraftOptions(name="orders", public=facts)).text)  # no value read
    assert cols["amount"] == {"name": "amount", "type": "float", "nullable": True, "bounds": [0.0, 500.0],
                              "bins": None, "on_out_of_domain": "clip"}
    assert cols["shipped"]["bounds"] == ["2020-01-01", "2020-12-31"] and cols["shipped"]["bin_by"] == "month"
    assert cols["status"]["nullable"] is False and cols["status"]["categories"] == STATUS
    path.write_text(json.dumps({"fields": [{"name": "status", "constraints": {"enum": "placed"}}]}))
    text = _error([str(path)])
    assert str(path) in text and "field 'status', constraints.enum" in text and "non-empty list" in text


# ---------------------------------------------------------------- the database's catalogue

@pytest.mark.parametrize("expression, atoms", [
    ("CHECK (((age >= 0) AND (age <= 120)))", [("age", ">=", 0), ("age", "<=", 120)]),
    ("CHECK (((status)::text = ANY ((ARRAY['a'::character varying, 'b''c'::character varying])::text[])))",
     [("status", "in", ["a", "b'c"])]),
    ("CHECK ((d >= '2020-01-01'::date))", [("d", ">=", "2020-01-01")]),
    ("(d >= CAST('2020-01-01' AS \"DATE\"))", [("d", ">=", "2020-01-01")]),
    ("CHECK ((score >= (0.5)::numeric))", [("score", ">=", 0.5)]),
    ("(age BETWEEN 0 AND 120)", [("age", ">=", 0), ("age", "<=", 120)]),
    ("CHECK ((0 < n))", [("n", ">", 0)]),
    ("CHECK (((a > 0) OR (a < -5)))", []),  # a disjunction is no interval
    ("CHECK ((a < b))", []),
    ("CHECK ((lower(s) = 'x'))", []),
])
def test_simple_checks_are_read_and_others_skipped(expression, atoms):
    assert check_atoms(expression) == atoms


def test_a_duckdb_table_with_enum_check_and_not_null(tmp_path):
    path = tmp_path / "shop.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TYPE state AS ENUM ('placed', 'shipped', 'completed', 'returned', 'lost')")
        con.execute("CREATE TABLE orders (status state NOT NULL, qty INTEGER CHECK (qty BETWEEN 1 AND 5), "
                    "amount DOUBLE CHECK (amount >= 0), priority INTEGER, CHECK (priority > 0 AND priority < 4), "
                    "channel VARCHAR CHECK (channel IN ('web', 'shop')))")
        con.execute("INSERT INTO orders SELECT 'placed', 1 + i % 5, i, 1 + i % 3, 'web' FROM range(50) t(i)")
    source = f"duckdb:{path}?table=orders"
    # ENUM labels and CHECK values may be data-derived (rule 10): read on the owner's word only
    assert "--trust-data-derived-contracts" in _error(["db:"], None, source)
    facts = read_public_sources(["db:"], None, source, trust_data_derived=True)
    assert facts.get("status").categories == tuple(STATUS) and facts.get("status").nullable is False
    assert facts.get("qty").bounds == (1, 5) and facts.get("priority").bounds == (1, 3)
    assert facts.get("amount").bounds == (0, None) and facts.get("channel").categories == ("web", "shop")
    assert "ENUM" in facts.get("status").origin("categories")
    assert set(facts.get("status").derived) == {"categories"} and set(facts.get("qty").derived) == {"bounds"}
    text = draft_schema(source, DraftOptions(name="orders", public=facts)).text  # no epsilon: no value read
    cols = _entries(text)
    assert cols["status"]["categories"] == STATUS and cols["qty"]["bounds"] == [1, 5]  # one level per value
    assert cols["channel"]["categories"] == ["web", "shop"] and "PUBLIC categories (database catalogue" in text
    assert "not found" in _error(["db:"], None, f"duckdb:{path}?table=missing", True)


def test_a_postgres_table_with_enum_and_check(postgres_url):  # noqa: F811
    import psycopg

    with psycopg.connect(postgres_url.replace("+psycopg", ""), autocommit=True) as con:
        con.execute("CREATE TYPE state AS ENUM ('placed', 'shipped', 'completed', 'returned', 'lost')")
        con.execute("CREATE TABLE contract_orders (status state NOT NULL, qty integer CHECK (qty BETWEEN 1 AND 5), "
                    "amount numeric(10, 2) CHECK (amount >= 0 AND amount <= 500), "
                    "channel varchar(10) CHECK (channel IN ('web', 'shop')), placed date CHECK (placed >= "
                    "'2020-01-01'), priority integer CHECK (priority > 0 OR priority IS NULL))")
    facts = read_public_sources(["db:"], None, f"{postgres_url}?table=contract_orders", trust_data_derived=True)
    assert facts.get("status").categories == tuple(STATUS) and facts.get("status").nullable is False
    assert "ENUM type state; DATA-DERIVED" in facts.get("status").origin("categories")
    assert facts.get("qty").bounds == (1, 5) and facts.get("qty").type == "integer"
    assert facts.get("amount").bounds == (0, 500) and facts.get("amount").type == "float"
    assert facts.get("channel").categories == ("web", "shop") and facts.get("placed").bounds == ("2020-01-01", None)
    assert facts.get("priority").bounds is None  # OR: skipped
    assert "not found" in _error(["db:"], None, f"{postgres_url}?table=nowhere", True)


# ---------------------------------------------------------------- the reverse direction: a dbt export

def test_the_dbt_export_reads_back_as_the_schemas_facts(tiny_schema, tmp_path, capsys):
    from privsynth.schema import parse_schema, temporal

    schema = parse_schema({**tiny_schema.model_dump(mode="json", exclude_defaults=True), "columns": [
        *tiny_schema.model_dump(mode="json", exclude_defaults=True)["columns"],
        {"name": "grade", "type": "integer", "values": [1, 2, 5], "on_out_of_domain": "clip"},
        {"name": "day", "type": "date", "bounds": ["2020-01-01", "2020-12-31"], "bin_by": "month"}]})
    schema_file = tmp_path / "tiny.yaml"
    schema_file.write_text(yaml.safe_dump(schema.model_dump(mode="json", exclude_defaults=True)))
    out = tmp_path / "schema.yml"
    assert main(["schema", "expectations", "--schema", str(schema_file), "--format", "dbt", "--output", str(out)]) == 0
    assert "dbt schema.yml" in capsys.readouterr().out
    facts = read_public_sources([str(out)])
    for col in schema.kept_columns:
        fact = facts.get(col.name)
        assert fact.type == col.type and bool(fact.nullable is False) == (not col.nullable), col.name
        if col.values is not None:
            assert [float(v) for v in fact.categories] == list(col.values)
        elif col.type == "categorical":
            assert fact.categories == col.categories
        elif col.bounds is not None:
            assert tuple(temporal.to_unit(x, col.type) for x in fact.bounds) == col.bounds, col.name
    assert facts.get("id") is None  # dropped: no facts
    doc = yaml.safe_load(out.read_text())
    color = next(c for c in doc["models"][0]["columns"] if c["name"] == "color")
    assert color["data_tests"][0]["accepted_values"]["config"] == {"severity": "warn"}  # mapped, not refused


# ---------------------------------------------------------------- end to end

def test_a_draft_takes_the_contracts_domain_and_spends_nothing_on_it(dbt_project, tmp_path, capsys, monkeypatch):
    csv = tmp_path / "orders.csv"
    orders().to_csv(csv, index=False)
    out = tmp_path / "orders.yaml"
    args = ["schema", "draft", "--input", str(csv), "--output", str(out), "--epsilon", "1", "--unlimited",
            "--ledger", f"sqlite:///{tmp_path / 'ledger.sqlite'}", "--public", "models/schema.yml",
            "--public-model", "orders"]
    monkeypatch.chdir(dbt_project)  # the path as a user in the project folder writes it
    assert main(args) == 0
    assert main([*args[:-2], "--force"]) == EXIT_USAGE  # two models, none named
    assert "--public-model" in capsys.readouterr().err
    text = out.read_text()
    cols = _entries(text)
    assert cols["status"]["categories"] == STATUS and "dp_released" not in cols["status"]  # the rare ones kept
    assert cols["priority"]["values"] == [1, 2, 3]  # listed accepted values: a coded column
    assert cols["qty"]["bounds"] == [1, 5] and cols["qty"]["bins"] == [1, 2, 3, 4, 5]  # one level per value
    assert cols["amount"]["bounds"] == [0, 500] and cols["amount"]["dp_released"] == ["bins"]
    assert "PUBLIC categories (dbt models/schema.yml accepted_values)" in text
    assert "PUBLIC bounds (dbt models/schema.yml dbt_utils.accepted_range)" in text
    spent = [line for line in text.splitlines() if line.startswith("#   ")]
    assert not any(line.split(":")[0].strip("# ") in ("status", "priority", "qty") for line in spent), spent
    amount = next(line for line in spent if line.startswith("#   amount:"))
    assert "edges" in amount and "bounds" not in amount and "facts" not in amount  # DP edges in public bounds only


def test_a_run_without_a_schema_reads_the_contract(dbt_project, tmp_path):
    csv = tmp_path / "orders.csv"
    orders().to_csv(csv, index=False)
    release = privsynth.synthesize(str(csv), epsilon=1.0, ledger=f"sqlite:///{tmp_path / 'l.sqlite'}",
                                   unlimited=True, seed=0, output=tmp_path / "run", release_store=tmp_path / "store",
                                   public=[str(dbt_project / "models" / "schema.yml")], public_model="orders")
    cols = _entries((release.run_dir / "schema.yaml").read_text())
    assert cols["status"]["categories"] == STATUS and cols["amount"]["bounds"] == [0, 500]
    discovery = json.loads((release.run_dir / "discovery.json").read_text())
    assert not {"status", "priority", "qty"} & set(discovery["columns_read"])
    synthetic = release.to_pandas()
    # values outside a contract's list would be mapped to <out-of-domain> (on_out_of_domain: category)
    assert set(synthetic["status"].dropna()) <= {*STATUS, "<out-of-domain>"}
    assert synthetic["amount"].between(0, 500).all()


def test_the_cli_refuses_a_malformed_contract_in_one_line(tmp_path, capsys):
    csv = tmp_path / "orders.csv"
    orders(50).to_csv(csv, index=False)
    bad = tmp_path / "schema.yml"
    bad.write_text(textwrap.dedent("""\
        models:
          - name: orders
            columns:
              - name: amount
                tests: [{dbt_utils.accepted_range: {min_value: 9, max_value: 1}}]
        """))
    code = main(["run", "--input", str(csv), "--public", str(bad), "--epsilon", "1", "--unlimited",
                 "--output", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()  # refused by the plan: before the run starts, reads or charges anything
    assert (code == EXIT_USAGE and "\n" not in err and not (tmp_path / "run").exists() and str(bad) in err
            and "'amount'" in err and "min 9 > max 1" in err)


def test_a_run_with_a_schema_refuses_contracts(tiny_schema, tmp_path):
    with pytest.raises(ParameterError, match="--public feeds the discovery of a run without --schema"):
        privsynth.synthesize(pd.DataFrame({"color": ["red"]}), tiny_schema, epsilon=1.0, unlimited=True,
                             public=[str(tmp_path / "schema.yml")], output=tmp_path / "run")
