"""Sources and sinks by URL, and atomic artifacts.

* :mod:`privsynth.io.sources`: ``--input`` forms, the row-batch readers, ``redact_url``;
* :mod:`privsynth.io.sinks`: ``--sink`` forms (files, DuckDB, PostgreSQL, other ibis backends);
* :mod:`privsynth.io.atomic`: atomic writes (temporary sibling + rename) and hashing.

The statistics engine (:mod:`privsynth.engine`) counts where the data lives instead of reading rows.
"""

from privsynth.io.atomic import (DEFAULT_BATCH_ROWS, AtomicParquetWriter, _json_default, atomic_write_bytes,
                                 atomic_write_json, atomic_write_table, iter_parquet, sha256_file)
from privsynth.io.sinks import SinkSpec, parse_sink, portable_table, write_sink
from privsynth.io.sources import (InputError, SourceSpec, check_writable_directory, coerce_batch, iter_source,
                                  parse_source, raw_arrow_schema, redact_url)

__all__ = [
    "DEFAULT_BATCH_ROWS", "AtomicParquetWriter", "InputError", "SinkSpec", "SourceSpec", "atomic_write_bytes",
    "atomic_write_json", "atomic_write_table", "check_writable_directory", "coerce_batch", "iter_parquet",
    "iter_source", "parse_sink", "parse_source", "portable_table", "raw_arrow_schema", "redact_url", "sha256_file",
    "write_sink",
]
