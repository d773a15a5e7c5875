"""Connections and source tables by URL: where the engine's queries run.

Source forms (``open_source``'s ``data``; the ``--input`` forms):

==========================================================  ==================================================
``path/t.csv`` ``.csv.gz`` ``.tsv`` ``.tsv.gz``             DuckDB ``read_csv`` in place (all columns as text,
                                                            as the pandas path reads them)
``path/t.parquet``, ``'data/*.parquet'`` (a glob)           DuckDB ``read_parquet`` in place
``s3://bucket/t.parquet`` (any fsspec URL, also CSV)        DuckDB through the fsspec file system
``duckdb:path/w.duckdb?table=NAME``                         the DuckDB file, read-only, sandboxed
``duckdb:path/w.duckdb?query=SELECT ...``                   one sandboxed SELECT (``engine.sandbox``)
``postgresql+psycopg://user@host:5432/db?table=NAME``       PostgreSQL (psycopg 3); also ``postgresql://``,
                                                            ``postgres://`` and ``?query=SELECT ...``; the
                                                            password from ``PGPASSWORD`` / ``~/.pgpass``
``spark:NAME`` / ``spark:?query=SELECT ...``                a table or view of the active SparkSession, or of
                                                            one built from ``PRIVSYNTH_SPARK_MASTER`` and
                                                            ``PRIVSYNTH_SPARK_CONF`` (``engine.spark``)
``spark:FORMAT:PATH`` (parquet, csv, orc, json)             files or an object store (``s3a://...``) read by
                                                            the cluster into a temporary view
``SCHEME://...?table=NAME``                                 any other ibis backend (``ibis.connect``): UNTESTED
a pandas / polars DataFrame, pyarrow Table or Dataset       registered in an in-memory DuckDB (no copy)
==========================================================  ==================================================

DuckDB runs out of core and in parallel; ``EngineOptions`` (or the ``PRIVSYNTH_DUCKDB_THREADS``,
``PRIVSYNTH_DUCKDB_MEMORY_LIMIT``, ``PRIVSYNTH_DUCKDB_TEMP_DIRECTORY`` environment variables) bound
its threads, memory and spill folder. Opening reads metadata only (file footers, CSV header, catalog
types). Credentials never appear in a description or an error (``io.redact_url``).
"""

from __future__ import annotations

import csv
import glob as globbing
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import ibis
import ibis.backends.duckdb
import ibis.expr.types as ir
import pyarrow as pa
import pyarrow.parquet as pq

from privsynth.engine.csv_lines import first_line_query, records_query
from privsynth.engine.sandbox import SandboxError, check_select, lock, open_duckdb_sandboxed
from privsynth.engine.sources import SourceSpec, _check_file, _csv_header, _parse_sql, _split_source_parameters
from privsynth.engine.spark import drop_view, register_files, spark_files, spark_session
from privsynth.io.connections import InputError, connect_url, duckdb_path, plain_table_name
from privsynth.io.credentials import redact_url
from privsynth.schema import Schema

CSV_SUFFIXES = (".csv", ".csv.gz", ".tsv", ".tsv.gz")
PARQUET_SUFFIXES = (".parquet", ".pq")


@dataclass(frozen=True)
class EngineOptions:
    """Resources of the embedded DuckDB (None: DuckDB's default, or the environment variable)."""

    threads: int | None = None
    memory_limit: str | None = None  # e.g. "1GB"
    temp_directory: str | None = None  # where DuckDB spills when the memory limit is reached

    def duckdb_config(self) -> dict[str, Any]:
        threads = self.threads or os.environ.get("PRIVSYNTH_DUCKDB_THREADS")
        memory = self.memory_limit or os.environ.get("PRIVSYNTH_DUCKDB_MEMORY_LIMIT")
        temp = self.temp_directory or os.environ.get("PRIVSYNTH_DUCKDB_TEMP_DIRECTORY")
        # Row order is irrelevant to counts; not keeping it lets DuckDB stream with less memory.
        config: dict[str, Any] = {"preserve_insertion_order": False}
        if threads:
            config["threads"] = int(threads)
        if memory:
            config["memory_limit"] = str(memory)
        if temp:
            config["temp_directory"] = str(temp)
        return config


@dataclass
class OpenedTable:
    """A source table on its backend: the ibis table, how to describe it, how to close it."""

    backend: Any  # an ibis backend
    table: ir.Table
    description: str
    text_from_csv: bool = False  # every column is CSV text (empty field = missing, leading blanks dropped)
    closers: list[Callable[[], None]] = field(default_factory=list)

    def close(self) -> None:
        for close in reversed(self.closers):
            try:
                close()
            except Exception:  # noqa: BLE001  (closing must not mask the error that ended the work)
                pass
        self.closers.clear()


# ---------------------------------------------------------------- errors

def backend_error(err: Exception, origin: str) -> InputError:
    """An InputError for a backend error, value-free: only catalog/binder/parser errors (about names in the
    query) are quoted; any other message (a conversion error, a CSV line) may hold a cell value."""
    name = type(err).__name__
    text = str(err)
    if "Invalid unicode" in text or "UnicodeDecodeError" in name or "invalid byte sequence" in text.lower():
        return InputError(f"{origin} is not UTF-8 text (an invalid byte sequence); expected UTF-8, re-encode the file")
    if "Expected Number of Columns" in text or "too many columns" in text.lower() or "CSV Error" in text:
        return InputError(f"{origin}: malformed CSV (a row has the wrong number of fields or bad quoting)")
    try:
        import duckdb

        if isinstance(err, (duckdb.CatalogException, duckdb.BinderException, duckdb.ParserException)):
            return InputError(f"{origin}: {text.splitlines()[0]}")
        if isinstance(err, duckdb.PermissionException):
            return InputError(f"{origin}: refused by the sandbox (file and network access are disabled)")
    except ImportError:  # pragma: no cover
        pass
    if isinstance(err, ibis.common.exceptions.TableNotFound):
        return InputError(f"{origin}: table not found")
    return InputError(f"{origin}: {name} while reading the rows")


# ---------------------------------------------------------------- DuckDB

def duckdb_backend(options: EngineOptions, database: str = ":memory:"):
    """An ibis DuckDB backend on a fresh in-memory (or file) database with the engine's settings."""
    import duckdb

    con = duckdb.connect(database, config=options.duckdb_config())
    return ibis.duckdb.from_connection(con)


def _expand_files(location: str, suffixes: tuple[str, ...]) -> list[str]:
    if any(ch in location for ch in "*?["):
        files = sorted(globbing.glob(location, recursive=True))
        if not files:
            raise InputError(f"input {location!r}: no file matches the pattern")
        return files
    _check_file(SourceSpec("parquet" if location.lower().endswith(PARQUET_SUFFIXES) else "csv", location))
    return [location]


def _check_parquet_footers(files: list[str], filesystem=None) -> None:
    """Footers only: a truncated file or repeated column names are refused before any row is read."""
    first: pa.Schema | None = None
    for path in files:
        try:
            schema = pq.read_schema(path, filesystem=filesystem)
        except (pa.ArrowInvalid, OSError) as err:
            raise InputError(f"input file {path!r} is not a readable Parquet file ({type(err).__name__}; truncated or "
                             "corrupt?)") from None
        names = schema.names
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise InputError(f"input file {path!r}: duplicate column name(s) {dupes}")
        if first is None:
            first = schema
        elif set(schema.names) != set(first.names):
            raise InputError(f"input {path!r}: its columns differ from those of {files[0]!r}; the files of one input "
                             "must share their columns")


def _open_csv(location: str, schema: Schema, options: EngineOptions, filesystem=None) -> OpenedTable:
    tsv = ".tsv" in location.lower()
    spec = SourceSpec("csv", location, delimiter="\t" if tsv else ",")
    if filesystem is None:
        _check_file(spec)
        header = _csv_header(spec, schema)  # empty file, non-UTF-8 header, duplicates, wrong delimiter
    else:
        header = None
    backend = duckdb_backend(options)
    if filesystem is not None:
        backend.register_filesystem(filesystem)
    origin = f"input file {location!r}"
    try:
        if header is None:
            header = _remote_csv_header(backend, location, spec.delimiter)
        name = f"privsynth_{uuid.uuid4().hex[:8]}"
        # One line, one record (engine/csv_lines.py): no line can change how another reads, and none fails the run.
        backend.con.execute(f"CREATE TEMP VIEW {name} AS {records_query(location, header, spec.delimiter)}")
        table = backend.table(name)
    except InputError:
        backend.disconnect()
        raise
    except Exception as err:  # noqa: BLE001
        backend.disconnect()
        raise backend_error(err, origin) from None
    return OpenedTable(backend, table, f"csv:{location}", text_from_csv=True, closers=[backend.disconnect])


def _remote_csv_header(backend, location: str, delimiter: str) -> list[str]:
    """The header of a CSV on an fsspec file system, read as its records are (its first physical line)."""
    rows = backend.con.execute(first_line_query(location)).fetchall()
    first = (rows[0][0] or "") if rows else ""
    if not first.strip():
        raise InputError(f"input file {location!r} has no header row")
    return [h.strip() for h in next(csv.reader([first.lstrip("\ufeff")], delimiter=delimiter))]


def _open_parquet(location: str, options: EngineOptions, filesystem=None) -> OpenedTable:
    if filesystem is None:
        files = _expand_files(location, PARQUET_SUFFIXES)
        _check_parquet_footers(files)
    else:
        _check_parquet_footers([location.split("://", 1)[1]], filesystem)
        files = [location]
    backend = duckdb_backend(options)
    if filesystem is not None:
        backend.register_filesystem(filesystem)
    try:
        table = backend.read_parquet(files if len(files) > 1 else files[0],
                                     table_name=f"privsynth_{uuid.uuid4().hex[:8]}")
    except Exception as err:  # noqa: BLE001
        backend.disconnect()
        raise backend_error(err, f"input {location!r}") from None
    return OpenedTable(backend, table, f"parquet:{location}", closers=[backend.disconnect])


def _table_ref(backend, name: str, origin: str) -> ir.Table:
    if not plain_table_name(name):
        raise InputError(f"{origin}: table name {name!r} must be letters, digits, '_' and '.' only")
    database, _, table = name.rpartition(".")
    try:
        return backend.table(table, database=database or None)
    except Exception as err:  # noqa: BLE001
        raise backend_error(err, origin) from None


def _sql_query(backend, query: str, dialect: str, origin: str) -> ir.Table:
    try:
        check_select(query, dialect=dialect, where=origin)
    except SandboxError as err:
        raise InputError(str(err)) from None
    try:
        return backend.sql(query, dialect=dialect)
    except Exception as err:  # noqa: BLE001
        raise backend_error(err, origin) from None


def _open_duckdb_file(spec: str, options: EngineOptions) -> OpenedTable:
    base, _, query_string = spec.partition("?")
    params, others = _split_source_parameters(query_string)
    if others:
        names = sorted({piece.partition("=")[0] for piece in others})
        raise InputError(f"--input: a duckdb: source takes ?table=NAME or ?query=SELECT..., not {names}")
    table, query = params.get("table"), params.get("query")
    if bool(table) == bool(query and query.strip()):
        raise InputError(f"--input {base!r}: a duckdb: source needs exactly one of ?table=NAME or ?query=SELECT...")
    path = duckdb_path(base)
    if not Path(path).is_file():
        raise InputError(f"DuckDB database {path!r} does not exist")
    import duckdb

    try:
        raw = open_duckdb_sandboxed(path, options.duckdb_config())
    except duckdb.Error as err:
        raise InputError(f"DuckDB database {path!r} cannot be opened: {type(err).__name__}") from None
    backend = _ibis_backend(raw)
    lock(raw)
    origin = f"DuckDB source duckdb:{path}"
    try:
        expr = _table_ref(backend, table, origin) if table else _sql_query(backend, query, "duckdb", origin)
    except Exception:
        raw.close()
        raise
    return OpenedTable(backend, expr, f"duckdb:{path}" + (f" table={table}" if table else " (query)"),
                       closers=[raw.close])


def _ibis_backend(raw):
    """The ibis backend on a sandboxed connection. ibis sets the session time zone (UTC) as it connects: before
    the lock. A second connection to a database this process holds open (the fine-decoding counts reopen the
    source) shares its locked configuration, time zone included: it takes the backend without that setting."""
    locked = raw.execute("SELECT current_setting('lock_configuration')").fetchone()[0]
    if not locked:
        backend = ibis.duckdb.from_connection(raw)
        raw.execute("SET GLOBAL TimeZone = 'UTC'")  # the default of every later connection to this database
        return backend
    if raw.execute("SELECT current_setting('TimeZone')").fetchone()[0] != "UTC":
        raise InputError("a DuckDB database already open in this process with another time zone cannot be read")
    return _LockedDuckDB.from_connection(raw)


class _LockedDuckDB(ibis.backends.duckdb.Backend):
    """ibis's DuckDB backend on a connection whose configuration is locked and already set (UTC, no replacements)."""

    def _post_connect(self, extensions=None) -> None:
        self._record_batch_readers_consumed = {}


def _open_frame(data: Any, options: EngineOptions) -> OpenedTable:
    kind = type(data).__module__.split(".")[0] + "." + type(data).__name__
    names = [str(c) for c in data.columns] if hasattr(data, "columns") else None
    if names is None and hasattr(data, "schema"):
        names = list(data.schema.names)
    if names is not None:
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise InputError(f"input {kind}: duplicate column name(s) {dupes}")
    if type(data).__module__.startswith("polars"):
        data = data.to_arrow()
    backend = duckdb_backend(options)
    name = f"privsynth_{uuid.uuid4().hex[:8]}"
    try:
        if type(data).__module__.startswith("pandas"):
            # Scanned once into a DuckDB table, typed by DuckDB's own pandas scan (and the options' sampling
            # of object columns). A registered frame is scanned anew by every query naming it, its columns
            # converted to NumPy each time: a run's counting queries (a UNION ALL of one part per marginal)
            # then held a copy of the frame per part (over 20 GB for 100,000 x 200).
            backend.con.register(f"{name}_frame", data)
            backend.con.execute(f'CREATE TABLE "{name}" AS SELECT * FROM "{name}_frame"')
            backend.con.unregister(f"{name}_frame")
        else:
            backend.con.register(name, data)  # a zero-copy view of Arrow data
        table = backend.table(name)
    except Exception as err:  # noqa: BLE001
        backend.disconnect()
        raise InputError(f"input {kind}: cannot be scanned by DuckDB ({type(err).__name__})") from None
    return OpenedTable(backend, table, f"in-memory {kind}", closers=[backend.disconnect])


# ---------------------------------------------------------------- servers

def _open_server(spec: str) -> OpenedTable:
    parsed = _parse_sql(spec)  # the same parser as --input's early check: one of ?table= / ?query=
    url, table, query = parsed.location, parsed.table, parsed.query
    backend = connect_url(url)
    parts = urlsplit(url.partition("?")[0])
    public = f"{parts.scheme}://{parts.hostname or ''}{':' + str(parts.port) if parts.port else ''}{parts.path}"
    origin = f"SQL source {public}"
    dialect = getattr(backend, "dialect", None) or "postgres"
    dialect = dialect if isinstance(dialect, str) else getattr(backend, "name", "postgres")
    try:
        expr = _table_ref(backend, table, origin) if table else _sql_query(backend, query, dialect, origin)
    except Exception:
        backend.disconnect()
        raise
    return OpenedTable(backend, expr, public + (f" table={table}" if table else " (query)"),
                       closers=[backend.disconnect])


def _open_spark(spec: str) -> OpenedTable:
    rest = spec[len("spark:"):]
    files = spark_files(rest)
    name, _, query_string = rest.partition("?")
    params, others = _split_source_parameters(query_string)
    query = params.get("query")
    if files is None and (others or bool(name) == bool(query and query.strip())):
        raise InputError("--input: expected spark:TABLE, spark:?query=SELECT ... or spark:FORMAT:PATH")
    try:
        session = spark_session()
    except ImportError:
        raise InputError("--input spark:...: pyspark is not installed (pip install 'privsynth[spark]')") from None
    backend = ibis.pyspark.connect(session)
    if files is not None:
        view = register_files(session, files)
        return OpenedTable(backend, _table_ref(backend, view, f"input {files.describe()}"), files.describe(),
                           text_from_csv=files.format == "csv", closers=[lambda: drop_view(session, view)])
    origin = "Spark source " + (name or "(query)")
    expr = _table_ref(backend, name, origin) if name else _sql_query(backend, query, "spark", origin)
    return OpenedTable(backend, expr, f"spark:{name}" if name else "spark: (query)")


# ---------------------------------------------------------------- dispatch

def open_table(data: Any, schema: Schema, options: EngineOptions | None = None) -> OpenedTable:
    """Open ``data`` (a URL / path string, or an in-memory table) as an ibis table; reads metadata only."""
    options = options or EngineOptions()
    if not isinstance(data, (str, os.PathLike)):
        return _open_frame(data, options)
    spec = str(data)
    if not spec:
        raise InputError("--input must be a path or URL")
    lowered = spec.lower()
    if lowered.startswith("duckdb:"):
        return _open_duckdb_file(spec, options)
    if lowered.startswith("spark:"):
        return _open_spark(spec)
    path_part = spec.split("?")[0]
    path_lower = path_part.lower()
    if "://" in path_part:
        scheme = path_part.split("://", 1)[0].lower()
        if scheme == "file":
            return open_table(path_part[len("file://"):], schema, options)
        if path_lower.endswith(CSV_SUFFIXES + PARQUET_SUFFIXES):
            import fsspec

            try:
                filesystem = fsspec.filesystem(scheme)
            except (ImportError, ValueError) as err:
                raise InputError(f"--input {redact_url(spec)!r}: no fsspec file system for {scheme!r} "
                                 f"({type(err).__name__})") from None
            if path_lower.endswith(PARQUET_SUFFIXES):
                return _open_parquet(path_part, options, filesystem)
            return _open_csv(path_part, schema, options, filesystem)
        return _open_server(spec)
    if path_lower.endswith(PARQUET_SUFFIXES):
        return _open_parquet(path_part, options)
    if path_lower.endswith(CSV_SUFFIXES):
        return _open_csv(path_part, schema, options)
    raise InputError(f"--input {spec!r}: expected a .csv, .csv.gz, .tsv or .parquet file (or a glob of Parquet files), "
                     "a duckdb:PATH?table=NAME source, a postgresql+psycopg://USER@HOST/DB?table=NAME URL, "
                     "spark:TABLE, or another ibis backend URL with ?table=NAME")
