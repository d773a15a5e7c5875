"""Input and output below the engine: sinks, atomic artifacts, connections, credentials, storage, home.

* :mod:`privsynth.io.sinks`: ``--sink`` forms (files, DuckDB, PostgreSQL, other ibis backends);
* :mod:`privsynth.io.atomic`: atomic writes (temporary sibling + rename) and hashing;
* :mod:`privsynth.io.connections`: database connections by URL (shared by sources and sinks);
* :mod:`privsynth.io.credentials`: passwords only as ``${ENV_VAR}`` references, redacted URLs;
* :mod:`privsynth.io.storage`: run folders and release stores on any fsspec location;
* :mod:`privsynth.io.home`: the per-user ``$PRIVSYNTH_HOME`` (ledger, release store).

Sources (``--input`` forms) belong to the statistics engine (:mod:`privsynth.engine.sources`), which
counts where the data lives instead of reading rows.
"""

from privsynth.io.atomic import (
                                 DEFAULT_BATCH_ROWS,
                                 AtomicParquetWriter,
                                 atomic_write_bytes,
                                 atomic_write_json,
                                 atomic_write_table,
                                 iter_parquet,
                                 sha256_file,
)
from privsynth.io.connections import InputError
from privsynth.io.credentials import redact_url
from privsynth.io.sinks import SinkSpec, parse_sink, portable_table, write_sink
from privsynth.io.storage import check_writable_directory

__all__ = [
    "DEFAULT_BATCH_ROWS", "AtomicParquetWriter", "InputError", "SinkSpec", "atomic_write_bytes",
    "atomic_write_json", "atomic_write_table", "check_writable_directory", "iter_parquet",
    "parse_sink", "portable_table", "redact_url", "sha256_file", "write_sink",
]
