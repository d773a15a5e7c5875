"""A run folder: stage artifacts written atomically, and ``manifest.json`` that says which to trust.

Every artifact is written to a temporary name and renamed, and the manifest (itself replaced
atomically after each stage) records its sha256. A later attempt of the same run trusts an artifact
only if the manifest lists it and its hash still matches, so a crash never leaves a half-written
artifact that a re-run would read.
"""

from __future__ import annotations

import json
import platform
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from privsynth.errors import RunFolderError  # noqa: F401  (re-exported: raised here)
from privsynth.io.atomic import atomic_write_json, json_default, sha256_file
from privsynth.io.storage import RemoteFolder, is_remote

MANIFEST = "manifest.json"
PACKAGES = ("privsynth", "numpy", "scipy", "pandas", "pyarrow", "cvxpy", "highspy", "opendp", "prefect",
            "great-expectations", "duckdb")

# Artifacts and who may see them (docs/design.md section 2).
# Private intermediates never enter a run folder (they live in the run's private temporary folder);
# the internal audit, when asked for, is written to internal-audit/ and is not listed here.
VISIBILITY = {
    "schema.yaml": "public (DP)",
    "discovery.json": "public (DP)",
    "validation.json": "public",
    "encoding.json": "public",
    "release.parquet": "public (DP)",
    "measurements.parquet": "public (DP)",
    "privacy.json": "public (DP)",
    "synthetic.parquet": "public (DP)",
    "report.json": "public (DP)",
    "report.md": "public (DP)",
    "report.html": "public (DP)",
    "synthetic-validation.json": "public (DP)",
}


def visibility_of(name: str) -> str:
    """What an artifact is: public (DP) outputs, public metadata, or INTERNAL (the opt-in audit, not DP)."""
    if name.startswith("internal-audit/"):
        return "internal (not DP)"
    if name.startswith("figures/"):
        return "public (DP)"  # drawn from the release and the synthetic table only
    return VISIBILITY.get(name, "public")


def new_run_id() -> str:
    """A run's id: its start time (to the second) and 6 random hex digits, so two runs never share a folder."""
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]


def package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


@dataclass
class RunFolder:
    path: Path
    manifest: dict
    remote: RemoteFolder | None = None

    @staticmethod
    def open_at(location: str | Path, run_key: dict, run_id: str) -> RunFolder:
        """``open`` for a local path or an fsspec URL (``privsynth.io.storage``): a remote run folder is
        worked on in a local folder and mirrored after every stage, artifacts before the manifest."""
        if not is_remote(location):
            return RunFolder.open(location, run_key, run_id)
        remote = RemoteFolder(str(location))
        local = Path(tempfile.mkdtemp(prefix="privsynth-run-"))
        if remote.exists(MANIFEST):
            previous = json.loads(remote.read_bytes(MANIFEST))
            remote.pull(local, [*previous.get("artifacts", {}), MANIFEST])
        folder = RunFolder.open(local, run_key, run_id)
        folder.remote = remote
        folder.save()
        return folder

    @property
    def location(self) -> str:
        """Where the run folder lives: its URL when remote, else its local path."""
        return self.remote.url if self.remote is not None else str(self.path)

    def release_local_copy(self) -> None:
        """Delete the local working copy of a remote run folder (everything is uploaded by then)."""
        if self.remote is not None:
            shutil.rmtree(self.path, ignore_errors=True)

    @staticmethod
    def open(path: str | Path, run_key: dict, run_id: str) -> RunFolder:
        """Open a fresh folder, or resume one that holds an earlier attempt of the *same* run.

        A non-empty folder that holds anything else is refused, so nothing already written is lost.
        """
        path = Path(path)
        # Compare keys as they read back from JSON: a tuple or a numpy number in the key must not make
        # the same run look like a different one on resume.
        run_key = json.loads(json.dumps(run_key, default=json_default))
        if path.exists() and not path.is_dir():
            raise RunFolderError(f"output folder {str(path)!r} is a file; choose an empty or new --output folder")
        manifest_path = path / MANIFEST
        if manifest_path.is_file():
            try:
                manifest = json.loads(manifest_path.read_text())
            except (OSError, json.JSONDecodeError):
                raise RunFolderError(f"output folder {str(path)!r} holds an unreadable manifest.json; choose another "
                                     "--output") from None
            if manifest.get("run_key") != run_key:
                if "mechanism" in manifest.get("stages", {}) or manifest.get("finished"):
                    raise RunFolderError(f"output folder {str(path)!r} holds a different run "
                                         f"({manifest.get('run_id')}) with a release; choose an empty or new --output "
                                         "folder")
                # A run that failed before its release (bad input, refused budget) holds nothing worth
                # keeping: its public leftovers are cleared and the folder is reused, unless the folder
                # also holds files that are not its artifacts (the user's own: never deleted).
                listed = {MANIFEST, *manifest.get("artifacts", {})}
                others = [p.name for p in path.iterdir() if not p.name.startswith(".") and p.name not in listed]
                if others:
                    raise RunFolderError(f"output folder {str(path)!r} is not empty and holds no privsynth run but a "
                                         "failed one and other files; choose an empty or new --output folder")
                RunFolder(path, manifest).clear()
                return RunFolder.open(path, run_key, run_id)
            manifest.setdefault("attempts", 1)
            manifest["attempts"] += 1
            folder = RunFolder(path, manifest)
            folder.remove_stale_temporaries()
            return folder
        if path.exists() and any(p for p in path.iterdir() if not p.name.startswith(".")):
            raise RunFolderError(f"output folder {str(path)!r} is not empty and holds no privsynth run; "
                                 "choose an empty or new --output folder")
        path.mkdir(parents=True, exist_ok=True)
        manifest = {"run_id": run_id, "run_key": run_key, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                    "attempts": 1, "package_versions": package_versions(), "stages": {}, "artifacts": {}}
        folder = RunFolder(path, manifest)
        folder.save()
        return folder

    @staticmethod
    def load(path: str | Path) -> RunFolder:
        path = Path(path)
        return RunFolder(path, json.loads((path / MANIFEST).read_text()))

    def file(self, name: str) -> Path:
        return self.path / name

    def save(self) -> None:
        atomic_write_json(self.path / MANIFEST, self.manifest)
        if self.remote is not None:
            self.remote.push(self.path, {n: entry["sha256"] for n, entry in self.manifest["artifacts"].items()
                                         if self.file(n).is_file()}, last=MANIFEST)

    def trusted(self, name: str) -> bool:
        """The artifact exists, is listed in the manifest, and its hash matches."""
        entry = self.manifest["artifacts"].get(name)
        target = self.file(name)
        return bool(entry) and target.is_file() and sha256_file(target) == entry["sha256"]

    def record(self, stage: str, artifacts: list[str], **facts) -> None:
        """Mark a stage done and list its artifacts with their hashes (atomically)."""
        for name in artifacts:
            self.manifest["artifacts"][name] = {
                "path": name, "sha256": sha256_file(self.file(name)),
                "visibility": visibility_of(name)}
        self.manifest["stages"][stage] = {"status": "done", "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                          "artifacts": artifacts, **facts}
        self.save()

    def note(self, **facts) -> None:
        """Record public facts of the run in the manifest (atomically)."""
        self.manifest.setdefault("facts", {}).update(facts)
        self.save()

    def require(self, name: str) -> Path:
        """The path of an artifact a stage is about to read; refuses one the manifest does not vouch for.

        A crashed attempt can leave a file that was never recorded, or one that changed after it was;
        reading it would pass a half-written or foreign artifact downstream.
        """
        if not self.trusted(name):
            raise RunFolderError(f"run folder {str(self.path)!r}: {name} is missing or does not match the manifest; "
                                 "re-run the same command to rebuild it")
        return self.file(name)

    def discard(self, names: list[str], reason: str) -> None:
        """Delete artifacts (private copies of a failed run) and say so in the manifest."""
        for name in names:
            existed = self.file(name).exists() or name in self.manifest["artifacts"]
            self.file(name).unlink(missing_ok=True)
            self.manifest["artifacts"].pop(name, None)
            if existed:
                self.manifest.setdefault("discarded", {})[name] = reason
        self.save()

    def clear(self) -> None:
        """Remove this run's listed artifacts and its manifest (only for a run that released nothing)."""
        for name in list(self.manifest.get("artifacts", {})):
            self.file(name).unlink(missing_ok=True)
        self.remove_stale_temporaries()
        (self.path / MANIFEST).unlink(missing_ok=True)

    def remove_stale_temporaries(self) -> list[str]:
        """Remove the temporary files of atomic writes that a killed attempt left behind."""
        removed = []
        for stale in self.path.glob(".*.tmp"):
            if stale.is_file():
                stale.unlink(missing_ok=True)
                removed.append(stale.name)
        return removed

    def stage_done(self, stage: str) -> bool:
        entry = self.manifest["stages"].get(stage)
        return bool(entry) and all(self.trusted(a) for a in entry.get("artifacts", []))
