"""Run folders: fresh, resumed and refused folders, and artifacts trusted only while their hash matches."""

from __future__ import annotations

import json

import numpy as np
import pytest

from privsynth.io import atomic_write_bytes
from privsynth.run.runfolder import MANIFEST, RunFolder, RunFolderError, new_run_id, package_versions

KEY = {"input": "adult.csv", "mechanism": "rap", "epsilon": 1.0, "seed": 3, "marginals": [[0, 1], [1, 2]]}


def test_open_fresh_folder(tmp_path):
    folder = RunFolder.open(tmp_path / "run", KEY, "run-1")
    manifest = json.loads((tmp_path / "run" / MANIFEST).read_text())
    assert manifest["run_id"] == "run-1" and manifest["run_key"] == KEY
    assert manifest["attempts"] == 1 and manifest["stages"] == {} and manifest["artifacts"] == {}
    assert manifest["package_versions"]["numpy"] == np.__version__
    assert folder.file("validation.json") == tmp_path / "run" / "validation.json"
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


def test_refuse_different_run_key_once_a_release_was_made(tmp_path):
    folder = RunFolder.open(tmp_path, KEY, "run-1")
    atomic_write_bytes(folder.file("release.parquet"), b"rel")
    folder.record("mechanism", ["release.parquet"])
    before = (tmp_path / MANIFEST).read_bytes()
    with pytest.raises(RunFolderError, match=r"holds a different run \(run-1\) with a release"):
        RunFolder.open(tmp_path, dict(KEY, epsilon=2.0), "run-2")
    assert (tmp_path / MANIFEST).read_bytes() == before and folder.file("release.parquet").read_bytes() == b"rel"
    # A finished run is refused too, whatever its stages say.
    finished = tmp_path / "finished"
    done = RunFolder.open(finished, KEY, "run-3")
    done.manifest["finished"] = "2026-01-01T00:00:00+0000"
    done.save()
    with pytest.raises(RunFolderError, match=r"holds a different run \(run-3\)"):
        RunFolder.open(finished, dict(KEY, epsilon=2.0), "run-4")


def test_folder_of_a_run_that_failed_before_its_release_is_reused(tmp_path):
    # A run refused at validation (bad input) or by the budget holds public leftovers only: a
    # different run may take the folder; the old artifacts and stale temporaries are cleared.
    failed = RunFolder.open(tmp_path, KEY, "run-1")
    atomic_write_bytes(failed.file("validation.json"), b'{"success": false}')
    failed.record("validate", ["validation.json"], success=False)
    (tmp_path / ".encoding.json.0123abcd.tmp").write_bytes(b"half")
    fresh = RunFolder.open(tmp_path, dict(KEY, epsilon=2.0), "run-2")
    assert fresh.manifest["run_id"] == "run-2" and fresh.manifest["attempts"] == 1
    assert fresh.manifest["run_key"] == dict(KEY, epsilon=2.0)
    assert fresh.manifest["stages"] == {} and fresh.manifest["artifacts"] == {}
    assert not (tmp_path / "validation.json").exists() and not list(tmp_path.glob(".*.tmp"))
    assert RunFolder.load(tmp_path).manifest["run_id"] == "run-2"


def test_failed_run_folder_with_other_files_is_refused_untouched(tmp_path):
    failed = RunFolder.open(tmp_path, KEY, "run-1")
    atomic_write_bytes(failed.file("validation.json"), b'{"success": false}')
    failed.record("validate", ["validation.json"], success=False)
    (tmp_path / "notes.txt").write_text("the user's own file, not an artifact")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(RunFolderError, match="not empty"):
        RunFolder.open(tmp_path, dict(KEY, epsilon=2.0), "run-2")
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # nothing lost by a refusal


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
    atomic_write_bytes(folder.file("report.md"), b"# report")
    assert not folder.trusted("validation.json")  # not listed yet
    assert not folder.stage_done("validate")
    folder.record("validate", ["validation.json", "report.md"], rows=3)
    assert folder.trusted("validation.json") and folder.stage_done("validate")
    entry = folder.manifest["artifacts"]["validation.json"]
    assert entry["visibility"] == "public" and len(entry["sha256"]) == 64
    assert folder.manifest["artifacts"]["report.md"]["visibility"] == "public (DP)"
    assert folder.manifest["stages"]["validate"]["rows"] == 3
    # The manifest on disk says the same (it is saved atomically by record).
    assert RunFolder.load(tmp_path).manifest == json.loads(json.dumps(folder.manifest))

    # Tampering with an artifact (or removing it) withdraws trust, and the stage must run again.
    folder.file("validation.json").write_bytes(b'{"ok": false}')
    assert not folder.trusted("validation.json")
    assert not folder.stage_done("validate")
    assert not RunFolder.load(tmp_path).trusted("validation.json")
    folder.file("report.md").unlink()
    assert not folder.trusted("report.md")
    assert not folder.trusted("never-written.json")


def test_run_folder_lists_public_artifacts_only(tmp_path):
    # Private intermediates (typed rows, histogram) live in the run's private temporary folder and the
    # internal audit in internal-audit/: none of them is a run-folder artifact.
    from privsynth.run.runfolder import VISIBILITY, visibility_of

    assert set(VISIBILITY) == {"schema.yaml", "discovery.json", "validation.json", "encoding.json", "release.parquet",
                               "measurements.parquet", "privacy.json", "synthetic.parquet", "report.json", "report.md",
                               "report.html", "synthetic-validation.json"}
    assert all(v.startswith("public") for v in VISIBILITY.values())
    assert visibility_of("figures/columns.png") == "public (DP)"
    assert visibility_of("internal-audit/audit.json") == "internal (not DP)"
    folder = RunFolder.open(tmp_path, KEY, "run-1")
    atomic_write_bytes(folder.file("release.parquet"), b"rel")
    atomic_write_bytes(folder.file("encoding.json"), b"{}")
    folder.record("mechanism", ["release.parquet", "encoding.json"])
    assert folder.manifest["artifacts"]["release.parquet"]["visibility"] == "public (DP)"
    assert folder.manifest["artifacts"]["encoding.json"]["visibility"] == "public"


def test_note_records_public_facts(tmp_path):
    folder = RunFolder.open(tmp_path, KEY, "run-1")
    folder.note(release_key="k" * 64)
    folder.note(other=1)
    assert RunFolder.load(tmp_path).manifest["facts"] == {"release_key": "k" * 64, "other": 1}


def test_run_ids_and_versions():
    a, b = new_run_id(), new_run_id()
    assert a != b and len(a.split("-")) == 3
    versions = package_versions()
    assert versions["python"] and versions["pyarrow"] != "not installed"


# ---------------------------------------------------------------- release store (DESIGN 5.3)

def test_release_store_keeps_the_first_release_under_its_key(tmp_path):
    from privsynth.mechanisms.base import Measurement, Release
    from privsynth.privacy.keys import release_key
    from privsynth.run.releases import ReleaseStore
    from privsynth.schema.encoding import Domain, one_hot

    key = release_key(bytes(range(32)), "fingerprint", "schema", "rap", {"epsilon": 1.0}, 1, None)
    domain = Domain(("a", "b"), (2, 3))
    measurement = Measurement((0,), np.array([3.5, -0.25]), "gaussian", 1.5)
    release = Release("rap", one_hot(np.array([[0, 2], [1, 1]]), domain).astype(float), np.array([0.25, 0.75]),
                      measurements=(measurement,))
    store = ReleaseStore(tmp_path / "store")
    assert store.get(key) is None
    store.put(key, release, ["a=0", "a=1", "b=0", "b=1", "b=2"], {"cost": {"rho": 0.1}})
    got, privacy = store.get(key)
    np.testing.assert_array_equal(got.points, release.points)
    np.testing.assert_array_equal(got.weights, release.weights)
    assert privacy == {"cost": {"rho": 0.1}}
    # the noisy measurements (public, DP) travel with the release, for the DP report of a reused release
    (found,) = got.measurements
    assert found.attributes == (0,) and found.noise == "gaussian" and found.scale == 1.5
    np.testing.assert_array_equal(found.noisy_counts, measurement.noisy_counts)
    # A second put under the same key keeps the first release: it is never replaced.
    other = Release("rap", release.points, np.array([0.5, 0.5]))
    store.put(key, other, ["a=0", "a=1", "b=0", "b=1", "b=2"], {"cost": {"rho": 9}})
    got, privacy = store.get(key)
    np.testing.assert_array_equal(got.weights, release.weights)
    assert privacy["cost"]["rho"] == 0.1
    assert [p.name for p in (tmp_path / "store").iterdir()] == [key]  # no staging leftovers


def test_release_store_defaults_to_the_per_user_home(tmp_path, monkeypatch):
    from privsynth.run.releases import STORE_ENV, ReleaseStore

    monkeypatch.setenv("PRIVSYNTH_HOME", str(tmp_path / "home"))
    monkeypatch.delenv(STORE_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    assert ReleaseStore().root == (tmp_path / "home").resolve() / "releases"
    monkeypatch.setenv(STORE_ENV, str(tmp_path / "shared"))
    assert ReleaseStore().root == tmp_path / "shared"
    assert ReleaseStore(tmp_path / "explicit").root == tmp_path / "explicit"


def test_release_store_sweeps_a_killed_writers_staging_folder(tmp_path):
    import numpy as np

    from privsynth.mechanisms.base import Release
    from privsynth.run.releases import ReleaseStore

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
