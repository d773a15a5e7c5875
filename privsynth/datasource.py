"""The private side of a run: open the data, validate it, and reduce it to its sparse histogram.

``open_data(data, schema, private_dir)`` accepts what ``privsynth.synthesize`` accepts: a source
URL or path (the ``--input`` forms of ``privsynth.io``), a pandas or polars DataFrame, a pyarrow
Table or Dataset. The handle it returns is the only object of a run that touches rows:

* ``validate()``: the schema's expectations (``privsynth.validation``), count-free and value-free;
* ``histogram()``: the distinct level-code records and their counts (``privsynth.workload.Histogram``),
  the one statistic every mechanism is computed from.

Rows that must be copied (a file source read in batches, an in-memory table) go to ``private_dir``,
a folder the run creates with owner-only permissions and deletes when it ends: nothing private is
left in the run folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from privsynth.encoding import encode_codes
from privsynth.io import (AtomicParquetWriter, InputError, SourceSpec, coerce_batch, iter_parquet, iter_source, parse_source,
                          raw_arrow_schema)
from privsynth.schema import Schema
from privsynth.workload import Histogram


class ValidationFailedError(ValueError):
    """The input failed schema validation; nothing was charged."""


def describe_data(data: Any) -> str:
    """A public description of the input (a location with credentials redacted, or the object's type)."""
    if isinstance(data, str):
        return parse_source(data).describe()
    return f"in-memory {type(data).__module__.split('.')[0]}.{type(data).__name__}"


def _as_arrow(data: Any) -> pa.Table:
    if isinstance(data, pa.Table):
        return data
    module = type(data).__module__.split(".")[0]
    if module == "pandas":
        return pa.Table.from_pandas(data, preserve_index=False)
    if module == "polars":
        return data.to_arrow()
    if module == "pyarrow":  # a pyarrow.dataset.Dataset, RecordBatchReader ...
        return data.to_table() if hasattr(data, "to_table") else data.read_all()
    raise InputError(f"data of type {type(data).__name__} is not supported; expected a source URL or path, a pandas "
                     "or polars DataFrame, or a pyarrow Table or Dataset")


def copy_typed_rows(spec: SourceSpec, schema: Schema, raw_path: Path, origin: str, batch_rows: int = 65_536) -> int:
    """Stream the source into ``raw_path`` (typed by the schema); returns the (private) row count."""
    writer: AtomicParquetWriter | None = None
    rows = 0
    try:
        for frame in iter_source(spec, schema, batch_rows):
            if writer is None:
                columns = [str(c) for c in frame.columns]
                dupes = sorted({c for c in columns if columns.count(c) > 1})
                if dupes:
                    raise InputError(f"{origin}: duplicate column name(s) {dupes}")
                missing = [c for c in schema.column_names if c not in columns]
                if missing:
                    raise InputError(f"{origin}: missing column(s) {missing}; the schema {schema.name!r} expects "
                                     f"{list(schema.column_names)}")
                extra = [c for c in columns if c not in schema.column_names]
                if schema.other_columns == "ignore":
                    extra = []  # never read: only the schema's columns are copied
                writer = AtomicParquetWriter(raw_path, raw_arrow_schema(schema, extra))
            frame.columns = [str(c) for c in frame.columns]
            typed = coerce_batch(frame, schema, origin)[writer.schema.names]
            writer.write(pa.Table.from_pandas(typed, schema=writer.schema, preserve_index=False))
            rows += len(typed)
        if writer is None or rows == 0:
            raise InputError(f"{origin} has a header but no data rows" if writer is not None else f"{origin} holds no table")
    except BaseException:
        if writer is not None:
            writer.__exit__(RuntimeError, None, None)  # discard the temporary file
        raise
    writer.__exit__(None, None, None)
    return rows


class DataHandle:
    """One run's access to the private table (see the module docstring): the statistics engine.

    Every source form is counted where it lives (``privsynth.engine``: DuckDB for files, globs and
    in-memory tables, PostgreSQL, Spark, any ibis backend); only aggregates come back. Nothing is
    copied into ``private_dir`` on this path; ``copy_typed_rows`` (the batch reader of
    ``privsynth.io``) remains for tools that need typed rows, not for runs.
    """

    def __init__(self, data: Any, schema: Schema, private_dir: Path) -> None:
        from privsynth.engine import open_source

        self.schema = schema
        self.private_dir = Path(private_dir)
        self.description = describe_data(str(data) if isinstance(data, Path) else data)
        self._source = open_source(str(data) if isinstance(data, Path) else data, schema)

    def row_count(self) -> int:
        """The exact row count: PRIVATE, only for checks that refuse without stating it."""
        return self._source.row_count()

    def validate(self):
        return self._source.validate()

    def histogram(self) -> Histogram:
        return self._source.histogram()

    def close(self) -> None:
        self._source.close()


def open_data(data: Any, schema: Schema, private_dir: Path) -> DataHandle:
    """Open the input for one run; reads nothing yet (errors name the source and what was expected)."""
    return DataHandle(data, schema, private_dir)
