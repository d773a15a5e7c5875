"""TEST HOOK: simulated crashes at named points of a run (no effect in normal runs).
"""

from __future__ import annotations

import os
from privsynth.errors import InjectedFault  # noqa: F401  (re-exported: raised here)

FAULT_ENV = "PRIVSYNTH_FAULT_INJECT"


FAULT_POINTS = ("after_charge", "after_noise_claimed", "after_release_stored", "during_rounding", "before_report")


def fault_point(name: str) -> None:
    """TEST HOOK (no effect in normal runs): simulate a crash at the named point of a run.

    With ``PRIVSYNTH_FAULT_INJECT=<name>`` the process dies on the spot with ``os._exit(137)``, as a
    SIGKILL or an out-of-memory kill would. With ``PRIVSYNTH_FAULT_INJECT=raise:<name>`` it raises
    :class:`InjectedFault` instead (for in-process tests).
    """
    wanted = os.environ.get(FAULT_ENV)
    if not wanted:
        return
    if wanted == name:
        os._exit(137)
    if wanted == f"raise:{name}":
        raise InjectedFault(f"injected fault at {name!r}")
