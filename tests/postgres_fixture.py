"""A real PostgreSQL server for tests: ``initdb`` + ``pg_ctl`` on a temporary folder and a free port.

Import the fixture into a test module (``from postgres_fixture import postgres_url``). The server
runs as the ``postgres`` system user when the tests run as root (PostgreSQL refuses to run as root),
listens on 127.0.0.1 only, trusts local connections (a throwaway test cluster), and is stopped and
deleted at the end of the session. Tests skip, saying why, only when the binaries are absent.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_postgres(args: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return args
    runuser = shutil.which("runuser")
    if runuser:
        return [runuser, "-u", "postgres", "--", *args]
    return ["su", "postgres", "-s", "/bin/sh", "-c", " ".join(args)]


class PostgresUnavailable(RuntimeError):
    """The binaries or the account to run them are missing (a reason to skip, not a failure)."""


@contextlib.contextmanager
def running_postgres(shared_buffers: str = "32MB"):
    """Start a throwaway server; yields ``postgresql+psycopg://postgres@127.0.0.1:PORT/postgres``."""
    initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
    if not initdb or not pg_ctl:
        raise PostgresUnavailable("PostgreSQL binaries (initdb, pg_ctl) are not on the PATH")
    account = None
    if os.geteuid() == 0:
        try:
            account = pwd.getpwnam("postgres")
        except KeyError:
            raise PostgresUnavailable("running as root and there is no 'postgres' user to run the server as") from None
    folder = Path(tempfile.mkdtemp(prefix="privsynth-pg-"))
    data = folder / "data"
    if account is not None:
        os.chown(folder, account.pw_uid, account.pw_gid)
    port = _free_port()
    env = {**os.environ, "LC_ALL": "C"}
    try:
        subprocess.run(_as_postgres([initdb, "-D", str(data), "-A", "trust", "-U", "postgres", "-E", "UTF8",
                                     "--no-sync"]),
                       check=True, capture_output=True, env=env, timeout=120)
        options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off -c shared_buffers={shared_buffers}"
        start = subprocess.run(_as_postgres([pg_ctl, "-D", str(data), "-o", options, "-l", str(folder / "log"), "-w",
                                             "-t", "60", "start"]),
                               capture_output=True, env=env, timeout=120)
        if start.returncode != 0:
            log = (folder / "log").read_text() if (folder / "log").exists() else ""
            raise RuntimeError(f"pg_ctl start failed: {start.stderr.decode()[-500:]} {log[-1000:]}")
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    finally:
        if data.exists():
            subprocess.run(_as_postgres([pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"]),
                           capture_output=True, timeout=60)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """``postgresql+psycopg://postgres@127.0.0.1:PORT/postgres`` of a fresh, empty server for the session."""
    try:
        with running_postgres() as url:
            yield url
    except PostgresUnavailable as why:
        pytest.skip(str(why))
