"""The DuckDB sandbox: user SQL can read the named database's tables and nothing else (DESIGN 5.7)."""

from __future__ import annotations

import re

import duckdb
import pandas as pd
import pytest

from privsynth.engine import SandboxError, check_select, open_source
from privsynth.engine.sandbox import lock, open_duckdb_sandboxed
from privsynth.io import InputError
from privsynth.schema import parse_schema

SCHEMA = parse_schema({"name": "people", "columns": [
    {"name": "name", "type": "categorical", "categories": ["ann", "bob"]},
    {"name": "age", "type": "integer", "bounds": [0, 100], "bins": [0, 50, 100]},
]})


@pytest.fixture()
def warehouse(tmp_path):
    path = tmp_path / "w.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE people AS SELECT * FROM (VALUES ('ann', 30), ('bob', 70)) t(name, age)")
    con.close()
    (tmp_path / "secret.csv").write_text("name,age\nann,1\n")
    return path


ATTACKS = [
    ("COPY (SELECT 1 AS name, 2 AS age) TO '{out}'", r"a COPY statement; only a single SELECT is allowed"),
    ("SELECT * FROM read_csv_auto('/etc/passwd')",
     r"a table function in FROM; only named tables of the database may be read"),
    ("SELECT * FROM read_csv('{secret}')", r"a table function in FROM"),
    ("SELECT * FROM '{secret}'", r"a file path in FROM; only named tables of the database may be read"),
    ("SELECT name, age FROM people; COPY people TO '{out}'", r"2 statements; expected exactly one SELECT statement"),
    ("ATTACH '{tmp}/other.duckdb' AS o", r"only a single SELECT is allowed"),
    ("SET enable_external_access = true", r"only a single SELECT is allowed"),
    ("INSERT INTO people VALUES ('cy', 3)", r"only a single SELECT is allowed"),
    ("SELECT name, (SELECT count(*) FROM glob('/*')) AS age FROM people", r"a table function in FROM"),
    ("SELECT name, length(content) AS age FROM people, read_text('/etc/passwd')", r"a table function in FROM"),
    ("SELECT * INTO stolen FROM people", r"SELECT \.\.\. INTO writes a table"),
    ("SELECT name, getenv('HOME') AS age FROM people", r"function getenv\(\) reads outside the database"),
    ("SELECT name, current_setting('temp_directory') AS age FROM people",
     r"function current_setting\(\) reads outside the database"),
    ("this is not SQL (", r"not valid SQL|only a single SELECT"),
]


@pytest.mark.parametrize("query, refusal", ATTACKS, ids=[a[0][:40] for a in ATTACKS])
def test_attacks_are_refused_with_one_clear_line(query, refusal, warehouse, tmp_path):
    out = tmp_path / "stolen.csv"
    text = query.format(out=out, secret=tmp_path / "secret.csv", tmp=tmp_path)
    with pytest.raises(InputError) as info:
        open_source(f"duckdb:{warehouse}?query={text}", SCHEMA)
    message = str(info.value)
    assert "\n" not in message and re.search(refusal, message), message
    assert "/etc/passwd" not in message and "secret.csv" not in message  # the query text is never quoted
    assert not out.exists() and not (tmp_path / "other.duckdb").exists()


def test_a_plain_select_with_cte_join_and_union_is_accepted(warehouse):
    query = ("WITH p AS (SELECT name, age FROM people) SELECT name, age FROM p WHERE age > 0 "
             "UNION ALL SELECT name, age FROM main.people WHERE name LIKE 'a%'")
    with open_source(f"duckdb:{warehouse}?query={query}", SCHEMA) as src:
        hist = src.histogram()
    assert hist.n == 3
    assert hist.codes.tolist() == [[0, 0], [1, 1]] and hist.counts.tolist() == [2, 1]


def test_the_connection_itself_refuses_file_access_even_without_the_parser(warehouse, tmp_path):
    """The second wall: SQL that slipped past check_select still cannot touch files or re-enable access."""
    con = open_duckdb_sandboxed(warehouse)
    lock(con)
    try:
        for sql in (f"COPY (SELECT 1) TO '{tmp_path / 'x.csv'}'", "SELECT * FROM read_csv_auto('/etc/passwd')",
                    f"ATTACH '{tmp_path / 'o.duckdb'}'", f"SELECT * FROM '{tmp_path / 'secret.csv'}'"):
            with pytest.raises(duckdb.Error):
                con.execute(sql).fetchall()
        with pytest.raises(duckdb.Error, match="configuration"):
            con.execute("SET enable_external_access = true")
        with pytest.raises(duckdb.Error):
            con.execute("CREATE TABLE t2 (a INT)")  # read-only
        assert con.execute("SELECT count(*) FROM people").fetchone() == (2,)
    finally:
        con.close()
    assert not (tmp_path / "x.csv").exists() and not (tmp_path / "o.duckdb").exists()


def test_check_select_returns_the_parsed_query_and_refuses_empty_text():
    assert check_select("SELECT a FROM t").key == "select"
    with pytest.raises(SandboxError, match="0 statements"):
        check_select("  ; ")


def test_a_table_source_is_sandboxed_too(warehouse, tmp_path):
    with open_source(f"duckdb:{warehouse}?table=people", SCHEMA) as src:
        raw = src.opened.backend.con
        with pytest.raises(duckdb.Error):
            raw.execute(f"COPY people TO '{tmp_path / 'y.csv'}'")
        assert src.histogram().n == 2
    assert not (tmp_path / "y.csv").exists()
    with pytest.raises(InputError, match=r"table name 'people; DROP TABLE people' must be letters"):
        open_source(f"duckdb:{warehouse}?table=people; DROP TABLE people", SCHEMA)
    with pytest.raises(InputError, match=r"DuckDB database '.*nope\.duckdb' does not exist"):
        open_source(f"duckdb:{tmp_path / 'nope.duckdb'}?table=people", SCHEMA)
    frame = pd.DataFrame({"name": ["ann"], "age": [1]})
    assert open_source(frame, SCHEMA).histogram().n == 1
