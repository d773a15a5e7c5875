"""The source's declared column types (metadata only: no value is read here).

Column names and types come from the source's declared types (Parquet footers, the DuckDB /
PostgreSQL catalog); for CSV, which declares none, DuckDB's sniffer infers them from sample rows (a
non-DP look at the values' *format*, said in the draft's header).
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

# Name tokens that mark identifiers and free text (proposed ``drop: true``; their values are never read).
IDENTIFIER_TOKENS = frozenset({
    "id", "ids", "uuid", "guid", "key", "pk", "ssn", "nin", "passport", "email", "mail", "name", "names",
    "firstname", "lastname", "surname", "fullname", "username", "login", "title", "description", "desc",
    "notes", "note", "comment", "comments", "remark", "remarks", "text", "message", "address", "street",
    "addr", "phone", "tel", "telephone", "mobile", "fax", "url", "uri", "link", "website", "ip", "password",
    "token", "hash", "iban", "account",
})


# ---------------------------------------------------------------- declared types

@dataclass(frozen=True)
class DeclaredColumn:
    """One source column as declared: name, privsynth type (None: no privsynth type), declared type."""

    name: str
    kind: str | None  # categorical | integer | float | boolean | None
    declared: str
    nullable: bool
    int_range: tuple[int, int] | None = None
    identifier_reason: str | None = None


def name_tokens(name: str) -> list[str]:
    """Lower-case words of a column name: split on non-alphanumerics and camelCase (``customerId`` -> customer, id)."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name)
    return [t for t in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if t]


def identifier_reason(name: str) -> str | None:
    """Why a column looks like an identifier or free text by its NAME alone (None: it does not)."""
    hits = [t for t in name_tokens(name) if t in IDENTIFIER_TOKENS]
    if not hits:
        return None
    return (f"its name contains {hits[0]!r}: looks like an identifier or free text (one value per person or "
            "per row carries no pattern DP can release); its values were not read")


def classify_dtype(dtype) -> tuple[str | None, tuple[int, int] | None]:
    """privsynth type of an ibis dtype: integer, float (also decimal), categorical (string), boolean, or None."""
    if dtype.is_boolean():
        return "boolean", None
    if dtype.is_integer():
        bounds = getattr(dtype, "bounds", None)
        return "integer", (int(bounds.lower), int(bounds.upper)) if bounds is not None else None
    if dtype.is_floating() or dtype.is_decimal():
        return "float", None
    if dtype.is_string():
        return "categorical", None
    if dtype.is_date():
        return "date", None
    if dtype.is_timestamp():
        return "timestamp", None
    return None, None


def declared_columns(table) -> list[DeclaredColumn]:
    """The columns of an ibis table from its schema (metadata only: no row is read)."""
    out = []
    for name, dtype in table.schema().items():
        kind, int_range = classify_dtype(dtype)
        out.append(DeclaredColumn(str(name), kind, str(dtype), bool(dtype.nullable), int_range,
                                  identifier_reason(str(name))))
    return out


def open_declared(source: str):
    """Open ``source`` reading metadata only; returns (OpenedTable, csv_sniffed: bool)."""
    from privsynth.engine.backends import CSV_SUFFIXES, EngineOptions, backend_error, duckdb_backend, open_table
    from privsynth.engine.sources import SourceSpec, _check_file
    from privsynth.io.connections import InputError

    path_part = str(source).split("?")[0]
    if path_part.lower().endswith(CSV_SUFFIXES) and "://" not in path_part:
        from privsynth.engine.backends import OpenedTable

        tsv = ".tsv" in path_part.lower()
        _check_file(SourceSpec("csv", path_part, delimiter="\t" if tsv else ","))
        backend = duckdb_backend(EngineOptions())
        try:
            table = backend.read_csv(path_part, table_name=f"privsynth_{uuid.uuid4().hex[:8]}", header=True,
                                     delim="\t" if tsv else ",", auto_detect=True)
        except Exception as err:  # noqa: BLE001
            backend.disconnect()
            raise backend_error(err, f"input file {path_part!r}") from None
        return OpenedTable(backend, table, f"csv:{path_part}", closers=[backend.disconnect]), True
    if path_part.lower().endswith(CSV_SUFFIXES):
        raise InputError(f"--input {path_part!r}: schema draft reads local CSV files; copy the file or use Parquet")
    return open_table(source, None), False  # the schema argument is used by local CSV only
