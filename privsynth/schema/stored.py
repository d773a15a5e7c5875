"""The source's storage types, kept by the synthetic table (docs/design.md 3: values in their real form).

A typed source declares how each column is stored: a Parquet footer, the DuckDB or PostgreSQL catalog say
DECIMAL(12, 2), UTINYINT, REAL, TIMESTAMP WITH TIME ZONE. That is the source's structure, not its rows: a
table and its neighbour declare the same types (rule 9), so it is public. A column's ``stored_as`` names
it, and the synthetic table is written in it (``to_stored``): money keeps its decimal type and scale, a
UINT8 code stays a UINT8, an aware moment stays aware. The stages that read the synthetic table back
(validation, the report, the audit) read it in the pipeline's own types (``from_stored``).

Forms, as the schema writes them: ``int8`` ... ``int64``, ``uint8`` ... ``uint64``, ``float32``, ``float64``,
``decimal(P,S)`` (1 <= P <= 38, 0 <= S <= P), ``date32``, ``timestamp(s|ms|us|ns)`` and
``timestamp(UNIT, ZONE)`` (an aware moment: the instant is kept, shown in ZONE). Writing is total: a value
outside what the storage type holds (a DP bin's edge past UINT8's 255, a decimal's digits) is clipped to
the nearest value it holds, a decimal rounded to its scale.
"""

from __future__ import annotations

import json
import re
import zoneinfo

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from privsynth.io.sinks import in_sql

INTEGER_FORMS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
FLOAT_FORMS = ("float32", "float64")
TIMESTAMP_UNITS = ("s", "ms", "us", "ns")
_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")
_TIMESTAMP = re.compile(r"timestamp\((s|ms|us|ns)(?:,\s*([A-Za-z0-9_+\-/]+))?\)")
# the pipeline's own type of each column type (``encoding.arrow_schema``): a form equal to it needs no entry
DEFAULT_FORMS = {"integer": "int64", "float": "float64", "date": "date32", "timestamp": "timestamp(us)"}
# ibis's precision digits of a timestamp (DuckDB's TIMESTAMP_S / _MS / plain / _NS)
_IBIS_UNITS = {"0": "s", "3": "ms", "6": "us", "9": "ns"}


def parse_form(form: str) -> pa.DataType:
    """The Arrow type of a ``stored_as`` form; ValueError naming the forms expected."""
    text = form.strip()
    if text in INTEGER_FORMS or text in FLOAT_FORMS:
        return {"float32": pa.float32(), "float64": pa.float64()}.get(text) or pa.type_for_alias(text)
    if text == "date32":
        return pa.date32()
    if m := _DECIMAL.fullmatch(text):
        precision, scale = int(m.group(1)), int(m.group(2))
        if 1 <= precision <= 38 and 0 <= scale <= precision:
            return pa.decimal128(precision, scale)
    elif m := _TIMESTAMP.fullmatch(text):
        zone = m.group(2)
        if zone is not None and zone != "UTC":
            try:
                zoneinfo.ZoneInfo(zone)
            except (zoneinfo.ZoneInfoNotFoundError, ValueError):
                raise ValueError(f"stored_as {form!r}: {zone!r} is not a time zone name (UTC, Europe/Paris, ...)") \
                    from None
        return pa.timestamp(m.group(1), tz=zone)
    raise ValueError(f"stored_as {form!r} is not a storage type: expected one of {', '.join(INTEGER_FORMS)}, "
                     "float32, float64, decimal(P,S) with 1 <= P <= 38 and 0 <= S <= P, date32, "
                     "timestamp(s|ms|us|ns) or timestamp(UNIT, ZONE)")


def form_of(t: pa.DataType) -> str | None:
    """The ``stored_as`` form of an Arrow type (``parse_form``'s inverse); None for a type that has none."""
    if pa.types.is_decimal(t) and t.precision <= 38:
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_timestamp(t):
        return f"timestamp({t.unit})" if t.tz is None else f"timestamp({t.unit}, {t.tz})"
    if pa.types.is_date32(t):
        return "date32"
    named = {pa.float32(): "float32", pa.float64(): "float64"}.get(t, str(t))
    return named if named in INTEGER_FORMS or named in FLOAT_FORMS else None


def fits(column_type: str, form: str) -> bool:
    """Whether a column of ``column_type`` can be written as ``form``: numbers as numbers, dates as dates
    or moments at midnight, moments as moments."""
    t = parse_form(form)
    if column_type in ("integer", "float"):
        return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
    if column_type == "date":
        return pa.types.is_date32(t) or pa.types.is_timestamp(t)
    if column_type == "timestamp":
        return pa.types.is_timestamp(t)
    return False


def declared_form(declared: str) -> str | None:
    """The ``stored_as`` form of an ibis declared type ('decimal(12, 2)', 'uint8', "timestamp('UTC', 6)");
    None where it has none (text, booleans, nested types)."""
    text = declared.strip().removeprefix("!")  # ibis marks a NOT NULL type with a leading '!'
    if text in INTEGER_FORMS or text in FLOAT_FORMS:
        return text
    if text == "date":
        return "date32"
    if m := re.fullmatch(r"decimal\((\d+),\s*(\d+)\)", text):
        return f"decimal({m.group(1)},{m.group(2)})"
    if m := re.fullmatch(r"timestamp(?:\((?:'([^']+)'\s*,?\s*)?(\d)?\))?", text):
        zone, digits = m.group(1), m.group(2)
        unit = _IBIS_UNITS.get(digits or "6")
        if unit is None:
            return None
        return f"timestamp({unit})" if zone is None else f"timestamp({unit}, {zone})"
    return None


def stored_form(declared: str, column_type: str) -> str | None:
    """The ``stored_as`` entry of a column the source declares as ``declared`` and the schema types as
    ``column_type``: None where writing the pipeline's own type already is the source's."""
    form = declared_form(declared)
    if form is None or form == DEFAULT_FORMS.get(column_type):
        return None
    try:
        return form if fits(column_type, form) else None
    except ValueError:  # a zone Python does not know: the instant is written in UTC
        return None


_SQL_NAMES = {pa.int8(): "smallint", pa.int16(): "smallint", pa.int32(): "integer", pa.int64(): "bigint",
              pa.float32(): "real", pa.float64(): "double", pa.date32(): "date"}


def sql_type(form: str) -> str:
    """The SQL type a warehouse table written from a column of ``form`` has (a dbt contract's ``data_type``)."""
    t = in_sql(parse_form(form))
    if pa.types.is_decimal(t):
        return f"numeric({t.precision},{t.scale})"
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz is None else "timestamp with time zone"
    return _SQL_NAMES[t]


# ---------------------------------------------------------------- writing and reading back

def _clipped(values: pa.Array, low: float, high: float) -> pa.Array:
    # skip_nulls=False: a missing value stays missing (skipping it would write the bound in its place)
    return pc.max_element_wise(pc.min_element_wise(values, pa.scalar(high, values.type), skip_nulls=False),
                               pa.scalar(low, values.type), skip_nulls=False)


def _as_integer(values: pa.Array, target: pa.DataType) -> pa.Array:
    info = np.iinfo(target.to_pandas_dtype())
    if pa.types.is_integer(values.type):
        low, high = max(int(info.min), -2**63), min(int(info.max), 2**63 - 1)
        return _clipped(values.cast(pa.int64()), low, high).cast(target)
    numbers = pc.round(values.cast(pa.float64()))
    # the largest double below the type's end (2^64 - 1 is not a double: it rounds up, past the type)
    high = float(np.nextafter(float(info.max) + 1.0, 0.0))
    return _clipped(numbers, float(info.min), high).cast(target, safe=False)


def _as_decimal(values: pa.Array, target: pa.Decimal128Type) -> pa.Array:
    largest = 10.0 ** (target.precision - target.scale) - 10.0 ** -target.scale
    if pa.types.is_integer(values.type) and target.scale == 0 and target.precision >= 19:
        return values.cast(target)  # every int64 fits: no round trip through a double
    numbers = pc.round(values.cast(pa.float64()), target.scale)
    return _clipped(numbers, -largest, largest).cast(target, safe=False)


def _as_timestamp(values: pa.Array, target: pa.TimestampType) -> pa.Array:
    if pa.types.is_date32(values.type):
        values = values.cast(pa.timestamp("s"))
    micros = values.cast(pa.timestamp("us"), safe=False).cast(pa.int64())
    if target.unit == "ns":  # nanoseconds reach 1677-09-21 .. 2262-04-11 only: clipped to a whole second inside
        seconds = 2**63 // 10**9
        micros = _clipped(micros, -seconds * 10**6, seconds * 10**6)
    moments = micros.cast(pa.timestamp("us"))
    return moments.cast(pa.timestamp(target.unit, tz=target.tz), safe=False)


def as_stored(values: pa.Array, form: str) -> pa.Array:
    """A column of the pipeline's types (int64, double, date32, timestamp[us] holding UTC) in ``form``."""
    target = parse_form(form)
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if pa.types.is_integer(target):
        return _as_integer(values, target)
    if pa.types.is_decimal(target):
        return _as_decimal(values, target)
    if pa.types.is_timestamp(target):
        return _as_timestamp(values, target)
    return values.cast(target, safe=False)  # float32, float64 (whole numbers as doubles), date32


def to_stored(table: pa.Table, forms: dict[str, str]) -> pa.Table:
    """The synthetic table with each named column in its ``stored_as`` form (post-processing)."""
    if not forms:
        return table
    for name, form in forms.items():
        i = table.schema.get_field_index(name)
        column = as_stored(table.column(i), form)
        table = table.set_column(i, pa.field(name, column.type, nullable=True), column)
    return table.replace_schema_metadata(_pandas_metadata_without(table.schema.metadata, set(forms)))


def _pandas_metadata_without(metadata: dict[bytes, bytes] | None, names: set[str]) -> dict[bytes, bytes] | None:
    """pandas' own record of the frame's dtypes, less the re-typed columns (pandas would read a decimal column
    back as the Float64 it was built from, and fail)."""
    if not metadata or b"pandas" not in metadata:
        return metadata
    record = json.loads(metadata[b"pandas"])
    record["columns"] = [c for c in record.get("columns", []) if c.get("name") not in names]
    return {**metadata, b"pandas": json.dumps(record).encode()}


def from_stored(table: pa.Table, own: pa.Schema) -> pa.Table:
    """A synthetic table read back in the pipeline's own types ``own`` (``encoding.arrow_schema``): decimals
    as doubles, aware moments as UTC wall time, narrow integers as int64."""
    columns = []
    for field in own:
        column = table.column(field.name)
        if column.type != field.type:
            if pa.types.is_timestamp(column.type) and column.type.tz is not None:
                column = column.cast(pa.timestamp(column.type.unit))  # the instant, as UTC wall time
            if pa.types.is_timestamp(column.type) and pa.types.is_date32(field.type):
                column = column.cast(pa.timestamp("s"), safe=False).cast(pa.date32(), safe=False)
            column = column.cast(field.type, safe=False)
        columns.append(column)
    return pa.table(columns, schema=own)
