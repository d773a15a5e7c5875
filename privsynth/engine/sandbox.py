"""The sandbox for user SQL (``duckdb:PATH?query=SELECT ...``; docs/design.md 5.7).

Two independent walls, so that a hole in one is not a hole:

1. :func:`check_select` parses the text with sqlglot (ibis's SQL parser) and accepts exactly one
   read-only query: a SELECT (UNION/INTERSECT/EXCEPT and WITH allowed) that reads only named tables,
   with no table function (``read_csv``, ``glob``, ...), no file path in FROM (DuckDB reads
   ``FROM 'file.csv'``), no ``SELECT ... INTO`` and no function that reads or writes files.
2. :func:`open_duckdb_sandboxed` opens the user's database read-only with
   ``enable_external_access = false`` (no file, extension or network access from SQL: COPY, ATTACH,
   read_csv, httpfs all fail) and then locks the configuration, so the query cannot turn it back on.
   Only that one database is attached.

Refusals are one line that names the rule broken; they quote neither the query nor any value.
"""

from __future__ import annotations

from pathlib import Path

import sqlglot
from sqlglot import exp

from privsynth.errors import SandboxError  # noqa: F401  (re-exported: raised here)

# Functions that touch files or the outside world, by name (case-insensitive), wherever they appear.
FILE_FUNCTIONS = frozenset({
    "read_csv", "read_csv_auto", "read_parquet", "parquet_scan", "read_json", "read_json_auto",
    "read_json_objects", "read_ndjson", "read_ndjson_auto", "read_ndjson_objects", "read_text", "read_blob",
    "read_xlsx", "glob", "sniff_csv", "parquet_metadata", "parquet_schema", "parquet_file_metadata",
    "parquet_kv_metadata", "iceberg_scan", "delta_scan", "sqlite_scan", "postgres_scan", "mysql_scan",
    "query_table", "query", "getenv", "current_setting", "duckdb_settings", "duckdb_extensions",
    "duckdb_secrets", "which_secret", "load_aws_credentials", "pg_read_file", "pg_read_binary_file",
    "pg_ls_dir", "lo_import", "lo_export", "dblink", "copy", "system", "shell",
})


def _function_name(node: exp.Expression) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    if isinstance(node, exp.Func):
        return node.sql_name().lower()
    return ""


def check_select(query: str, dialect: str = "duckdb", where: str = "query") -> exp.Query:
    """Parse ``query`` and return it if it is one read-only SELECT over named tables; else SandboxError."""
    try:
        statements = [s for s in sqlglot.parse(query, read=dialect) if s is not None]
    except sqlglot.errors.SqlglotError:
        raise SandboxError(f"{where}: not valid SQL; expected one SELECT statement") from None
    if len(statements) != 1:
        raise SandboxError(f"{where}: {len(statements)} statements; expected exactly one SELECT statement")
    statement = statements[0]
    if not isinstance(statement, exp.Query):
        kind = statement.key.upper()
        raise SandboxError(f"{where}: a {kind} statement; only a single SELECT is allowed")
    for node in statement.walk():
        if isinstance(node, exp.Into):
            raise SandboxError(f"{where}: SELECT ... INTO writes a table; only a read-only SELECT is allowed")
        if isinstance(node, exp.Table):
            target = node.this
            if not isinstance(target, exp.Identifier):
                raise SandboxError(f"{where}: a table function in FROM; only named tables of the database may be read")
            if target.quoted and any(ch in target.name for ch in "/\\.:*?"):
                raise SandboxError(f"{where}: a file path in FROM; only named tables of the database may be read")
        if isinstance(node, (exp.Command, exp.Copy, exp.Insert, exp.Update, exp.Delete, exp.Create, exp.Drop,
                             exp.Alter, exp.Set, exp.Pragma, exp.Use)):
            raise SandboxError(f"{where}: a {node.key.upper()} inside the query; only a read-only SELECT is allowed")
        name = _function_name(node)
        if name in FILE_FUNCTIONS:
            raise SandboxError(f"{where}: function {name}() reads outside the database; it is not allowed")
    return statement


def open_duckdb_sandboxed(path: str | Path, config: dict | None = None):
    """A read-only DuckDB connection to ONE database file with external access off; call :func:`lock`
    once the engine's own session settings are made. Raises duckdb.Error when the file cannot be opened."""
    import duckdb

    settings = dict(config or {})
    settings["enable_external_access"] = False
    settings["autoinstall_known_extensions"] = False
    settings["autoload_known_extensions"] = False
    return duckdb.connect(str(path), read_only=True, config=settings)


def lock(con) -> None:
    """Lock a DuckDB connection's configuration (after the engine has made its own settings). The lock is the
    database's: a second connection to a database this process holds open is locked already."""
    if not con.execute("SELECT current_setting('lock_configuration')").fetchone()[0]:
        con.execute("SET lock_configuration = true")
