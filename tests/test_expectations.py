"""The schema's Great Expectations suite, where users meet it: written by `privsynth schema expectations`,
loaded by GX 1.x, validating the bundled Adult table and a release of it; and every run's check of its own
synthetic table (synthetic-validation.json), which reports a table that fails its schema."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import great_expectations as gx
import pandas as pd
import pyarrow as pa
import pytest

import privsynth
from privsynth.cli import main
from privsynth.engine.expectations import gx_suite, schema_expectations, suite_json
from privsynth.engine.gx_run import gx_validate
from privsynth.run.stages import validate_synthetic
from privsynth.schema import load_schema

DATA = Path(privsynth.__file__).parent / "data"
ADULT_YAML = DATA / "adult.yaml"


@pytest.fixture(scope="module")
def adult() -> pd.DataFrame:
    # As a user reads it: the bundled file marks a missing value ("?" in the UCI original) with an empty
    # field, which pandas reads as NaN; the nullable columns (workclass, occupation, native_country) allow it.
    return pd.read_csv(DATA / "adult.csv.gz")


def validate_with_gx(suite: gx.ExpectationSuite, frame: pd.DataFrame):
    """A team's own GX validation: ephemeral context, pandas datasource, the suite as loaded."""
    context = gx.get_context(mode="ephemeral")
    batch = (context.data_sources.add_pandas("team").add_dataframe_asset("adult")
             .add_batch_definition_whole_dataframe("all").get_batch(batch_parameters={"dataframe": frame}))
    return batch.validate(suite)


@pytest.mark.slow  # a small release of Adult (~20 s with GX's import)
def test_the_written_suite_loads_in_gx_and_validates_adult_and_a_release_of_it(adult, tmp_path, capsys):
    assert main(["schema", "expectations", "--schema", str(ADULT_YAML), "--output", str(tmp_path / "suite.json")]) == 0
    assert "45 expectations" in capsys.readouterr().out
    suite = gx.ExpectationSuite(**json.loads((tmp_path / "suite.json").read_text()))
    schema = load_schema(ADULT_YAML)
    assert len(suite.expectations) == sum(1 for e in schema_expectations(schema) if e.gx)

    result = validate_with_gx(suite, adult)
    assert result.success, [r.expectation_config.type for r in result.results if not r.success]
    assert len(result.results) == len(suite.expectations)

    release = privsynth.synthesize(adult.head(2000), ADULT_YAML, mechanism="microaggregation", rows=500, seed=0,
                                   unlimited=True, output=tmp_path / "run")
    synthetic = release.to_pandas()
    assert len(synthetic) == 500
    assert validate_with_gx(suite, synthetic).success
    # and the run checked it itself, against the same suite
    doc = json.loads(Path(release.run_dir, "synthetic-validation.json").read_text())
    assert doc["success"] and doc["failed_expectations"] == 0
    assert doc["evaluated_expectations"] == len(suite.expectations)
    manifest = json.loads(Path(release.run_dir, "manifest.json").read_text())
    assert manifest["stages"]["rounding"]["synthetic_valid"] is True
    assert "synthetic-validation.json" in manifest["stages"]["rounding"]["artifacts"]

    broken = synthetic.assign(education_num=synthetic["education_num"] + 100)  # outside [1, 17] (fail)
    result = validate_with_gx(suite, broken)
    assert not result.success
    assert {r.expectation_config.kwargs.get("column") for r in result.results if not r.success} == {"education_num"}


def test_the_cli_prints_the_suite_on_stdout(capsys):
    assert main(["schema", "expectations", "--schema", str(ADULT_YAML)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == suite_json(load_schema(ADULT_YAML))
    assert printed["name"] == "privsynth-adult"
    kinds = {e["type"] for e in printed["expectations"]}
    assert {"expect_table_row_count_to_be_between", "expect_table_columns_to_match_set",
            "expect_column_values_to_be_in_type_list", "expect_column_values_to_be_between",
            "expect_column_values_to_be_in_set", "expect_column_values_to_not_be_null",
            "expect_column_proportion_of_non_null_values_to_be_between"} == kinds


def test_gx_runs_the_suite_on_adult_with_the_same_outcomes_as_the_engine(adult):
    from privsynth.engine import open_source

    schema = load_schema(ADULT_YAML)
    ours = gx_validate(adult, schema)
    assert ours.success, ours.failure_message()
    with open_source(str(DATA / "adult.csv.gz"), schema) as src:
        engine = {(r.expectation_type, r.column): r.success for r in src.validate().results}
    assert all(engine[r.expectation_type, r.column] for r in ours.results)
    assert len(ours.results) == len(gx_suite(schema).expectations) < len(engine)


class _Folder:
    def __init__(self, path: Path):
        self.path = path

    def file(self, name: str) -> Path:
        return self.path / name


class _Context:
    def __init__(self, schema, path: Path):
        self.schema, self.folder = schema, _Folder(path)


def test_a_synthetic_table_that_fails_its_schema_is_reported_as_a_bug(adult, tmp_path, caplog):
    schema = load_schema(ADULT_YAML)
    table = pa.Table.from_pandas(adult.head(300).assign(sex="SECRET-not-a-sex"), preserve_index=False)
    with caplog.at_level(logging.WARNING, logger="privsynth.run"):
        assert validate_synthetic(_Context(schema, tmp_path), table) is False
    assert "BUG: the synthetic table fails its own schema: column 'sex': 300 value(s) not among the schema's 2 " \
           "categories" in caplog.text
    doc = json.loads((tmp_path / "synthetic-validation.json").read_text())
    assert doc["success"] is False and doc["failed_expectations"] == 1
    failed = [r for r in doc["results"] if not r["success"]]
    assert [(r["expectation_type"], r["column"], r["unexpected_count"]) for r in failed] == [
        ("expect_column_values_to_be_in_set", "sex", 300)]
    assert "SECRET" not in json.dumps(doc) + caplog.text  # whitelisted results: no value samples
    assert ({r["expectation_type"] for r in doc["not_run_by_gx"]}
            >= {"privsynth_expect_column_values_to_be_whole_numbers"})
    # a table that passes is recorded as such
    assert validate_synthetic(_Context(schema, tmp_path), pa.Table.from_pandas(adult.head(300), preserve_index=False))


def test_a_synthetic_table_holds_the_kept_columns_only(tiny_schema, tiny_frame):
    schema = tiny_schema  # 'id' is dropped: the input has it, a release never does
    kept = tiny_frame.drop(columns=["id"])
    assert gx_validate(kept, schema, synthetic=True).success
    assert not gx_validate(tiny_frame, schema, synthetic=True).success  # a dropped column in a release: a bug
    failed = gx_validate(kept, schema).failures
    assert [r.message for r in failed] == ["table: missing column(s) ['id']; expected exactly the schema's "
                                           f"{len(schema.columns)} columns"]
