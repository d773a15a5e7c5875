"""Sinks: where the synthetic table goes (``--sink``), by URL; the same URL forms as ``--input``.

* ``out/synthetic.parquet`` or ``out/synthetic.csv``: an atomic file write (temporary sibling, rename);
* ``duckdb:path/to/w.duckdb?table=NAME``: DuckDB, the table replaced in one statement (``CREATE OR REPLACE``);
* ``postgresql+psycopg://user@host:5432/db?table=NAME`` (also ``postgresql://``, ``postgres://``):
  PostgreSQL through ibis (psycopg 3), the table created under a temporary name, the old one dropped
  and the new one renamed in ONE transaction: readers see the old table or the new one, never half.
  The password comes from the environment (``PGPASSWORD``, or libpq's ``~/.pgpass``), never from the URL;
* any other ibis backend URL with ``?table=NAME`` (``ibis.connect``), replaced with ibis's
  ``create_table(overwrite=True)``: untested, atomic only where that backend makes it so.

The table keeps the schema's types: integers stay BIGINT, floats DOUBLE, booleans BOOLEAN, categories
text (the Arrow dictionary is cast to plain strings, a type every backend has), and a column the source stores
otherwise keeps its storage type (``stored_as``: DECIMAL(12, 2), a TIMESTAMPTZ), where the backend has it: beyond
DuckDB, an unsigned integer is written in the signed type that holds it, a nanosecond moment in microseconds.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs

import pyarrow as pa

from privsynth.io.atomic import atomic_write_bytes, atomic_write_table
from privsynth.io.connections import InputError, connect_url, duckdb_path, plain_table_name
from privsynth.io.credentials import redact_url

SQL_SCHEMES = ("postgresql", "postgresql+psycopg", "postgres")


@dataclass(frozen=True)
class SinkSpec:
    kind: str  # "duckdb" | "postgres" | "ibis" | "parquet" | "csv"
    location: str  # a path, or the connection URL without ?table= (may hold credentials: show redact_url of it)
    table: str | None = None

    def describe(self) -> str:
        """Public description: credentials masked."""
        if self.table is None:
            return self.location
        return f"{redact_url(self.location)} table {self.table}"


def parse_sink(sink: str) -> SinkSpec:
    """Parse a ``--sink`` argument; raises InputError on an unknown form or an unsafe table name."""
    if not sink or not isinstance(sink, str):
        raise InputError("--sink must be a path or URL")
    lowered = sink.lower()
    base, _, query_string = sink.partition("?")
    scheme = base.split("://", 1)[0].lower() if "://" in base else ""
    if lowered.startswith("duckdb:") or scheme:
        params = {k: v[-1] for k, v in parse_qs(query_string).items()}
        name = params.get("table")
        if lowered.startswith("duckdb:"):
            if not name or not plain_table_name(name):
                raise InputError(f"--sink {redact_url(sink)!r}: "
                                 "expected duckdb:PATH?table=NAME with a plain table name")
            return SinkSpec("duckdb", duckdb_path(base), name)
        if not name or not plain_table_name(name):
            raise InputError(f"--sink {redact_url(sink)!r}: expected {scheme}://...?table=NAME with a plain table name")
        others = "&".join(p for p in query_string.split("&") if p and not p.lower().startswith("table="))
        location = base + ("?" + others if others else "")
        return SinkSpec("postgres" if scheme in SQL_SCHEMES else "ibis", location, name)
    for suffix in ("parquet", "csv"):
        if lowered.endswith("." + suffix):
            return SinkSpec(suffix, sink)
    raise InputError(f"--sink {redact_url(sink)!r}: expected duckdb:PATH?table=NAME, "
                     "postgresql+psycopg://USER@HOST/DB?table=NAME, another ibis backend URL with ?table=NAME, or a "
                     ".parquet or .csv path")


# SQL has no unsigned integers (PostgreSQL, Spark): the next signed type holds every value; UBIGINT's need NUMERIC(20)
_SIGNED = {pa.uint8(): pa.int16(), pa.uint16(): pa.int32(), pa.uint32(): pa.int64(), pa.uint64(): pa.decimal128(20, 0)}


def in_sql(t: pa.DataType) -> pa.DataType:
    """The type a SQL backend without unsigned integers or nanoseconds (PostgreSQL, Spark) holds a column of ``t``
    in: an unsigned integer in the signed type that holds it, a nanosecond moment in microseconds."""
    if t in _SIGNED:
        return _SIGNED[t]
    if pa.types.is_timestamp(t) and t.unit == "ns":
        return pa.timestamp("us", tz=t.tz)
    return t


def portable_type(t: pa.DataType, duckdb: bool) -> pa.DataType:
    """A column type every SQL backend has: categories as plain strings; beyond DuckDB, unsigned integers as the
    signed type that holds them and nanosecond moments in microseconds (PostgreSQL's finest)."""
    if pa.types.is_dictionary(t):
        return t.value_type
    return t if duckdb else in_sql(t)


def portable_table(table: pa.Table, duckdb: bool = True) -> pa.Table:
    """The synthetic table in types the sink's backend has (``portable_type``); values unchanged."""
    fields = [pa.field(f.name, portable_type(f.type, duckdb), nullable=True) for f in table.schema]
    return table.cast(pa.schema(fields))


def _split_name(name: str) -> tuple[str | None, str]:
    """``schema.table`` -> (schema, table); ``table`` -> (None, table)."""
    database, _, table = name.rpartition(".")
    return (database or None), table


def write_sink(table: pa.Table, sink: str) -> str:
    """Write the synthetic table to a sink; returns a public description of where it went (no credentials)."""
    spec = parse_sink(sink)
    if spec.kind == "parquet":
        atomic_write_table(sink, table)
        return sink
    if spec.kind == "csv":
        buffer = io.BytesIO()
        table.to_pandas().to_csv(buffer, index=False)
        atomic_write_bytes(sink, buffer.getvalue())
        return sink
    data = portable_table(table, duckdb=spec.kind == "duckdb")
    if spec.kind == "duckdb":
        _write_duckdb(data, spec)
        return f"duckdb:{spec.location} table {spec.table}"

    try:
        con = connect_url(spec.location)
    except InputError as err:
        raise InputError(str(err).replace("--input", "--sink")) from None
    database, name = _split_name(spec.table)
    try:
        con.create_table(name, data, database=database, overwrite=True)
    except Exception as err:  # noqa: BLE001  (driver errors can quote the URL: name the kind only)
        raise InputError(f"--sink {spec.describe()}: the table cannot be written ({type(err).__name__})") from None
    finally:
        con.disconnect()
    return spec.describe()


def _write_duckdb(data: pa.Table, spec: SinkSpec) -> None:
    import duckdb

    Path(spec.location).parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(spec.location)
    try:
        # CREATE OR REPLACE is one statement, so one transaction: readers see the old or the new table.
        con.register("privsynth_staged", data)
        con.execute(f"CREATE OR REPLACE TABLE {spec.table} AS SELECT * FROM privsynth_staged")
    finally:
        con.close()
