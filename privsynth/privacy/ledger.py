"""The privacy budget ledger: one allowance per dataset, charged before any noise is drawn.

DESIGN section 5, rules 2 and 3:
* the ledger is charged *before* any privacy noise is drawn, and is never refunded (there is no
  delete or refund API; a budget may be raised by its owner, never lowered below what is spent);
* a release is keyed by (input hash, schema hash, mechanism config, seed) -- see ``release_key`` --
  and a re-run with the same key reuses the existing charge instead of paying twice.

The spending rule (how charges compose, whether one more fits) lives in
``privsynth.privacy.spending``; this module stores budgets and charges and applies it.

Storage: SQLAlchemy Core, any database URL. The URL is chosen by an explicit argument, else the
environment variable PRIVSYNTH_LEDGER_URL, else ``default_ledger_url()`` (a per-user SQLite file,
see ``privsynth.io.home``). Tables are created on first use. A password in the URL is written as an
environment reference (``${PGPASSWORD}``, see ``privsynth.io.credentials``) and expanded on connect.

Noise claims (DESIGN 5.2): a charge records when noise was drawn for its release key
(``claim_noise``). A second claim for the same key is refused, so a release whose stored copy was
lost (a killed run after the draw, a new store folder) can never be drawn again for free.

Release-key secret: ``release_secret()`` is a random 32-byte value created once per ledger and kept
in it. Release keys are HMACs under it, so a key that is shown (a store folder name, a manifest)
cannot be used to test guesses about the data by anyone without the ledger.

Concurrency: a charge is a check-and-insert in one transaction that is serialised per database
(SQLite: ``BEGIN IMMEDIATE`` takes the write lock before the budget is read, with a busy timeout,
so a second writer waits instead of reading a stale total) or per dataset (PostgreSQL: a
transaction-scoped advisory lock on the dataset name plus ``SELECT ... FOR UPDATE`` on the budget
row). Two processes racing for the last of a budget therefore cannot both be accepted.
"""

from __future__ import annotations

import math
import os
import secrets
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from privsynth.io.credentials import expand_credentials
from privsynth.io.atomic import create_file
from privsynth.io.home import default_ledger_path, make_private_dir, privsynth_home, warn_if_open_to_others
from privsynth.privacy.accounting import DEFAULT_DELTA, PrivacyCost
from privsynth.privacy.spending import (
    check_budget_delta,
    check_cost,
    check_epsilon,
    epsilon_spent,
    fits_budget,
    remaining_rho,
    total_pure_epsilon,
    total_rho,
)

LEDGER_URL_ENV = "PRIVSYNTH_LEDGER_URL"
SQLITE_BUSY_TIMEOUT_S = 60.0
_MAX_NAME = 200


# --------------------------------------------------------------------------------------------
# Errors


class LedgerError(ValueError):
    """Base class of the ledger's refusals (a ValueError so callers and the CLI can catch one type)."""


class BudgetExceededError(LedgerError):
    """The charge would take the dataset over its budget; nothing was recorded."""


class BudgetNotSetError(LedgerError):
    """The dataset has no budget and the caller required one."""


class NonPrivateChargeError(LedgerError):
    """A charge with no DP guarantee was made against a dataset guarded by a budget."""


class UnknownDatasetError(LedgerError):
    """The ledger holds neither a budget nor a charge for this dataset."""


class NoiseAlreadyDrawnError(LedgerError):
    """Noise was already drawn for this release key; drawing again would be a second release for one charge."""


class ReleaseKeyConflictError(LedgerError):
    """A release key is already charged with a different cost: the key does not identify the release."""


# --------------------------------------------------------------------------------------------
# URL selection


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


def _check_name(kind: str, value: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{kind} must be a non-empty string, got {value!r}")
    if len(value) > _MAX_NAME or any(ord(ch) < 32 for ch in value):
        raise ValueError(f"{kind} must be at most {_MAX_NAME} printable characters, got {value!r}")
    return value


# --------------------------------------------------------------------------------------------
# Records


@dataclass(frozen=True)
class BudgetStatus:
    """One dataset's allowance and what it has spent.

    epsilon / delta: the budget (epsilon None: no budget set; delta None: pure-DP budget).
    spent_rho: total zCDP rho (inf if a non-DP release was recorded).
    spent_epsilon: epsilon spent at the budget's delta (pure epsilon for a pure budget); with no
        budget, the pure total when every charge is pure, else the spend at DEFAULT_DELTA.
    remaining_epsilon: epsilon - spent_epsilon, floored at 0; None with no budget.
    remaining_rho: the zCDP rho one more charge may carry (delta budgets only), else None.
    """

    dataset: str
    epsilon: float | None
    delta: float | None
    spent_rho: float
    spent_epsilon: float | None
    remaining_epsilon: float | None
    remaining_rho: float | None
    charges: int
    non_private_charges: int = 0


@dataclass(frozen=True)
class ChargeRecord:
    """One stored charge (never deleted)."""

    charge_id: int
    dataset: str
    release_key: str
    rho: float
    pure_epsilon: float | None
    is_dp: bool
    guarantee: str
    description: str
    created_at: str

    def cost(self) -> PrivacyCost:
        if not self.is_dp:
            return PrivacyCost.not_private(self.guarantee)
        return PrivacyCost(rho=self.rho, pure_epsilon=self.pure_epsilon, guarantee=self.guarantee)


@dataclass(frozen=True)
class ChargeReceipt:
    """Proof that a release is paid for; ``reference`` is what NoiseSource.authorize expects.

    reused: True when the release key was already charged, so this call charged nothing.
    """

    charge: ChargeRecord
    reused: bool
    status: BudgetStatus

    @property
    def dataset(self) -> str:
        return self.charge.dataset

    @property
    def release_key(self) -> str:
        return self.charge.release_key

    @property
    def reference(self) -> str:
        return f"ledger:{self.charge.dataset}:{self.charge.charge_id}:{self.charge.release_key}"


# --------------------------------------------------------------------------------------------
# Storage

_metadata = sa.MetaData()

_budgets = sa.Table(
    "privsynth_budgets",
    _metadata,
    sa.Column("dataset", sa.String(_MAX_NAME), primary_key=True),
    sa.Column("epsilon", sa.Double, nullable=False),
    sa.Column("delta", sa.Double, nullable=True),
    sa.Column("created_at", sa.String(40), nullable=False),
    sa.Column("updated_at", sa.String(40), nullable=False),
)

_charges = sa.Table(
    "privsynth_charges",
    _metadata,
    sa.Column("charge_id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("dataset", sa.String(_MAX_NAME), nullable=False, index=True),
    sa.Column("release_key", sa.String(_MAX_NAME), nullable=False),
    # NULL for a release without a DP guarantee (rho would be infinite).
    sa.Column("rho", sa.Double, nullable=True),
    sa.Column("pure_epsilon", sa.Double, nullable=True),
    sa.Column("is_dp", sa.Boolean, nullable=False),
    sa.Column("guarantee", sa.Text, nullable=False),
    sa.Column("description", sa.Text, nullable=False),
    sa.Column("created_at", sa.String(40), nullable=False),
    # Set (once) when the noise of this release is drawn; see claim_noise.
    sa.Column("noise_drawn_at", sa.String(40), nullable=True),
    sa.UniqueConstraint("dataset", "release_key", name="uq_privsynth_charges_release"),
)

_secrets = sa.Table(
    "privsynth_secrets",
    _metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("value", sa.String(128), nullable=False),
)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


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


def _make_engine(url: str) -> Engine:
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


class BudgetLedger:
    """Per-dataset privacy budgets and their charges, stored in any SQLAlchemy database.

    ``BudgetLedger(url)`` opens (and on first use creates) the ledger at
    ``resolve_ledger_url(url)``. Picklable: a copy in another process reopens the same URL.
    """

    def __init__(self, url: str | None = None) -> None:
        self._url = resolve_ledger_url(url)
        self._engine = _make_engine(self._url)
        self._backend = self._engine.dialect.name
        self._create_tables()

    # pickling by URL lets a ledger travel to worker processes
    def __reduce__(self):
        return (BudgetLedger, (self._url,))

    def __enter__(self) -> "BudgetLedger":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._engine.dispose()

    @property
    def url(self) -> str:
        """The ledger URL with any password masked."""
        return display_url(self._url)

    def _create_tables(self) -> None:
        try:
            _metadata.create_all(self._engine)
        except sa.exc.DBAPIError:
            # Another process created them between our check and our CREATE (servers without
            # transactional serialisation of DDL); a second checked pass finds them.
            _metadata.create_all(self._engine)
        self._add_missing_columns()

    def _add_missing_columns(self) -> None:
        """Ledgers written by earlier versions lack noise_drawn_at: add it (NULL: no claim recorded)."""
        columns = {c["name"] for c in sa.inspect(self._engine).get_columns("privsynth_charges")}
        if "noise_drawn_at" not in columns:
            with self._engine.begin() as conn:
                conn.execute(sa.text("ALTER TABLE privsynth_charges ADD COLUMN noise_drawn_at VARCHAR(40)"))

    @contextmanager
    def _transaction(self, dataset: str | None = None) -> Iterator[Connection]:
        """A serialised read-write transaction (see the module docstring, Concurrency)."""
        with self._engine.begin() as conn:
            if self._backend == "postgresql" and dataset is not None:
                conn.execute(
                    sa.text("SELECT pg_advisory_xact_lock(hashtextextended(:name, 0))"),
                    {"name": "privsynth-ledger:" + dataset},
                )
            yield conn

    def _budget_row(self, conn: Connection, dataset: str, lock: bool):
        query = sa.select(_budgets.c.epsilon, _budgets.c.delta).where(_budgets.c.dataset == dataset)
        if lock and self._backend != "sqlite":
            query = query.with_for_update()
        return conn.execute(query).first()

    @staticmethod
    def _charge_rows(conn: Connection, dataset: str) -> list[ChargeRecord]:
        rows = conn.execute(
            sa.select(_charges).where(_charges.c.dataset == dataset).order_by(_charges.c.charge_id)
        ).mappings()
        return [
            ChargeRecord(
                charge_id=int(r["charge_id"]),
                dataset=r["dataset"],
                release_key=r["release_key"],
                rho=math.inf if r["rho"] is None else float(r["rho"]),
                pure_epsilon=None if r["pure_epsilon"] is None else float(r["pure_epsilon"]),
                is_dp=bool(r["is_dp"]),
                guarantee=r["guarantee"],
                description=r["description"],
                created_at=r["created_at"],
            )
            for r in rows
        ]

    @staticmethod
    def _status_of(dataset: str, budget, records: Sequence[ChargeRecord]) -> BudgetStatus:
        costs = [r.cost() for r in records]
        spent_rho = total_rho(costs)
        non_private = sum(1 for r in records if not r.is_dp)
        if budget is None:
            # No budget, so no delta of its own: the spend is stated at the runs' default delta (pure sum when
            # every charge is pure), so `budget show` says what a run without a limit spent.
            pure = total_pure_epsilon(costs)
            spent = pure if pure is not None else epsilon_spent(costs, DEFAULT_DELTA)
            return BudgetStatus(dataset, None, None, spent_rho, spent, None, None, len(costs), non_private)
        epsilon, delta = float(budget.epsilon), None if budget.delta is None else float(budget.delta)
        spent = epsilon_spent(costs, delta)
        left_rho = None if delta is None else remaining_rho(costs, epsilon, delta)
        return BudgetStatus(
            dataset, epsilon, delta, spent_rho, spent, max(epsilon - spent, 0.0), left_rho, len(costs), non_private
        )

    # ---- public API -------------------------------------------------------------------------

    def set_budget(self, dataset: str, epsilon: float, delta: float | None = DEFAULT_DELTA, *,
                   pure: bool = False) -> BudgetStatus:
        """Create or change a dataset's (epsilon, delta) allowance.

        delta defaults to the delta runs use (``DEFAULT_DELTA``), so every mechanism fits; ``pure=True``
        (or an explicit ``delta=None``) makes a pure-DP budget, which only pure-DP mechanisms can spend.
        Refused (BudgetExceededError) when the charges already recorded would not fit the new
        allowance: a budget can be raised, never lowered below what is spent.
        """
        dataset = _check_name("dataset", dataset)
        epsilon = check_epsilon(epsilon)
        if pure:
            delta = None
        delta = check_budget_delta(delta)
        with self._transaction(dataset) as conn:
            existing = self._budget_row(conn, dataset, lock=True)
            records = self._charge_rows(conn, dataset)
            costs = [r.cost() for r in records]
            if not fits_budget(costs, epsilon, delta):
                spent = epsilon_spent(costs, delta)
                why = (
                    "a release without a DP guarantee is recorded for it"
                    if any(not c.is_dp for c in costs)
                    else "its recorded zCDP charges cannot be expressed in pure epsilon"
                    if delta is None and math.isinf(spent)
                    else f"it has already spent epsilon {spent:.6g} at delta {delta!r} (rho {total_rho(costs):.6g})"
                )
                raise BudgetExceededError(
                    f"cannot set the budget of dataset {dataset!r} to epsilon {epsilon:g}, delta {delta!r}: {why}; "
                    "budgets are never lowered below what is spent"
                )
            now = _now()
            if existing is None:
                conn.execute(
                    _budgets.insert().values(dataset=dataset, epsilon=epsilon, delta=delta, created_at=now, updated_at=now)
                )
            else:
                conn.execute(
                    _budgets.update()
                    .where(_budgets.c.dataset == dataset)
                    .values(epsilon=epsilon, delta=delta, updated_at=now)
                )
            return self._status_of(dataset, _Budget(epsilon, delta), records)

    def charge(
        self,
        dataset: str,
        release_key: str,
        cost: PrivacyCost,
        description: str = "",
        *,
        require_budget: bool = True,
    ) -> ChargeReceipt:
        """Check the budget and record the charge in one serialised transaction.

        Idempotent per (dataset, release_key): if the key is already charged, the stored receipt
        is returned with ``reused=True`` and nothing is charged. Raises BudgetExceededError
        (nothing recorded) if the charge does not fit, BudgetNotSetError if the dataset has no
        budget and ``require_budget`` is True, NonPrivateChargeError for a non-DP cost against a
        budgeted dataset. With ``require_budget=False`` and no budget the charge is recorded
        without a limit (ad-hoc runs), so a budget set later still counts it.
        ``description`` is stored and shown by `privsynth budget show`: put no data values in it.
        """
        dataset = _check_name("dataset", dataset)
        release_key = _check_name("release_key", release_key)
        check_cost(cost)
        if not isinstance(description, str):
            raise ValueError(f"description must be a string, got {type(description).__name__}")
        try:
            return self._charge_once(dataset, release_key, cost, description, require_budget)
        except sa.exc.IntegrityError:
            # A concurrent writer inserted the same release key first (servers that do not
            # serialise on our lock, e.g. no budget row to lock): it is now a reuse.
            with self._transaction(dataset) as conn:
                receipt = self._existing_receipt(conn, dataset, release_key, cost)
            if receipt is None:
                raise
            return receipt

    def _existing_receipt(self, conn: Connection, dataset: str, key: str, cost: PrivacyCost) -> ChargeReceipt | None:
        records = self._charge_rows(conn, dataset)
        match = next((r for r in records if r.release_key == key), None)
        if match is None:
            return None
        same = match.is_dp == cost.is_dp and (
            not cost.is_dp or (match.rho == float(cost.rho) and match.pure_epsilon == cost.pure_epsilon)
        )
        if not same:
            raise ReleaseKeyConflictError(
                f"release key {key!r} of dataset {dataset!r} is already charged with a different cost "
                f"(stored rho {match.rho!r}, pure epsilon {match.pure_epsilon!r}; requested rho {cost.rho!r}, "
                f"pure epsilon {cost.pure_epsilon!r}); a release key must identify one release"
            )
        budget = self._budget_row(conn, dataset, lock=False)
        return ChargeReceipt(match, True, self._status_of(dataset, budget, records))

    def _charge_once(
        self, dataset: str, key: str, cost: PrivacyCost, description: str, require_budget: bool
    ) -> ChargeReceipt:
        with self._transaction(dataset) as conn:
            budget = self._budget_row(conn, dataset, lock=True)
            reused = self._existing_receipt(conn, dataset, key, cost)
            if reused is not None:
                return reused
            records = self._charge_rows(conn, dataset)
            if budget is None and require_budget:
                raise BudgetNotSetError(
                    f"dataset {dataset!r} has no privacy budget; set one with "
                    f"`privsynth budget set {dataset} --epsilon E [--delta D]` (nothing was charged)"
                )
            if budget is not None:
                self._check_fits(dataset, budget, records, cost)
            values = dict(
                dataset=dataset,
                release_key=key,
                rho=float(cost.rho) if cost.is_dp else None,
                pure_epsilon=None if cost.pure_epsilon is None else float(cost.pure_epsilon),
                is_dp=bool(cost.is_dp),
                guarantee=cost.guarantee,
                description=description,
                created_at=_now(),
            )
            charge_id = conn.execute(_charges.insert().values(**values)).inserted_primary_key[0]
            record = ChargeRecord(
                charge_id=int(charge_id),
                **{**values, "rho": math.inf if not cost.is_dp else values["rho"]},
            )
            return ChargeReceipt(record, False, self._status_of(dataset, budget, [*records, record]))

    def _check_fits(self, dataset: str, budget, records: Sequence[ChargeRecord], cost: PrivacyCost) -> None:
        epsilon, delta = float(budget.epsilon), None if budget.delta is None else float(budget.delta)
        if not cost.is_dp:
            raise NonPrivateChargeError(
                f"dataset {dataset!r} is guarded by a privacy budget (epsilon {epsilon:g}, delta {delta!r}); "
                "a release without a differential-privacy guarantee cannot be charged to it (nothing was charged)"
            )
        costs = [r.cost() for r in records]
        if delta is None and cost.pure_epsilon is None:
            raise BudgetExceededError(
                f"dataset {dataset!r} has a pure-DP budget (epsilon {epsilon:g}, no delta) and this charge is "
                f"zCDP (rho {cost.rho:.6g}), which has no pure epsilon; set a budget with a delta to use it "
                "(nothing was charged)"
            )
        if fits_budget([*costs, cost], epsilon, delta):
            return
        status = self._status_of(dataset, budget, records)
        spent = status.spent_epsilon
        requested = cost.pure_epsilon if delta is None else cost.epsilon_at(delta)
        after = epsilon_spent([*costs, cost], delta)
        at = "pure epsilon (no delta)" if delta is None else f"delta {delta:g}"
        rho_part = (
            f"; in zCDP: spent rho {status.spent_rho:.6g}, requested rho {cost.rho:.6g}, "
            f"remaining rho {status.remaining_rho:.6g}"
            if delta is not None
            else f"; in zCDP: spent rho {status.spent_rho:.6g}, requested rho {cost.rho:.6g}"
        )
        raise BudgetExceededError(
            f"privacy budget exceeded for dataset {dataset!r} (budget epsilon {epsilon:g} at {at}): "
            f"spent epsilon {spent:.6g}, requested epsilon {requested:.6g}, remaining epsilon "
            f"{status.remaining_epsilon:.6g}; with this charge the total would be epsilon {after:.6g}"
            f"{rho_part}. Nothing was charged and no noise was drawn."
        )

    def claim_noise(self, dataset: str, release_key: str) -> None:
        """Record that the noise of this charged release is being drawn now; at most once per key.

        Called after ``charge`` and before the first draw. Raises NoiseAlreadyDrawnError when noise
        was drawn for this key before (its release should have been stored: re-running after a lost
        release must be a new release, charged again), LedgerError when the key was never charged.
        """
        dataset = _check_name("dataset", dataset)
        release_key = _check_name("release_key", release_key)
        with self._transaction(dataset) as conn:
            result = conn.execute(
                _charges.update()
                .where(_charges.c.dataset == dataset, _charges.c.release_key == release_key,
                       _charges.c.noise_drawn_at.is_(None))
                .values(noise_drawn_at=_now())
            )
            if result.rowcount == 1:
                return
            charged = conn.execute(
                sa.select(_charges.c.charge_id).where(_charges.c.dataset == dataset,
                                                      _charges.c.release_key == release_key)
            ).first()
        if charged is None:
            raise LedgerError(f"dataset {dataset!r}: no charge is recorded for this release; charge before drawing noise")
        raise NoiseAlreadyDrawnError(
            f"dataset {dataset!r}: noise was already drawn for this release, but its stored copy is gone "
            "(a run killed after drawing, or another release store); drawing again would be a second release "
            "for one charge. Start a new run (a new release, charged again; a seeded run needs another --seed, "
            "since its key has no per-run part); nothing was drawn")

    def noise_drawn(self, dataset: str, release_key: str) -> bool:
        """Whether noise was drawn for this release key (read-only)."""
        with self._transaction(None) as conn:
            row = conn.execute(
                sa.select(_charges.c.noise_drawn_at).where(_charges.c.dataset == dataset,
                                                           _charges.c.release_key == release_key)
            ).first()
        return bool(row and row[0])

    def release_secret(self) -> bytes:
        """This ledger's release-key secret (32 random bytes, created once, never shown)."""
        with self._transaction("\x00secret") as conn:
            row = conn.execute(sa.select(_secrets.c.value).where(_secrets.c.name == "release-key")).first()
            if row is None:
                value = secrets.token_hex(32)
                try:
                    conn.execute(_secrets.insert().values(name="release-key", value=value))
                except sa.exc.IntegrityError:
                    row = None
                else:
                    return bytes.fromhex(value)
        if row is None:
            with self._transaction(None) as conn:
                row = conn.execute(sa.select(_secrets.c.value).where(_secrets.c.name == "release-key")).first()
        return bytes.fromhex(row[0])

    def status(self, dataset: str | None = None) -> list[BudgetStatus]:
        """Budget and spending per dataset (all datasets, sorted by name, when ``dataset`` is None)."""
        if dataset is not None:
            dataset = _check_name("dataset", dataset)
        with self._transaction(None) as conn:
            if dataset is None:
                names = sorted(
                    set(conn.execute(sa.select(_budgets.c.dataset)).scalars())
                    | set(conn.execute(sa.select(_charges.c.dataset).distinct()).scalars())
                )
            else:
                names = [dataset]
            result = []
            for name in names:
                budget = self._budget_row(conn, name, lock=False)
                records = self._charge_rows(conn, name)
                if budget is None and not records:
                    raise UnknownDatasetError(self._unknown_message(conn, name))
                result.append(self._status_of(name, budget, records))
            return result

    def find_charge(self, dataset: str, release_key: str) -> ChargeRecord | None:
        """The stored charge of this release key, or None; charges nothing (a read-only lookup)."""
        dataset = _check_name("dataset", dataset)
        release_key = _check_name("release_key", release_key)
        with self._transaction(None) as conn:
            row = next((r for r in self._charge_rows(conn, dataset) if r.release_key == release_key), None)
        return row

    def history(self, dataset: str) -> list[ChargeRecord]:
        """Every charge of ``dataset``, oldest first."""
        dataset = _check_name("dataset", dataset)
        with self._transaction(None) as conn:
            records = self._charge_rows(conn, dataset)
            if not records and self._budget_row(conn, dataset, lock=False) is None:
                raise UnknownDatasetError(self._unknown_message(conn, dataset))
            return records

    @staticmethod
    def _unknown_message(conn: Connection, dataset: str) -> str:
        known = sorted(
            set(conn.execute(sa.select(_budgets.c.dataset)).scalars())
            | set(conn.execute(sa.select(_charges.c.dataset).distinct()).scalars())
        )
        listing = ", ".join(repr(k) for k in known[:20]) if known else "none"
        return f"the ledger has no budget or charge for dataset {dataset!r} (known datasets: {listing})"


@dataclass(frozen=True)
class _Budget:
    epsilon: float
    delta: float | None


# --------------------------------------------------------------------------------------------
# Display


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if math.isinf(value):
        return "inf"
    return f"{value:.6g}"


def format_status(statuses: Sequence[BudgetStatus]) -> str:
    """A plain-text table for `privsynth budget show`."""
    if not statuses:
        return "the ledger holds no budgets or charges"
    header = ("dataset", "budget eps", "delta", "spent eps", "remaining eps", "spent rho", "remaining rho", "charges")
    rows = [header]
    for s in statuses:
        budget = "none" if s.epsilon is None else _fmt(s.epsilon)
        delta = "-" if s.epsilon is None else ("pure" if s.delta is None else f"{s.delta:g}")
        charges = str(s.charges) + (f" ({s.non_private_charges} not DP)" if s.non_private_charges else "")
        rows.append(
            (s.dataset, budget, delta, _fmt(s.spent_epsilon), _fmt(s.remaining_epsilon), _fmt(s.spent_rho),
             _fmt(s.remaining_rho), charges)
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    notes = []
    if any(s.epsilon is None for s in statuses):
        notes.append(f"budget 'none': charges recorded by runs without a limit; their spent eps is stated at delta "
                     f"{DEFAULT_DELTA:g} (the runs' default; the pure sum when every charge is pure)")
    if any(s.delta is not None and s.epsilon is not None for s in statuses):
        notes.append("spent eps at the budget's delta: tight zCDP composition (pure sum when every charge is pure)")
    return "\n".join(lines + [""] + notes if notes else lines)
