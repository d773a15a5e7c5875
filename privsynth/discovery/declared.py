"""The source's declared column types (metadata only: no value is read here).

Column names and types come from the source's declared types (Parquet footers, the DuckDB /
PostgreSQL catalog). CSV declares none: its columns are read as text, and the types are decided
under DP (``facts``) or by public facts, never sniffed from the rows.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

# Name tokens that mark identifiers and free text (proposed ``drop: true``; their values are never read).
IDENTIFIER_TOKENS = frozenset({
    "id", "ids", "uid", "uuid", "guid", "key", "pk", "ssn", "nin", "passport", "email", "mail", "name", "names",
    "firstname", "lastname", "surname", "fullname", "username", "login", "title", "description", "desc",
    "notes", "note", "comment", "comments", "remark", "remarks", "text", "message", "address", "street",
    "addr", "phone", "tel", "telephone", "mobile", "fax", "url", "uri", "link", "website", "ip", "password",
    "token", "hash", "iban", "account",
    # the row index a data frame or R writes beside the data ("rownames", pandas' "Unnamed: 0")
    "rownames", "rowname", "rowid", "rownum", "unnamed",
})
# Whole names that are a written row index (pyarrow stores a pandas index as "__index_level_0__")
IDENTIFIER_NAMES = frozenset({"index", "__index_level_0__", "row", "row_number"})


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
    hits = [name] if name.lower() in IDENTIFIER_NAMES else [t for t in name_tokens(name) if t in IDENTIFIER_TOKENS]
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


def open_declared(source):
    """Open ``source`` reading metadata only; returns (OpenedTable, text_source: bool).

    A CSV file declares no types: it is read as text (never sniffed: a type inferred from the rows would
    change with one added row), and ``text_source`` is True; the discovery's DP column facts decide. A
    pandas column of Python objects (dtype ``object``) declares no type either: DuckDB would infer one from a
    sample of its values (30 and 31: an integer; 30 and 30.5: a float), so it is read as text here, and
    its type is decided under DP like a text column's (rule 10: no reader's inferred type is public)."""
    from privsynth.engine.backends import open_table

    opened = open_table(source, None, unsniffed_options())
    return opened, bool(getattr(opened, "text_from_csv", False))


@functools.cache
def _unsniffed_options_class() -> type:
    from privsynth.engine.backends import EngineOptions  # the engine is imported on first use only

    class Unsniffed(EngineOptions):
        """The engine's settings, with DuckDB's sampling of pandas object columns off (they stay text)."""

        def duckdb_config(self) -> dict:
            return {**super().duckdb_config(), "pandas_analyze_sample": 0}

    return Unsniffed


def unsniffed_options():
    """EngineOptions for reading declared types: a pandas frame's object columns are text, never sniffed."""
    return _unsniffed_options_class()()
