"""Sources, sinks and atomic artifacts: every input form, clear errors that never quote cell values."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from privsynth.engine.sources import coerce_batch, iter_source, parse_source, raw_arrow_schema
from privsynth.io import (
    AtomicParquetWriter,
    InputError,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_table,
    check_writable_directory,
    iter_parquet,
    sha256_file,
    write_sink,
)
from privsynth.schema import parse_schema

SCHEMA = parse_schema({"name": "people", "columns": [
    {"name": "name", "type": "categorical", "categories": ["ann", "bob", "cy"]},
    {"name": "age", "type": "integer", "bounds": [0, 100], "bins": [0, 50, 100]},
    {"name": "score", "type": "float", "bounds": [0, 1], "bins": [0, 0.5, 1], "nullable": True},
]})
ROWS = pd.DataFrame({"name": ["ann", "bob", "cy", "ann"], "age": ["30", "41", "7", "99"], "score": ["0.5", "", "0.25", "1"]})


def read_all(spec_text: str, batch_rows: int = 2) -> pd.DataFrame:
    spec = parse_source(spec_text)
    frames = [coerce_batch(f, SCHEMA, "test") for f in iter_source(spec, SCHEMA, batch_rows)]
    return pd.concat(frames, ignore_index=True)


def no_leftovers(folder: Path) -> bool:
    return not [p.name for p in folder.iterdir() if p.name.endswith(".tmp") or ".partial" in p.name]


# ---------------------------------------------------------------- parse_source

@pytest.mark.parametrize("text, kind, location, delimiter", [
    ("data/x.csv", "csv", "data/x.csv", ","),
    ("data/x.CSV.GZ", "csv", "data/x.CSV.GZ", ","),
    ("x.tsv", "csv", "x.tsv", "\t"),
    ("x.tsv.gz", "csv", "x.tsv.gz", "\t"),
    ("x.parquet", "parquet", "x.parquet", ","),
    ("s3://bucket/part/x.parquet", "parquet", "s3://bucket/part/x.parquet", ","),
    ("s3://bucket/x.tsv.gz", "csv", "s3://bucket/x.tsv.gz", "\t"),
])
def test_parse_file_sources(text, kind, location, delimiter):
    spec = parse_source(text)
    assert (spec.kind, spec.location, spec.delimiter) == (kind, location, delimiter)
    assert spec.table is None and spec.query is None


def test_parse_sql_sources():
    spec = parse_source("duckdb:warehouse/w.duckdb?table=main.people")
    assert (spec.kind, spec.location, spec.table, spec.query) == ("sql", "duckdb:warehouse/w.duckdb", "main.people", None)
    spec = parse_source("duckdb:w.duckdb?query=SELECT a+1 AS x FROM t WHERE b = 'x&y' AND c LIKE '%20'")
    assert spec.query == "SELECT a+1 AS x FROM t WHERE b = 'x&y' AND c LIKE '%20'"  # literal, not URL-decoded
    assert spec.table is None
    spec = parse_source("postgresql://me:secret@db.example/prod?sslmode=require&table=people")
    assert spec.kind == "sql" and spec.table == "people"
    assert spec.location == "postgresql://me:secret@db.example/prod?sslmode=require"  # connection options kept
    assert "secret" not in spec.describe() and "sslmode" not in spec.describe()
    assert spec.describe() == "sql:postgresql://db.example/prod table=people"
    assert parse_source("sqlite:///tmp/x.db?query=SELECT 1").describe().endswith("(query)")


@pytest.mark.parametrize("text, problem", [
    ("", "must be a path or URL"),
    ("data.json", "expected a .csv"),
    ("data", "expected a .csv"),
    ("duckdb:w.duckdb", "exactly one of"),
    ("duckdb:w.duckdb?table=a&query=SELECT 1", "exactly one of"),
    ("duckdb:w.duckdb?table=", "exactly one of"),
    ("duckdb:w.duckdb?table=people;DROP TABLE x", "letters, digits"),
    ("duckdb:w.duckdb?table=a..b", "letters, digits"),
    ("duckdb:w.duckdb?table=a&mode=rw", "not ['mode']"),
    ("postgresql://me:secret@h/db", "exactly one of"),
])
def test_parse_source_errors(text, problem):
    with pytest.raises(InputError, match=problem.replace("[", r"\[").replace("]", r"\]")) as info:
        parse_source(text)
    assert "secret" not in str(info.value)


# ---------------------------------------------------------------- reading every form

@pytest.fixture()
def written_sources(tmp_path):
    csv = tmp_path / "people.csv"
    ROWS.to_csv(csv, index=False)
    gz = tmp_path / "people.csv.gz"
    gz.write_bytes(gzip.compress(csv.read_bytes()))
    tsv = tmp_path / "people.tsv"
    ROWS.to_csv(tsv, index=False, sep="\t")
    parquet = tmp_path / "people.parquet"
    typed = pd.DataFrame({"name": ROWS["name"], "age": [30, 41, 7, 99], "score": [0.5, None, 0.25, 1.0]})
    typed.to_parquet(parquet)
    db = tmp_path / "w.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE people AS SELECT * FROM typed")
    con.close()
    return {"csv": str(csv), "gz": str(gz), "tsv": str(tsv), "parquet": str(parquet),
            "duckdb_table": f"duckdb:{db}?table=people",
            "duckdb_query": f"duckdb:{db}?query=SELECT name, age+0 AS age, score FROM people ORDER BY rowid",
            "sqlalchemy": f"sqlite:///{tmp_path / 'w.sqlite'}?table=people", "_typed": typed, "_tmp": tmp_path}


def test_every_source_form_reads_the_same_rows(written_sources):
    import sqlalchemy

    typed = written_sources["_typed"]
    engine = sqlalchemy.create_engine(f"sqlite:///{written_sources['_tmp'] / 'w.sqlite'}")
    typed.to_sql("people", engine, index=False)
    engine.dispose()
    expected = pd.DataFrame({"name": ["ann", "bob", "cy", "ann"], "age": [30.0, 41.0, 7.0, 99.0],
                             "score": [0.5, np.nan, 0.25, 1.0]})
    for key in ("csv", "gz", "tsv", "parquet", "duckdb_table", "duckdb_query", "sqlalchemy"):
        frame = read_all(written_sources[key])
        assert list(frame.columns) == ["name", "age", "score"], key
        assert frame["name"].tolist() == expected["name"].tolist(), key
        np.testing.assert_array_equal(frame["age"].to_numpy(), expected["age"].to_numpy(), err_msg=key)
        np.testing.assert_array_equal(frame["score"].to_numpy(), expected["score"].to_numpy(), err_msg=key)


def test_reading_is_batched(written_sources):
    spec = parse_source(written_sources["csv"])
    assert [len(f) for f in iter_source(spec, SCHEMA, batch_rows=3)] == [3, 1]
    spec = parse_source(written_sources["parquet"])
    assert [len(f) for f in iter_source(spec, SCHEMA, batch_rows=3)] == [3, 1]


def test_file_source_errors(tmp_path):
    def read(path: Path):
        return list(iter_source(parse_source(str(path)), SCHEMA))

    with pytest.raises(InputError, match="does not exist"):
        read(tmp_path / "missing.csv")
    (tmp_path / "folder.csv").mkdir()
    with pytest.raises(InputError, match="is not a file"):
        read(tmp_path / "folder.csv")
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(InputError, match="is empty"):
        read(tmp_path / "empty.csv")
    (tmp_path / "semi.csv").write_text("name;age;score\nann;3;0.5\n")
    with pytest.raises(InputError, match="contains ';'"):
        read(tmp_path / "semi.csv")
    (tmp_path / "dupe.csv").write_text("name,age,age\nann,3,4\n")
    with pytest.raises(InputError, match=r"duplicate column name\(s\) \['age'\]"):
        read(tmp_path / "dupe.csv")
    (tmp_path / "latin.csv").write_bytes("name,age,score\n".encode() + "jos\xe9,3,0.5\n".encode("latin-1"))
    with pytest.raises(InputError, match="not UTF-8"):
        read(tmp_path / "latin.csv")
    (tmp_path / "ragged.csv").write_text("name,age,score\nann,3,0.5\nbob,4,0.5,extra,more\n")
    with pytest.raises(InputError, match="malformed CSV"):
        read(tmp_path / "ragged.csv")
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(InputError, match="not a readable Parquet file"):
        read(tmp_path / "bad.parquet")
    rows = "".join(f"ann,{i % 100},{(i * 7919) % 1000 / 1000}\n" for i in range(20_000)).encode()
    whole = gzip.compress(b"name,age,score\n" + rows)
    (tmp_path / "trunc.csv.gz").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(InputError, match="cannot be read"):
        read(tmp_path / "trunc.csv.gz")


def test_sql_source_errors(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        list(iter_source(parse_source(f"duckdb:{tmp_path / 'none.duckdb'}?table=t"), SCHEMA))
    db = tmp_path / "w.duckdb"
    duckdb.connect(str(db)).close()
    with pytest.raises(InputError, match="DuckDB source") as info:
        list(iter_source(parse_source(f"duckdb:{db}?table=missing_table"), SCHEMA))
    assert "missing_table" in str(info.value)


# ---------------------------------------------------------------- coerce_batch

def test_coerce_batch_types_and_specials():
    frame = pd.DataFrame({"name": ["ann", None], "age": [" 30 ", ""], "score": ["nan", "inf"], "extra": [1, None]})
    out = coerce_batch(frame, SCHEMA, "input x")
    assert out["name"].tolist() == ["ann", None]
    assert out["age"].dtype == np.float64 and out["age"].iloc[0] == 30.0 and np.isnan(out["age"].iloc[1])
    # 'nan' / 'inf' spellings stay as floats for validation to name; they are not "non-numbers".
    assert np.isnan(out["score"].iloc[0]) and np.isinf(out["score"].iloc[1])
    assert out["extra"].tolist() == ["1", None]
    numeric = coerce_batch(pd.DataFrame({"age": np.array([1, 2], dtype=np.int64), "score": [True, False]}), SCHEMA, "x")
    assert numeric["age"].dtype == np.float64 and numeric["score"].tolist() == [1.0, 0.0]


@pytest.mark.parametrize("column, values, problem", [
    ("age", ["30", "thirty-one", "SECRET-VALUE"], r"column 'age' has value\(s\) that are not numbers \(the schema says integer\)"),
    ("score", ["0.5", "SECRET-VALUE"], r"column 'score' has value\(s\) that are not numbers \(the schema says float\)"),
    ("age", ["30", "30.25", "7.5"], r"column 'age' has non-integer value\(s\)"),
    ("age", [30.0, 12.125], r"column 'age' has non-integer value\(s\)"),
])
def test_coerce_batch_errors_name_column_not_value(column, values, problem):
    with pytest.raises(InputError, match=problem) as info:
        coerce_batch(pd.DataFrame({column: values}), SCHEMA, "input x")
    message = str(info.value)
    assert message.startswith("input x: ")
    for value in values:
        if str(value) not in ("30", "30.0"):
            assert str(value) not in message


def test_coerce_batch_integer_coded_categories():
    schema = parse_schema({"name": "t", "columns": [{"name": "k", "type": "categorical", "categories": ["1", "2"], "nullable": True}]})
    out = coerce_batch(pd.DataFrame({"k": [1.0, None, 2.0]}), schema, "x")
    assert out["k"].tolist() == ["1", None, "2"]


def test_raw_arrow_schema_accepts_coerced_batches():
    frame = coerce_batch(pd.DataFrame({"name": ["ann"], "age": ["3"], "score": [""], "extra": ["z"]}), SCHEMA, "x")
    target = raw_arrow_schema(SCHEMA, ["extra"])
    table = pa.Table.from_pandas(frame[target.names], schema=target, preserve_index=False)
    assert table.schema.field("age").type == pa.float64() and table.column("score").null_count == 1


# ---------------------------------------------------------------- atomic artifacts

def test_atomic_parquet_writer_discards_on_error(tmp_path):
    target = tmp_path / "out.parquet"
    schema = pa.schema([("x", pa.int64())])
    with pytest.raises(RuntimeError, match="boom"):
        with AtomicParquetWriter(target, schema) as writer:
            writer.write(pa.table({"x": [1, 2, 3]}, schema=schema))
            raise RuntimeError("boom")
    assert not target.exists()
    assert no_leftovers(tmp_path) and list(tmp_path.iterdir()) == []
    # A previous complete file survives a failed rewrite untouched.
    atomic_write_table(target, pa.table({"x": [7]}, schema=schema))
    before = sha256_file(target)
    with pytest.raises(RuntimeError):
        with AtomicParquetWriter(target, schema) as writer:
            writer.write(pa.table({"x": [1]}, schema=schema))
            raise RuntimeError("boom")
    assert sha256_file(target) == before and no_leftovers(tmp_path)
    with AtomicParquetWriter(target, schema) as writer:
        for i in range(3):
            writer.write(pa.table({"x": [i, i]}, schema=schema))
    assert writer.rows == 6 and pq.read_table(target).column("x").to_pylist() == [0, 0, 1, 1, 2, 2]
    assert [b.num_rows for b in iter_parquet(target, batch_rows=4)] == [4, 2]
    assert no_leftovers(tmp_path)


def test_atomic_write_bytes_never_leaves_partial_file(tmp_path, monkeypatch):
    target = tmp_path / "sub" / "a.json"
    atomic_write_json(target, {"a": np.int64(1), "b": np.float32(0.5), "c": np.arange(2), "p": Path("x")})
    assert json.loads(target.read_text()) == {"a": 1, "b": 0.5, "c": [0, 1], "p": "x"}
    before = target.read_bytes()

    def failing_fsync(fd):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="disk full"):
        atomic_write_bytes(target, b"x" * 100_000)
    monkeypatch.undo()
    assert target.read_bytes() == before
    assert no_leftovers(target.parent)
    with pytest.raises(TypeError, match="not JSON serialisable"):
        atomic_write_json(target, {"x": object()})
    assert target.read_bytes() == before and no_leftovers(target.parent)


def test_sha256_file(tmp_path):
    import hashlib

    path = tmp_path / "f.bin"
    data = os.urandom(3 << 20)
    path.write_bytes(data)
    assert sha256_file(path) == hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------- sinks

def test_write_sink_duckdb_replaces_table(tmp_path):
    sink = f"duckdb:{tmp_path / 'out' / 'w.duckdb'}?table=synthetic_people"
    first = pa.table({"x": [1, 2, 3], "y": ["a", "b", "c"]})
    assert "synthetic_people" in write_sink(first, sink)
    second = pa.table({"z": [9.5]})
    write_sink(second, sink)
    con = duckdb.connect(str(tmp_path / "out" / "w.duckdb"), read_only=True)
    try:
        assert con.execute("SELECT * FROM synthetic_people").fetchall() == [(9.5,)]
        assert [r[0] for r in con.execute("DESCRIBE synthetic_people").fetchall()] == ["z"]
    finally:
        con.close()


def test_write_sink_files_and_errors(tmp_path):
    table = pa.table({"x": [1, 2], "y": ["a", None]})
    write_sink(table, str(tmp_path / "s.parquet"))
    assert pq.read_table(tmp_path / "s.parquet").equals(table)
    write_sink(table, str(tmp_path / "s.csv"))
    assert (tmp_path / "s.csv").read_text().splitlines() == ["x,y", "1,a", "2,"]
    for bad in ("out.json", "duckdb:w.duckdb", "duckdb:w.duckdb?table=x;drop"):
        with pytest.raises(InputError, match="--sink"):
            write_sink(table, str(tmp_path / bad) if not bad.startswith("duckdb") else bad)


def test_check_writable_directory(tmp_path):
    made = check_writable_directory(tmp_path / "a" / "b")
    assert made.is_dir() and list(made.iterdir()) == []
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(InputError, match="cannot be written"):
        check_writable_directory(blocker / "sub")
    with pytest.raises(InputError, match="cannot be written"):
        check_writable_directory(blocker)


def test_duckdb_errors_do_not_quote_cell_values(tmp_path):
    db = tmp_path / "w.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE t AS SELECT 'SECRET-VALUE' AS name")
    con.close()
    with pytest.raises(InputError, match="DuckDB source") as info:
        list(iter_source(parse_source(f"duckdb:{db}?query=SELECT CAST(name AS INTEGER) AS age FROM t"), SCHEMA))
    assert "SECRET-VALUE" not in str(info.value)
    with pytest.raises(InputError, match="nope"):
        list(iter_source(parse_source(f"duckdb:{db}?query=SELECT nope FROM t"), SCHEMA))


def test_sql_source_password_reference_is_expanded_only_at_connect_time(monkeypatch):
    # The documented form of a password in --input: a ${VAR} reference, expanded when the connection opens.
    import sqlalchemy

    seen = []

    def engine_spy(url, *args, **kwargs):
        seen.append(str(url))
        raise sqlalchemy.exc.ArgumentError("stopped by the test")

    monkeypatch.setattr(sqlalchemy, "create_engine", engine_spy)
    monkeypatch.setenv("WAREHOUSE_PASSWORD", "s3cr3t")
    spec = parse_source("postgresql+psycopg://analyst:${WAREHOUSE_PASSWORD}@db.example/warehouse?table=people")
    assert "${WAREHOUSE_PASSWORD}" in spec.location  # the parameter holds the variable's name only
    with pytest.raises(InputError) as info:
        list(iter_source(spec, SCHEMA))
    assert seen == ["postgresql+psycopg://analyst:s3cr3t@db.example/warehouse"]
    assert "s3cr3t" not in str(info.value)


# ---------------------------------------------------------------- dates and timestamps

DATES = parse_schema({"name": "d", "columns": [
    {"name": "day", "type": "date", "bounds": ["2019-01-01", "2020-12-31"], "bin_by": "month", "nullable": True},
    {"name": "at", "type": "timestamp", "bounds": ["2020-03-01", "2020-03-08"], "bin_by": "day"},
]})


def test_coerce_batch_reads_dates_and_timestamps_into_the_raw_types():
    import datetime as dt

    from privsynth.schema.encoding import encode_codes

    text = pd.DataFrame({"day": ["2019-05-06", "", " 2020-12-31"], "at": ["2020-03-01T10:00:00.7", "2020-03-02", "2020-03-07 23:59:59"]})
    out = coerce_batch(text, DATES, "x")
    assert out["day"].tolist() == [dt.date(2019, 5, 6), None, dt.date(2020, 12, 31)]
    assert out["at"].tolist()[0] == pd.Timestamp("2020-03-01 10:00:00")  # floored to the second
    table = pa.Table.from_pandas(out, schema=raw_arrow_schema(DATES, []), preserve_index=False)
    assert table.schema.field("day").type == pa.date32() and table.schema.field("at").type == pa.timestamp("us")
    np.testing.assert_array_equal(encode_codes(out, DATES), encode_codes(text, DATES))
    with pytest.raises(InputError, match=r"^x: column 'day' has value\(s\) that are not dates \(the schema says date\)$"):
        coerce_batch(text.assign(day=["2019-05-06", "SECRET", None]), DATES, "x")


def test_write_sink_duckdb_keeps_date_and_timestamp_types(tmp_path):
    from privsynth.schema.encoding import arrow_schema, decode_codes

    frame = decode_codes(np.array([[0, 0], [23, 6], [24, 3]], dtype=np.int32), DATES, np.random.default_rng(0))
    table = pa.Table.from_pandas(frame, schema=arrow_schema(DATES), preserve_index=False)
    sink = f"duckdb:{tmp_path / 'w.duckdb'}?table=synthetic_dates"
    write_sink(table, sink)
    con = duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True)
    try:
        assert [r[1] for r in con.execute("DESCRIBE synthetic_dates").fetchall()] == ["DATE", "TIMESTAMP"]
        back = con.execute("SELECT * FROM synthetic_dates").arrow()
    finally:
        con.close()
    back = back.read_all() if hasattr(back, "read_all") else back
    assert back.column("day").to_pylist() == table.column("day").to_pylist()
    assert back.column("at").to_pylist() == table.column("at").to_pylist()
