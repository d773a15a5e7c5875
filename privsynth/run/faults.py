"""TEST HOOK: simulated crashes at named points of a run (no effect in normal runs).
"""

from __future__ import annotations

import os
import signal

from privsynth.errors import InjectedFault  # noqa: F401  (re-exported: raised here)

FAULT_ENV = "PRIVSYNTH_FAULT_INJECT"
FAULT_ONCE_ENV = "PRIVSYNTH_FAULT_ONCE"  # a marker file: the fault fires only while it is absent (a retry goes on)


FAULT_POINTS = ("after_charge", "after_noise_claimed", "after_release_stored", "during_rounding", "before_report")


def _first_time() -> bool:
    """True unless ``PRIVSYNTH_FAULT_ONCE`` names a marker that exists; the marker is made before the kill, so
    a process restarted with the same environment (a Prefect retry on the same worker) is not killed again."""
    marker = os.environ.get(FAULT_ONCE_ENV)
    if not marker:
        return True
    try:
        os.close(os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        return False
    return True


def draw_point(stage: str, draws: int) -> str:
    """The fault point after the ``draws``-th noise draw of ``stage`` ("discovery" or "mechanism") was kept."""
    return f"{stage}_draw:{draws}"


def fault_point(name: str) -> None:
    """TEST HOOK (no effect in normal runs): simulate a crash at the named point of a run.

    With ``PRIVSYNTH_FAULT_INJECT=<name>`` the process dies on the spot with ``os._exit(137)``, as a
    SIGKILL or an out-of-memory kill would; with ``kill:<name>`` it sends itself SIGKILL. Besides
    ``FAULT_POINTS``, ``draw_point`` names a point after each kept noise draw (``mechanism_draw:8``). With
    ``PRIVSYNTH_FAULT_INJECT=raise:<name>`` it raises :class:`InjectedFault` instead (for in-process tests).
    """
    wanted = os.environ.get(FAULT_ENV)
    if not wanted:
        return
    if wanted == name:
        os._exit(137)
    if wanted == f"kill:{name}" and _first_time():
        os.kill(os.getpid(), signal.SIGKILL)  # a real SIGKILL, as the OOM killer or a pod eviction sends
    if wanted == f"raise:{name}":
        raise InjectedFault(f"injected fault at {name!r}")
