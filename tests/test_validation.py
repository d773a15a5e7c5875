"""Schema validation with Great Expectations: what passes, what fails and names the column, and
that no data value ever reaches the report (it is the public validation.json)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privsynth.engine.gx_validation import (
    EXPECT_FINITE,
    EXPECT_ROWS,
    EXPECT_UNIQUE_COLUMN_NAMES,
    EXPECT_WHOLE_NUMBERS,
    DataValidationError,
    ValidationReport,
    build_suite,
    check_frame,
    validate_frame,
)
from privsynth.schema import load_schema, parse_schema
from privsynth.schema.encoding import encode_codes

ROOT = Path(__file__).resolve().parents[1]

SCHEMA = parse_schema({
    "name": "toy",
    "columns": [
        {"name": "id", "type": "categorical", "categories": ["unused"], "drop": True},
        {"name": "n", "type": "integer", "bounds": [0, 10], "bins": [0, 5, 10]},
        {"name": "c", "type": "integer", "bounds": [0, 10], "bins": [0, 5, 10], "on_out_of_domain": "clip", "nullable": True},
        {"name": "f", "type": "float", "bounds": [0, 1], "bins": [0, 0.5, 1]},
        {"name": "k", "type": "categorical", "categories": ["a", "b", "1"]},
        {"name": "o", "type": "categorical", "categories": ["a", "b"], "on_out_of_domain": "category", "nullable": True},
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

def test_adult_passes_its_schema():
    schema = load_schema(ROOT / "schemas" / "adult.yaml")
    adult = pd.read_csv(ROOT / "privsynth" / "data" / "adult.csv.gz")
    report = validate_frame(adult, schema)
    assert report.success, report.failure_message()
    assert report.failure_message() == ""
    doc = report.to_json()
    json.dumps(doc)  # serialisable as validation.json
    assert doc["success"] and doc["failed_expectations"] == 0
    assert doc["schema"] == "adult" and doc["schema_hash"] == schema.content_hash()
    checked = {r["column"] for r in doc["results"]}
    assert {c.name for c in schema.kept_columns} <= checked
    report.raise_if_failed()


def test_valid_toy_frame_passes_and_encodes():
    report = validate_frame(frame(), SCHEMA)
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
    report = validate_frame(frame(**overrides), SCHEMA)
    assert report.success, report.failure_message()
    encode_codes(frame(**overrides), SCHEMA)


def test_clip_and_category_columns_accept_out_of_domain_values():
    report = validate_frame(frame(c=[-5.0, 1000.0, np.nan], o=["zz", "a", None], bc=["maybe", 1, 0]), SCHEMA)
    assert report.success, report.failure_message()


# ---------------------------------------------------------------- the suite

def test_build_suite_follows_the_schema():
    suite = build_suite(SCHEMA)
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
            assert list(cfg.kwargs["value_set"]) == ["a", "b", "1"]
    assert "id" not in by_column  # a dropped column is only checked for presence
    assert "expect_column_values_to_be_between" in by_column["n"]
    assert "expect_column_values_to_be_between" not in by_column["c"]  # clip
    assert "expect_column_values_to_be_in_set" in by_column["k"]
    assert "expect_column_values_to_be_in_set" not in by_column["o"]  # category
    assert "expect_column_values_to_be_in_set" in by_column["b"]
    assert "expect_column_values_to_be_in_set" not in by_column["bc"]
    for name in ("n", "c", "f"):
        assert "expect_column_values_to_be_in_type_list" in by_column[name]
    for name in ("n", "f", "k", "b", "bc"):
        assert "expect_column_values_to_not_be_null" in by_column[name]
    for name in ("c", "o"):
        assert "expect_column_values_to_not_be_null" not in by_column[name]


# ---------------------------------------------------------------- failures name the column

def test_missing_column_fails_and_is_named():
    report = validate_frame(frame().drop(columns=["k"]), SCHEMA)
    assert not report.success
    assert failed(report) == {("expect_table_columns_to_match_set", None)}
    assert "missing column(s) ['k']" in report.failure_message()


def test_missing_dropped_column_fails():
    report = validate_frame(frame().drop(columns=["id"]), SCHEMA)
    assert "missing column(s) ['id']" in report.failure_message()


def test_unexpected_column_fails_and_is_named():
    report = validate_frame(frame().assign(extra=1), SCHEMA)
    assert failed(report) == {("expect_table_columns_to_match_set", None)}
    assert "unexpected column(s) ['extra']" in report.failure_message()


def test_column_names_that_may_be_data_are_withheld():
    # A headerless CSV turns its first record into column names: with no schema name among them,
    # they are counted, not listed.
    bad = pd.DataFrame([[7, "SECRET-NAME"]], columns=["123456", "SECRET-NAME"])
    report = validate_frame(bad, SCHEMA)
    assert not report.success
    text = json.dumps(report.to_json()) + report.failure_message()
    assert "SECRET-NAME" not in text and "123456" not in text
    assert "2 (names withheld)" in report.failure_message()


def test_strings_in_numeric_columns_fail():
    # Each column's checks are independent, so one frame covers a fail, a clip and a float column.
    report = validate_frame(frame(n=["1", "2", "x"], c=["1", None, "3"], f=["0.5", "y", "0.1"]), SCHEMA)
    assert not report.success
    assert failed_columns(report) == {"n", "c", "f"}
    for column in ("n", "c", "f"):
        assert ("expect_column_values_to_be_in_type_list", column) in failed(report)
        assert f"column '{column}': dtype" in report.failure_message()
        assert f"is not numeric; expected {SCHEMA.column(column).type} values" in report.failure_message()


def test_mixed_object_numeric_column_fails_with_a_count():
    report = validate_frame(frame(n=pd.Series([1, "x", 3], dtype=object)), SCHEMA)
    outcome = next(r for r in report.failures if r.expectation_type == "expect_column_values_to_be_in_type_list")
    assert outcome.column == "n" and outcome.unexpected_count == 1
    assert failed_columns(report) == {"n"}


def test_booleans_in_numeric_column_fail():
    report = validate_frame(frame(f=[True, False, True]), SCHEMA)
    assert failed(report) == {("expect_column_values_to_be_in_type_list", "f")}


def test_out_of_domain_categorical_fails():
    report = validate_frame(frame(k=["a", "c", "d"]), SCHEMA)
    assert failed(report) == {("expect_column_values_to_be_in_set", "k")}
    outcome = report.failures[0]
    assert outcome.unexpected_count == 2 and outcome.element_count == 3
    assert outcome.unexpected_percent == pytest.approx(200 / 3)
    assert report.failure_message() == "column 'k': 2 value(s) not among the schema's 3 categories"


def test_out_of_bounds_numeric_fails():
    report = validate_frame(frame(n=[-1, 5, 11], f=[0.5, 1.5, 0.0]), SCHEMA)
    assert failed(report) == {("expect_column_values_to_be_between", "n"), ("expect_column_values_to_be_between", "f")}
    assert "column 'n': 2 value(s) outside [0, 10]" in report.failure_message()
    assert "column 'f': 1 value(s) outside [0, 1]" in report.failure_message()


def test_non_boolean_value_fails():
    report = validate_frame(frame(b=["yes", "no", True]), SCHEMA)
    assert failed(report) == {("expect_column_values_to_be_in_set", "b")}
    assert "column 'b': 2 value(s) are not boolean" in report.failure_message()


def test_fractional_value_in_integer_column_fails():
    report = validate_frame(frame(n=[1.5, 2.0, 3.0]), SCHEMA)
    assert failed(report) == {(EXPECT_WHOLE_NUMBERS, "n")}
    assert "column 'n': 1 value(s) are not whole numbers" in report.failure_message()


def test_null_in_non_nullable_columns_fails():
    bad = frame(k=["a", None, "b"], b=pd.array([True, None, False], dtype="boolean"), n=[1.0, np.nan, 2.0], f=[0.5, np.nan, 0.1])
    report = validate_frame(bad, SCHEMA)
    assert failed(report) == {("expect_column_values_to_not_be_null", c) for c in ("k", "b", "n", "f")}
    for column in ("k", "b", "n", "f"):
        assert f"column '{column}': 1 missing value(s) (null/NaN) but the column is not nullable" in report.failure_message()


def test_nan_in_nullable_column_passes():
    assert validate_frame(frame(c=[np.nan, np.nan, 1.0], o=[None, "a", None]), SCHEMA).success


def test_infinity_always_fails():
    # 'c' is a nullable clip column: inf is neither missing nor clippable.
    report = validate_frame(frame(n=[np.inf, 1.0, 2.0], c=[-np.inf, np.inf, np.nan], f=[np.inf, -np.inf, 0.5]), SCHEMA)
    assert {(EXPECT_FINITE, c) for c in ("n", "c", "f")} <= failed(report)
    assert failed_columns(report) == {"n", "c", "f"}
    message = report.failure_message()
    assert "column 'n': 1 value(s) are +inf or -inf" in message
    assert "column 'c': 2 value(s) are +inf or -inf" in message
    assert "column 'f': 2 value(s) are +inf or -inf" in message


def test_all_null_column_fails():
    # nullable or not, a column with no value at all is an ingest fault
    report = validate_frame(frame(c=[None, None, None], o=[None, None, None], k=[None, None, None]), SCHEMA)
    assert {("expect_column_proportion_of_non_null_values_to_be_between", c) for c in ("c", "o", "k")} <= failed(report)
    assert failed_columns(report) == {"c", "o", "k"}
    for column in ("c", "o", "k"):
        assert f"column '{column}': every value is missing" in report.failure_message()


def test_empty_table_fails():
    report = validate_frame(frame().iloc[0:0], SCHEMA)
    assert failed(report) == {(EXPECT_ROWS, None)}
    assert report.failure_message() == "table: 0 rows; expected at least one"


def test_repeated_column_names_fail():
    bad = pd.concat([frame(), frame()[["k"]]], axis=1)
    report = validate_frame(bad, SCHEMA)
    assert (EXPECT_UNIQUE_COLUMN_NAMES, None) in failed(report)
    assert "column name(s) appear more than once: ['k']" in report.failure_message()


def test_several_failures_give_one_line_each():
    report = validate_frame(frame(k=["a", "zz", "b"], n=[1, 2, 99]).drop(columns=["bc"]), SCHEMA)
    lines = report.failure_message().splitlines()
    assert len(lines) == len(report.failures) == 3
    assert lines[0].startswith("table: missing column(s) ['bc']")
    assert any(line.startswith("column 'n':") for line in lines)
    assert any(line.startswith("column 'k':") for line in lines)


def test_check_frame_raises_with_the_failure_lines():
    with pytest.raises(DataValidationError, match="column 'k': 1 value"):
        check_frame(frame(k=["a", "zz", "b"]), SCHEMA)
    assert check_frame(frame(), SCHEMA).success


# ---------------------------------------------------------------- no data values in the report

SECRET = "Zebra-7731-SECRET"


def test_secret_values_never_reach_the_report(caplog, capfd):
    caplog.set_level(logging.DEBUG)  # GX's own logs go to Prefect's log capture in a run
    bad = frame(
        k=["a", SECRET, "b"],                          # out-of-domain category (GX would list it)
        n=["1", SECRET, "3"],                          # string in a numeric fail column (GX raises, quoting it)
        f=pd.Series([0.5, SECRET, 0.1], dtype=object), # mixed object column
        c=[SECRET, None, "3"],                         # string in a numeric clip column
        b=[True, SECRET, False],                       # not boolean
    )
    report = validate_frame(bad, SCHEMA)
    assert failed_columns(report) == {"k", "n", "f", "c", "b"}
    published = json.dumps(report.to_json()) + report.failure_message() + repr(report)
    assert SECRET not in published
    assert "Zebra" not in published and "7731" not in published
    out, err = capfd.readouterr()
    assert SECRET not in caplog.text + out + err


def test_validation_prints_nothing(capfd):
    # GX draws tqdm progress bars on stderr by default; the context turns them off.
    validate_frame(frame(n=[1, 2, 99]), SCHEMA)
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_out_of_bounds_number_is_not_quoted():
    report = validate_frame(frame(n=[1, 2, 987654321]), SCHEMA)
    assert not report.success
    assert "987654321" not in json.dumps(report.to_json()) + report.failure_message() + repr(report)


def test_report_json_fields():
    doc = validate_frame(frame(k=["a", "zz", "b"]), SCHEMA).to_json()
    assert set(doc) == {"success", "schema", "schema_hash", "evaluated_expectations", "failed_expectations", "results"}
    for r in doc["results"]:
        assert set(r) == {"expectation_type", "column", "success", "unexpected_count", "unexpected_percent",
                          "element_count", "message"}
    assert doc["failed_expectations"] == 1 and doc["success"] is False
