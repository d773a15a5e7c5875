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

from privsynth.engine import open_source
from privsynth.engine.sources import parse_source
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
from privsynth.schema.encoding import encode_codes
from privsynth.schema.workload import Histogram

SCHEMA = parse_schema({"name": "people", "columns": [
    {"name": "name", "type": "categorical", "categories": ["ann", "bob", "cy"]},
    {"name": "age", "type": "integer", "bounds": [0, 100], "bins": [0, 50, 100]},
    {"name": "score", "type": "float", "bounds": [0, 1], "bins": [0, 0.5, 1], "nullable": True},
]})
ROWS = pd.DataFrame({"name": ["ann", "bob", "cy", "ann"], "age": ["30", "41", "7", "99"],
                     "score": ["0.5", "", "0.25", "1"]})


def histogram(source) -> Histogram:
    """The source's histogram, counted by the engine where the rows live."""
    with open_source(source, SCHEMA) as src:
        return src.histogram()


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
    assert (spec.kind, spec.location, spec.table, spec.query) == ("sql", "duckdb:warehouse/w.duckdb", "main.people",
                                                                  None)
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
            "_typed": typed, "_tmp": tmp_path}


def test_every_source_form_gives_the_same_histogram(written_sources):
    typed = written_sources["_typed"]
    expected = Histogram.of_codes(encode_codes(typed, SCHEMA))
    for key in ("csv", "gz", "tsv", "parquet", "duckdb_table", "duckdb_query"):
        got = histogram(written_sources[key])
        assert np.array_equal(got.codes, expected.codes) and np.array_equal(got.counts, expected.counts), key


def test_file_source_errors(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        histogram(str(tmp_path / "missing.csv"))
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(InputError, match="is empty"):
        histogram(str(tmp_path / "empty.csv"))
    (tmp_path / "semi.csv").write_text("name;age;score\nann;3;0.5\n")
    with pytest.raises(InputError, match="contains ';'"):
        histogram(str(tmp_path / "semi.csv"))
    (tmp_path / "dupe.csv").write_text("name,age,age\nann,3,4\n")
    with pytest.raises(InputError, match=r"duplicate column name\(s\) \['age'\]"):
        histogram(str(tmp_path / "dupe.csv"))
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(InputError):
        histogram(str(tmp_path / "bad.parquet"))


def test_sql_source_errors(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        histogram(f"duckdb:{tmp_path / 'none.duckdb'}?table=t")
    db = tmp_path / "w.duckdb"
    duckdb.connect(str(db)).close()
    with pytest.raises(InputError, match="DuckDB source .*: table not found"):
        histogram(f"duckdb:{db}?table=missing_table")


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
    con.execute("CREATE TABLE t AS SELECT 'SECRET-VALUE' AS name, 3 AS age, 0.5 AS score")
    con.close()
    with pytest.raises(InputError) as info:
        histogram(f"duckdb:{db}?query=SELECT name, CAST(name AS INTEGER) AS age, score FROM t")
    assert "SECRET-VALUE" not in str(info.value)
    with pytest.raises(InputError, match="nope"):
        histogram(f"duckdb:{db}?query=SELECT nope FROM t")


# ---------------------------------------------------------------- dates and timestamps

DATES = parse_schema({"name": "d", "columns": [
    {"name": "day", "type": "date", "bounds": ["2019-01-01", "2020-12-31"], "bin_by": "month", "nullable": True},
    {"name": "at", "type": "timestamp", "bounds": ["2020-03-01", "2020-03-08"], "bin_by": "day"},
]})


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
