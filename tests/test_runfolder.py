"""Run folders: fresh, resumed and refused folders, and artifacts trusted only while their hash matches."""

from __future__ import annotations

import json

import numpy as np
import pytest

from privsynth.io import atomic_write_bytes
from privsynth.runfolder import MANIFEST, RunFolder, RunFolderError, new_run_id, package_versions

KEY = {"input": "adult.csv", "mechanism": "rap", "epsilon": 1.0, "seed": 3, "marginals": [[0, 1], [1, 2]]}


def test_open_fresh_folder(tmp_path):
    folder = RunFolder.open(tmp_path / "run", KEY, "run-1")
    manifest = json.loads((tmp_path / "run" / MANIFEST).read_text())
    assert manifest["run_id"] == "run-1" and manifest["run_key"] == KEY
    assert manifest["attempts"] == 1 and manifest["stages"] == {} and manifest["artifacts"] == {}
    assert manifest["package_versions"]["numpy"] == np.__version__
    assert folder.file("raw.parquet") == tmp_path / "run" / "raw.parquet"
    # An existing empty folder (or one holding only hidden files) is fine too.
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / ".DS_Store").write_text("")
    RunFolder.open(tmp_path / "empty", KEY, "run-2")


def test_resume_same_run_key(tmp_path):
    RunFolder.open(tmp_path, KEY, "run-1")
    again = RunFolder.open(tmp_path, dict(reversed(list(KEY.items()))), "run-other-id")
    assert again.manifest["run_id"] == "run-1"  # the earlier attempt's identity is kept
    assert again.manifest["attempts"] == 2
    again.save()
    assert RunFolder.open(tmp_path, KEY, "x").manifest["attempts"] == 3


def test_resume_with_json_unfriendly_key(tmp_path):
    # Tuples and numpy numbers read back from JSON as lists and plain numbers: still the same run.
    key = {"marginals": ((0, 1), (1, 2)), "epsilon": np.float64(0.5), "rows": np.int64(100)}
    RunFolder.open(tmp_path, key, "run-1")
    assert RunFolder.open(tmp_path, key, "run-1").manifest["attempts"] == 2


def test_refuse_different_run_key(tmp_path):
    RunFolder.open(tmp_path, KEY, "run-1")
    with pytest.raises(RunFolderError, match=r"holds a different run \(run-1\)"):
        RunFolder.open(tmp_path, dict(KEY, epsilon=2.0), "run-2")


def test_refuse_non_empty_folder_without_manifest(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(RunFolderError, match="not empty and holds no privsynth run"):
        RunFolder.open(tmp_path, KEY, "run-1")
    assert (tmp_path / "notes.txt").read_text() == "mine"
    assert not (tmp_path / MANIFEST).exists()


def test_refuse_unreadable_manifest_and_file_path(tmp_path):
    (tmp_path / MANIFEST).write_text("{not json")
    with pytest.raises(RunFolderError, match="unreadable manifest"):
        RunFolder.open(tmp_path, KEY, "run-1")
    plain = tmp_path / "plain"
    plain.write_text("x")
    with pytest.raises(RunFolderError, match="is a file"):
        RunFolder.open(plain, KEY, "run-1")


def test_record_and_trust(tmp_path):
    folder = RunFolder.open(tmp_path, KEY, "run-1")
    atomic_write_bytes(folder.file("validation.json"), b'{"ok": true}')
    atomic_write_bytes(folder.file("plot.png"), b"png")
    assert not folder.trusted("validation.json")  # not listed yet
    assert not folder.stage_done("validate")
    folder.record("validate", ["validation.json", "plot.png"], rows=3)
    assert folder.trusted("validation.json") and folder.stage_done("validate")
    entry = folder.manifest["artifacts"]["validation.json"]
    assert entry["visibility"] == "public" and len(entry["sha256"]) == 64
    assert folder.manifest["artifacts"]["plot.png"]["visibility"] == "internal (not DP)"
    assert folder.manifest["stages"]["validate"]["rows"] == 3
    # The manifest on disk says the same (it is saved atomically by record).
    assert RunFolder.load(tmp_path).manifest == json.loads(json.dumps(folder.manifest))

    # Tampering with an artifact (or removing it) withdraws trust, and the stage must run again.
    folder.file("validation.json").write_bytes(b'{"ok": false}')
    assert not folder.trusted("validation.json")
    assert not folder.stage_done("validate")
    assert not RunFolder.load(tmp_path).trusted("validation.json")
    folder.file("plot.png").unlink()
    assert not folder.trusted("plot.png")
    assert not folder.trusted("never-written.json")


def test_visibility_of_private_artifacts(tmp_path):
    folder = RunFolder.open(tmp_path, KEY, "run-1")
    atomic_write_bytes(folder.file("raw.parquet"), b"raw")
    atomic_write_bytes(folder.file("release.parquet"), b"rel")
    folder.record("ingest", ["raw.parquet", "release.parquet"])
    assert folder.manifest["artifacts"]["raw.parquet"]["visibility"] == "private"
    assert folder.manifest["artifacts"]["release.parquet"]["visibility"] == "public (DP)"


def test_run_ids_and_versions():
    a, b = new_run_id(), new_run_id()
    assert a != b and len(a.split("-")) == 3
    versions = package_versions()
    assert versions["python"] and versions["pyarrow"] != "not installed"


# ---------------------------------------------------------------- release store (DESIGN 5.3)

def test_release_key_and_store(tmp_path):
    from privsynth.encoding import Domain, one_hot
    from privsynth.mechanisms.base import Release
    from privsynth.releases import ReleaseStore, run_release_key

    base = dict(input_hash="i", schema_hash="s", mechanism="rap", config={"epsilon": 1.0})
    seeded = run_release_key(**base, seed=1, run_id="a")
    assert seeded == run_release_key(**base, seed=1, run_id="b")  # a seed fixes the noise: same release
    assert seeded != run_release_key(**base, seed=2, run_id="a")
    assert run_release_key(**base, seed=None, run_id="a") != run_release_key(**base, seed=None, run_id="b")
    assert run_release_key(**base, seed=None, run_id="a") == run_release_key(**base, seed=None, run_id="a")
    assert run_release_key(**dict(base, config={"epsilon": 2.0}), seed=1, run_id="a") != seeded

    domain = Domain(("a", "b"), (2, 3))
    release = Release("rap", one_hot(np.array([[0, 2], [1, 1]]), domain).astype(float), np.array([0.25, 0.75]))
    store = ReleaseStore(tmp_path / "store")
    assert store.get(seeded) is None
    store.put(seeded, release, ["a=0", "a=1", "b=0", "b=1", "b=2"], {"cost": {"rho": 0.1}})
    got, privacy = store.get(seeded)
    np.testing.assert_array_equal(got.points, release.points)
    np.testing.assert_array_equal(got.weights, release.weights)
    assert privacy == {"cost": {"rho": 0.1}}
    # A second put under the same key keeps the first release: it is never replaced.
    other = Release("rap", release.points, np.array([0.5, 0.5]))
    store.put(seeded, other, ["a=0", "a=1", "b=0", "b=1", "b=2"], {"cost": {"rho": 9}})
    got, privacy = store.get(seeded)
    np.testing.assert_array_equal(got.weights, release.weights)
    assert privacy["cost"]["rho"] == 0.1
    assert [p.name for p in (tmp_path / "store").iterdir()] == [seeded]  # no staging leftovers


def test_release_store_sweeps_a_killed_writers_staging_folder(tmp_path):
    import numpy as np

    from privsynth.mechanisms.base import Release
    from privsynth.releases import ReleaseStore

    store = ReleaseStore(tmp_path / "releases")
    stale = store.root / ".k1.deadbeef.partial"
    stale.mkdir(parents=True)
    (stale / "release.parquet").write_bytes(b"torn")
    assert store.get("k1") is None  # a staging folder is never read
    release = Release("toy", np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([0.5, 0.5]))
    store.put("k1", release, ["a=0", "a=1"], {"visibility": "public"})
    assert not stale.exists()
    found, privacy = store.get("k1")
    assert np.allclose(found.points, release.points) and privacy == {"visibility": "public"}
