"""The release store: each mechanism release persisted once, under its release key.

DESIGN section 5.3: a retried or re-run stage must not draw fresh noise for the same release. The
mechanism stage looks here first; a release found under its key is reused and not charged again.
A release is stored as a folder written under a temporary name and renamed, so it is either
complete or absent.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

import pyarrow.parquet as pq

from privsynth.io import atomic_write_json, atomic_write_table
from privsynth.mechanisms.base import Release

DEFAULT_STORE = "runs/releases"


def run_release_key(input_hash: str, schema_hash: str, mechanism: str, config: dict, seed: int | None, run_id: str) -> str:
    """The key of a run's release (privsynth.privacy.ledger.release_key).

    Without a seed the noise is fresh on every run, so the run id joins the key: a re-run of the
    *same* run (same folder, or a retried Prefect flow run) reuses its release, a new run is a new
    release and is charged.
    """
    from privsynth.privacy.ledger import release_key

    keyed = config if seed is not None else {**config, "run_nonce": run_id}
    return release_key(input_hash, schema_hash, mechanism, keyed, seed)


class ReleaseStore:
    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root or os.environ.get("PRIVSYNTH_RELEASE_STORE", DEFAULT_STORE))

    def folder(self, key: str) -> Path:
        return self.root / key

    def get(self, key: str) -> tuple[Release, dict] | None:
        folder = self.folder(key)
        if not (folder / "release.parquet").is_file() or not (folder / "privacy.json").is_file():
            return None
        release = Release.from_arrow(pq.read_table(folder / "release.parquet"))
        return release, json.loads((folder / "privacy.json").read_text())

    def put(self, key: str, release: Release, column_names: list[str], privacy: dict) -> Path:
        target = self.folder(key)
        if target.exists():
            return target
        # A killed writer leaves its staging folder behind; reads never trust one, and this sweeps them.
        for stale in self.root.glob(f".{key}.*.partial") if self.root.is_dir() else ():
            shutil.rmtree(stale, ignore_errors=True)
        staging = self.root / f".{key}.{uuid.uuid4().hex[:8]}.partial"
        staging.mkdir(parents=True)
        try:
            atomic_write_table(staging / "release.parquet", release.to_arrow(column_names))
            atomic_write_json(staging / "privacy.json", privacy)
            os.replace(staging, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return target
