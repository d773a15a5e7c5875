"""Schema -> ibis expressions: the level code of every kept column, computed where the data lives.

The codes are exactly those of :func:`privsynth.schema.encoding.encode_codes` on the same rows typed by
pandas (numbers as numbers, text as text, an empty CSV field missing): per column, in-domain levels first (categories in
schema order, ``false``/``true``, or numeric bins [e_i, e_{i+1}) with the last bin closed), then
``<missing>`` (nullable columns), then ``<out-of-domain>`` (``on_out_of_domain: category``);
``clip`` columns clip to the bounds before binning. A row the schema forbids gets a NEGATIVE code
instead (see :class:`Fault`), so one query both bins and finds faults; the caller turns a negative
code into an error that names the column and the kind of fault, never the value.

How source values read, as in the pandas path:

* missing: SQL NULL, and NaN in floating columns; CSV text is read as strings, an empty field
  (after leading blanks are dropped, as ``skipinitialspace`` does) is missing;
* categorical: text compared with the categories; integer columns compare as their decimal text
  (3 matches "3"), floating columns as integral values (3.0 matches "3") or their shortest repr;
* boolean: true/false/1/0 (case and blanks ignored for text), booleans as themselves;
* numeric (integer/float): numbers as they are; text parsed as a number (``TRY_CAST``), where a
  value that is not a number is a fault.
* date/timestamp: numbers in the unit of :mod:`privsynth.schema.temporal` (whole days since 1970-01-01, whole
  seconds since the epoch, floored), read from DATE and TIMESTAMP columns (naive = UTC) or from ISO text
  (``TRY_CAST`` to a UTC timestamp; text that is not a date is a fault). Calendar parts of a zoned
  timestamp are taken in the session time zone, which ibis sets to UTC on DuckDB.

The expressions are plain ibis (CASE, comparisons, casts, string trims): no backend-specific SQL.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, replace

import ibis
import ibis.expr.datatypes as dt
import ibis.expr.types as ir

from privsynth.engine.values import (
    clean_text,
    finite,
    in_calendar,
    is_whole,
    missing_word,
    moment_from_text,
    number_from_text,
)
from privsynth.schema import Column, Schema
from privsynth.schema.temporal import SECONDS_PER_DAY, TEMPORAL_TYPES


class Fault(enum.IntEnum):
    """Negative codes for values the schema forbids; the order is the order faults are reported in."""

    NOT_A_NUMBER = -4  # text in a numeric column that does not parse as a number
    NOT_WHOLE = -5  # a fractional value in an integer column
    NOT_FINITE = -3  # +-inf in a numeric column
    OUT_OF_DOMAIN = -2  # outside the public domain where the schema says 'fail'
    MISSING = -1  # missing in a column that is not nullable


# Priority when a column has several faults: the pandas path reads (not a number, not whole) before it
# encodes (not finite, out of domain, missing).
FAULT_ORDER = (Fault.NOT_A_NUMBER, Fault.NOT_WHOLE, Fault.NOT_FINITE, Fault.OUT_OF_DOMAIN, Fault.MISSING)


def fault_message(col: Column, fault: Fault) -> str:
    """One value-free line for a fault in ``col`` (the messages of the pandas path)."""
    where = f"column {col.name!r}"
    return {
        Fault.NOT_A_NUMBER: f"{where} has value(s) that are not {_plural(col.type)} (the schema says {col.type})",
        Fault.NOT_WHOLE: f"{where} has non-integer value(s) (the schema says integer)",
        Fault.NOT_FINITE: f"{where}: value(s) that are not finite numbers",
        Fault.OUT_OF_DOMAIN: f"{where}: value(s) outside the schema's domain",
        Fault.MISSING: f"{where}: missing value(s) but the column is not nullable",
    }[fault]


def _plural(kind: str) -> str:
    return {"date": "dates", "timestamp": "timestamps"}.get(kind, "numbers")


class SourceKind(str, enum.Enum):  # noqa: UP042  (StrEnum would change str() and format() of a member)
    """How a source column's values read: its storage type, reduced to what binning distinguishes."""

    TEXT = "text"
    INTEGER = "integer"
    FLOAT = "float"
    BOOLEAN = "boolean"
    DATE = "date"
    TIMESTAMP = "timestamp"


def source_kind(dtype: dt.DataType) -> SourceKind | None:
    """The kind of a source column's type, or None for a type no schema column can read (dates, ...)."""
    if dtype.is_string():
        return SourceKind.TEXT
    if dtype.is_boolean():
        return SourceKind.BOOLEAN
    if dtype.is_integer():
        return SourceKind.INTEGER
    if dtype.is_floating() or dtype.is_decimal():
        return SourceKind.FLOAT
    if dtype.is_date():
        return SourceKind.DATE
    if dtype.is_timestamp():
        return SourceKind.TIMESTAMP
    return None


def type_problem(col: Column, dtype: dt.DataType) -> str | None:
    """Why a source column of ``dtype`` cannot hold ``col`` (schema metadata only), or None."""
    kind = source_kind(dtype)
    temporal_source = kind in (SourceKind.DATE, SourceKind.TIMESTAMP)
    if col.type in TEMPORAL_TYPES:
        if kind in (SourceKind.TEXT, SourceKind.DATE, SourceKind.TIMESTAMP):
            return None
        return f"column {col.name!r} has type {dtype} (the schema says {col.type}); expected dates, timestamps or text"
    if kind is None or temporal_source:
        return f"column {col.name!r} has type {dtype} (the schema says {col.type}); expected " + (
            "numbers or text" if col.type in ("integer", "float") else "text, numbers or booleans")
    if col.type in ("integer", "float") and kind is SourceKind.BOOLEAN:
        return f"column {col.name!r} has type boolean; the schema says {col.type}"
    return None


@dataclass(frozen=True)
class ColumnValues:
    """A source column read for binning: the value expression, its kind, and row predicates."""

    kind: SourceKind
    value: ir.Value  # text (stripped for CSV), or float64 for numeric (also date/timestamp) schema columns
    missing: ir.BooleanValue
    not_a_number: ir.BooleanValue | None = None  # numeric schema columns read from text


def _literal_int(value: int, dtype: str) -> ir.Value:
    return ibis.literal(value, type=dtype)


def read_column(table: ir.Table, col: Column, text_from_csv: bool) -> ColumnValues:
    """The value of ``col`` in ``table`` as binning reads it, and when it counts as missing."""
    raw = table[col.name]
    kind = source_kind(raw.type())
    problem = type_problem(col, raw.type())
    if problem:
        raise ValueError(problem)
    if col.type in TEMPORAL_TYPES:
        return _read_temporal(raw, kind, col.type, text_from_csv, col.format)
    numeric = col.type in ("integer", "float")
    if kind is SourceKind.TEXT:
        text = raw.lstrip() if text_from_csv else raw
        if text_from_csv:
            text = text.nullif("")  # pandas reads an empty (or blank, after skipinitialspace) field as missing
        if numeric:
            stripped = text.strip()
            # DuckDB also reads '1_000' as a number; pandas (the reference) does not
            number = number_from_text(stripped, col.format)
            blank = stripped == ""
            # as pandas reads CSV: '', 'nan' and the other missing words are missing; other text that parses as
            # nothing is a fault
            word = missing_word(stripped)
            missing = text.isnull() | blank | word
            not_a_number = text.notnull() & ~blank & ~word & number.isnull()
            return ColumnValues(kind, number, missing, not_a_number)
        cleaned = clean_text(raw)  # the one text rule (engine/values.py), as discovery reads the same column
        return ColumnValues(kind, cleaned, cleaned.isnull())
    if kind is SourceKind.FLOAT:
        value = raw.cast("float64")
        return ColumnValues(kind, value, raw.isnull() | value.isnan())
    if kind is SourceKind.INTEGER:
        return ColumnValues(kind, raw.cast("float64") if numeric else raw.cast("int64"), raw.isnull())
    return ColumnValues(kind, raw, raw.isnull())


def temporal_unit(value: ir.Value, kind: SourceKind, unit: str) -> ir.FloatingValue:
    """A DATE or TIMESTAMP value in ``unit``'s number (days or seconds since the epoch, floored), float64."""
    if kind is SourceKind.TIMESTAMP and value.type().timezone is not None:
        # UTC wall time (the session zone); SQL generators refuse EXTRACT from a zoned timestamp
        value = value.cast(dt.Timestamp(scale=value.type().scale))
    day = value if kind is SourceKind.DATE else value.date()
    days = day.epoch_days().cast("float64")
    if unit == "date":
        return days
    seconds = days * SECONDS_PER_DAY
    if kind is SourceKind.TIMESTAMP:
        seconds = seconds + value.hour().cast("float64") * 3600 + value.minute().cast("float64") * 60 \
            + value.second().cast("float64")
    return seconds


def _read_temporal(raw: ir.Value, kind: SourceKind, unit: str, text_from_csv: bool,
                   date_format: str | None = None) -> ColumnValues:
    if kind is not SourceKind.TEXT:
        moment = in_calendar(raw)  # infinity and years beyond 9999 are no dates (a NULL here: missing)
        return ColumnValues(kind, temporal_unit(moment, kind, unit), moment.isnull())
    text = raw.lstrip() if text_from_csv else raw
    if text_from_csv:
        text = text.nullif("")
    stripped = text.strip()
    # ISO text; a zone offset converts to UTC, text without one is UTC (the session zone)
    moment = moment_from_text(stripped, date_format)
    blank = stripped == ""
    word = missing_word(stripped)
    missing = text.isnull() | blank | word
    not_a_date = text.notnull() & ~blank & ~word & moment.isnull()
    return ColumnValues(kind, temporal_unit(moment, SourceKind.TIMESTAMP, unit), missing, not_a_date)


# ---------------------------------------------------------------- category matching

def _canonical_int(text: str) -> int | None:
    """The integer whose decimal text is exactly ``text`` ("3", "-2"; not "03", "3.0"), else None."""
    try:
        value = int(text)
    except ValueError:
        return None
    return value if str(value) == text and abs(value) < 2**63 else None


def _shortest_float(text: str) -> float | None:
    """The non-integral finite float whose repr is exactly ``text`` ("0.5"), else None."""
    try:
        value = float(text)
    except ValueError:
        return None
    if not math.isfinite(value) or value.is_integer() or repr(value) != text:
        return None
    return value


def category_condition(values: ColumnValues, category: str) -> ir.BooleanValue | None:
    """When a present value reads as ``category`` (``encoding.category_text``); None if it never can."""
    v = values.value
    if values.kind is SourceKind.TEXT:
        # a category is compared by the one text rule; an integer code also matches its float spelling ("3.0")
        same = v == category.strip()
        whole = _canonical_int(category.strip())
        return same if whole is None else same | (number_from_text(v) == whole)
    if values.kind is SourceKind.BOOLEAN:
        return {"True": v, "False": ~v}.get(category)
    whole = _canonical_int(category)
    if whole is not None:
        return v == whole
    if values.kind is SourceKind.FLOAT:
        fraction = _shortest_float(category)
        if fraction is not None:
            return v == fraction
    return None


# ---------------------------------------------------------------- codes

@dataclass(frozen=True)
class Binning:
    """The code expression of every kept column (schema.kept_columns order) and its integer type, over ``table``:
    the source's table with each numeric and temporal column's read value computed once (``binning``)."""

    codes: tuple[ir.IntegerValue, ...]
    names: tuple[str, ...]  # result column names c0, c1, ... (schema names may clash with SQL or each other)
    dtype: str
    table: ir.Table
    values: tuple[ColumnValues, ...]  # each kept column as read over ``table`` (validation counts on them too)


def code_dtype(schema: Schema) -> str:
    """The narrowest signed integer type that holds every level code and the fault codes."""
    largest = max(len(c.labels) for c in schema.kept_columns)
    return "int16" if largest < 2**15 else "int32"


def column_code(values: ColumnValues, col: Column, dtype: str, array_lookup: bool = False) -> ir.IntegerValue:
    """The level code of ``col`` read as ``values`` (a CASE expression); a negative :class:`Fault` code for
    forbidden values."""
    lit = lambda k: _literal_int(int(k), dtype)  # noqa: E731
    n_levels = col.domain_levels
    missing_code = lit(n_levels if col.nullable else Fault.MISSING)
    ood_code = lit(len(col.labels) - 1 if col.on_out_of_domain == "category" else Fault.OUT_OF_DOMAIN)
    branches: list[tuple[ir.BooleanValue, ir.Value]] = []
    unreadable_as_missing = col.on_unreadable == "missing"
    if values.not_a_number is not None:
        branches.append((values.not_a_number, missing_code if unreadable_as_missing else lit(Fault.NOT_A_NUMBER)))
    branches.append((values.missing, missing_code))
    if col.type == "categorical":
        if values.kind is SourceKind.TEXT and array_lookup:
            # One lookup in the category list (DuckDB's LIST_INDEXOF, -1 when absent): about three
            # times faster there than a CASE with one string comparison per category. Not everywhere:
            # ibis writes it for PostgreSQL as a correlated UNNEST subquery per row (30 times slower).
            found = ibis.literal([c.strip() for c in col.categories or ()], type="array<string>").index(values.value)
            branches.append((found >= 0, found.cast(dtype)))
            number = number_from_text(values.value)  # an integer code's float spelling ("3.0" is 3)
            branches += [(number == whole, lit(i)) for i, c in enumerate(col.categories or ())
                         if (whole := _canonical_int(c.strip())) is not None]
            return ibis.cases(*branches, else_=ood_code)
        for i, category in enumerate(col.categories or ()):
            cond = category_condition(values, category)
            if cond is not None:
                branches.append((cond, lit(i)))
        return ibis.cases(*branches, else_=ood_code)
    if col.type == "boolean":
        v = values.value
        if values.kind is SourceKind.BOOLEAN:
            branches.append((v, lit(1)))
            return ibis.cases(*branches, else_=lit(0))
        if values.kind is SourceKind.TEXT:
            text = v.strip().lower()
            branches += [(text.isin(["false", "0"]), lit(0)), (text.isin(["true", "1"]), lit(1))]
        else:
            branches += [(v == 0, lit(0)), (v == 1, lit(1))]
        return ibis.cases(*branches, else_=ood_code)
    # numeric: float64 value
    x = values.value
    low, high = col.bounds  # type: ignore[misc]
    if col.type == "integer":
        branches.append((finite(x) & ~is_whole(x),
                         missing_code if unreadable_as_missing else lit(Fault.NOT_WHOLE)))
    branches.append((x.isinf(), lit(Fault.NOT_FINITE)))
    if col.on_out_of_domain != "clip":
        branches.append(((x < low) | (x > high), lit(Fault.OUT_OF_DOMAIN)))
    edges = col.bins or ()
    # bin i is [e_i, e_{i+1}); below e_1 is bin 0 (clipped values too), at or above e_{k-1} the last bin
    for i, edge in enumerate(edges[1:-1]):
        branches.append((x < edge, lit(i)))
    return ibis.cases(*branches, else_=lit(len(edges) - 2))


def binning(table: ir.Table, schema: Schema, text_from_csv: bool = False, array_lookup: bool = False) -> Binning:
    """Code expressions of every kept column of ``schema`` over ``table``, built once per source.

    ``array_lookup``: categories by one array lookup instead of a CASE (the same codes; faster on DuckDB).
    """
    dtype = code_dtype(schema)
    cols = schema.kept_columns
    # A number or moment is compared with every bin edge: read once, in a projection, it is not written out once
    # per edge. A year-first moment read from text is 31,000 characters of SQL; inlined in 385 sub-bin
    # comparisons it took DuckDB 107 s and 8 GB for 12,925 rows.
    read = {j: _read_name(table, j) for j, col in enumerate(cols) if col.type not in ("categorical", "boolean")}
    if read:
        table = table.mutate(**{name: read_column(table, cols[j], text_from_csv).value for j, name in read.items()})
    values = tuple(read_column(table, col, text_from_csv) for col in cols)
    values = tuple(replace(v, value=table[read[j]]) if j in read else v for j, v in enumerate(values))
    codes = tuple(column_code(v, col, dtype, array_lookup) for v, col in zip(values, cols))
    return Binning(codes, tuple(f"c{j}" for j in range(len(cols))), dtype, table, values)


def _read_name(table: ir.Table, j: int) -> str:
    """A column name for kept column j's read value that no source column has."""
    name = f"privsynth_read_{j}"
    while name in table.columns:
        name = "_" + name
    return name
