"""Where privsynth keeps its per-user state: the budget ledger, the release store and default runs.

One place per user, whatever the working folder, so running from another folder never silently
starts a fresh, unlimited ledger (a new ledger would forget what was spent). The folder is
``$PRIVSYNTH_HOME`` if set, else ``$XDG_DATA_HOME/privsynth``, else ``~/.local/share/privsynth``.
Teams point ``PRIVSYNTH_LEDGER_URL`` at a shared database instead (PostgreSQL).

The folder holds the ledger's HMAC secret and the stored releases (named by their release keys), so
it is created owner-only (0700) and privsynth warns when an existing one is open to other users.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

OWNER_ONLY_DIR = 0o700
logger = logging.getLogger("privsynth.io.home")

HOME_ENV = "PRIVSYNTH_HOME"


def privsynth_home() -> Path:
    """The per-user privsynth folder (not created here)."""
    explicit = os.environ.get(HOME_ENV, "").strip()
    if explicit:
        return Path(explicit).expanduser().resolve()
    data_home = os.environ.get("XDG_DATA_HOME", "").strip()
    base = Path(data_home).expanduser() if data_home else Path.home() / ".local" / "share"
    return (base / "privsynth").resolve()


def default_ledger_path() -> Path:
    return privsynth_home() / "ledger.sqlite"


def default_release_store() -> Path:
    return privsynth_home() / "releases"


def make_private_dir(path: Path) -> Path:
    """Create ``path`` owner-only (0700; its parents as the system makes them), or warn if it exists open to others."""
    path = Path(path)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            path.mkdir(mode=OWNER_ONLY_DIR)
        except FileExistsError:  # made by a concurrent run
            pass
    warn_if_open_to_others(path)
    return path


def open_to_others(path: Path) -> bool:
    """True when a group or other user may read, write or enter ``path``."""
    return bool(stat.S_IMODE(Path(path).stat().st_mode) & 0o077)


def warn_if_open_to_others(path: Path) -> bool:
    """Warn (once per call) when ``path`` is open to other users; returns whether it is."""
    path = Path(path)
    if not path.exists() or not open_to_others(path):
        return False
    fix = "chmod 700" if path.is_dir() else "chmod 600"
    logger.warning("%s is open to other users (mode %s): it holds the ledger's secret or stored releases; "
                   "run `%s %s`", path, oct(stat.S_IMODE(path.stat().st_mode)), fix, path)
    return True
