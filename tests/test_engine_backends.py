"""Real backends: PostgreSQL (a server started for the session) and Spark (local, slow); sinks to DuckDB
and PostgreSQL keep the synthetic table's types; URLs never show a password."""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from conftest import ADULT_DATA, ADULT_SCHEMA
from postgres_fixture import postgres_url  # noqa: F401  (a fixture)

from privsynth.engine import connect_url, open_source
from privsynth.io import InputError, parse_sink, redact_url, write_sink
from privsynth.schema import load_schema
from privsynth.schema.encoding import arrow_schema, domain_of, encode_codes
from privsynth.schema.workload import Histogram


@pytest.fixture(scope="module")
def adult_schema():
    return load_schema(ADULT_SCHEMA)


@pytest.fixture(scope="module")
def adult_reference(adult_schema) -> Histogram:
    frame = pd.read_csv(ADULT_DATA, keep_default_na=False, na_values=[""])  # as pandas reads it
    return Histogram.of_codes(encode_codes(frame, adult_schema))


@pytest.fixture(scope="module")
def adult_arrow() -> pa.Table:
    return pa.Table.from_pandas(pd.read_csv(ADULT_DATA, keep_default_na=False, na_values=[""]), preserve_index=False)


def synthetic_table() -> pa.Table:
    """A synthetic table in the schema's Arrow types (dictionary strings, booleans, int64, float64)."""
    return pa.table({
        "colour": pa.array(["red", None, "blue"]).dictionary_encode(),
        "member": pa.array([True, False, None]),
        "size": pa.array([1, None, 2**40], type=pa.int64()),
        "weight": pa.array([0.5, 0.25, None], type=pa.float64()),
    })


# ---------------------------------------------------------------- PostgreSQL

@pytest.fixture(scope="module")
def pg_adult(postgres_url, adult_arrow):  # noqa: F811
    con = connect_url(postgres_url)
    try:
        con.create_table("adult", adult_arrow, overwrite=True)
    finally:
        con.disconnect()
    return postgres_url


def test_postgres_histogram_equals_the_pandas_path_and_moves_only_counts(pg_adult, adult_schema, adult_reference):
    with open_source(f"{pg_adult}?table=public.adult", adult_schema) as src:
        assert "postgres" in src.describe() and "table=public.adult" in src.describe()
        hist = src.histogram()
        assert src.bytes_returned < 3_000_000  # the count table, not 48,842 rows x 15 columns
        np.testing.assert_array_equal(hist.codes, adult_reference.codes)
        np.testing.assert_array_equal(hist.counts, adult_reference.counts)
        report = src.validate()
        assert report.success, report.failure_message()
        by_query = src.marginals([(0, 1), (13,)], method="query")
    domain = domain_of(adult_schema)
    for m, counts in by_query.items():
        np.testing.assert_array_equal(counts, adult_reference.marginal(domain, m))


def test_postgres_query_source_is_checked_and_runs(pg_adult, adult_schema, adult_reference):
    with open_source(f"{pg_adult}?query=SELECT * FROM adult WHERE age >= 0", adult_schema) as src:
        assert src.histogram().n == adult_reference.n
    with pytest.raises(InputError, match=r"a DROP statement; only a single SELECT is allowed"):
        open_source(f"{pg_adult}?query=DROP TABLE adult", adult_schema)
    with pytest.raises(InputError, match=r"function pg_read_file\(\) reads outside the database"):
        open_source(f"{pg_adult}?query=SELECT pg_read_file('/etc/passwd') AS age FROM adult", adult_schema)
    with pytest.raises(InputError,
                       match=r"SQL source postgresql\+psycopg://127\.0\.0\.1:\d+/postgres: table not found|does not "
                             r"exist"):
        open_source(f"{pg_adult}?table=nope", adult_schema)


def test_postgres_sink_replaces_the_table_and_keeps_types(postgres_url):  # noqa: F811
    table = synthetic_table()
    where = write_sink(table, f"{postgres_url}?table=synthetic_people")
    assert where.endswith("table synthetic_people") and "postgres" in where
    write_sink(table.slice(0, 2), f"{postgres_url}?table=synthetic_people")  # replaced, not appended
    con = connect_url(postgres_url)
    try:
        back = con.table("synthetic_people")
        types = {name: str(t) for name, t in back.schema().items()}
        assert types == {"colour": "string", "member": "boolean", "size": "int64", "weight": "float64"}
        rows = back.to_pyarrow().sort_by("weight")
        assert rows.num_rows == 2 and rows["weight"].to_pylist() == [0.25, 0.5]
    finally:
        con.disconnect()


# ---------------------------------------------------------------- DuckDB sink

def test_duckdb_sink_replaces_the_table_and_keeps_types(tmp_path):
    target = f"duckdb:{tmp_path / 'out.duckdb'}?table=synthetic"
    assert parse_sink(target).kind == "duckdb"
    write_sink(synthetic_table(), target)
    write_sink(synthetic_table().slice(0, 1), target)
    con = duckdb.connect(str(tmp_path / "out.duckdb"), read_only=True)
    try:
        described = {r[0]: r[1] for r in con.execute("DESCRIBE synthetic").fetchall()}
        assert described == {"colour": "VARCHAR", "member": "BOOLEAN", "size": "BIGINT", "weight": "DOUBLE"}
        assert con.execute("SELECT count(*), max(size) FROM synthetic").fetchone() == (1, 1)
    finally:
        con.close()


def test_sink_types_follow_the_schema(tmp_path):
    from privsynth.schema import parse_schema

    schema = parse_schema({"name": "s", "columns": [
        {"name": "c", "type": "categorical", "categories": ["a"]}, {"name": "b", "type": "boolean"},
        {"name": "i", "type": "integer", "bounds": [0, 9], "bins": [0, 9]},
                                                    {"name": "f", "type": "float", "bounds": [0, 1], "bins": [0, 1]}]})
    table = pa.table({"c": pa.array(["a"]).dictionary_encode(), "b": [True], "i": pa.array([3], pa.int64()),
                      "f": [0.5]}).cast(arrow_schema(schema))
    write_sink(table, f"duckdb:{tmp_path / 'o.duckdb'}?table=main.t")
    with duckdb.connect(str(tmp_path / "o.duckdb"), read_only=True) as con:
        assert [r[1] for r in con.execute("DESCRIBE main.t").fetchall()] == ["VARCHAR", "BOOLEAN", "BIGINT", "DOUBLE"]


# ---------------------------------------------------------------- URLs and credentials

@pytest.mark.parametrize("url, shown", [
    ("postgresql+psycopg://ann:hunter2@db.example:5432/w?table=t", "postgresql+psycopg://ann:***@db.example:5432/w?table=t"),
    ("postgresql://ann@db/w?password=hunter2&sslmode=require", "postgresql://ann@db/w?password=***&sslmode=require"),
    ("duckdb:w.duckdb?table=t", "duckdb:w.duckdb?table=t"),
    ("s3://bucket/x.parquet", "s3://bucket/x.parquet"),
])
def test_redact_url_masks_passwords(url, shown):
    assert redact_url(url) == shown
    assert "hunter2" not in redact_url(url)


def test_a_password_in_a_url_is_refused_and_never_shown(adult_schema):
    with pytest.raises(InputError) as info:
        open_source("postgresql+psycopg://ann:hunter2@127.0.0.1:1/w?table=t", adult_schema)
    assert "hunter2" not in str(info.value) and "PGPASSWORD" in str(info.value)
    with pytest.raises(InputError) as info:
        write_sink(synthetic_table(), "postgresql://ann:hunter2@127.0.0.1:1/w?table=t")
    assert "hunter2" not in str(info.value)
    with pytest.raises(InputError) as info:
        parse_sink("postgresql://ann:hunter2@h/w?table=bad name")
    assert "hunter2" not in str(info.value)


# ---------------------------------------------------------------- Spark

@pytest.mark.slow
def test_spark_histogram_equals_the_pandas_path(adult_schema, adult_reference, adult_arrow, monkeypatch, tmp_path):
    pytest.importorskip("pyspark")
    from privsynth.engine import spark_session

    monkeypatch.setenv("PRIVSYNTH_SPARK_MASTER", "local[2]")
    session = spark_session()
    try:
        session.createDataFrame(adult_arrow.to_pandas()).createOrReplaceTempView("adult")
        with open_source("spark:adult", adult_schema) as src:
            hist = src.histogram()
            by_query = src.marginals([(0, 1)], method="query")
        np.testing.assert_array_equal(hist.codes, adult_reference.codes)
        np.testing.assert_array_equal(hist.counts, adult_reference.counts)
        np.testing.assert_array_equal(by_query[(0, 1)], adult_reference.marginal(domain_of(adult_schema), (0, 1)))
        with pytest.raises(InputError, match="only a single SELECT"):
            open_source("spark:?query=DROP TABLE adult", adult_schema)
        assert_spark_reads_files(adult_schema, adult_reference, adult_arrow, tmp_path)
    finally:
        session.stop()


def assert_spark_reads_files(schema, reference: Histogram, arrow: pa.Table, folder) -> None:
    """spark:parquet: and spark:csv: count as the pandas path; a missing path is an InputError, and the SQL
    sandbox still refuses a file path inside a query."""
    import pyarrow.parquet as pq

    (folder / "adult").mkdir()
    pq.write_table(arrow, folder / "adult" / "part-0.parquet")
    for spec in (f"spark:parquet:{folder / 'adult'}", f"spark:csv:{ADULT_DATA}"):
        with open_source(spec, schema) as src:
            hist = src.histogram()
            assert src.describe() == spec and src.bytes_returned < 3_000_000
        np.testing.assert_array_equal(hist.codes, reference.codes)
        np.testing.assert_array_equal(hist.counts, reference.counts)
    with pytest.raises(InputError, match=r"input spark:orc:.*nowhere: the cluster cannot read it \(PATH_NOT_FOUND\)"):
        open_source(f"spark:orc:{folder / 'nowhere'}", schema)
    with pytest.raises(InputError, match="a file path in FROM"):
        open_source(f"spark:?query=SELECT * FROM parquet.`{folder / 'adult'}`", schema)


def test_postgres_date_and_timestamp_columns_bin_like_the_pandas_path_and_sink_as_date_timestamp(postgres_url):  # noqa: F811
    from test_engine import DATES, dates_frame

    from privsynth.schema.encoding import arrow_schema, decode_codes, encode_codes
    from privsynth.schema.workload import Histogram

    frame = dates_frame()
    expected = Histogram.of_codes(encode_codes(frame, DATES))
    con = connect_url(postgres_url)
    try:
        con.create_table("dated", pa.Table.from_pandas(frame, preserve_index=False), overwrite=True)
    finally:
        con.disconnect()
    with open_source(f"{postgres_url}?table=public.dated", DATES) as src:
        hist = src.histogram()
        report = src.validate()
    np.testing.assert_array_equal(hist.codes, expected.codes)
    np.testing.assert_array_equal(hist.counts, expected.counts)
    assert report.success, report.failure_message()
    # the facts' grain slots (whole days, hours, minutes, seconds) count alike on the server and in DuckDB
    from privsynth.discovery.facts import exact_counts
    from privsynth.engine.backends import open_table

    grains = []
    for data in (f"{postgres_url}?table=public.dated", frame):
        opened = open_table(data, DATES)
        try:
            grains.append(exact_counts(opened.table, [("seen", "timestamp")])["seen"].decimals[:4].tolist())
        finally:
            opened.close()
    assert grains[0] == grains[1] == [5.0, 1.0, 0.0, 2.0]  # 23:59:59.5 is a second's
    table = pa.Table.from_pandas(decode_codes(expected.codes, DATES, np.random.default_rng(1)),
                                 schema=arrow_schema(DATES), preserve_index=False)
    write_sink(table, f"{postgres_url}?table=synthetic_dates")
    con = connect_url(postgres_url)
    try:
        back = con.table("synthetic_dates")
        assert {name: str(t) for name, t in back.schema().items()} == {"opened": "date", "seen": "timestamp(6)",
                                                                       "due": "date"}
        assert back.to_pyarrow()["opened"].to_pylist() == table["opened"].to_pylist()
    finally:
        con.disconnect()


def test_postgres_reads_a_number_s_place_as_duckdb_does(postgres_url):  # noqa: F811
    """The facts' places slots (whole thousands, hundreds, tens, units, then decimals) count alike on the server
    and in DuckDB, for numbers written as text (separators, signs) and for stored doubles and integers."""
    from privsynth.discovery.facts import exact_counts
    from privsynth.engine.backends import open_table

    frame = pd.DataFrame({
        "written": ["0", "40", "1,200", "$10,000", "7", "2.50", "150%", "-40", "10,050", "n/a", None, "0.125"],
        "stored": [0.0, 40.0, 1200.0, 3000.0, 7.0, -250.0, 1e7, 123456789.0, 6.9, 2.5e6 + 0.5, None, 6.904679999999999],
        "whole": pd.array([0, 40, 1200, 3000, 7, -250, 10_000_000, 123456789, 30, 20, None, 11], dtype="Int64")})
    con = connect_url(postgres_url)
    try:
        con.create_table("placed", pa.Table.from_pandas(frame, preserve_index=False), overwrite=True)
    finally:
        con.disconnect()
    columns = [("written", "text"), ("stored", "float"), ("whole", "integer")]
    slots = []
    for data in (f"{postgres_url}?table=public.placed", frame):
        opened = open_table(data, None)
        try:
            counts = exact_counts(opened.table, columns)
            slots.append({name: counts[name].decimals.tolist() for name, _ in columns})
        finally:
            opened.close()
    assert slots[0] == slots[1]
    assert slots[0]["written"] == [1.0, 1.0, 4.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0]  # a zero: its own slot, last
    assert slots[0]["stored"] == [2.0, 1.0, 2.0, 2.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0]
    assert slots[0]["whole"] == [2.0, 1.0, 4.0, 3.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]


def test_postgres_reads_written_moments_as_duckdb_does(postgres_url):  # noqa: F811
    """The facts' classes and grain slots of moments written as text (slashed with a one-digit hour, year-first,
    ISO, an impossible date) count alike on the server and in DuckDB."""
    from privsynth.discovery.facts import CLASSES, exact_counts
    from privsynth.engine.backends import open_table

    texts = ["9/30/1990 0:00:00", "11/29/1993 13:05", "13/01/2021 5:00:00", "2/30/2021 0:00:00", "3/4/2021 0:00",
             "2020/06/04 7:45:34", "2020-06-04T07:45:00Z", "03/04/2021", "junk", None]
    frame = pd.DataFrame({"written": texts})
    con = connect_url(postgres_url)
    try:
        con.create_table("moments", pa.Table.from_pandas(frame, preserve_index=False), overwrite=True)
    finally:
        con.disconnect()
    read = []
    for data in (f"{postgres_url}?table=public.moments", frame):
        opened = open_table(data, None)
        try:
            counts = exact_counts(opened.table, [("written", "text")])["written"]
            read.append((counts.classes.tolist(), counts.decimals.tolist()))
        finally:
            opened.close()
    assert read[0] == read[1]
    classes = dict(zip(CLASSES, read[0][0]))
    assert (classes["month_first"], classes["day_first"], classes["slash"]) == (2.0, 1.0, 2.0)
    assert (classes["year_first_time"], classes["timestamp"]) == (1.0, 1.0)
    assert (classes["text"], classes["missing"]) == (2.0, 1.0)  # an impossible date is text
    assert read[0][1][:4] == [2.0, 1.0, 1.0, 1.0]  # grains: day, hour, minute, second (a slashed date: none)
    assert read[0][1][4:8] == [0.0, 0.0, 1.0, 0.0]  # the ISO moment written with a Z: its grain's slot, after ZULU


def _two_column_schema():
    from privsynth.schema import parse_schema

    return parse_schema({"name": "frame", "columns": [
        {"name": "word", "type": "categorical", "categories": ["a", "b", "c"], "on_out_of_domain": "category"},
        {"name": "size", "type": "integer", "bounds": [0, 9], "bins": [0, 3, 6, 9], "nullable": True,
         "on_out_of_domain": "clip", "on_unreadable": "missing"}]}, origin="test:frame")


def test_a_pandas_frame_is_scanned_once_into_a_table_and_counts_as_its_histogram():
    """DuckDB scans a registered pandas frame anew on every query naming it (a UNION ALL of one part per
    marginal held one copy per part); the frame is scanned once into a DuckDB table, typed by the same scan,
    and a column no type holds (numbers beside strings) reads as DuckDB's scan reads it."""
    from privsynth.engine.backends import open_table

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"word": pd.array(rng.choice(["a", "b", "c"], 500), dtype="string[pyarrow]"),
                          "size": pd.array(rng.integers(0, 9, 500), dtype="Int64")})
    schema = _two_column_schema()
    opened = open_table(frame, schema)
    try:
        kinds = dict(opened.backend.con.execute(
            "SELECT table_name, table_type FROM information_schema.tables").fetchall())
    finally:
        opened.close()
    assert list(kinds.values()) == ["BASE TABLE"]
    with open_source(frame, schema) as source:
        by_query = source.marginals([(0,), (1,), (0, 1)], method="query")
        by_histogram = source.marginals([(0,), (1,), (0, 1)], method="histogram")
    for m, counts in by_histogram.items():
        np.testing.assert_array_equal(by_query[m], counts)
    assert by_histogram[(0, 1)].sum() == 500
    mixed = pd.DataFrame({"word": ["a", "b", 7, "c"] * 25, "size": [1, 4, 7, 2] * 25})
    with open_source(mixed, schema) as source:
        assert source.marginals([(1,)], method="query")[(1,)].sum() == 100
