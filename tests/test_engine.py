"""The statistics engine: codes identical to the pandas path on every source form, faults and validation
as value-free messages, marginals by query equal to marginals from the histogram."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from conftest import ADULT_DATA, ADULT_SCHEMA

from privsynth.engine import EngineOptions, open_source
from privsynth.engine.binning import binning
from privsynth.io import InputError
from privsynth.schema import load_schema, parse_schema
from privsynth.schema.encoding import domain_of, encode_codes
from privsynth.schema.workload import Histogram

SECRET = "Zq7-SECRET-hunter2"

TOY = parse_schema({"name": "toy", "columns": [
    {"name": "id", "type": "categorical", "drop": True},
    {"name": "color", "type": "categorical", "categories": ["red", "green", "blue"], "nullable": True,
     "on_out_of_domain": "category"},
    {"name": "grade", "type": "categorical", "categories": ["1", "2", "3"], "nullable": True},
    {"name": "age", "type": "integer", "bounds": [0, 100], "bins": [0, 18, 40, 65, 100], "on_out_of_domain": "clip"},
    {"name": "score", "type": "float", "bounds": [0.0, 1.0], "bins": [0.0, 0.25, 0.5, 1.0], "nullable": True},
    {"name": "member", "type": "boolean", "nullable": True},
    {"name": "flag", "type": "boolean", "on_out_of_domain": "category"},
]})


def toy_frame() -> pd.DataFrame:
    """Nulls, out-of-domain categories, values to clip on both sides, bin edges, booleans in several spellings."""
    return pd.DataFrame({
        "id": [f"p{i}" for i in range(12)],
        "color": ["red", "green", "blue", None, "purple", "red", "green", "blue", "RED", "red", None, "blue"],
        "grade": pd.array([1, 2, 3, None, 1, 2, 3, 1, None, 2, 3, 1], dtype="Int64"),
        "age": [-5, 0, 17, 18, 39, 40, 64, 65, 99, 100, 150, 30],
        "score": [0.0, 0.25, 0.2499, 0.5, 1.0, None, 0.75, 0.1, 0.99, None, 0.3, 0.6],
        "member": pd.array([True, False, None, True, False, True, False, True, None, True, False, True],
                           dtype="boolean"),
        "flag": ["true", "False", "1", "0", "yes", "TRUE", "n", "false", "1", "0", "true", "x"],
    })


def read_with_pandas(spec: str) -> pd.DataFrame:
    """The file as pandas reads it (an empty CSV field is missing, as in the engine)."""
    if spec.endswith(".parquet"):
        return pd.read_parquet(spec)
    return pd.read_csv(spec, keep_default_na=False, na_values=[""], skipinitialspace=True)


def reference(spec: str, schema) -> Histogram:
    """The pandas path: the file read by pandas, then encode_codes."""
    return Histogram.of_codes(encode_codes(read_with_pandas(spec), schema))


def same(a: Histogram, b: Histogram) -> bool:
    return a.codes.shape == b.codes.shape and np.array_equal(a.codes, b.codes) and np.array_equal(a.counts, b.counts)


@pytest.fixture(scope="module")
def adult_schema():
    return load_schema(ADULT_SCHEMA)


@pytest.fixture(scope="module")
def adult_reference(adult_schema) -> Histogram:
    return reference(str(ADULT_DATA), adult_schema)


@pytest.fixture(scope="module")
def adult_arrow(adult_schema) -> pa.Table:
    """Adult typed as a warehouse would hold it: integers as BIGINT, text as VARCHAR, missing as NULL."""
    frame = pd.read_csv(ADULT_DATA, keep_default_na=False, na_values=[""])
    return pa.Table.from_pandas(frame, preserve_index=False)


# ---------------------------------------------------------------- Adult, every DuckDB source form

def test_adult_csv_histogram_equals_the_pandas_path(adult_schema, adult_reference):
    with open_source(str(ADULT_DATA), adult_schema) as src:
        hist = src.histogram()
        assert same(hist, adult_reference)
        assert hist.codes.shape[1] == len(adult_schema.kept_columns)
        # Only the count table came back: m rows of small codes, far below the 48,842 rows' size.
        assert src.bytes_returned < 3_000_000
        assert src.row_count() == adult_reference.n


def test_adult_parquet_glob_duckdb_file_and_arrow_give_the_same_histogram(adult_schema, adult_reference, adult_arrow,
                                                                          tmp_path):
    half = adult_arrow.num_rows // 2
    parts = tmp_path / "parts"
    parts.mkdir()
    pq.write_table(adult_arrow.slice(0, half), parts / "part-0.parquet")
    pq.write_table(adult_arrow.slice(half), parts / "part-1.parquet")
    import duckdb

    con = duckdb.connect(str(tmp_path / "w.duckdb"))
    con.register("staged", adult_arrow)
    con.execute("CREATE SCHEMA census; CREATE TABLE census.adult AS SELECT * FROM staged")
    con.close()
    sources = [
        str(parts / "*.parquet"),
        str(parts / "part-0.parquet"),
        f"duckdb:{tmp_path / 'w.duckdb'}?table=census.adult",
        f"duckdb:{tmp_path / 'w.duckdb'}?query=SELECT * FROM census.adult WHERE age >= 0",
        adult_arrow,
        ds.dataset(str(parts), format="parquet"),
        adult_arrow.to_pandas(),
    ]
    for data in sources:
        with open_source(data, adult_schema, EngineOptions(threads=2)) as src:
            hist = src.histogram()
        if data is sources[1]:
            assert same(hist, reference(str(parts / "part-0.parquet"), adult_schema))
        else:
            assert same(hist, adult_reference), f"source {data if isinstance(data, str) else type(data)}"


@pytest.mark.slow  # four scans of the gzipped CSV
def test_marginals_by_query_equal_marginals_from_the_histogram(adult_schema, adult_reference):
    domain = domain_of(adult_schema)
    marginals = [(0,), (1, 3), (0, 5, 14), (13,)]
    with open_source(str(ADULT_DATA), adult_schema) as src:
        by_query = src.marginals(marginals, method="query")
        auto = src.marginals(marginals)
    for m in marginals:
        expected = adult_reference.marginal(domain, m)
        assert by_query[m].dtype == np.float64 and by_query[m].shape == (domain.size_of(m),)
        np.testing.assert_array_equal(by_query[m], expected)
        np.testing.assert_array_equal(auto[m], expected)


def test_marginals_refuse_a_malformed_marginal(adult_schema):
    with open_source(str(ADULT_DATA), adult_schema) as src:
        with pytest.raises(ValueError, match=r"marginal \(3, 1\): expected ascending attribute indices in \[0, 15\)"):
            src.marginals([(3, 1)])


# ---------------------------------------------------------------- the toy table: every level kind

def test_toy_csv_and_parquet_codes_equal_the_pandas_path(tmp_path):
    frame = toy_frame()
    frame.to_csv(tmp_path / "toy.csv", index=False)
    typed = frame.assign(grade=frame["grade"].astype("float64"))  # integer-coded categories as float + NaN
    pq.write_table(pa.Table.from_pandas(typed, preserve_index=False), tmp_path / "toy.parquet")
    for name in ("toy.csv", "toy.parquet"):
        expected = reference(str(tmp_path / name), TOY)
        with open_source(str(tmp_path / name), TOY) as src:
            got = src.histogram()
        assert same(got, expected), name
    # and an in-memory pandas frame, against encode_codes on the same frame
    with open_source(typed, TOY) as src:
        assert same(src.histogram(), Histogram.of_codes(encode_codes(typed, TOY)))


def test_packed_and_wide_histograms_agree_also_on_faults(tmp_path):
    """One BIGINT key per record (the default) and one column per attribute (domains >= 2^62) agree."""
    frame = toy_frame()
    with open_source(frame, TOY) as packed, open_source(frame, TOY) as wide:
        wide.packed_max_cells = 0
        wide.bins = binning(wide.table, TOY, array_lookup=False)  # categories by CASE, as on PostgreSQL
        assert same(packed.histogram(), wide.histogram())
    bad = frame.assign(flag=["true"] * 11 + [None], score=[1.5] + [0.1] * 11)
    for packed_max_cells in (0, 2**62):
        with open_source(bad, TOY) as src:
            src.packed_max_cells = packed_max_cells
            with pytest.raises(InputError, match=r"column 'score': value\(s\) outside the schema's domain"):
                src.histogram()
            with pytest.raises(InputError, match=r"column 'flag': missing value\(s\) but the column is not nullable"):
                src.marginals([(0,), (4, 5)], method="query")


def test_toy_codes_are_the_documented_levels(tmp_path):
    """Clipping, the last closed bin, the missing and out-of-domain levels, boolean spellings: by hand."""
    frame = toy_frame().iloc[[0, 3, 4, 9, 10]]  # age -5 / 18 / 39 / 100 / 150
    with open_source(frame, TOY) as src:
        hist = src.histogram()
    rows = {tuple(r) for r in np.repeat(hist.codes, hist.counts, axis=0).tolist()}
    # color: red=0 <missing>=3 <ood>=4; grade 1..3 -> 0..2, missing 3; age bins; score bins, missing 3;
    # member false=0 true=1 missing=2; flag false=0 true=1 <ood>=2
    assert rows == {(0, 0, 0, 0, 1, 1), (3, 3, 1, 2, 1, 0), (4, 0, 1, 2, 0, 2), (0, 1, 3, 3, 1, 0), (3, 2, 3, 1, 0, 1)}


def _histogram_refusal(frame, schema, path) -> str:
    """The InputError message of counting ``frame`` (written as CSV to ``path``) under ``schema``."""
    frame.to_csv(path, index=False)
    with open_source(str(path), schema) as src:
        with pytest.raises(InputError) as info:
            src.histogram()
    return str(info.value)


@pytest.mark.parametrize("column, value, fault", [
    ("age", SECRET, "has value(s) that are not numbers (the schema says integer)"),
    ("age", "41.5", "has non-integer value(s) (the schema says integer)"),
    ("score", "inf", ": value(s) that are not finite numbers"),
    ("score", "1.5", ": value(s) outside the schema's domain"),
    ("flag", "", ": missing value(s) but the column is not nullable"),
    ("grade", "7", ": value(s) outside the schema's domain"),
])
def test_a_forbidden_value_is_a_value_free_error_naming_the_column(column, value, fault, tmp_path):
    frame = toy_frame().astype({column: object})
    frame.loc[5, column] = value
    message = _histogram_refusal(frame, TOY, tmp_path / "toy.csv")
    assert f"column {column!r}" in message and fault in message
    assert SECRET not in message and "41.5" not in message and "\n" not in message


# ---------------------------------------------------------------- refusals at open (metadata only)

def test_open_refuses_missing_columns_repeats_and_unreadable_types(tmp_path):
    frame = toy_frame()
    frame.drop(columns=["score"]).to_csv(tmp_path / "missing.csv", index=False)
    with pytest.raises(InputError,
                       match=r"input csv:.*missing\.csv: missing column\(s\) \['score'\]; the schema 'toy' expects"):
        open_source(str(tmp_path / "missing.csv"), TOY)
    text = frame.to_csv(index=False).replace("flag", "score", 1)
    (tmp_path / "dupe.csv").write_text(text)
    with pytest.raises(InputError, match=r"dupe\.csv': duplicate column name\(s\) \['score'\]"):
        open_source(str(tmp_path / "dupe.csv"), TOY)
    arrays = [pa.array(frame[c]) for c in frame.columns] + [pa.array(frame["age"])]
    pq.write_table(pa.Table.from_arrays(arrays, names=[*frame.columns, "age"]), tmp_path / "dupe.parquet")
    with pytest.raises(InputError, match=r"dupe\.parquet': duplicate column name\(s\) \['age'\]"):
        open_source(str(tmp_path / "dupe.parquet"), TOY)
    dated = pa.Table.from_pandas(frame, preserve_index=False).set_column(3, "age",
                                                                         pa.array([pd.Timestamp("2020-01-01")] * 12))
    with pytest.raises(InputError,
                       match=r"column 'age' has type timestamp.* \(the schema says integer\); "
                             r"expected numbers or text"):
        open_source(dated, TOY)


@pytest.mark.parametrize("content, pattern", [
    (b"", r"toy\.csv' is empty \(0 bytes\); expected a header row"),
    (b"id;color;grade;age;score;member;flag\n1;red;1;3;0.5;true;true\n", r"the header has one column but contains ';'"),
    (b"\xff\xfeid,color\n", r"toy\.csv' is not UTF-8 text"),
])
def test_open_refuses_unreadable_csv_files(content, pattern, tmp_path):
    (tmp_path / "toy.csv").write_bytes(content)
    with pytest.raises(InputError, match=pattern):
        open_source(str(tmp_path / "toy.csv"), TOY)


def test_non_utf8_bytes_after_the_header_are_refused_without_quoting_them(tmp_path):
    text = toy_frame().to_csv(index=False).encode()
    lines = text.split(b"\n")
    lines[5] = lines[5].replace(b"purple", b"p\xe9rple-" + SECRET.encode())
    (tmp_path / "toy.csv").write_bytes(b"\n".join(lines))
    with pytest.raises(InputError, match=r"toy\.csv' is not UTF-8 text") as info:
        with open_source(str(tmp_path / "toy.csv"), TOY) as src:
            src.histogram()
    assert SECRET not in str(info.value)


def test_truncated_parquet_and_empty_glob_are_refused(tmp_path):
    pq.write_table(pa.Table.from_pandas(toy_frame(), preserve_index=False), tmp_path / "t.parquet")
    data = (tmp_path / "t.parquet").read_bytes()
    (tmp_path / "t.parquet").write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match=r"t\.parquet' is not a readable Parquet file"):
        open_source(str(tmp_path / "t.parquet"), TOY)
    with pytest.raises(InputError, match=r"no file matches the pattern"):
        open_source(str(tmp_path / "none-*.parquet"), TOY)


def test_fsspec_url_is_read_through_duckdb(tmp_path):
    import fsspec

    fs = fsspec.filesystem("memory")
    with fs.open("/privsynth-test/toy.parquet", "wb") as handle:
        pq.write_table(pa.Table.from_pandas(toy_frame(), preserve_index=False), handle)
    pq.write_table(pa.Table.from_pandas(toy_frame(), preserve_index=False), tmp_path / "toy.parquet")
    with open_source("memory://privsynth-test/toy.parquet", TOY) as src:
        assert same(src.histogram(), reference(str(tmp_path / "toy.parquet"), TOY))


# ---------------------------------------------------------------- validation as aggregates

def _csv_report(frame: pd.DataFrame, tmp_path, schema=TOY):
    frame.to_csv(tmp_path / "v.csv", index=False)
    with open_source(str(tmp_path / "v.csv"), schema) as src:
        return src.validate()


def test_validation_passes_a_good_table_and_keeps_the_public_shape(tmp_path):
    report = _csv_report(toy_frame().assign(score=[0.1] * 12), tmp_path)
    assert report.success, report.failure_message()
    public = report.public_json()
    assert public["schema"] == "toy" and public["failed_expectations"] == 0
    assert {r["expectation_type"] for r in public["results"]} >= {
        "privsynth_expect_table_to_have_rows", "expect_table_columns_to_match_set", "expect_column_values_to_be_in_set",
        "expect_column_values_to_be_between", "privsynth_expect_column_values_to_be_whole_numbers",
        "expect_column_values_to_not_be_null", "expect_column_proportion_of_non_null_values_to_be_between"}
    assert all(set(r) == {"expectation_type", "column", "success", "message"} for r in public["results"])


@pytest.mark.parametrize("edit, pattern", [
    (lambda f: f.assign(ssn=SECRET),
     r"table: unexpected column\(s\) \['ssn'\]; expected exactly the schema's 7 columns"),
    (lambda f: f.assign(score=[1.5] + [0.1] * 11), r"column 'score': some value\(s\) outside \[0, 1\]"),
    (lambda f: f.assign(grade=["9"] + ["1"] * 11),
     r"column 'grade': some value\(s\) not among the schema's 3 categories"),
    (lambda f: f.assign(color=None), r"column 'color': every value is missing"),
    (lambda f: f.assign(flag=["true"] * 11 + [None]),
     r"column 'flag': some missing value\(s\) \(null/NaN\) but the column is not nullable"),
    (lambda f: f.assign(score=["inf"] + ["0.1"] * 11),
     r"column 'score': some value\(s\) are \+inf or -inf; numeric values must be finite"),
    (lambda f: f.assign(age=[SECRET] + [3] * 11),
     r"column 'age': some value\(s\) are not numbers; expected integer values"),
    (lambda f: f.assign(age=[3.5] + [3] * 11),
     r"column 'age': some value\(s\) are not whole numbers; expected integer values"),
])
def test_validation_failures_are_one_value_free_line_each(edit, pattern, tmp_path):
    report = _csv_report(edit(toy_frame().assign(score=[0.1] * 12)), tmp_path)
    assert not report.success
    public = report.public_failure_message()
    assert any(re.search(pattern, line) for line in public.splitlines()), public
    assert SECRET not in public and SECRET not in report.failure_message()


def test_validation_of_a_header_only_file_says_no_rows(tmp_path):
    (tmp_path / "v.csv").write_text("id,color,grade,age,score,member,flag\n")
    with open_source(str(tmp_path / "v.csv"), TOY) as src:
        report = src.validate()
    assert not report.success
    assert report.public_failure_message() == "table: 0 rows; expected at least one"


def test_validation_in_place_agrees_with_great_expectations_on_the_same_suite(tmp_path):
    """One definition run two ways: every expectation GX runs has the engine's outcome and public message;
    the engine runs the others (engine-only ones) as well."""
    from privsynth.engine.expectations import schema_expectations
    from privsynth.engine.gx_run import gx_validate

    text = {c.name: str for c in TOY.columns if c.type in ("categorical", "boolean")}  # categories as text
    cases = [toy_frame().assign(score=[0.1] * 12),
             toy_frame().assign(score=[1.5] + [0.1] * 11, grade=["9"] + ["1"] * 11, flag=["true"] * 11 + [None])]
    for case, frame in enumerate(cases):
        frame.to_csv(tmp_path / "v.csv", index=False)
        gx = gx_validate(pd.read_csv(tmp_path / "v.csv", dtype=text, keep_default_na=False, na_values=[""]), TOY)
        with open_source(str(tmp_path / "v.csv"), TOY) as src:
            ours = src.validate()
        assert ours.success is gx.success is (case == 0)
        assert [(r.expectation_type, r.column) for r in ours.results] == [(e.kind, e.column)
                                                                          for e in schema_expectations(TOY)]
        engine = {(r["expectation_type"], r["column"]): r for r in ours.public_json()["results"]}
        for r in gx.public_json()["results"]:
            assert engine[r["expectation_type"], r["column"]] == r


# ---------------------------------------------------------------- the hostile-input cases, through the engine

def _hostile_cases():
    import test_hostile_input as hostile

    return hostile, [c for c in hostile.CASES if c[4] in ("ingest", "validate") and c[0] != "delta >= 1/n"]


# Where the engine's message differs from the row-reading pipeline's (stage, pattern).
ENGINE_PATTERNS = {
    "header only": r"table: 0 rows; expected at least one",
    "wrong type": r"column 'size': some value\(s\) are not numbers; expected integer values",
}


@pytest.mark.slow  # imports the flow-level test module (Prefect)
def test_every_hostile_input_is_refused_by_the_engine_without_leaking(tmp_path):
    """open_source + validate + histogram refuse each bad input of tests/test_hostile_input.py with the
    same one-line message (or the engine's equivalent above), quoting no secret."""
    hostile, cases = _hostile_cases()
    for case in cases:
        name, _, _, pattern, _ = case
        folder = tmp_path / name.replace(" ", "-")
        folder.mkdir()
        values = hostile._build(case, folder)
        schema = load_schema(values["schema_file"])
        message = ""
        try:
            with open_source(values["input"], schema) as src:
                report = src.validate()
                message = report.public_failure_message()
                if report.success:
                    src.histogram()
        except InputError as err:
            message = str(err)
        assert message, f"{name}: not refused"
        assert re.search(ENGINE_PATTERNS.get(name, pattern), message), f"{name}: {message}"
        for secret in hostile.SECRETS:
            assert secret not in message, f"{name} leaked {secret!r}"


# ---------------------------------------------------------------- dates and timestamps

DATES = parse_schema({"name": "dates", "columns": [
    {"name": "opened", "type": "date", "bounds": ["2010-01-01", "2020-12-31"], "bin_by": "year", "nullable": True},
    {"name": "seen", "type": "timestamp", "bounds": ["1969-12-31", "1970-01-03"], "bin_by": "day",
     "on_out_of_domain": "clip"},
    {"name": "due", "type": "date", "bounds": ["2019-01-01", "2019-12-31"], "bin_by": "quarter", "nullable": True},
]})


def dates_frame() -> pd.DataFrame:
    """Bin edges, the last closed bin, a second before the epoch (floor), values to clip, missing values."""
    import datetime as dt

    return pd.DataFrame({
        "opened": [dt.date(2010, 1, 1), dt.date(2019, 6, 1), None, dt.date(2020, 12, 31), dt.date(2011, 1, 1),
                   dt.date(2010, 12, 31), dt.date(2015, 2, 28), None],
        "seen": pd.to_datetime(["1969-12-31 23:59:59.5", "1970-01-01", "1900-01-01", "2030-01-01", "1970-01-01 05:00",
                                "1970-01-02 23:59:59.999", "1969-12-31", "1970-01-03"], format="ISO8601"),
        "due": [dt.date(2019, 3, 31), dt.date(2019, 4, 1), dt.date(2019, 12, 31), None, dt.date(2019, 7, 1),
                dt.date(2019, 9, 30), dt.date(2019, 1, 1), dt.date(2019, 10, 1)],
    })


def test_date_and_timestamp_codes_equal_the_pandas_path_on_every_duckdb_source_form(tmp_path):
    import duckdb

    frame = dates_frame()
    expected = Histogram.of_codes(encode_codes(frame, DATES))
    arrow = pa.Table.from_pandas(frame, preserve_index=False)
    assert arrow.schema.field("opened").type == pa.date32() and pa.types.is_timestamp(arrow.schema.field("seen").type)
    frame.to_csv(tmp_path / "d.csv", index=False)  # ISO text
    pq.write_table(arrow, tmp_path / "d.parquet")  # Parquet DATE and TIMESTAMP
    zoned = arrow.set_column(1, "seen", arrow["seen"].cast(pa.timestamp("us", tz="Europe/Berlin")))  # TIMESTAMPTZ
    pq.write_table(zoned, tmp_path / "z.parquet")
    con = duckdb.connect(str(tmp_path / "w.duckdb"))
    con.register("staged", arrow)
    con.execute("CREATE TABLE t AS SELECT * FROM staged")  # SQL DATE and TIMESTAMP
    assert [r[1] for r in con.execute("DESCRIBE t").fetchall()] == ["DATE", "TIMESTAMP", "DATE"]
    con.close()
    for data in (str(tmp_path / "d.csv"), str(tmp_path / "d.parquet"), str(tmp_path / "z.parquet"),
                 f"duckdb:{tmp_path / 'w.duckdb'}?table=t", frame, arrow):
        with open_source(data, DATES) as src:
            hist = src.histogram()
        assert same(hist, expected), f"source {data if isinstance(data, str) else type(data)}"
        if isinstance(data, str) and not data.startswith("duckdb:"):
            assert same(reference(data, DATES), expected), data  # the batch reader agrees too


def test_a_date_that_does_not_parse_or_is_outside_the_bounds_is_a_value_free_error(tmp_path):
    for column, value, fault in [("opened", SECRET, "has value(s) that are not dates (the schema says date)"),
                                 ("seen", SECRET, "has value(s) that are not timestamps (the schema says timestamp)"),
                                 ("due", "2021-05-05", ": value(s) outside the schema's domain")]:
        frame = dates_frame().astype({column: object})
        frame.loc[2, column] = value
        message = _histogram_refusal(frame, DATES, tmp_path / "d.csv")
        assert f"column {column!r}" in message and fault in message, message
        shown = message.replace(str(tmp_path), "<tmp>")  # the test's folder may hold "2021" by chance
        assert SECRET not in shown and "2021" not in shown and "\n" not in message


def test_date_columns_refuse_numbers_and_numeric_columns_refuse_dates(tmp_path):
    frame = dates_frame().assign(opened=range(8))
    with pytest.raises(InputError,
                       match=r"column 'opened' has type int64 \(the schema says date\); expected dates, timestamps or "
                             r"text"):
        open_source(frame, DATES)
    numeric = parse_schema({"name": "n", "columns": [{"name": "x", "type": "integer", "bounds": [0, 9],
                                                      "bins": [0, 9]}]})
    with pytest.raises(InputError, match=r"column 'x' has type date .*expected numbers or text"):
        open_source(pa.table({"x": pa.array(dates_frame()["due"].fillna(pd.Timestamp("2019-01-01").date()),
                                            pa.date32())}), numeric)


def test_date_validation_in_place_names_the_column_not_the_value(tmp_path):
    bad = dates_frame().astype({"opened": object, "due": object})
    bad.loc[1, "opened"] = SECRET
    bad.loc[4, "due"] = "2020-02-02"
    for frame, ok in ((dates_frame(), True), (bad, False)):
        frame.to_csv(tmp_path / "v.csv", index=False)
        with open_source(str(tmp_path / "v.csv"), DATES) as src:
            ours = src.validate()
        assert ours.success is ok
    public = ours.public_failure_message()
    assert "column 'opened': some value(s) are not dates; expected date values" in public
    assert "column 'due': some value(s) outside [2019-01-01, 2019-12-31]" in public
    assert SECRET not in public and SECRET not in ours.failure_message()


def test_iso_text_with_zone_offsets_and_blanks_reads_alike_in_the_engine_and_pandas(tmp_path):
    schema = parse_schema({"name": "z", "columns": [
        {"name": "t", "type": "timestamp", "bounds": ["2019-01-01", "2019-01-03"], "bin_by": "day", "nullable": True},
        {"name": "d", "type": "date", "bounds": ["2019-01-01", "2019-01-03"], "bin_by": "day"}]})
    frame = pd.DataFrame({
        "t": ["2019-01-02T01:00:00+02:00", "2019-01-01T23:30:00-01:00", "2019-01-02T00:00:00Z",
              "2019-01-01 23:59:59.999999", " 2019-01-02 ", ""],
        "d": ["2019-01-02T01:00:00+02:00", "2019-01-01T23:30:00-01:00", "2019-01-02", "2019-01-01T23:59:59",
              "2019-01-02", "2019-01-01"]})
    codes = encode_codes(frame, schema)
    assert codes.tolist() == [[0, 0], [1, 1], [1, 1], [0, 0], [1, 1], [2, 0]]  # UTC days; '' is <missing>
    frame.to_csv(tmp_path / "z.csv", index=False)
    with open_source(str(tmp_path / "z.csv"), schema) as src:
        assert same(src.histogram(), Histogram.of_codes(codes))
