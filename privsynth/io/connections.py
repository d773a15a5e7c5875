"""Connections by URL, shared by the engine's sources and io's sinks: one place that opens a database.

A password is never taken from a parameter: only a ``${ENV_VAR}`` reference, read here at connect time
(``privsynth.io.credentials``), or the driver's own environment (``PGPASSWORD``, ``~/.pgpass``).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote, urlsplit

import ibis

from privsynth.errors import InputError  # noqa: F401  (re-exported: raised here)
from privsynth.io.credentials import CredentialError, expand_credentials, password_from_reference, redact_url

POSTGRES_SCHEMES = ("postgresql", "postgresql+psycopg", "postgres")


def plain_table_name(name: str) -> bool:
    """Letters, digits and '_' in dot-separated parts: safe to put into SQL text unquoted."""
    return all(part.replace("_", "").isalnum() for part in name.split("."))


def duckdb_path(location: str) -> str:
    return location[len("duckdb:"):].removeprefix("//") if location.lower().startswith("duckdb:") else location


def connect_url(url: str):
    """An ibis backend for a server URL (PostgreSQL, or any other ibis backend); refuses a password in it."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    password = None
    if parts.password:
        # Only a ${ENV_VAR} reference is accepted (privsynth.io.credentials); its value is read here, at connect time.
        try:
            password = password_from_reference(unquote(parts.password))
        except CredentialError as err:
            raise InputError(f"{redact_url(url)!r}: {err}; give the password in the environment (PGPASSWORD for "
                             "PostgreSQL, or user:${VAR}@host) or a Prefect block, never in a parameter") from None
    if scheme in POSTGRES_SCHEMES:
        kwargs: dict[str, Any] = {}
        for piece in parts.query.split("&"):
            if piece:
                key, _, value = piece.partition("=")
                kwargs[unquote(key)] = unquote(value)
        try:
            return ibis.postgres.connect(host=parts.hostname or None, port=parts.port,
                                         user=unquote(parts.username or "") or None, password=password,
                                         database=unquote(parts.path.lstrip("/")) or None, **kwargs)
        except Exception as err:  # noqa: BLE001  (libpq messages can carry connection details)
            raise InputError(f"PostgreSQL {redact_url(url)}: cannot connect ({type(err).__name__})") from None
    try:
        return ibis.connect(expand_credentials(url) if password is not None else url)
    except Exception as err:  # noqa: BLE001
        raise InputError(f"--input {redact_url(url)!r}: no ibis backend connects to it "
                         f"({type(err).__name__})") from None
