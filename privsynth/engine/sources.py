"""Input forms (the ``--input`` argument) and the checks of a file made before the engine opens it.

* ``path/to/table.csv`` (also ``.csv.gz``, ``.tsv``) or ``path/to/table.parquet``; a URL such as
  ``s3://bucket/table.parquet`` works for Parquet when the matching fsspec backend is installed;
* ``duckdb:path/to/warehouse.duckdb?table=people`` or ``duckdb:path.duckdb?query=SELECT ...``;
* any SQLAlchemy URL with ``?table=NAME`` or ``?query=...``, e.g.
  ``postgresql://user@host/db?table=people`` (needs a driver such as psycopg);
* ``spark:TABLE``, ``spark:?query=...`` or ``spark:parquet:PATH`` (also ``csv``, ``orc``, ``json``:
  files read by the Spark cluster, :mod:`privsynth.engine.spark`).

The rows are read by the statistics engine where they live (:mod:`privsynth.engine.backends`); sinks
are in :mod:`privsynth.io.sinks`. Errors name the file and say what was expected; they never quote
cell values (logs are releases).
"""

from __future__ import annotations

import csv
import gzip
import io
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from privsynth.engine.spark import spark_files
from privsynth.io.connections import InputError, plain_table_name
from privsynth.io.credentials import redact_url
from privsynth.schema import Schema


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
            return redact_url(self.location)
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
        if spark_files(rest) is None and (not rest or rest.startswith("?") and not rest.lower().startswith("?query=")):
            raise InputError("--input: expected spark:TABLE, spark:?query=SELECT ... or spark:FORMAT:PATH")
        return SourceSpec("spark", spec)
    file_suffixes = (".parquet", ".csv", ".csv.gz", ".tsv", ".tsv.gz")
    if lowered.startswith("duckdb:") or ("://" in spec.split("?")[0]
                                         and not lowered.split("?")[0].endswith(file_suffixes)):
        return _parse_sql(spec)
    path = spec.split("?")[0]
    if path.lower().endswith(".parquet"):
        return SourceSpec("parquet", path)
    if path.lower().endswith((".csv", ".csv.gz", ".tsv", ".tsv.gz")):
        return SourceSpec("csv", path, delimiter="\t" if ".tsv" in path.lower() else ",")
    raise InputError(f"--input {spec!r}: expected a .csv, .csv.gz, .tsv or .parquet file (or a glob of Parquet files), "
                     "a duckdb:PATH?table=NAME source, a database URL with ?table=NAME, spark:TABLE or "
                     "spark:FORMAT:PATH")


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
        raise InputError(f"--input {redact_url(spec)!r}: a SQL source needs exactly one of ?table=NAME or "
                         "?query=SELECT...")
    if table is not None and not plain_table_name(table):
        raise InputError(f"--input: table name {table!r} must be letters, digits, '_' and '.' only")
    if others:
        if base.lower().startswith("duckdb:"):
            names = sorted({piece.partition("=")[0] for piece in others})
            raise InputError(f"--input: a duckdb: source takes ?table=NAME or ?query=SELECT..., not {names}")
        base = base + "?" + "&".join(others)  # connection options of the SQLAlchemy URL, e.g. sslmode
    return SourceSpec("sql", base, table=table, query=query)


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
    # utf-8-sig: a byte-order mark (what spreadsheet exports write) belongs to the encoding, not to the first name
    return io.TextIOWrapper(raw, encoding="utf-8-sig", newline="")


def check_input_width(columns: int, origin: str) -> None:
    """Refuse an input with more columns than PRIVSYNTH_MAX_INPUT_COLUMNS, before anything else is read."""
    from privsynth.schema.limits import LimitError, limit

    allowed = limit("PRIVSYNTH_MAX_INPUT_COLUMNS")
    if columns > allowed:
        raise LimitError(f"{origin} has {columns} columns; the limit is {allowed} (PRIVSYNTH_MAX_INPUT_COLUMNS): "
                         "select the columns you need with a query or a view, or raise the limit")


def _csv_header(spec: SourceSpec, schema: Schema | None) -> list[str]:
    """The header row's names, checked (``schema`` None: a table being discovered, whose names are all it has)."""
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
        if schema is None:
            raise InputError(f"input file {spec.location!r}: {len(dupes)} duplicate column name(s) in the header "
                             "(names withheld: without a schema the first row may be data); expected unique names")
        named = dupes if set(dupes) <= set(schema.column_names) else (f"{len(dupes)} (names withheld: not schema "
                                                                      "columns)")
        raise InputError(f"input file {spec.location!r}: duplicate column name(s) {named}; expected each of "
                         f"{list(schema.column_names)} once")
    if schema is not None and len(header) == 1 and len(schema.columns) > 1:
        for other in (";", "\t", "|"):
            if other in header[0]:
                raise InputError(f"input file {spec.location!r}: the header has one column but contains {other!r}; "
                                 f"expected {spec.delimiter!r}-delimited columns {list(schema.column_names)}")
    return header
