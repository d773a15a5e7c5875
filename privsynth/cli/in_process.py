"""`privsynth run` without a Prefect API: the Python API's runner in this process, its progress on the console."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

IN_PROCESS_LINE = ("no Prefect API configured: this run ran in this process (nothing is recorded in Prefect). To "
                   "record runs in a Prefect server, start one (`prefect server start`) and set PREFECT_API_URL "
                   "(`prefect config set PREFECT_API_URL=http://127.0.0.1:4200/api`)")


def prefect_api_url() -> str | None:
    """The Prefect API this process would use: $PREFECT_API_URL, else the active profile's (read from the
    profiles file, without importing Prefect, whose import alone costs seconds). None: no server."""
    if os.environ.get("PREFECT_API_URL"):
        return os.environ["PREFECT_API_URL"]
    import tomllib
    from pathlib import Path

    home = Path(os.environ.get("PREFECT_HOME") or Path.home() / ".prefect").expanduser()
    path = Path(os.environ.get("PREFECT_PROFILES_PATH") or home / "profiles.toml").expanduser()
    try:
        profiles = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return None
    active = os.environ.get("PREFECT_PROFILE") or profiles.get("active") or "ephemeral"
    value = profiles.get("profiles", {}).get(active, {}).get("PREFECT_API_URL")
    return str(value) if value else None


class _ToStandardError(logging.StreamHandler):
    """The library's progress lines on whatever sys.stderr is when a line is written (a redirect, a capture)."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter("%(asctime)s.%(msecs)03d | %(levelname)-7s | %(message)s", "%H:%M:%S"))

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):
        pass


@contextmanager
def _console_logging() -> Iterator[None]:
    """While a run is in process: the library's progress lines (stages, the mechanism's rounds) on the console."""
    from privsynth.api import attached_at_info

    with attached_at_info(logging.getLogger("privsynth"), _ToStandardError()):
        yield


def run_in_process(parameters) -> dict:
    """The run without Prefect: the Python API's runner (privsynth.api.run), the same stages and rules."""
    from privsynth.api import run
    from privsynth.run.parameters import ParameterError

    if parameters.credentials_block:
        raise ParameterError("credentials_block names a Prefect Secret block, which needs a Prefect server "
                             "(PREFECT_API_URL); without one, give the password in the environment (PGPASSWORD, or "
                             "user:${VAR}@host in the URL)")
    with _console_logging():
        outcome = run(parameters)  # its progress lines go to the "privsynth" logger, on the console
    # Said after a run that finished, in its summary: an error is then one line with nothing before it.
    return {**outcome.public_summary(), "prefect": IN_PROCESS_LINE}
