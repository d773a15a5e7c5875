"""``--public db:``: the facts the input database's catalogue declares about the input table.

PostgreSQL (``pg_attribute``, ``pg_enum``, ``pg_constraint``) and DuckDB (``duckdb_columns()``,
``duckdb_constraints()``): each column's declared type, the labels of an ENUM type (its categories),
NOT NULL, and simple CHECK constraints (``checks``). The catalogue is metadata: no row is read. A
column without NOT NULL states nothing about nulls (a declaration that nulls are allowed is not one
that they occur, and must not contradict a contract's ``not_null``).

Rule 10 (``contract_trust``): the catalogue cannot say who wrote a value list or a range. An ENUM's
labels may come from ``SELECT DISTINCT`` over the rows and a CHECK's values from their observed min and
max, so both are marked possibly data-derived (the ENUM's type, categorical, is structure and is not).
Declared column types and NOT NULL are the table's structure, as its storage declares them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from privsynth.discovery.checks import check_facts
from privsynth.discovery.contract_facts import Where, combined, type_kind
from privsynth.discovery.public import PublicColumn, PublicFacts, mark_derived
from privsynth.errors import ContractError, InputError

_PG_COLUMNS = """
SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
       CASE WHEN t.typtype = 'e' THEN ARRAY(SELECT e.enumlabel::text FROM pg_enum e WHERE e.enumtypid = t.oid
                                            ORDER BY e.enumsortorder) END
FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
WHERE a.attrelid = to_regclass(%s) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum"""
_PG_CHECKS = """
SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint
WHERE conrelid = to_regclass(%s) AND contype = 'c' ORDER BY conname"""
_DUCK_COLUMNS = """
SELECT column_name, data_type, NOT is_nullable FROM duckdb_columns()
WHERE table_name = ? AND schema_name = coalesce(?, current_schema()) AND database_name = coalesce(?, current_database())
ORDER BY column_index"""
_DUCK_CHECKS = """
SELECT coalesce(constraint_name, 'check ' || constraint_index), expression FROM duckdb_constraints()
WHERE table_name = ? AND schema_name = coalesce(?, current_schema()) AND database_name = coalesce(?, current_database())
  AND constraint_type = 'CHECK' ORDER BY constraint_index"""


def catalogue_facts(input_source: Any) -> PublicFacts:
    """The input table's catalogue facts; ``input_source`` is the run's ``--input`` (a database table)."""
    from privsynth.engine.sources import parse_source

    if not isinstance(input_source, str):
        raise ContractError("--public db: reads the catalogue of --input's database; the input is not a database "
                            "table (give duckdb:PATH?table=NAME or postgresql://...?table=NAME)")
    try:
        spec = parse_source(input_source)
    except InputError as err:
        raise ContractError(f"--public db: {err}") from None
    if spec.kind != "sql" or not spec.table:
        raise ContractError(f"--public db: reads the catalogue of a database table; --input {spec.describe()!r} is "
                            "not one (a file, or a ?query=)")
    if spec.location.lower().startswith("duckdb:"):
        from privsynth.io.connections import duckdb_path

        where = Where("database catalogue", f"duckdb:{duckdb_path(spec.location)} table={spec.table}")
        columns, checks = _duckdb_catalogue(spec.location, spec.table, where)
    else:
        where = Where("database catalogue", spec.describe().removeprefix("sql:"))  # no credentials
        columns, checks = _postgres_catalogue(spec.location, spec.table, where)
    if not columns:
        raise where.error(f"table {spec.table!r}", "not found in the catalogue")
    return catalogue_to_facts(columns, checks, where)


def catalogue_to_facts(columns: Iterable[tuple[str, str, bool, list[str] | None]],
                       checks: Iterable[tuple[str, str]], where: Where) -> PublicFacts:
    """Facts from catalogue rows: (name, declared type, not null, ENUM labels or None) per column, and
    (constraint name, CHECK expression) per constraint."""
    columns = list(columns)
    facts: list[PublicColumn] = []
    for name, declared, not_null, labels in columns:
        if labels is not None:
            # DuckDB writes an ENUM's labels as its type; PostgreSQL its name
            enum = "ENUM type" + ("" if declared.upper().startswith("ENUM(") else f" {declared}")
            origin = where.origin(enum)
            facts.append(mark_derived(PublicColumn(name, type="categorical", categories=tuple(labels),
                                                   origins={"type": origin, "categories": origin}),
                                      f"{where.kind} {where.path} {enum}: an ENUM's labels may have been built "
                                      "from the rows (SELECT DISTINCT)", ("categories",)))
        elif (kind := type_kind(declared)) is not None:
            facts.append(PublicColumn(name, type=kind, origins={"type": where.origin(f"column type {declared}")}))
        if not_null:
            facts.append(PublicColumn(name, nullable=False, origins={"nullable": where.origin("NOT NULL")}))
    names = [c[0] for c in columns]
    for constraint, expression in checks:
        why = (f"{where.kind} {where.path} CHECK {constraint}: a CHECK's values may have been written from the rows "
               "(their observed values, min or max)")
        facts += [mark_derived(f, why, ("categories", "bounds"))
                  for f in check_facts(expression, names, where, f"CHECK {constraint}", f"CHECK {constraint}")]
    return combined(facts, where)


def duckdb_enum_labels(declared: str) -> list[str] | None:
    """The labels of a DuckDB ``ENUM('a', 'b')`` type as ``duckdb_columns()`` writes it (None: not an ENUM)."""
    if not declared.upper().startswith("ENUM("):
        return None
    return [label.replace("''", "'") for label in re.findall(r"'((?:[^']|'')*)'", declared)]


def _qualified(table: str) -> tuple[str, str | None, str | None]:
    """(table, schema, database) of ``[[database.]schema.]table``."""
    parts = table.split(".")
    return parts[-1], parts[-2] if len(parts) > 1 else None, parts[-3] if len(parts) > 2 else None


def _duckdb_catalogue(location: str, table: str, where: Where) -> tuple[list, list]:
    import duckdb

    from privsynth.engine.backends import EngineOptions
    from privsynth.engine.sandbox import open_duckdb_sandboxed
    from privsynth.io.connections import duckdb_path

    try:
        # the engine's own read-only, sandboxed settings: the same file may be open in this process for the run
        con = open_duckdb_sandboxed(duckdb_path(location), EngineOptions().duckdb_config())
    except duckdb.Error as err:
        raise ContractError(f"--public db: DuckDB database {duckdb_path(location)!r} cannot be opened "
                            f"({type(err).__name__})") from None
    try:
        params = list(_qualified(table))
        rows = con.execute(_DUCK_COLUMNS, params).fetchall()
        columns = [(n, t, bool(nn), duckdb_enum_labels(t)) for n, t, nn in rows]
        checks = [(str(n), e) for n, e in con.execute(_DUCK_CHECKS, params).fetchall() if e]
    except duckdb.Error as err:
        raise where.error("catalogue", f"cannot be read ({type(err).__name__})") from None
    finally:
        con.close()
    return columns, checks


def _postgres_catalogue(location: str, table: str, where: Where) -> tuple[list, list]:
    from privsynth.io.connections import connect_url

    try:
        backend = connect_url(location)
    except InputError as err:
        raise ContractError(f"--public db: {err}") from None
    try:
        with backend.con.cursor() as cur:
            cur.execute(_PG_COLUMNS, (table,))
            columns = [(n, t, bool(nn), list(labels) if labels is not None else None)
                       for n, t, nn, labels in cur.fetchall()]
            cur.execute(_PG_CHECKS, (table,))
            checks = cur.fetchall()
    except Exception as err:  # noqa: BLE001  (driver messages can carry connection details)
        raise where.error("catalogue", f"cannot be read ({type(err).__name__})") from None
    finally:
        backend.disconnect()
    return columns, checks
