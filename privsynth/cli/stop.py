"""How `privsynth` stops on SIGTERM: promptly (status 143), and leaving the process as it was.

The command's own process (the installed entry point) ends with 143 and a line that says what a re-run does.
A host process that calls ``privsynth.cli.main`` (a test run, a script) gets its own SIGTERM handling back after
the command, no stop flag left set, and the signal itself when one arrived during the command.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager

_STOP = {"requested": False}


def _stopped_line() -> str:
    from privsynth.run.phase import stop_message

    return stop_message()


def _stop_on_sigterm(signum, frame) -> None:  # noqa: ARG001
    """SIGTERM (a scheduler's or an operator's stop) ends the run promptly; every write is atomic and
    the ledger's charge is one transaction, so stopping between two stages leaves nothing half-done.
    A query interrupted by the signal may surface as an error of its own: the flag makes main report
    the stop, not that error."""
    _STOP["requested"] = True
    raise SystemExit(143)


@contextmanager
def _sigterm_stops_this_command(own_process: bool) -> Iterator[None]:
    """While one command runs: SIGTERM stops it (``_stop_on_sigterm``, status 143). Afterwards the process is as
    it was: its own SIGTERM handler, no stop flag, no CLI-run marker, so a later command never reads an old stop.
    ``own_process`` False (``main`` called with an argument list by a host process, e.g. a test run): a SIGTERM
    that arrived during the command was meant for the host too, so it is delivered again to the host's handler
    once the command has stopped (a timeout's SIGTERM ends the test run instead of failing every later test)."""
    _STOP["requested"] = False
    marker = os.environ.get("PRIVSYNTH_CLI_RUN")
    try:
        previous = signal.signal(signal.SIGTERM, _stop_on_sigterm)
    except ValueError:  # not the main thread: no handler of ours
        previous = None
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if marker is None:
            os.environ.pop("PRIVSYNTH_CLI_RUN", None)
        else:
            os.environ["PRIVSYNTH_CLI_RUN"] = marker
        stopped, _STOP["requested"] = _STOP["requested"], False
        if stopped and not own_process and previous is not None:
            os.kill(os.getpid(), signal.SIGTERM)
