"""Where privsynth keeps its per-user state: the budget ledger, the release store and default runs.

One place per user, whatever the working folder, so running from another folder never silently
starts a fresh, unlimited ledger (a new ledger would forget what was spent). The folder is
``$PRIVSYNTH_HOME`` if set, else ``$XDG_DATA_HOME/privsynth``, else ``~/.local/share/privsynth``.
Teams point ``PRIVSYNTH_LEDGER_URL`` at a shared database instead (PostgreSQL).
"""

from __future__ import annotations

import os
from pathlib import Path

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
