"""Issue 38: a run killed at any point loses nothing. A real SIGKILL (the process sends it to itself at a named
point, ``PRIVSYNTH_FAULT_INJECT=kill:<point>``, so no finally block, atexit or Prefect state runs), then the same
``privsynth run`` command again, in this process mode (no Prefect API). After the re-run:

* it finished, and said where it resumed when the kill came in the middle of drawing;
* the ledger holds each of the run's charges exactly once (the mechanism's; with discovery, discovery's too);
* the run folder is complete (every artifact vouched for by the manifest) and, the run being seeded, its release
  and synthetic table are bit-identical to an uninterrupted run's;
* while the run was dead, its noise journal was 0600 in the 0700 release store, and no journal is ever in the
  public run folder; once the release is stored the journal is gone.

Slow (about 10 s a command): ``-m slow``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from conftest import TOY_SCHEMA, toy_frame

from privsynth.privacy.journal import JOURNALS, unframe
from privsynth.privacy.ledger import BudgetLedger
from privsynth.run.faults import draw_point
from privsynth.run.runfolder import RunFolder

pytestmark = pytest.mark.slow

CLI = Path(sys.executable).with_name("privsynth")
ARTIFACTS = ("validation.json", "encoding.json", "release.parquet", "privacy.json", "synthetic.parquet",
             "report.json", "report.md", "manifest.json")
AIM = ["--mechanism", "aim", "--rows", "60", "--seed", "7", "--unlimited",
       "--option", "k=2", "--option", "rounds_cap=4", "--option", "iterations_per_round=10",
       "--option", "final_iterations=20"]


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("toy")
    toy_frame(400).to_csv(tmp / "toy.csv", index=False)
    (tmp / "large").mkdir()
    toy_frame(5000).to_csv(tmp / "large" / "toy.csv", index=False)  # discovery keeps its columns at epsilon 4
    (tmp / "toy.yaml").write_text(yaml.safe_dump(TOY_SCHEMA))
    template = tmp / "template-ledger.sqlite"
    with BudgetLedger(f"sqlite:///{template}") as ledger:
        ledger.release_secret()  # every copy shares it: the same seeded streams, separate charges
    return {"data": str(tmp / "toy.csv"), "schema": str(tmp / "toy.yaml"), "template": template,
            "large": str(tmp / "large" / "toy.csv")}


def _cli(toy: dict, tmp: Path, fault: str | None, *, discover: bool = False) -> subprocess.CompletedProcess:
    if not (tmp / "ledger.sqlite").exists():
        shutil.copyfile(toy["template"], tmp / "ledger.sqlite")
        os.chmod(tmp / "ledger.sqlite", 0o600)
    (tmp / "system-tmp").mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PRIVSYNTH_FAULT_INJECT")}
    env.update(PREFECT_HOME=str(tmp / "prefect-home"), PRIVSYNTH_HOME=str(tmp / "home"), TMPDIR=str(tmp / "system-tmp"),
               PRIVSYNTH_RELEASE_STORE=str(tmp / "releases"), GX_ANALYTICS_ENABLED="false",
               # not a parameter: a twin folder is the same run
               PRIVSYNTH_LEDGER_URL=f"sqlite:///{tmp / 'ledger.sqlite'}")
    if fault:
        env["PRIVSYNTH_FAULT_INJECT"] = fault
    source = ["--input", toy["large"], "--epsilon", "4"] if discover else \
        ["--input", toy["data"], "--schema", toy["schema"], "--epsilon", "1"]
    args = ["run", *source, *AIM,
            "--output", str(tmp / "run")]
    return subprocess.run([str(CLI), *args], cwd=tmp, env=env, capture_output=True, text=True, timeout=300)


def _journals(tmp: Path) -> list[Path]:
    folder = tmp / "releases" / JOURNALS
    return sorted(folder.iterdir()) if folder.is_dir() else []


def _records(journal: Path) -> int:
    """Draws kept in a journal (its records less the header)."""
    return len(unframe(journal.read_bytes())[0]) - 1


def _uninterrupted(toy: dict, tmp: Path, discover: bool) -> dict:
    done = _cli(toy, tmp, None, discover=discover)
    assert done.returncode == 0, done.stderr[-3000:]
    run = tmp / "run"
    return {"release": pq.read_table(run / "release.parquet"), "synthetic": pq.read_table(run / "synthetic.parquet"),
            "charges": sorted((c.description, c.rho) for c in BudgetLedger(f"sqlite:///{tmp / 'ledger.sqlite'}")
                              .history("toy"))}


@pytest.fixture(scope="module")
def reference(toy, tmp_path_factory) -> dict:
    return _uninterrupted(toy, tmp_path_factory.mktemp("reference"), discover=False)


@pytest.fixture(scope="module")
def draws(toy, tmp_path_factory) -> int:
    """How many draws the mechanism makes: killed once all are kept and before the release is stored."""
    tmp = tmp_path_factory.mktemp("count")
    killed = _cli(toy, tmp, "kill:mechanism_drawn")
    assert killed.returncode == -9, killed.stderr[-3000:]
    (journal,) = _journals(tmp)
    return _records(journal)


def _kill_then_rerun(toy: dict, tmp: Path, fault: str, reference, *, discover: bool = False,
                     resumes: bool) -> subprocess.CompletedProcess:
    killed = _cli(toy, tmp, fault, discover=discover)
    assert killed.returncode == -9, killed.stderr[-3000:]  # died of SIGKILL
    run = tmp / "run"
    assert "finished" not in RunFolder.load(run).manifest
    for journal in _journals(tmp):
        assert stat.S_IMODE(journal.stat().st_mode) == 0o600
        assert stat.S_IMODE(journal.parent.stat().st_mode) == 0o700
        assert stat.S_IMODE(journal.parent.parent.stat().st_mode) == 0o700
    assert not [p for p in run.rglob("*") if "journal" in p.name.lower()], "a journal in the public run folder"
    if callable(reference):
        reference = reference()
    again = _cli(toy, tmp, None, discover=discover)
    assert again.returncode == 0, again.stderr[-3000:]
    assert ("resuming run " in again.stdout + again.stderr) is resumes
    folder = RunFolder.load(run)
    for name in ARTIFACTS[:-1]:
        assert folder.trusted(name), f"{name} is missing or does not match the manifest"
    assert "finished" in folder.manifest and folder.manifest["attempts"] == 2
    charges = BudgetLedger(f"sqlite:///{tmp / 'ledger.sqlite'}").history("toy")
    assert sorted((c.description, c.rho) for c in charges) == reference["charges"], "each charge exactly once"
    assert pq.read_table(run / "release.parquet").equals(reference["release"])
    assert pq.read_table(run / "synthetic.parquet").equals(reference["synthetic"])
    assert _journals(tmp) == [], "a stored release's journal is spent"
    assert not [p for p in run.rglob("*") if "journal" in p.name.lower()]
    return again


@pytest.mark.parametrize("fault, resumes", [
    ("kill:after_charge", False),          # charged, nothing claimed or drawn
    ("kill:after_noise_claimed", True),    # claimed, the journal holds no draw yet
    ("kill:during_rounding", False),       # the release stored: reused
    ("kill:before_report", False),
])
def test_killed_outside_the_draws_finishes_charged_once(fault, resumes, toy, reference, tmp_path):
    again = _kill_then_rerun(toy, tmp_path, fault, reference, resumes=resumes)
    if resumes:
        assert "0 noisy measurements and 0 selections replayed" in again.stdout + again.stderr


@pytest.mark.parametrize("where", ["early", "late"])
def test_killed_in_the_mechanism_resumes_where_it_stopped(where, toy, reference, draws, tmp_path):
    point = 2 if where == "early" else draws - 1
    assert draws > 6, "aim's one-way measurements, its rounds' selections and measurements"
    again = _kill_then_rerun(toy, tmp_path, f"kill:{draw_point('mechanism', point)}", reference, resumes=True)
    found = re.search(r"mechanism: resuming run \S+: (\d+) noisy measurements and (\d+) selections replayed",
                      again.stdout + again.stderr)
    assert found and int(found[1]) + int(found[2]) == point, again.stderr[-3000:]


def test_killed_with_every_draw_kept_but_the_release_not_stored(toy, reference, draws, tmp_path):
    _kill_then_rerun(toy, tmp_path, "kill:mechanism_drawn", reference, resumes=True)


def test_killed_during_discovery_resumes_it(toy, tmp_path):
    """Discovery's key holds the run id: the uninterrupted reference is a twin of the killed run folder (same
    run id) with a fresh ledger (the same secret) and an empty release store."""

    def twin_reference() -> dict:
        twin = tmp_path / "twin"
        shutil.copytree(tmp_path / "run", twin / "run")
        reference = _uninterrupted(toy, twin, discover=True)
        assert RunFolder.load(twin / "run").manifest["run_id"] == RunFolder.load(tmp_path / "run").manifest["run_id"]
        assert len(reference["charges"]) == 2  # discovery's, then the mechanism's
        return reference

    again = _kill_then_rerun(toy, tmp_path, f"kill:{draw_point('discovery', 3)}", twin_reference, discover=True,
                             resumes=True)
    assert re.search(r"discover: resuming run \S+: 3 noisy measurements and 0 selections replayed",
                     again.stdout + again.stderr), again.stderr[-3000:]


def test_killed_in_the_mechanism_after_discovery_resumes_with_discoverys_counts(toy, tmp_path):
    """The mechanism joins discovery's category counts, and its release key holds them: the resumed run reads
    them back from discovery.json exactly, so it finds its journal and replays its draws (a key that differed
    would charge and draw a second release)."""
    killed = _cli(toy, tmp_path, f"kill:{draw_point('mechanism', 3)}", discover=True)
    assert killed.returncode == -9, killed.stderr[-3000:]
    discovery = json.loads((tmp_path / "run" / "discovery.json").read_text())
    assert discovery["category_counts_dp"], "the toy's categorical column has counts to join"
    again = _cli(toy, tmp_path, None, discover=True)
    assert again.returncode == 0, again.stderr[-3000:]
    assert re.search(r"mechanism: resuming run \S+: 3 noisy measurements and 0 selections replayed",
                     again.stdout + again.stderr), again.stderr[-3000:]
    charges = BudgetLedger(f"sqlite:///{tmp_path / 'ledger.sqlite'}").history("toy")
    assert len(charges) == 2, "discovery's charge and the mechanism's, each once"
    privacy = json.loads((tmp_path / "run" / "privacy.json").read_text())
    assert privacy["release_facts"]["earlier_counts_joined"]


def test_a_torn_append_is_discarded_and_redrawn(toy, reference, draws, tmp_path):
    """Killed half-way through writing a draw: the torn record is cut off, and that draw (never used) is drawn
    again; the seeded stream makes the release the uninterrupted one."""
    killed = _cli(toy, tmp_path, f"kill:{draw_point('mechanism', 4)}")
    assert killed.returncode == -9
    (journal,) = _journals(tmp_path)
    data = journal.read_bytes()
    journal.write_bytes(data[: len(data) - 5])  # the fourth record, cut short
    again = _cli(toy, tmp_path, None)
    assert again.returncode == 0, again.stderr[-3000:]
    assert ("resuming run " in again.stdout + again.stderr
            and pq.read_table(tmp_path / "run" / "release.parquet").equals(reference["release"]))
    assert len(BudgetLedger(f"sqlite:///{tmp_path / 'ledger.sqlite'}").history("toy")) == 1
