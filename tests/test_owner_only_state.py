"""Owner-only state (issue 21): the ledger's HMAC secret, the stored releases and a run's private parts
cannot be read by another local user, even where the folders above them are open to everyone.

Found as an attacker on the same machine: `ledger.sqlite` was 0644 in a privsynth home of mode 0755, so
any local user could read the secret and the charges' release keys and test whether a candidate table
(the real one with or without one person) gives a recorded key. Each test fails on that code.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest
from conftest import TOY_SCHEMA, toy_frame

import privsynth
from privsynth.privacy.ledger import BudgetLedger
from privsynth.schema import parse_schema

SCHEMA = parse_schema(TOY_SCHEMA)
NOBODY = 65534


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_parent():
    """A folder every user may enter and list (0755), as ~/.local/share under a 0755 home often is."""
    folder = Path(tempfile.mkdtemp(prefix="privsynth-open-"))
    os.chmod(folder, 0o755)
    old = os.umask(0o022)  # the common default: files 0644, folders 0755 unless created otherwise
    try:
        yield folder
    finally:
        os.umask(old)
        shutil.rmtree(folder, ignore_errors=True)


def _run_in_home(home: Path, monkeypatch, output: Path):
    monkeypatch.setenv("PRIVSYNTH_HOME", str(home))
    monkeypatch.delenv("PRIVSYNTH_LEDGER_URL", raising=False)
    monkeypatch.delenv("PRIVSYNTH_RELEASE_STORE", raising=False)
    return privsynth.synthesize(toy_frame(120), SCHEMA, mechanism="reduced_space",
                                options={"points_per_statistic": 1.0}, rows=30, unlimited=True, output=output,
                                audit=True)


def test_home_ledger_store_and_private_parts_are_created_owner_only(open_parent, monkeypatch):
    home = open_parent / "privsynth"
    _run_in_home(home, monkeypatch, open_parent / "run")
    assert _mode(home) == 0o700
    assert _mode(home / "ledger.sqlite") == 0o600
    store = home / "releases"
    assert _mode(store) == 0o700
    stored = [p for p in store.rglob("*") if p.is_file()]
    assert stored and all(_mode(p) == 0o600 for p in stored)
    assert all(_mode(p) == 0o700 for p in store.iterdir() if p.is_dir())
    assert _mode(open_parent / "run" / "internal-audit") == 0o700  # not DP: the run folder's private part


def test_a_custom_ledger_file_is_created_owner_only(open_parent):
    path = open_parent / "team" / "ledger.sqlite"
    with BudgetLedger(f"sqlite:///{path}") as ledger:
        ledger.release_secret()
    assert _mode(path) == 0o600


def test_an_existing_home_or_ledger_open_to_others_is_warned_about(open_parent, monkeypatch, caplog):
    home = open_parent / "shared-home"
    home.mkdir(mode=0o755)
    ledger_file = home / "ledger.sqlite"
    ledger_file.touch(mode=0o644)
    monkeypatch.setenv("PRIVSYNTH_HOME", str(home))
    monkeypatch.delenv("PRIVSYNTH_LEDGER_URL", raising=False)
    with caplog.at_level(logging.WARNING, logger="privsynth"):
        BudgetLedger().release_secret()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(str(home) in w and "chmod 700" in w for w in warnings), warnings
    assert any(str(ledger_file) in w and "chmod 600" in w for w in warnings), warnings


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="reading as another user needs root (to switch to nobody) and setpriv")
def test_another_local_user_cannot_read_the_secret_or_list_the_releases(open_parent, monkeypatch):
    home = open_parent / "privsynth"
    _run_in_home(home, monkeypatch, open_parent / "run")
    as_nobody = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    # The attack: read the ledger (its privsynth_secrets table) and list the store's release keys.
    for target in (home / "ledger.sqlite", home / "releases"):
        attempt = subprocess.run([*as_nobody, "ls", "-l" if target.is_dir() else "-d", str(target)],
                                 capture_output=True, text=True)
        if target.is_file():
            attempt = subprocess.run([*as_nobody, "cat", str(target)], capture_output=True)
        assert attempt.returncode != 0, f"another user read {target}"
    # The same file moved out of the owner-only home is still owner-only (its own mode, not only its folder's).
    moved = open_parent / "ledger-copy.sqlite"
    shutil.copy2(home / "ledger.sqlite", moved)
    assert subprocess.run([*as_nobody, "cat", str(moved)], capture_output=True).returncode != 0
