"""Run folders and release stores on any fsspec location (S3, GCS, Azure, a mounted volume, memory).

Workers on other machines need no shared disk: ``--output s3://bucket/runs/nightly`` and
``PRIVSYNTH_RELEASE_STORE=s3://bucket/privsynth/releases`` put the public artifacts and the stored
releases in an object store. A run works in a local folder and mirrors it after every stage:

* every artifact is uploaded before the manifest that vouches for it, so a reader (or a resumed
  run) that trusts the manifest never sees a missing or torn artifact;
* a stored release is complete only once its ``COMPLETE`` marker exists, written after its files.

Only public artifacts and DP releases are ever uploaded; the private intermediates stay in the
run's local private folder (``privsynth.run.stages``). The backend for a URL scheme comes with its
fsspec package (``s3fs``, ``gcsfs``, ``adlfs``); ``memory://`` needs none (tests).
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

import fsspec

from privsynth.io.connections import InputError

COMPLETE = "COMPLETE"


def is_remote(location: str | Path) -> bool:
    """A URL with a scheme other than file:// (and not a duckdb: sink)."""
    text = str(location)
    return "://" in text and not text.lower().startswith("file://")


class RemoteFolder:
    """A folder at an fsspec URL, mirrored from (and pulled into) a local folder."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self.fs, self.root = fsspec.core.url_to_fs(self.url)
        self._uploaded: dict[str, str] = {}

    def _path(self, name: str) -> str:
        return f"{self.root}/{name}"

    def exists(self, name: str) -> bool:
        return self.fs.exists(self._path(name))

    def read_bytes(self, name: str) -> bytes:
        with self.fs.open(self._path(name), "rb") as handle:
            return handle.read()

    def write_bytes(self, name: str, data: bytes) -> None:
        parent = self._path(name).rsplit("/", 1)[0]
        self.fs.makedirs(parent, exist_ok=True)
        with self.fs.open(self._path(name), "wb") as handle:
            handle.write(data)

    def push(self, local: Path, names: list[str] | dict[str, str], last: str | None = None) -> None:
        """Upload the named files of ``local`` that changed since the last push, then ``last``.

        ``names`` may map each name to its known sha256 (a run folder's manifest has them), so
        unchanged artifacts are neither read nor hashed again."""
        known = names if isinstance(names, dict) else {}
        for name in names:
            digest = known.get(name) or hashlib.sha256((local / name).read_bytes()).hexdigest()
            if self._uploaded.get(name) != digest:
                self.write_bytes(name, (local / name).read_bytes())
                self._uploaded[name] = digest
        if last is not None:
            self.write_bytes(last, (local / last).read_bytes())

    def pull(self, local: Path, names: list[str]) -> None:
        """Download the named files into ``local`` (those that exist)."""
        for name in names:
            if self.exists(name):
                target = local / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(self.read_bytes(name))
                self._uploaded[name] = hashlib.sha256(target.read_bytes()).hexdigest()


def check_writable_directory(path: str | Path) -> Path:
    """Create the folder if needed and prove it is writable, before any budget is spent."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-check-", delete=True):
            pass
    except OSError as err:
        raise InputError(f"output folder {str(path)!r} cannot be written "
                         f"({err.strerror or type(err).__name__})") from None
    return path
