"""The release store: each mechanism release persisted once, under its release key.

docs/design.md 5.3: a retried or re-run stage must not draw fresh noise for the same release. The
mechanism stage looks here first; a release found under its key is reused and not charged again.
A release is stored as a folder written under a temporary name and renamed, so it is either
complete or absent. Its name is the release key, an HMAC under the ledger's secret
(``privsynth.privacy.keys``). The store is per user by default (``privsynth.io.home``), like the ledger.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
import weakref
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from privsynth.io import AtomicParquetWriter, atomic_write_json, atomic_write_table
from privsynth.io.home import OWNER_ONLY_DIR, default_release_store, make_private_dir
from privsynth.io.storage import COMPLETE, RemoteFolder, is_remote
from privsynth.mechanisms.base import Measurement, Release

STORE_ENV = "PRIVSYNTH_RELEASE_STORE"
MEASUREMENTS = "measurements.parquet"


def measurements_table(measurements) -> pa.Table:
    """The release's noisy measurements as a table (public, DP): one row per measured marginal."""
    return pa.table({
        "attributes": pa.array([list(map(int, m.attributes)) for m in measurements], pa.list_(pa.int32())),
        "noisy_counts": pa.array([np.asarray(m.noisy_counts, dtype=np.float64).tolist() for m in measurements],
                                 pa.list_(pa.float64())),
        "noise": pa.array([m.noise for m in measurements]),
        "scale": pa.array([float(m.scale) for m in measurements], pa.float64()),
        "level_groups": pa.array([[None if g is None else list(map(int, g)) for g in m.level_groups]
                                  for m in measurements], pa.list_(pa.list_(pa.int32()))),
    })


def write_release(path: Path, release: Release, column_names, *, private: bool = False) -> None:
    """``release.parquet``: one Parquet row group per ``Release.arrow_batches`` batch, written atomically;
    memory is the points and one batch."""
    batches = release.arrow_batches(list(column_names))
    first = next(batches)
    with AtomicParquetWriter(path, first.schema, private=private) as writer:
        writer.write(first)
        for batch in batches:
            writer.write(batch)


def read_release(path: Path) -> Release:
    """The release in ``release.parquet``, read a row group at a time into one array of its points."""
    parquet = pq.ParquetFile(path)
    # Row group by row group: a whole-file read of 2,787 uint8 columns held 1.5 GB for a 270 MB release.
    batches = (batch for group in range(parquet.num_row_groups) for batch in parquet.read_row_group(group).to_batches())
    return Release.from_batches(parquet.schema_arrow, parquet.metadata.num_rows, batches)


def measurements_from_table(table: pa.Table) -> tuple[Measurement, ...]:
    rows = table.to_pylist()
    return tuple(Measurement(tuple(r["attributes"]), np.asarray(r["noisy_counts"], dtype=np.float64), r["noise"],
                             float(r["scale"]),
                             tuple(None if g is None else tuple(g) for g in (r.get("level_groups") or ())))
                 for r in rows)


class ReleaseStore:
    def __init__(self, root: str | Path | None = None) -> None:
        location = root or os.environ.get(STORE_ENV) or default_release_store()
        # An fsspec URL (s3://, gs://, memory://): releases are staged locally and uploaded, files first
        # and the COMPLETE marker last (privsynth.io.storage), so workers need no shared disk.
        self.remote = RemoteFolder(str(location)) if is_remote(location) else None
        self.root = Path(tempfile.mkdtemp(prefix="privsynth-store-")) if self.remote else Path(location)
        if self.remote is not None:
            weakref.finalize(self, shutil.rmtree, self.root, True)  # the local staging copy goes with the store

    def folder(self, key: str) -> Path:
        return self.root / key

    def journal_place(self, key: str):
        """Where the noise journal of ``key`` is kept (docs/design.md 5.3): ``.journals/<key>`` of this store,
        owner-only, and for a remote store also at its URL (a dead worker's journal is found by the next)."""
        from privsynth.privacy.journal import JOURNALS, JournalPlace

        make_private_dir(self.root)
        name = f"{JOURNALS}/{key}"
        return JournalPlace(self.root / JOURNALS / key, self.remote, name if self.remote is not None else None)

    def _fetch(self, key: str) -> None:
        """Bring a complete remote release into the local staging root."""
        if self.remote is None or (self.folder(key) / "release.parquet").is_file():
            return
        if self.remote.exists(f"{key}/{COMPLETE}"):
            self.remote.pull(self.root, [f"{key}/release.parquet", f"{key}/privacy.json", f"{key}/{MEASUREMENTS}"])

    def get(self, key: str) -> tuple[Release, dict] | None:
        self._fetch(key)
        folder = self.folder(key)
        if not (folder / "release.parquet").is_file() or not (folder / "privacy.json").is_file():
            return None
        release = read_release(folder / "release.parquet")
        if (folder / MEASUREMENTS).is_file():
            release = replace(release, measurements=measurements_from_table(pq.read_table(folder / MEASUREMENTS)))
        return release, json.loads((folder / "privacy.json").read_text())

    def put(self, key: str, release: Release, column_names: list[str], privacy: dict) -> Path:
        target = self.folder(key)
        if target.exists():
            return target
        # Owner-only, made on the first release: its folders are named by release keys and hold releases.
        make_private_dir(self.root)
        # A killed writer leaves its staging folder behind; reads never trust one, and this sweeps them.
        for stale in self.root.glob(f".{key}.*.partial") if self.root.is_dir() else ():
            shutil.rmtree(stale, ignore_errors=True)
        staging = self.root / f".{key}.{uuid.uuid4().hex[:8]}.partial"
        staging.mkdir(mode=OWNER_ONLY_DIR, parents=True)
        try:
            write_release(staging / "release.parquet", release, column_names, private=True)
            atomic_write_json(staging / "privacy.json", privacy, private=True)
            if release.measurements:
                atomic_write_table(staging / MEASUREMENTS, measurements_table(release.measurements), private=True)
            os.replace(staging, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        if self.remote is not None:
            names = [f"{key}/{p.name}" for p in target.iterdir() if p.is_file()]
            (target / COMPLETE).write_text("complete\n")
            self.remote.push(self.root, names, last=f"{key}/{COMPLETE}")
        return target
