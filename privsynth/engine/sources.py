"""Sources and sinks: CSV, Parquet (local path or fsspec URL) and SQL tables (DuckDB, PostgreSQL).

Input forms (the ``--input`` argument):

* ``path/to/table.csv`` (also ``.csv.gz``, ``.tsv``) or ``path/to/table.parquet``; a URL such as
  ``s3://bucket/table.parquet`` works for Parquet when the matching fsspec backend is installed;
* ``duckdb:path/to/warehouse.duckdb?table=people`` or ``duckdb:path.duckdb?query=SELECT ...``;
* any SQLAlchemy URL with ``?table=NAME`` or ``?query=...``, e.g.
  ``postgresql://user@host/db?table=people`` (needs a driver such as psycopg).

Sinks are in :mod:`privsynth.io.sinks`, atomic artifacts in :mod:`privsynth.io.atomic`; the statistics
engine (:mod:`privsynth.engine`) reads the same URL forms where the data lives.

Rows are read in record batches, so memory is bounded by one batch. Errors name the file and say
what was expected; they never quote cell values (logs are releases).
"""

from __future__ import annotations

import csv
import gzip
import io
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from privsynth.io.atomic import DEFAULT_BATCH_ROWS
from privsynth.io.connections import InputError, duckdb_path, plain_table_name
from privsynth.io.credentials import expand_credentials, redact_url
from privsynth.schema import Schema, temporal
from privsynth.schema.encoding import category_text


@dataclass(frozen=True)
class SourceSpec:
    kind: str  # "csv" | "parquet" | "sql"
    location: str
    table: str | None = None
    query: str | None = None
    delimiter: str = ","

    def describe(self) -> str:
        """A public description: the location and table, never credentials."""
        if self.kind == "spark":
            return self.location
        if self.kind != "sql":
            return f"{self.kind}:{self.location}"
        parts = urlsplit(self.location)
        host = parts.hostname or ""
        return f"sql:{parts.scheme}://{host}{parts.path}" + (f" table={self.table}" if self.table else " (query)")


def parse_source(spec: str) -> SourceSpec:
    """Parse an ``--input`` argument; raises InputError on an unknown form."""
    if not spec or not isinstance(spec, str):
        raise InputError("--input must be a path or URL")
    lowered = spec.lower()
    if lowered.startswith("spark:"):
        # A table or query of a Spark session: opened and counted by the engine (privsynth.engine.backends).
        rest = spec[len("spark:"):]
        if not rest or rest.startswith("?") and not rest.lower().startswith("?query="):
            raise InputError("--input: expected spark:TABLE or spark:?query=SELECT ...")
        return SourceSpec("spark", spec)
    file_suffixes = (".parquet", ".csv", ".csv.gz", ".tsv", ".tsv.gz")
    if lowered.startswith("duckdb:") or ("://" in spec.split("?")[0] and not lowered.split("?")[0].endswith(file_suffixes)):
        return _parse_sql(spec)
    path = spec.split("?")[0]
    if path.lower().endswith(".parquet"):
        return SourceSpec("parquet", path)
    if path.lower().endswith((".csv", ".csv.gz", ".tsv", ".tsv.gz")):
        return SourceSpec("csv", path, delimiter="\t" if ".tsv" in path.lower() else ",")
    raise InputError(f"--input {spec!r}: expected a .csv, .csv.gz, .tsv or .parquet file (or a glob of Parquet files), "
                     "a duckdb:PATH?table=NAME source, a database URL with ?table=NAME, or spark:TABLE")


def _split_source_parameters(query_string: str) -> tuple[dict[str, str], list[str]]:
    """``table`` / ``query`` of a source's query string, and the other parameters as given.

    ``query=`` runs literally to the end of the string: SQL holds '+', '&', '%' and '=' that URL
    decoding would silently change (``a+b`` would become ``a b``). Other parameters (``sslmode=...``)
    belong to the connection URL and are kept, undecoded, in order.
    """
    ours: dict[str, str] = {}
    others: list[str] = []
    rest = query_string
    while rest:
        if rest.lower().startswith("query="):
            ours["query"] = rest[len("query="):]
            break
        piece, _, rest = rest.partition("&")
        key, _, value = piece.partition("=")
        if key.lower() == "table":
            ours["table"] = unquote(value)
        elif piece:
            others.append(piece)
    return ours, others


def _parse_sql(spec: str) -> SourceSpec:
    base, _, query_string = spec.partition("?")
    params, others = _split_source_parameters(query_string)
    table, query = params.get("table"), params.get("query")
    if bool(table) == bool(query and query.strip()):
        raise InputError(f"--input {redact_url(spec)!r}: a SQL source needs exactly one of ?table=NAME or ?query=SELECT...")
    if table is not None and not plain_table_name(table):
        raise InputError(f"--input: table name {table!r} must be letters, digits, '_' and '.' only")
    if others:
        if base.lower().startswith("duckdb:"):
            names = sorted({piece.partition("=")[0] for piece in others})
            raise InputError(f"--input: a duckdb: source takes ?table=NAME or ?query=SELECT..., not {names}")
        base = base + "?" + "&".join(others)  # connection options of the SQLAlchemy URL, e.g. sslmode
    return SourceSpec("sql", base, table=table, query=query)


def _duckdb_error(err: Exception) -> str:
    """A DuckDB error for the user. Catalog, parser and binder errors speak of the query (a missing table
    or column) and are quoted; any other error, a conversion error above all, may quote a cell value,
    so only its kind is named."""
    import duckdb

    if isinstance(err, (duckdb.CatalogException, duckdb.ParserException, duckdb.BinderException)):
        return str(err).splitlines()[0]
    return f"{type(err).__name__} while reading the rows"


def _check_file(spec: SourceSpec) -> None:
    if "://" in spec.location:
        return
    path = Path(spec.location)
    if not path.exists():
        raise InputError(f"input file {spec.location!r} does not exist")
    if not path.is_file():
        raise InputError(f"input {spec.location!r} is not a file")
    if path.stat().st_size == 0:
        raise InputError(f"input file {spec.location!r} is empty (0 bytes); expected a header row and data rows")


def _open_text(location: str):
    raw = gzip.open(location, "rb") if location.lower().endswith(".gz") else open(location, "rb")
    return io.TextIOWrapper(raw, encoding="utf-8", newline="")


def check_input_width(columns: int, origin: str) -> None:
    """Refuse an input with more columns than PRIVSYNTH_MAX_INPUT_COLUMNS, before anything else is read."""
    from privsynth.schema.limits import LimitError, limit

    allowed = limit("PRIVSYNTH_MAX_INPUT_COLUMNS")
    if columns > allowed:
        raise LimitError(f"{origin} has {columns} columns; the limit is {allowed} (PRIVSYNTH_MAX_INPUT_COLUMNS): select the "
                         "columns you need with a query or a view, or raise the limit")


def _csv_header(spec: SourceSpec, schema: Schema) -> list[str]:
    try:
        with _open_text(spec.location) as handle:
            first = handle.readline()
    except UnicodeDecodeError as err:
        raise InputError(f"input file {spec.location!r} is not UTF-8 text (invalid byte at byte offset {err.start}); "
                         "expected UTF-8, re-encode the file") from None  # the first block read starts at byte 0
    except (OSError, EOFError) as err:
        raise InputError(f"input file {spec.location!r} cannot be read: {type(err).__name__}") from None
    if not first.strip():
        raise InputError(f"input file {spec.location!r} has no header row")
    header = next(csv.reader([first], delimiter=spec.delimiter))
    check_input_width(len(header), f"input file {spec.location!r}")
    header = [h.strip() for h in header]
    counts = Counter(header)
    dupes = sorted(h for h, c in counts.items() if c > 1)
    if dupes:
        # A file without a header row makes its first data row the "header": name repeats only when
        # they are schema names, which cannot be data values.
        named = dupes if set(dupes) <= set(schema.column_names) else f"{len(dupes)} (names withheld: not schema columns)"
        raise InputError(f"input file {spec.location!r}: duplicate column name(s) {named}; expected each of "
                         f"{list(schema.column_names)} once")
    if len(header) == 1 and len(schema.columns) > 1:
        for other in (";", "\t", "|"):
            if other in header[0]:
                raise InputError(f"input file {spec.location!r}: the header has one column but contains {other!r}; "
                                 f"expected {spec.delimiter!r}-delimited columns {list(schema.column_names)}")
    return header


def _csv_batches(spec: SourceSpec, schema: Schema, batch_rows: int) -> Iterator[pd.DataFrame]:
    header = _csv_header(spec, schema)
    try:
        with _open_text(spec.location) as handle:
            reader = pd.read_csv(handle, sep=spec.delimiter, dtype=str, keep_default_na=False, na_values=[""],
                                 chunksize=batch_rows, skipinitialspace=True, engine="c")
            for chunk in reader:
                chunk.columns = header
                yield chunk
    except UnicodeDecodeError as err:
        raise InputError(f"input file {spec.location!r} is not UTF-8 text (invalid byte sequence near byte {err.start} of a block)") from None
    except pd.errors.ParserError as err:
        line = str(err).split("line")[-1].split(",")[0].strip() if "line" in str(err) else "?"
        raise InputError(f"input file {spec.location!r}: malformed CSV (row near line {line} has the wrong number of fields)") from None
    except (OSError, EOFError) as err:
        raise InputError(f"input file {spec.location!r} cannot be read ({type(err).__name__}; truncated or corrupt?)") from None


def _parquet_batches(spec: SourceSpec, batch_rows: int) -> Iterator[pd.DataFrame]:
    try:
        source = pq.ParquetFile(spec.location)
    except (pa.ArrowInvalid, OSError) as err:
        raise InputError(f"input file {spec.location!r} is not a readable Parquet file ({type(err).__name__}; truncated or corrupt?)") from None
    names = source.schema_arrow.names
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise InputError(f"input file {spec.location!r}: duplicate column name(s) {dupes}")
    try:
        for batch in source.iter_batches(batch_size=batch_rows):
            yield batch.to_pandas()
    except (pa.ArrowInvalid, OSError) as err:
        raise InputError(f"input file {spec.location!r}: a row group cannot be read ({type(err).__name__}; truncated or corrupt?)") from None


def _sql_batches(spec: SourceSpec, batch_rows: int) -> Iterator[pd.DataFrame]:
    query = spec.query or f"SELECT * FROM {spec.table}"
    if spec.location.lower().startswith("duckdb:"):
        import duckdb

        path = duckdb_path(spec.location)
        if path not in ("", ":memory:") and not Path(path).is_file():
            raise InputError(f"DuckDB database {path!r} does not exist")
        try:
            con = duckdb.connect(path, read_only=True)
        except duckdb.Error as err:
            raise InputError(f"DuckDB database {path!r} cannot be opened: {type(err).__name__}") from None
        try:
            try:
                # A relation streams batch by batch; a DB-API result would be copied whole first.
                relation = con.sql(query)
                if relation is None:
                    raise InputError(f"DuckDB source {spec.describe()}: the query returns no table")
                # DuckDB >= 2 calls it to_arrow_reader, 1.x fetch_arrow_reader; pyproject allows both.
                fetch = getattr(relation, "to_arrow_reader", None) or relation.fetch_arrow_reader
                for batch in fetch(batch_rows):
                    yield batch.to_pandas()
            except duckdb.Error as err:
                raise InputError(f"DuckDB source {spec.describe()}: {_duckdb_error(err)}") from None
        finally:
            con.close()
        return
    import sqlalchemy

    try:
        engine = sqlalchemy.create_engine(expand_credentials(spec.location))
    except Exception as err:  # driver missing or bad URL: say which, without the password
        raise InputError(f"SQL source {spec.describe()}: cannot create an engine ({type(err).__name__}: {err})") from None
    try:
        with engine.connect() as con:
            yield from pd.read_sql_query(sqlalchemy.text(query), con, chunksize=batch_rows)
    except sqlalchemy.exc.SQLAlchemyError as err:
        raise InputError(f"SQL source {spec.describe()}: {type(err).__name__}") from None
    finally:
        engine.dispose()


def iter_source(spec: SourceSpec, schema: Schema, batch_rows: int = DEFAULT_BATCH_ROWS) -> Iterator[pd.DataFrame]:
    """Record batches of the source as DataFrames, in source order."""
    if spec.kind in ("csv", "parquet"):
        _check_file(spec)
    if spec.kind == "csv":
        return _csv_batches(spec, schema, batch_rows)
    if spec.kind == "parquet":
        return _parquet_batches(spec, batch_rows)
    return _sql_batches(spec, batch_rows)


# ---------------------------------------------------------------- typing raw columns

def raw_arrow_schema(schema: Schema, extra_columns: list[str]) -> pa.Schema:
    """Types of raw.parquet: schema columns typed by the schema, unexpected columns as strings."""
    types = {"categorical": pa.string(), "boolean": pa.string(), "integer": pa.float64(), "float": pa.float64(),
             "date": pa.date32(), "timestamp": pa.timestamp("us")}
    fields = [pa.field(c.name, types[c.type]) for c in schema.columns]
    return pa.schema(fields + [pa.field(name, pa.string()) for name in extra_columns])


def coerce_batch(frame: pd.DataFrame, schema: Schema, origin: str) -> pd.DataFrame:
    """Schema columns as the schema's types; a value that cannot be read as the type is an error.

    Numeric columns become float64 (NaN = missing) so that a bad type is reported here, by column,
    instead of as a parser message that would quote the value. Date columns become Python dates and
    timestamp columns naive UTC datetime64 (floored to the day / second, ``privsynth.schema.temporal``).
    """
    out = {}
    for name in frame.columns:
        series = frame[name]
        try:
            col = schema.column(name)
        except KeyError:
            out[name] = category_text(series).astype(object).where(series.notna(), None)
            continue
        if col.type in temporal.TEMPORAL_TYPES:
            values, not_date = temporal.values_in_unit(series, col.type)
            if not_date.any():
                raise InputError(f"{origin}: column {name!r} has value(s) that are not {col.type}s "
                                 f"(the schema says {col.type})")
            missing = np.isnan(values)
            whole = np.where(missing, 0, values).astype(np.int64)
            moments = pd.Series(whole.astype("datetime64[D]" if col.type == "date" else "datetime64[s]")
                                .astype("datetime64[us]"), index=series.index).where(~missing)
            out[name] = moments.dt.date.astype(object).where(~missing, None) if col.type == "date" else moments
        elif col.type in ("integer", "float"):
            if series.dtype.kind in "iufb":
                numeric = series.astype(np.float64)
            else:
                text = series.astype("string").str.strip()
                numeric = pd.to_numeric(text, errors="coerce")
                bad = numeric.isna() & text.notna() & (text != "")
                lowered = text.str.lower()
                # 'nan' / 'inf' spellings parse as floats; keep them so validation can name them.
                special = lowered.isin(["nan", "inf", "+inf", "-inf", "infinity", "-infinity"])
                numeric = numeric.where(~special, pd.to_numeric(text.where(special), errors="coerce"))
                bad &= ~special
                if bad.any():
                    raise InputError(f"{origin}: column {name!r} has value(s) that are not numbers "
                                     f"(the schema says {col.type})")
                numeric = numeric.astype(np.float64)
            if col.type == "integer":
                finite = np.isfinite(numeric.to_numpy())
                fractional = finite & (numeric.to_numpy() != np.round(numeric.to_numpy()))
                if fractional.any():
                    raise InputError(f"{origin}: column {name!r} has non-integer value(s) "
                                     "(the schema says integer)")
            out[name] = numeric
        else:
            # category_text: an integer-coded category column that holds a null arrives as float64
            # (1.0, 2.0); its text must be "1", "2" to match the schema's categories.
            out[name] = category_text(series).astype(object).where(series.notna(), None)
    return pd.DataFrame(out)
