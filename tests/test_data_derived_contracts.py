"""Rule 10 (issue 36, finding 6): what is public must be public.

A contract made by profiling the data (a GX suite a profiler or data assistant wrote, an ENUM built with
SELECT DISTINCT, a CHECK written from the observed values) states what the rows hold. D and
D' = D + (age 30.5, color "purple") then give different contracts, and a draft that read them as public
would change its type and categories with no charge and no word. Such contracts are refused, the same way
on D and D', before anything is read or charged, unless the owner passes --trust-data-derived-contracts;
with it the written schema marks every such fact DATA-DERIVED and the console says so once. Column types
a reader inferred from the rows are never used: a CSV is read as text.
"""

from __future__ import annotations

import json

import duckdb
import numpy as np
import pandas as pd
import pytest
import yaml

import privsynth
from privsynth.cli import EXIT_USAGE, main
from privsynth.discovery import DraftOptions, draft_schema
from privsynth.discovery.contract_trust import TRUST_FLAG, gx_profiler_entry
from privsynth.discovery.contracts import read_public_sources
from privsynth.discovery.public import PublicColumn, merge_column
from privsynth.errors import DataDerivedContractError
from privsynth.privacy.ledger import BudgetLedger

COLORS = ["red", "green", "blue"]


def people(n: int = 300, seed: int = 0) -> pd.DataFrame:
    """D: whole ages, three colours."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"age": rng.integers(18, 81, n), "color": rng.choice(COLORS, n)})


def neighbour(frame: pd.DataFrame) -> pd.DataFrame:
    """D' = D plus one record (age 30.5, color "purple")."""
    return pd.concat([frame, pd.DataFrame({"age": [30.5], "color": ["purple"]})], ignore_index=True)


def profiled_suite(frame: pd.DataFrame, meta: dict | None = None) -> dict:
    """A suite as GX 0.x's onboarding data assistant saves it: the observed types, values, min and max."""
    details = {"profiler_details": {"metric_configuration": {"metric_name": "column.distinct_values"},
                                    "num_batches": 1}}
    return {
        "expectation_suite_name": "people.profiled",
        "meta": meta if meta is not None else {
            "great_expectations_version": "0.15.50",
            "citations": [{"citation_date": "2024-05-01T00:00:00.000000Z",
                           "comment": "Created by effective Rule-Based Profiler of OnboardingDataAssistant with the "
                                      "configuration included.",
                           "profiler_config": {"name": "onboarding_data_assistant", "rules": {}}}]},
        "expectations": [
            {"expectation_type": "expect_column_values_to_be_in_type_list",
             "kwargs": {"column": "age", "type_list": [str(frame["age"].dtype)]}, "meta": details},
            {"expectation_type": "expect_column_values_to_be_between",
             "kwargs": {"column": "age", "min_value": float(frame["age"].min()),
                        "max_value": float(frame["age"].max())},
             "meta": details},
            {"expectation_type": "expect_column_values_to_be_in_set",
             "kwargs": {"column": "color", "value_set": sorted(frame["color"].unique().tolist())}, "meta": details},
        ],
    }


def _entries(text: str) -> dict[str, dict]:
    return {c["name"]: c for c in yaml.safe_load(text)["columns"]}


# ---------------------------------------------------------------- what looks data-derived

@pytest.mark.parametrize("meta, expectation_meta, entry", [
    ({"great_expectations_version": "0.13.49", "UserConfigurableProfiler": {
        "created_by": "UserConfigurableProfiler", "batch_kwargs": {"path": "people.csv"}}}, None,
     "meta.UserConfigurableProfiler"),
    ({"great_expectations_version": "0.13.10",
      "BasicSuiteBuilderProfiler": {"created_by": "BasicSuiteBuilderProfiler"}},
     None, "meta.BasicSuiteBuilderProfiler"),
    ({"great_expectations_version": "0.15.50", "citations": [
        {"comment": "Created by effective Rule-Based Profiler of OnboardingDataAssistant",
         "profiler_config": {"name": "onboarding_data_assistant"}}]}, None, "meta.citations[0].profiler_config"),
    ({"great_expectations_version": "0.15.50", "citations": [
        {"comment": "Created suite added via CLI", "batch_request": {"datasource_name": "warehouse",
                                                                      "data_asset_name": "people"}}]}, None,
     "meta.citations[0].batch_request"),
    ({"great_expectations_version": "0.16.0", "citations": [{"comment": "made by the Missingness data assistant"}]},
     None, "meta.citations[0].comment"),
    ({"great_expectations_version": "0.15.50"}, {"profiler_details": {"num_batches": 1}},
     "expectation 0 meta.profiler_details"),
    ({"great_expectations_version": "0.12.0"}, {"BasicDatasetProfiler": {"confidence": "very low"}},
     "expectation 0 meta.BasicDatasetProfiler"),
])
def test_a_profiled_suite_is_refused_in_one_line_naming_the_entry_and_the_option(tmp_path, meta, expectation_meta,
                                                                                    entry):
    suite = {"meta": meta, "expectations": [
        {"expectation_type": "expect_column_values_to_be_in_set",
         "kwargs": {"column": "color", "value_set": COLORS},
         **({"meta": expectation_meta} if expectation_meta else {})}]}
    assert gx_profiler_entry(suite) == entry
    path = tmp_path / "suite.json"
    path.write_text(json.dumps(suite))
    with pytest.raises(DataDerivedContractError) as info:
        read_public_sources([str(path)])
    text = str(info.value)
    assert "\n" not in text and str(path) in text and entry in text and "'color'" in text and TRUST_FLAG in text
    assert "trust_data_derived=True" in text and "red" not in text  # the contract's values are not needed to refuse
    facts = read_public_sources([str(path)], trust_data_derived=True)
    assert facts.get("color").categories == tuple(COLORS) and facts.get("color").derived.keys() == {"categories"}
    assert ("DATA-DERIVED" in facts.get("color").origin("categories")
            and entry in facts.get("color").origin("categories"))


def test_a_suite_written_from_documentation_is_read_without_the_option(tmp_path, tiny_schema):
    from privsynth.engine.expectations import suite_json

    hand = {"meta": {"great_expectations_version": "1.3.0", "notes": "from the data dictionary",
                     "citations": [{"citation_date": "2024-01-01", "comment": "reviewed by the data owner"}]},
            "expectations": [{"type": "expect_column_values_to_be_in_set",
                              "kwargs": {"column": "color", "value_set": COLORS}}]}
    ours = suite_json(tiny_schema)  # what `privsynth schema expectations` writes from a schema
    for i, suite in enumerate((hand, ours)):
        assert gx_profiler_entry(suite) is None
        path = tmp_path / f"suite{i}.json"
        path.write_text(json.dumps(suite))
        facts = read_public_sources([str(path)])
        assert facts.get("color").categories and not facts.get("color").derived


def test_a_fact_also_stated_by_documentation_stands_on_the_documentation():
    derived = PublicColumn("color", categories=tuple(COLORS), origins={"categories": "GX s.json in_set"},
                           derived={"categories": "GX s.json meta.citations[0].profiler_config"})
    documented = PublicColumn("color", categories=tuple(COLORS),
                              origins={"categories": "dbt schema.yml accepted_values"})
    assert not merge_column(derived, documented).derived
    assert merge_column(derived, documented).origin("categories") == "dbt schema.yml accepted_values"
    assert merge_column(documented, derived).derived == {}
    assert merge_column(PublicColumn("color"), derived).derived == derived.derived


# ---------------------------------------------------------------- D and D': the neighbour test

def test_a_profiled_suite_of_d_or_d_prime_is_refused_alike_and_the_draft_is_the_same(tmp_path, capsys):
    d, d_prime = people(), neighbour(people())
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    suite = tmp_path / "people-suite.json"
    outcomes = []
    for name, frame in (("d", d), ("d_prime", d_prime)):
        csv = tmp_path / f"{name}.csv"
        frame.to_csv(csv, index=False)
        profile = profiled_suite(frame)
        suite.write_text(json.dumps(profile))  # the same contract path, profiled from each table
        # the profiled contracts differ exactly as the finding says: a type and a category
        assert profile["expectations"][0]["kwargs"]["type_list"] == (["int64"] if name == "d" else ["float64"])
        out = tmp_path / f"{name}.yaml"
        base = ["schema", "draft", "--input", str(csv), "--output", str(out), "--name", "people"]
        code = main([*base, "--public", str(suite), "--epsilon", "1", "--unlimited", "--ledger", ledger])
        err = capsys.readouterr().err.strip()
        assert code == EXIT_USAGE and "\n" not in err and not out.exists()  # refused before anything is written
        assert "meta.citations[0].profiler_config" in err and TRUST_FLAG in err and str(suite) in err
        assert main(base) == 0  # the owner drafts without the contract: CSV text, no value read
        capsys.readouterr()
        outcomes.append((err, _entries(out.read_text())))
    (err_d, cols_d), (err_d_prime, cols_d_prime) = outcomes
    assert err_d == err_d_prime  # the refusal says nothing about the rows
    assert cols_d == cols_d_prime  # the same drafted types and categories on D and D'
    assert cols_d["age"]["type"] == "categorical" and cols_d["color"]["categories"] == []  # text, TODO: never sniffed
    assert BudgetLedger(ledger).status() == []  # nothing charged, to any dataset


def test_with_the_option_the_schema_marks_each_fact_data_derived(tmp_path, capsys):
    csv, suite, out = tmp_path / "d.csv", tmp_path / "suite.json", tmp_path / "d.yaml"
    people().to_csv(csv, index=False)
    suite.write_text(json.dumps(profiled_suite(people())))
    assert main(["schema", "draft", "--input", str(csv), "--output", str(out), "--public", str(suite),
                 TRUST_FLAG]) == 0
    err = capsys.readouterr().err
    assert err.count("DP guarantee does not cover") == 1 and "age type" in err and "color categories" in err
    text = out.read_text()
    cols = _entries(text)
    assert cols["color"]["categories"] == sorted(COLORS) and cols["age"]["type"] == "integer"  # the owner's word, used
    assert cols["age"]["bounds"] == [18, 80]
    comments = [line for line in text.splitlines() if line.lstrip().startswith("#")]
    for fact in ("PUBLIC type", "PUBLIC categories", "PUBLIC bounds"):
        line = next(c for c in comments if fact in c)
        assert "DATA-DERIVED" in line and "meta.citations[0].profiler_config" in line, line
    assert any(c.startswith("# DATA-DERIVED PUBLIC FACTS") for c in comments)
    assert any(c.startswith("#   color: categories (GX") for c in comments)


# ---------------------------------------------------------------- the database catalogue

def _warehouse(path, frame: pd.DataFrame) -> str:
    """A DuckDB table whose ENUM was built from the data (SELECT DISTINCT), and a CHECK from its min and max."""
    with duckdb.connect(str(path)) as con:
        con.register("src", frame)
        con.execute("CREATE TYPE colour AS ENUM (SELECT DISTINCT color FROM src ORDER BY color)")
        low, high = float(frame["age"].min()), float(frame["age"].max())
        con.execute(f"CREATE TABLE people (age DOUBLE NOT NULL CHECK (age BETWEEN {low} AND {high}), color colour)")
        con.execute("INSERT INTO people SELECT age, color FROM src")
    return f"duckdb:{path}?table=people"


def test_catalogue_enum_and_check_values_need_the_option_on_d_and_d_prime_alike(tmp_path, capsys):
    errors, drafts = [], []
    for name, frame in (("d", people()), ("d_prime", neighbour(people()))):
        source = _warehouse(tmp_path / f"{name}.duckdb", frame)
        out = tmp_path / f"{name}.yaml"
        base = ["schema", "draft", "--input", source, "--output", str(out), "--name", "people"]
        assert main([*base, "--public", "db:"]) == EXIT_USAGE and not out.exists()
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and "CHECK" in err and TRUST_FLAG in err
        errors.append(err.replace(name + ".duckdb", "X.duckdb"))
        assert main(base) == 0  # declared types only: the catalogue's structure
        capsys.readouterr()
        drafts.append(_entries(out.read_text()))
    assert errors[0] == errors[1] and drafts[0] == drafts[1]
    source = _warehouse(tmp_path / "trusted.duckdb", people())
    facts = read_public_sources(["db:"], None, source, trust_data_derived=True)
    assert facts.get("color").categories == tuple(sorted(COLORS)) and facts.get("color").type == "categorical"
    assert set(facts.get("color").derived) == {"categories"} and set(facts.get("age").derived) == {"bounds"}
    assert facts.get("age").nullable is False and "nullable" not in facts.get("age").derived  # NOT NULL: structure
    text = draft_schema(source, DraftOptions(name="people", public=facts)).text
    assert "SELECT DISTINCT" in text and "DATA-DERIVED PUBLIC FACTS" in text


def test_a_catalogue_with_types_and_not_null_only_needs_no_option(tmp_path):
    path = tmp_path / "plain.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE people (age INTEGER NOT NULL, color VARCHAR)")
    facts = read_public_sources(["db:"], None, f"duckdb:{path}?table=people")
    assert facts.get("age").type == "integer" and facts.get("age").nullable is False and not facts.get("age").derived


# ---------------------------------------------------------------- a run without a schema

def test_a_run_refuses_a_profiled_suite_before_anything_and_marks_it_when_trusted(tmp_path):
    csv, suite = tmp_path / "d.csv", tmp_path / "suite.json"
    people().to_csv(csv, index=False)
    suite.write_text(json.dumps(profiled_suite(people())))
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    common = dict(epsilon=1.0, ledger=ledger, unlimited=True, seed=0, dataset="people", public=[str(suite)],
                  release_store=tmp_path / "store")
    with pytest.raises(DataDerivedContractError, match="profiler_config"):
        privsynth.synthesize(str(csv), output=tmp_path / "refused", **common)
    assert not (tmp_path / "refused").exists() and BudgetLedger(ledger).status() == []
    lines: list[str] = []
    release = privsynth.synthesize(str(csv), output=tmp_path / "run", trust_data_derived=True, progress=lines.append,
                                   **common)
    text = (release.run_dir / "schema.yaml").read_text()
    assert _entries(text)["color"]["categories"] == sorted(COLORS) and "DATA-DERIVED PUBLIC FACTS" in text
    assert sum("DP guarantee does not cover" in line for line in lines) == 1


# ---------------------------------------------------------------- types a reader inferred from the rows

def test_a_pandas_object_column_is_text_never_typed_by_a_sniffer():
    """DuckDB types a pandas object column from a sample of its values (30 and 31: BIGINT; plus 30.5: DOUBLE).
    The draft reads such a column as text, so D and D' declare the same types (a DP pass types it, charged)."""
    d = people().astype({"age": object})
    d_prime = neighbour(people()).astype({"age": object})
    d_prime["age"] = pd.Series([int(v) if float(v).is_integer() else v for v in d_prime["age"]],
                               dtype=object)  # Python ints, and the 30.5
    texts = [draft_schema(frame, DraftOptions(name="people")).text for frame in (d, d_prime)]
    assert texts[0] == texts[1]
    assert _entries(texts[0])["age"]["type"] == "categorical" and "declared type: string" in texts[0]
