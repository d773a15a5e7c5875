"""Credentials in connection URLs: never as values in parameters, always from the environment.

A URL that reaches a Prefect parameter, a manifest or a log must carry no password: Prefect stores
flow parameters in its database and shows them in the UI. So a password is written as a reference
to an environment variable, ``postgresql+psycopg://analyst:${PGPASSWORD}@db/warehouse``, and
expanded only when the connection is opened (libpq's own ``PGPASSWORD`` works too, with no password
in the URL at all). A literal password is refused before anything runs.
"""

from __future__ import annotations

import os
import re
from urllib.parse import quote, urlsplit

from privsynth.errors import CredentialError  # noqa: F401  (re-exported: raised here)

_REFERENCE = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")


def _password_of(url: str) -> str | None:
    if "://" not in url:
        return None
    netloc = urlsplit(url).netloc
    if "@" not in netloc:
        return None
    userinfo = netloc.rsplit("@", 1)[0]
    return userinfo.split(":", 1)[1] if ":" in userinfo else None


def check_no_literal_password(url: str | None, what: str) -> None:
    """Refuse a URL whose password is a literal value (``${VAR}`` references are fine)."""
    if not url:
        return
    password = _password_of(url)
    if password is not None and not _REFERENCE.match(password):
        raise CredentialError(
            f"{what}: the URL carries a password; parameters are stored and shown (manifest, Prefect UI), so "
            "write it as a reference to an environment variable, e.g. user:${PGPASSWORD}@host, or leave it out "
            "and set PGPASSWORD (PostgreSQL), or use a Prefect Secret block")


def password_from_reference(password: str) -> str:
    """The value of a ``${VAR}`` password reference (CredentialError for a literal or an unset variable)."""
    match = _REFERENCE.match(password)
    if match is None:
        raise CredentialError("a password in a URL must be a ${ENV_VAR} reference, not a literal value")
    value = os.environ.get(match.group(1))
    if value is None:
        raise CredentialError(f"the connection URL references ${{{match.group(1)}}}, which is not set in the "
                              "environment")
    return value


def expand_credentials(url: str) -> str:
    """The URL with a ``${VAR}`` password replaced by the variable's value (at connect time only)."""
    password = _password_of(url)
    if password is None:
        return url
    if _REFERENCE.match(password) is None:
        return url
    return url.replace(":" + password + "@", ":" + quote(password_from_reference(password), safe="") + "@", 1)


_SECRET_PARAMETER = re.compile(r"(?i)([?&](?:password|passwd|pwd|secret|token|access_key|secret_key)=)[^&]*")


def redact_url(url: str) -> str:
    """``url`` with any password masked (``user:***@host``, ``?password=***``): the only form of a
    source, sink or ledger URL that may be shown in logs, errors, manifests or Prefect parameters."""
    text = str(url)
    scheme, sep, rest = text.partition("://")
    if sep:
        netloc, slash, tail = rest.partition("/")
        if "@" in netloc:
            userinfo, _, host = netloc.rpartition("@")
            if ":" in userinfo:
                userinfo = userinfo.split(":", 1)[0] + ":***"
            netloc = f"{userinfo}@{host}"
        text = f"{scheme}{sep}{netloc}{slash}{tail}"
    return _SECRET_PARAMETER.sub(r"\1***", text)
