"""The privacy budget ledger: one allowance per dataset, charged before any noise is drawn.

docs/design.md 5.2 and 5.3:
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

Noise claims (docs/design.md 5.2): a charge records when noise was drawn for its release key
(``claim_noise``). A second claim for the same key is refused, so a release whose stored copy was
lost (a killed run after the draw, a new store folder) can never be drawn again for free.

Release-key secret: ``release_secret()`` is a random 32-byte value created once per ledger and kept
in it. Release keys are HMACs under it, so a key that is shown (a store folder name, a manifest)
cannot be used to test guesses about the data by anyone without the ledger.

Concurrency: a charge is a check-and-insert in one transaction that is serialised per database
(SQLite: ``BEGIN IMMEDIATE`` takes the write lock before the budget is read, with a busy timeout,
so a second writer waits instead of reading a stale total) or per dataset (PostgreSQL: a
transaction-scoped advisory lock on the dataset, ``advisory_lock_key``, plus ``SELECT ... FOR UPDATE``
on the budget row). Two processes racing for the last of a budget therefore cannot both be accepted.
The lock key is a 64-bit integer computed here, so no text (and never a NUL byte, which PostgreSQL's
text type refuses) is sent for it, and it does not depend on the server's hash function.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from privsynth.privacy.accounting import DEFAULT_DELTA, PrivacyCost
from privsynth.privacy.ledger_records import (
    BudgetExceededError,
    BudgetNotSetError,
    BudgetStatus,
    ChargeReceipt,
    ChargeRecord,
    LedgerError,
    NoiseAlreadyDrawnError,
    NonPrivateChargeError,
    ReleaseKeyConflictError,
    UnknownDatasetError,
    check_name,
    format_status,
    status_of,
)
from privsynth.privacy.ledger_store import (
    BUDGETS,
    CHARGES,
    LEDGER_URL_ENV,
    METADATA,
    SECRETS,
    advisory_lock_key,
    default_ledger_url,
    display_url,
    make_engine,
    new_release_secret,
    now_iso,
    resolve_ledger_url,
    unknown_dataset_message,
)
from privsynth.privacy.spending import (
    WHY_EPSILONS_DO_NOT_SUBTRACT,
    check_budget_delta,
    check_cost,
    check_epsilon,
    epsilon_spent,
    fits_budget,
    total_rho,
)


class BudgetLedger:
    """Per-dataset privacy budgets and their charges, stored in any SQLAlchemy database.

    ``BudgetLedger(url)`` opens (and on first use creates) the ledger at
    ``resolve_ledger_url(url)``. Picklable: a copy in another process reopens the same URL.
    """

    def __init__(self, url: str | None = None) -> None:
        self._url = resolve_ledger_url(url)
        self._engine = make_engine(self._url)
        self._backend = self._engine.dialect.name
        self._create_tables()

    # pickling by URL lets a ledger travel to worker processes
    def __reduce__(self):
        return (BudgetLedger, (self._url,))

    def __enter__(self) -> BudgetLedger:
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
            METADATA.create_all(self._engine)
        except sa.exc.DBAPIError:
            # Another process created them between our check and our CREATE (servers without
            # transactional serialisation of DDL); a second checked pass finds them.
            METADATA.create_all(self._engine)
        self._add_missing_columns()

    def _add_missing_columns(self) -> None:
        """Ledgers written by earlier versions lack noise_drawn_at (NULL: no claim recorded) and extra_delta
        (NULL: 0, every earlier charge was plain zCDP or pure): add them."""
        columns = {c["name"] for c in sa.inspect(self._engine).get_columns("privsynth_charges")}
        added = {"noise_drawn_at": "VARCHAR(40)", "extra_delta": "DOUBLE PRECISION"}
        for name, sql_type in added.items():
            if name not in columns:
                with self._engine.begin() as conn:
                    conn.execute(sa.text(f"ALTER TABLE privsynth_charges ADD COLUMN {name} {sql_type}"))

    @contextmanager
    def _transaction(self, lock: int | None = None) -> Iterator[Connection]:
        """A serialised read-write transaction (see the module docstring, Concurrency).

        ``lock``: an ``advisory_lock_key``, held (PostgreSQL) until the transaction ends; None for reads.
        """
        with self._engine.begin() as conn:
            if self._backend == "postgresql" and lock is not None:
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(CAST(:key AS BIGINT))"), {"key": lock})
            yield conn

    def _budget_row(self, conn: Connection, dataset: str, lock: bool):
        query = sa.select(BUDGETS.c.epsilon, BUDGETS.c.delta).where(BUDGETS.c.dataset == dataset)
        if lock and self._backend != "sqlite":
            query = query.with_for_update()
        return conn.execute(query).first()

    @staticmethod
    def _charge_rows(conn: Connection, dataset: str) -> list[ChargeRecord]:
        rows = conn.execute(
            sa.select(CHARGES).where(CHARGES.c.dataset == dataset).order_by(CHARGES.c.charge_id)
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
                extra_delta=float(r["extra_delta"] or 0.0),
            )
            for r in rows
        ]

    def set_budget(self, dataset: str, epsilon: float, delta: float | None = DEFAULT_DELTA, *,
                   pure: bool = False) -> BudgetStatus:
        """Create or change a dataset's (epsilon, delta) allowance.

        delta defaults to the delta runs use (``DEFAULT_DELTA``), so every mechanism fits; ``pure=True``
        (or an explicit ``delta=None``) makes a pure-DP budget, which only pure-DP mechanisms can spend.
        Refused (BudgetExceededError) when the charges already recorded would not fit the new
        allowance: a budget can be raised, never lowered below what is spent.
        """
        dataset = check_name("dataset", dataset)
        epsilon = check_epsilon(epsilon)
        if pure:
            delta = None
        delta = check_budget_delta(delta)
        with self._transaction(advisory_lock_key("dataset", dataset)) as conn:
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
            now = now_iso()
            if existing is None:
                conn.execute(
                    BUDGETS.insert().values(dataset=dataset, epsilon=epsilon, delta=delta, created_at=now,
                                            updated_at=now)
                )
            else:
                conn.execute(
                    BUDGETS.update()
                    .where(BUDGETS.c.dataset == dataset)
                    .values(epsilon=epsilon, delta=delta, updated_at=now)
                )
            return status_of(dataset, _Budget(epsilon, delta), records)

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
        dataset = check_name("dataset", dataset)
        release_key = check_name("release_key", release_key)
        check_cost(cost)
        if not isinstance(description, str):
            raise ValueError(f"description must be a string, got {type(description).__name__}")
        try:
            return self._charge_once(dataset, release_key, cost, description, require_budget)
        except sa.exc.IntegrityError:
            # A concurrent writer inserted the same release key first (servers that do not
            # serialise on our lock, e.g. no budget row to lock): it is now a reuse.
            with self._transaction(advisory_lock_key("dataset", dataset)) as conn:
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
            not cost.is_dp or (match.rho == float(cost.rho) and match.pure_epsilon == cost.pure_epsilon
                               and match.extra_delta == float(cost.extra_delta))
        )
        if not same:
            raise ReleaseKeyConflictError(
                f"release key {key!r} of dataset {dataset!r} is already charged with a different cost "
                f"(stored rho {match.rho!r}, pure epsilon {match.pure_epsilon!r}; requested rho {cost.rho!r}, "
                f"pure epsilon {cost.pure_epsilon!r}); a release key must identify one release"
            )
        budget = self._budget_row(conn, dataset, lock=False)
        return ChargeReceipt(match, True, status_of(dataset, budget, records))

    def _charge_once(
        self, dataset: str, key: str, cost: PrivacyCost, description: str, require_budget: bool
    ) -> ChargeReceipt:
        with self._transaction(advisory_lock_key("dataset", dataset)) as conn:
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
            values: dict[str, Any] = dict(  # the charge's row (its columns' values), as inserted
                dataset=dataset,
                release_key=key,
                rho=float(cost.rho) if cost.is_dp else None,
                pure_epsilon=None if cost.pure_epsilon is None else float(cost.pure_epsilon),
                is_dp=bool(cost.is_dp),
                guarantee=cost.guarantee,
                description=description,
                created_at=now_iso(),
                extra_delta=float(cost.extra_delta) if cost.is_dp else 0.0,
            )
            inserted = conn.execute(CHARGES.insert().values(**values)).inserted_primary_key
            if inserted is None:  # a single-row insert reports its primary key
                raise RuntimeError("the ledger's database did not report the new charge's id; nothing was charged")
            record = ChargeRecord(
                charge_id=int(inserted[0]),
                **{**values, "rho": math.inf if not cost.is_dp else values["rho"]},
            )
            return ChargeReceipt(record, False, status_of(dataset, budget, [*records, record]))

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
        status = status_of(dataset, budget, records)
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
            f"spent epsilon {spent:.6g}, requested epsilon {requested:.6g}; one more run may spend at most epsilon "
            f"{status.next_run_epsilon:.6g}; with this charge the total would be epsilon {after:.6g}{rho_part} "
            f"({WHY_EPSILONS_DO_NOT_SUBTRACT}). Nothing was charged and no noise was drawn."
        )

    def claim_noise(self, dataset: str, release_key: str) -> None:
        """Record that the noise of this charged release is being drawn now; at most once per key.

        Called after ``charge`` and before the first draw. Raises NoiseAlreadyDrawnError when noise
        was drawn for this key before (its release should have been stored: re-running after a lost
        release must be a new release, charged again), LedgerError when the key was never charged.
        """
        dataset = check_name("dataset", dataset)
        release_key = check_name("release_key", release_key)
        with self._transaction(advisory_lock_key("dataset", dataset)) as conn:
            result = conn.execute(
                CHARGES.update()
                .where(CHARGES.c.dataset == dataset, CHARGES.c.release_key == release_key,
                       CHARGES.c.noise_drawn_at.is_(None))
                .values(noise_drawn_at=now_iso())
            )
            if result.rowcount == 1:
                return
            charged = conn.execute(
                sa.select(CHARGES.c.charge_id).where(CHARGES.c.dataset == dataset,
                                                      CHARGES.c.release_key == release_key)
            ).first()
        if charged is None:
            raise LedgerError(f"dataset {dataset!r}: no charge is recorded for this release; charge before drawing "
                              "noise")
        raise NoiseAlreadyDrawnError(
            f"dataset {dataset!r}: noise was already drawn for this release, but its stored copy is gone "
            "(a run killed after drawing, or another release store); drawing again would be a second release "
            "for one charge. Start a new run (a new release, charged again; a seeded run needs another --seed, "
            "since its key has no per-run part); nothing was drawn")

    def noise_drawn(self, dataset: str, release_key: str) -> bool:
        """Whether noise was drawn for this release key (read-only)."""
        with self._transaction(None) as conn:
            row = conn.execute(
                sa.select(CHARGES.c.noise_drawn_at).where(CHARGES.c.dataset == dataset,
                                                           CHARGES.c.release_key == release_key)
            ).first()
        return bool(row and row[0])

    def release_secret(self) -> bytes:
        """This ledger's release-key secret (32 random bytes, created once, never shown)."""
        with self._transaction(advisory_lock_key("secret")) as conn:
            row = conn.execute(sa.select(SECRETS.c.value).where(SECRETS.c.name == "release-key")).first()
            if row is None:
                value = new_release_secret()
                try:
                    conn.execute(SECRETS.insert().values(name="release-key", value=value))
                except sa.exc.IntegrityError:
                    row = None
                else:
                    return bytes.fromhex(value)
        if row is None:
            with self._transaction(None) as conn:
                row = conn.execute(sa.select(SECRETS.c.value).where(SECRETS.c.name == "release-key")).one()
        return bytes.fromhex(row[0])

    def status(self, dataset: str | None = None) -> list[BudgetStatus]:
        """Budget and spending per dataset (all datasets, sorted by name, when ``dataset`` is None)."""
        if dataset is not None:
            dataset = check_name("dataset", dataset)
        with self._transaction(None) as conn:
            if dataset is None:
                names = sorted(
                    set(conn.execute(sa.select(BUDGETS.c.dataset)).scalars())
                    | set(conn.execute(sa.select(CHARGES.c.dataset).distinct()).scalars())
                )
            else:
                names = [dataset]
            result = []
            for name in names:
                budget = self._budget_row(conn, name, lock=False)
                records = self._charge_rows(conn, name)
                if budget is None and not records:
                    raise UnknownDatasetError(unknown_dataset_message(conn, name))
                result.append(status_of(name, budget, records))
            return result

    def find_charge(self, dataset: str, release_key: str) -> ChargeRecord | None:
        """The stored charge of this release key, or None; charges nothing (a read-only lookup)."""
        dataset = check_name("dataset", dataset)
        release_key = check_name("release_key", release_key)
        with self._transaction(None) as conn:
            row = next((r for r in self._charge_rows(conn, dataset) if r.release_key == release_key), None)
        return row

    def history(self, dataset: str) -> list[ChargeRecord]:
        """Every charge of ``dataset``, oldest first."""
        dataset = check_name("dataset", dataset)
        with self._transaction(None) as conn:
            records = self._charge_rows(conn, dataset)
            if not records and self._budget_row(conn, dataset, lock=False) is None:
                raise UnknownDatasetError(unknown_dataset_message(conn, dataset))
            return records


@dataclass(frozen=True)
class _Budget:
    epsilon: float
    delta: float | None


# The ledger's names, wherever they are defined (records and storage are modules of their own).
__all__ = ["BudgetExceededError", "BudgetLedger", "BudgetNotSetError", "BudgetStatus", "ChargeReceipt", "ChargeRecord",
           "LEDGER_URL_ENV", "LedgerError", "NoiseAlreadyDrawnError", "NonPrivateChargeError",
           "ReleaseKeyConflictError", "UnknownDatasetError", "default_ledger_url", "display_url", "format_status",
           "resolve_ledger_url"]
