"""Atomic artifacts and hashing: a reader never sees half a file.

Every artifact is written to a temporary sibling, fsynced, then renamed over its final name
(``os.replace`` is atomic on one file system); a failed write leaves no partial file behind.
``private=True`` creates the file owner-only (0600) from its first byte, and a missing parent folder
owner-only (0700): the mode is given to the call that creates it, never narrowed by a chmod after the
data is in it.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

DEFAULT_BATCH_ROWS = 65_536


def sha256_file(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _temporary_sibling(path: Path) -> Path:
    return path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")


OWNER_ONLY_FILE = 0o600
OWNER_ONLY_FOLDER = 0o700


def make_parent(path: Path, private: bool) -> None:
    """Create ``path``'s folder if missing; owner-only when ``private`` (an existing folder is left as is)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=OWNER_ONLY_FOLDER if private else 0o777)


def create_file(path: Path, private: bool) -> int:
    """Create ``path`` (it must not exist) and return its descriptor; owner-only when ``private``."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, OWNER_ONLY_FILE if private else 0o666)


def atomic_write_bytes(path: str | Path, data: bytes, *, private: bool = False) -> None:
    """Write to a temporary sibling, fsync, then rename: readers never see half a file."""
    path = Path(path)
    make_parent(path, private)
    tmp = _temporary_sibling(path)
    try:
        with os.fdopen(create_file(tmp, private), "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def atomic_write_json(path: str | Path, payload: object, *, private: bool = False) -> None:
    atomic_write_bytes(path, (json.dumps(payload, indent=2, sort_keys=False, default=json_default) + "\n").encode(),
                       private=private)


def json_default(value: object):
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


class AtomicParquetWriter:
    """Stream batches into ``path`` through a temporary file renamed on successful close."""

    def __init__(self, path: str | Path, arrow_schema: pa.Schema, *, private: bool = False) -> None:
        self.path = Path(path)
        make_parent(self.path, private)
        self._tmp = _temporary_sibling(self.path)
        os.close(create_file(self._tmp, private))  # created with its mode; the writer reopens it in place
        self._writer = pq.ParquetWriter(self._tmp, arrow_schema, compression="zstd")
        self.schema = arrow_schema
        self.rows = 0

    def write(self, table: pa.Table) -> None:
        self._writer.write_table(table)
        self.rows += table.num_rows

    def __enter__(self) -> AtomicParquetWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._writer.close()
        if exc_type is None:
            os.replace(self._tmp, self.path)
        self._tmp.unlink(missing_ok=True)


def atomic_write_table(path: str | Path, table: pa.Table, *, private: bool = False) -> None:
    with AtomicParquetWriter(path, table.schema, private=private) as writer:
        writer.write(table)


def iter_parquet(path: str | Path, batch_rows: int = DEFAULT_BATCH_ROWS,
                 columns: list[str] | None = None) -> Iterator[pa.RecordBatch]:
    yield from pq.ParquetFile(path).iter_batches(batch_size=batch_rows, columns=columns)
