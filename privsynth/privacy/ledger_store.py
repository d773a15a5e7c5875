"""The ledger's storage: which database (URL resolution), its tables, and the engine that opens it.

SQLAlchemy Core, any database URL: an explicit argument, else ``PRIVSYNTH_LEDGER_URL``, else a per-user
SQLite file in ``$PRIVSYNTH_HOME`` created owner-only (it holds the HMAC secret). SQLite takes its write
lock before a budget is read (``BEGIN IMMEDIATE``); PostgreSQL serialises per dataset in the ledger.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from datetime import UTC, datetime
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from privsynth.io.atomic import create_file
from privsynth.io.credentials import expand_credentials
from privsynth.io.home import default_ledger_path, make_private_dir, privsynth_home, warn_if_open_to_others
from privsynth.privacy.ledger_records import MAX_NAME

LEDGER_URL_ENV = "PRIVSYNTH_LEDGER_URL"


SQLITE_BUSY_TIMEOUT_S = 60.0




def default_ledger_url() -> str:
    """The per-user ledger (``privsynth.io.home``), used when neither a URL nor PRIVSYNTH_LEDGER_URL is given.

    Never relative to the working folder: running from another folder must not start a fresh,
    unlimited ledger that has forgotten what was spent.
    """
    return f"sqlite:///{default_ledger_path()}"


def resolve_ledger_url(url: str | None = None) -> str:
    """Precedence: explicit ``url`` > environment variable PRIVSYNTH_LEDGER_URL > ``default_ledger_url()``."""
    if url is not None:
        if not isinstance(url, str) or not url.strip():
            raise ValueError(f"ledger URL must be a non-empty SQLAlchemy URL string, got {url!r}")
        return url.strip()
    from_env = os.environ.get(LEDGER_URL_ENV, "").strip()
    return from_env or default_ledger_url()


def display_url(url: str) -> str:
    """The URL with any password masked, for logs and the CLI."""
    return sa.engine.make_url(url).render_as_string(hide_password=True)


METADATA = sa.MetaData()


BUDGETS = sa.Table(
    "privsynth_budgets",
    METADATA,
    sa.Column("dataset", sa.String(MAX_NAME), primary_key=True),
    sa.Column("epsilon", sa.Double, nullable=False),
    sa.Column("delta", sa.Double, nullable=True),
    sa.Column("created_at", sa.String(40), nullable=False),
    sa.Column("updated_at", sa.String(40), nullable=False),
)


CHARGES = sa.Table(
    "privsynth_charges",
    METADATA,
    sa.Column("charge_id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("dataset", sa.String(MAX_NAME), nullable=False, index=True),
    sa.Column("release_key", sa.String(MAX_NAME), nullable=False),
    # NULL for a release without a DP guarantee (rho would be infinite).
    sa.Column("rho", sa.Double, nullable=True),
    sa.Column("pure_epsilon", sa.Double, nullable=True),
    sa.Column("is_dp", sa.Boolean, nullable=False),
    sa.Column("guarantee", sa.Text, nullable=False),
    sa.Column("description", sa.Text, nullable=False),
    sa.Column("created_at", sa.String(40), nullable=False),
    # Set (once) when the noise of this release is drawn; see claim_noise.
    sa.Column("noise_drawn_at", sa.String(40), nullable=True),
    # approximate zCDP: the charge's additive delta (categorical thresholds); NULL in older ledgers: 0
    sa.Column("extra_delta", sa.Double, nullable=True),
    sa.UniqueConstraint("dataset", "release_key", name="uq_privsynth_charges_release"),
)


SECRETS = sa.Table(
    "privsynth_secrets",
    METADATA,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("value", sa.String(128), nullable=False),
)


def new_release_secret() -> str:
    """A fresh release-key secret: 32 bytes from the OS CSPRNG, hex. Called once per ledger."""
    return secrets.token_hex(32)


def unknown_dataset_message(conn: Connection, dataset: str) -> str:
    """The refusal for a dataset the ledger does not know, naming the ones it does (at most 20)."""
    known = sorted(
        set(conn.execute(sa.select(BUDGETS.c.dataset)).scalars())
        | set(conn.execute(sa.select(CHARGES.c.dataset).distinct()).scalars())
    )
    listing = ", ".join(repr(k) for k in known[:20]) if known else "none"
    return f"the ledger has no budget or charge for dataset {dataset!r} (known datasets: {listing})"


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def create_private_sqlite(database: Path) -> None:
    """The ledger file holds the HMAC secret that keeps release keys unlinkable: it is created owner-only
    (0600; SQLite gives its journal the same mode) in a folder created owner-only when it is privsynth's
    home. An existing file or home open to other users is warned about, not silently used."""
    if database.parent == privsynth_home():
        make_private_dir(database.parent)
    else:
        database.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.close(create_file(database, private=True))  # an empty file is an empty SQLite database
    except FileExistsError:
        warn_if_open_to_others(database)


def make_engine(url: str) -> Engine:
    url = expand_credentials(url)
    parsed = sa.engine.make_url(url)
    if parsed.drivername == "postgresql":
        # A plain postgresql:// URL would need psycopg2; psycopg (3) is the driver we install.
        parsed = parsed.set(drivername="postgresql+psycopg")
        url = parsed.render_as_string(hide_password=False)
    if parsed.get_backend_name() != "sqlite":
        return sa.create_engine(url, pool_pre_ping=True)
    database = parsed.database or ""
    if database and database != ":memory:" and not database.startswith("file:"):
        create_private_sqlite(Path(database).expanduser())
    engine = sa.create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S})

    # pysqlite defers BEGIN until the first write, so a check-then-insert would read the total
    # outside any lock. Take transaction control from the driver (SQLAlchemy's documented recipe)
    # and emit BEGIN IMMEDIATE, which takes the write lock before the budget is read.
    @sa.event.listens_for(engine, "connect")
    def _no_implicit_begin(dbapi_connection, connection_record):  # noqa: ARG001
        dbapi_connection.isolation_level = None

    @sa.event.listens_for(engine, "begin")
    def _begin_immediate(conn):
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def advisory_lock_key(scope: str, name: str = "") -> int:
    """A stable signed 64-bit PostgreSQL advisory-lock key for one ledger scope.

    ``scope`` is "dataset" (``name`` the dataset: charges of one dataset serialise) or "secret" (the
    one-time creation of the release-key secret). Distinct scopes never share a key short of a
    64-bit collision, which would only serialise two transactions, never break one. The key is
    derived in Python rather than by ``hashtextextended`` so nothing textual reaches the server.
    """
    if scope not in ("dataset", "secret"):
        raise ValueError(f"unknown ledger lock scope {scope!r}")
    digest = hashlib.sha256(f"privsynth-ledger-lock/{scope}/{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)
