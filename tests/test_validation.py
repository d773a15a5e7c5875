"""The schema's expectations run both ways, in place by the engine (every run's validate stage) and by
Great Expectations (every run's synthetic table): what passes, what fails and names the column, and
that no data value ever reaches the report (the engine's is the public validation.json)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privsynth.engine import open_source
from privsynth.engine.expectations import (
    FINITE,
    ROWS,
    WHOLE_NUMBERS,
    ValidationReport,
    gx_suite,
    schema_expectations,
)
from privsynth.engine.gx_run import gx_validate
from privsynth.io import InputError
from privsynth.schema import load_schema, parse_schema
from privsynth.schema.encoding import encode_codes


def engine_validate(table, schema) -> ValidationReport:
    with open_source(table, schema) as src:
        return src.validate()


WAYS = {"engine": engine_validate, "gx": gx_validate}


@pytest.fixture(params=sorted(WAYS))
def validate(request):
    return WAYS[request.param]


ROOT = Path(__file__).resolve().parents[1]

SCHEMA = parse_schema({
    "name": "toy",
    "columns": [
        {"name": "id", "type": "categorical", "categories": ["unused"], "drop": True},
        {"name": "n", "type": "integer", "bounds": [0, 10], "bins": [0, 5, 10]},
        {"name": "c", "type": "integer", "bounds": [0, 10], "bins": [0, 5, 10], "on_out_of_domain": "clip",
         "nullable": True},
        {"name": "f", "type": "float", "bounds": [0, 1], "bins": [0, 0.5, 1]},
        {"name": "k", "type": "categorical", "categories": ["a", "b", "1"]},
        {"name": "o", "type": "categorical", "categories": ["a", "b"], "on_out_of_domain": "category",
         "nullable": True},
        {"name": "b", "type": "boolean"},
        {"name": "bc", "type": "boolean", "on_out_of_domain": "category"},
    ],
})


def frame(**overrides) -> pd.DataFrame:
    """A valid 3-row frame for SCHEMA, with some columns replaced."""
    data = {
        "id": ["r1", "r2", "r3"],
        "n": [0, 5, 10],
        "c": [1.0, np.nan, 3.0],
        "f": [0.0, 0.25, 1.0],
        "k": ["a", "b", "1"],
        "o": ["a", None, "b"],
        "b": [True, False, True],
        "bc": [True, False, False],
    }
    data.update(overrides)
    return pd.DataFrame(data)


def failed(report: ValidationReport) -> set[tuple[str, str | None]]:
    return {(r.expectation_type, r.column) for r in report.failures}


def failed_columns(report: ValidationReport) -> set[str | None]:
    return {r.column for r in report.failures}


# ---------------------------------------------------------------- passing data

def test_adult_passes_its_schema(validate):
    schema = load_schema(ROOT / "privsynth" / "data" / "adult.yaml")
    adult = pd.read_csv(ROOT / "privsynth" / "data" / "adult.csv.gz")
    report = validate(adult, schema)
    assert report.success, report.failure_message()
    assert report.failure_message() == ""
    doc = report.to_json()
    json.dumps(doc)  # serialisable as validation.json
    assert doc["success"] and doc["failed_expectations"] == 0
    assert doc["schema"] == "adult" and doc["schema_hash"] == schema.content_hash()
    checked = {r["column"] for r in doc["results"]}
    assert {c.name for c in schema.kept_columns} <= checked


def test_valid_toy_frame_passes_and_encodes(validate):
    report = validate(frame(), SCHEMA)
    assert report.success, report.failure_message()
    # What validation accepts, the encoder accepts.
    codes = encode_codes(frame(), SCHEMA)
    assert codes.shape == (3, len(SCHEMA.kept_columns))


@pytest.mark.parametrize("overrides", [
    # pandas nullable integers; boolean spellings; pandas Categorical
    {"n": pd.array([0, 5, 10], dtype="Int64"), "b": ["true", "False", "1"], "k": pd.Categorical(["a", "b", "a"])},
    # Python ints in an object column (SQL sources); booleans as 1/0; categories compared as
    # strings, as the encoder does
    {"n": pd.Series([0, 5, 10], dtype=object), "b": [1, 0, 1], "k": [1, 1, 1]},
    # integer-valued floats in an integer column; pandas boolean dtype
    {"n": [0.0, 5.0, 10.0], "b": pd.array([True, False, True], dtype="boolean")},
])
def test_equivalent_encodings_pass(overrides):
    report = engine_validate(frame(**overrides), SCHEMA)
    assert report.success, report.failure_message()
    encode_codes(frame(**overrides), SCHEMA)


def test_clip_and_category_columns_accept_out_of_domain_values(validate):
    report = validate(frame(c=[-5.0, 1000.0, np.nan], o=["zz", "a", None], bc=["maybe", 1, 0]), SCHEMA)
    assert report.success, report.failure_message()


def test_the_suite_follows_the_schema():
    suite = gx_suite(SCHEMA)
    by_column: dict[str | None, list[str]] = {}
    for e in suite.expectations:
        cfg = e.configuration
        by_column.setdefault(cfg.kwargs.get("column"), []).append(cfg.type)
        if cfg.type == "expect_table_columns_to_match_set":
            assert set(cfg.kwargs["column_set"]) == set(SCHEMA.column_names)  # dropped 'id' included
            assert e.exact_match is True
        if cfg.type == "expect_column_values_to_be_between":
            assert (cfg.kwargs["min_value"], cfg.kwargs["max_value"]) == SCHEMA.column(cfg.kwargs["column"]).bounds
        if cfg.type == "expect_column_values_to_be_in_set" and cfg.kwargs["column"] == "k":
            assert list(cfg.kwargs["value_set"]) == ["a", "b", "1"] and cfg.kwargs.get("mostly") is None
        if cfg.type == "expect_column_values_to_be_in_set" and cfg.kwargs["column"] == "o":
            assert list(cfg.kwargs["value_set"]) == ["a", "b"] and cfg.kwargs["mostly"] == 0.5  # category: mostly known
        if cfg.type == "expect_table_row_count_to_be_between":
            assert cfg.kwargs["min_value"] == 1
    assert "id" not in by_column  # a dropped column is only checked for presence
    assert "expect_column_values_to_be_between" in by_column["n"]
    assert "expect_column_values_to_be_between" not in by_column["c"]  # clip
    assert "expect_column_values_to_be_in_set" in by_column["k"]
    assert "expect_column_values_to_be_in_set" in by_column["b"]
    assert "expect_column_values_to_be_in_set" not in by_column["bc"]
    for name in ("n", "c", "f"):
        assert "expect_column_values_to_be_in_type_list" in by_column[name]
    for name in ("n", "f", "k", "b", "bc"):
        assert "expect_column_values_to_not_be_null" in by_column[name]
    for name in ("c", "o"):
        assert "expect_column_values_to_not_be_null" not in by_column[name]
    # One definition: the suite is exactly the expectations GX can express, in the same order.
    listed = [(e.kind, e.column) for e in schema_expectations(SCHEMA) if e.gx]
    assert [(e.meta["privsynth"], e.configuration.kwargs.get("column")) for e in suite.expectations] == listed
    assert all(e.engine_only for e in schema_expectations(SCHEMA) if not e.gx)


# ---------------------------------------------------------------- failures name the column

def test_missing_column_fails_and_is_named():
    report = gx_validate(frame().drop(columns=["k"]), SCHEMA)
    assert not report.success
    assert failed(report) == {("expect_table_columns_to_match_set", None)}
    assert "missing column(s) ['k']" in report.failure_message()


def test_missing_dropped_column_fails():
    report = gx_validate(frame().drop(columns=["id"]), SCHEMA)
    assert "missing column(s) ['id']" in report.failure_message()


def test_unexpected_column_fails_and_is_named():
    report = gx_validate(frame().assign(extra=1), SCHEMA)
    assert failed(report) == {("expect_table_columns_to_match_set", None)}
    assert "unexpected column(s) ['extra']" in report.failure_message()


def test_column_names_that_may_be_data_are_withheld():
    # A headerless CSV turns its first record into column names: with no schema name among them,
    # they are counted, not listed.
    bad = pd.DataFrame([[7, "SECRET-NAME"]], columns=["123456", "SECRET-NAME"])
    report = gx_validate(bad, SCHEMA)
    assert not report.success
    text = json.dumps(report.to_json()) + report.failure_message()
    assert "SECRET-NAME" not in text and "123456" not in text
    assert "2 (names withheld)" in report.failure_message()


def test_strings_in_numeric_columns_fail(validate):
    # Each column's checks are independent, so one frame covers a fail, a clip and a float column.
    report = validate(frame(n=["1", "2", "x"], c=["1", None, "z"], f=["0.5", "y", "0.1"]), SCHEMA)
    assert not report.success
    assert failed_columns(report) == {"n", "c", "f"}
    for column in ("n", "c", "f"):
        assert ("expect_column_values_to_be_in_type_list", column) in failed(report)
        assert f"value(s) are not numbers; expected {SCHEMA.column(column).type} values" in report.failure_message()


def test_mixed_object_numeric_column_fails_with_a_count():
    report = gx_validate(frame(n=pd.Series([1, "x", 3], dtype=object)), SCHEMA)
    outcome = next(r for r in report.failures if r.expectation_type == "expect_column_values_to_be_in_type_list")
    assert outcome.column == "n" and outcome.unexpected_count == 1
    assert failed_columns(report) == {"n"}


def test_booleans_in_numeric_column_fail():
    report = gx_validate(frame(f=[True, False, True]), SCHEMA)
    assert failed(report) == {("expect_column_values_to_be_in_type_list", "f")}
    with pytest.raises(InputError, match="column 'f' has type boolean; the schema says float"):
        engine_validate(frame(f=[True, False, True]), SCHEMA)  # refused when opened


def test_out_of_domain_categorical_fails(validate):
    report = validate(frame(k=["a", "c", "d"]), SCHEMA)
    assert failed(report) == {("expect_column_values_to_be_in_set", "k")}
    outcome = report.failures[0]
    assert outcome.unexpected_count == 2 and outcome.element_count == 3
    assert outcome.unexpected_percent == pytest.approx(200 / 3)
    assert report.failure_message() == "column 'k': 2 value(s) not among the schema's 3 categories"


def test_out_of_bounds_numeric_fails(validate):
    report = validate(frame(n=[-1, 5, 11], f=[0.5, 1.5, 0.0]), SCHEMA)
    assert failed(report) == {("expect_column_values_to_be_between", "n"), ("expect_column_values_to_be_between", "f")}
    assert "column 'n': 2 value(s) outside [0, 10]" in report.failure_message()
    assert "column 'f': 1 value(s) outside [0, 1]" in report.failure_message()


def test_non_boolean_value_fails(validate):
    report = validate(frame(b=["yes", "no", True]), SCHEMA)
    assert failed(report) == {("expect_column_values_to_be_in_set", "b")}
    assert "column 'b': 2 value(s) are not boolean" in report.failure_message()


def test_fractional_value_in_integer_column_fails():
    report = engine_validate(frame(n=[1.5, 2.0, 3.0]), SCHEMA)
    assert failed(report) == {(WHOLE_NUMBERS, "n")}
    assert "column 'n': 1 value(s) are not whole numbers" in report.failure_message()


def test_null_in_non_nullable_columns_fails(validate):
    bad = frame(k=["a", None, "b"], b=pd.array([True, None, False], dtype="boolean"), n=[1.0, np.nan, 2.0],
                f=[0.5, np.nan, 0.1])
    report = validate(bad, SCHEMA)
    assert failed(report) == {("expect_column_values_to_not_be_null", c) for c in ("k", "b", "n", "f")}
    for column in ("k", "b", "n", "f"):
        assert (f"column '{column}': 1 missing value(s) (null/NaN) but the column is not nullable"
                in report.failure_message())


def test_nan_in_nullable_column_passes(validate):
    assert validate(frame(c=[np.nan, np.nan, 1.0], o=[None, "a", None]), SCHEMA).success


def test_infinity_always_fails():
    # 'c' is a nullable clip column: inf is neither missing nor clippable.
    report = engine_validate(frame(n=[np.inf, 1.0, 2.0], c=[-np.inf, np.inf, np.nan], f=[np.inf, -np.inf, 0.5]), SCHEMA)
    assert {(FINITE, c) for c in ("n", "c", "f")} <= failed(report)
    assert failed_columns(report) == {"n", "c", "f"}
    message = report.failure_message()
    assert "column 'n': 1 value(s) are +inf or -inf" in message
    assert "column 'c': 2 value(s) are +inf or -inf" in message
    assert "column 'f': 2 value(s) are +inf or -inf" in message


def test_all_null_column_fails(validate):
    # nullable or not, a column with no value at all is an ingest fault
    report = validate(frame(c=[None, None, None], o=[None, None, None], k=[None, None, None]), SCHEMA)
    assert {("expect_column_proportion_of_non_null_values_to_be_between", c) for c in ("c", "o", "k")} <= failed(report)
    assert failed_columns(report) == {"c", "o", "k"}
    for column in ("c", "o", "k"):
        assert f"column '{column}': every value is missing" in report.failure_message()


def test_empty_table_fails(validate):
    report = validate(frame().iloc[0:0], SCHEMA)
    assert failed(report) == {(ROWS, None)}
    assert report.failure_message() == "table: 0 rows; expected at least one"


def test_repeated_column_names_are_refused_before_any_row_is_read():
    bad = pd.concat([frame(), frame()[["k"]]], axis=1)
    with pytest.raises(InputError, match="k"):
        engine_validate(bad, SCHEMA)


def test_several_failures_give_one_line_each():
    report = gx_validate(frame(k=["a", "zz", "b"], n=[1, 2, 99]).drop(columns=["bc"]), SCHEMA)
    lines = report.failure_message().splitlines()
    assert len(lines) == len(report.failures) == 3
    assert lines[0].startswith("table: missing column(s) ['bc']")
    assert any(line.startswith("column 'n':") for line in lines)
    assert any(line.startswith("column 'k':") for line in lines)


def test_the_public_form_has_no_count(validate):
    report = validate(frame(k=["a", "zz", "b"]), SCHEMA)
    assert report.failure_message() == "column 'k': 1 value(s) not among the schema's 3 categories"
    assert report.public_failure_message() == "column 'k': some value(s) not among the schema's 3 categories"
    assert all(set(r) == {"expectation_type", "column", "success", "message"} for r in report.public_json()["results"])


# ---------------------------------------------------------------- no data values in the report

SECRET = "Zebra-7731-SECRET"


def test_secret_values_never_reach_the_report(validate, caplog, capfd):
    caplog.set_level(logging.DEBUG)  # GX's own logs go to Prefect's log capture in a run
    bad = frame(
        k=["a", SECRET, "b"],                          # out-of-domain category (GX would list it)
        n=["1", SECRET, "3"],                          # string in a numeric fail column (GX raises, quoting it)
        f=pd.Series([0.5, SECRET, 0.1], dtype=object), # mixed object column
        c=[SECRET, None, "3"],                         # string in a numeric clip column
        b=[True, SECRET, False],                       # not boolean
    )
    try:
        report = validate(bad, SCHEMA)
    except InputError as err:  # the engine refuses a column type it cannot read, naming no value
        published = str(err)
    else:
        assert failed_columns(report) == {"k", "n", "f", "c", "b"}
        published = json.dumps(report.to_json()) + report.failure_message() + repr(report)
    assert SECRET not in published
    assert "Zebra" not in published and "7731" not in published
    out, err = capfd.readouterr()
    assert SECRET not in caplog.text + out + err


def test_validation_prints_nothing(validate, capfd):
    # GX draws tqdm progress bars on stderr by default; the context turns them off.
    validate(frame(n=[1, 2, 99]), SCHEMA)
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_out_of_bounds_number_is_not_quoted(validate):
    report = validate(frame(n=[1, 2, 987654321]), SCHEMA)
    assert not report.success
    assert "987654321" not in json.dumps(report.to_json()) + report.failure_message() + repr(report)


def test_report_json_fields(validate):
    doc = validate(frame(k=["a", "zz", "b"]), SCHEMA).to_json()
    assert set(doc) == {"success", "schema", "schema_hash", "evaluated_expectations", "failed_expectations", "results"}
    for r in doc["results"]:
        assert set(r) == {"expectation_type", "column", "success", "unexpected_count", "unexpected_percent",
                          "element_count", "message"}
    assert doc["failed_expectations"] == 1 and doc["success"] is False
