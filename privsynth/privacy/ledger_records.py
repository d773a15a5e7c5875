"""What the ledger returns and refuses with: its errors, a dataset's status, a stored charge, a
charge's receipt, and the plain-text table of `privsynth budget show`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from privsynth.errors import (  # noqa: F401  (re-exported: the ledger's refusals)
    BudgetExceededError,
    BudgetNotSetError,
    LedgerError,
    NoiseAlreadyDrawnError,
    NonPrivateChargeError,
    ReleaseKeyConflictError,
    UnknownDatasetError,
)
from privsynth.privacy.accounting import DEFAULT_DELTA, PrivacyCost
from privsynth.privacy.spending import (
    WHY_EPSILONS_DO_NOT_SUBTRACT,
    epsilon_spent,
    next_run_epsilon,
    remaining_rho,
    rho_allowance,
    total_pure_epsilon,
    total_rho,
)

MAX_NAME = 200


def check_name(kind: str, value: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{kind} must be a non-empty string, got {value!r}")
    if len(value) > MAX_NAME or any(ord(ch) < 32 for ch in value):
        raise ValueError(f"{kind} must be at most {MAX_NAME} printable characters, got {value!r}")
    return value


@dataclass(frozen=True)
class BudgetStatus:
    """One dataset's allowance and what it has spent.

    epsilon / delta: the budget (epsilon None: no budget set; delta None: pure-DP budget).
    spent_rho: total zCDP rho (inf if a non-DP release was recorded).
    spent_epsilon: epsilon spent at the budget's delta (pure epsilon for a pure budget); with no
        budget, the pure total when every charge is pure, else the spend at DEFAULT_DELTA.
    remaining_epsilon: epsilon - spent_epsilon, floored at 0; None with no budget.
    remaining_rho: the zCDP rho one more charge may carry (delta budgets only), else None.
    next_run_epsilon: the largest epsilon one more run may spend; None with no budget. Not epsilon -
        spent_epsilon: epsilons do not subtract (``spending.WHY_EPSILONS_DO_NOT_SUBTRACT``).
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
    next_run_epsilon: float | None = None  # the largest epsilon one more run may spend (spending.next_run_epsilon)


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
    extra_delta: float = 0.0  # approximate zCDP's additive delta (PrivacyCost.extra_delta)

    def cost(self) -> PrivacyCost:
        if not self.is_dp:
            return PrivacyCost.not_private(self.guarantee)
        return PrivacyCost(rho=self.rho, pure_epsilon=self.pure_epsilon, guarantee=self.guarantee,
                           extra_delta=self.extra_delta)


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
    header = ("dataset", "budget eps", "delta", "spent eps", "next run may spend eps", "spent rho", "remaining rho",
              "charges")
    rows = [header]
    for s in statuses:
        budget = "none" if s.epsilon is None else _fmt(s.epsilon)
        delta = "-" if s.epsilon is None else ("pure" if s.delta is None else f"{s.delta:g}")
        charges = str(s.charges) + (f" ({s.non_private_charges} not DP)" if s.non_private_charges else "")
        rows.append(
            (s.dataset, budget, delta, _fmt(s.spent_epsilon), _fmt(s.next_run_epsilon), _fmt(s.spent_rho),
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
    if any(s.epsilon is not None for s in statuses):
        notes.append("next run may spend eps: the largest epsilon one more run may spend now (`privsynth budget show "
                     "DATASET --next-run E` says what a run at E would leave); " + WHY_EPSILONS_DO_NOT_SUBTRACT)
    return "\n".join(lines + [""] + notes if notes else lines)


def status_of(dataset: str, budget, records: Sequence[ChargeRecord]) -> BudgetStatus:
    """A dataset's status: its allowance (or none) and what its charges have spent (the spending rule's figures)."""
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
        dataset, epsilon, delta, spent_rho, spent, max(epsilon - spent, 0.0), left_rho, len(costs), non_private,
        next_run_epsilon(costs, epsilon, delta),
    )


def after_next_run(status: BudgetStatus, costs: Sequence[PrivacyCost], run_epsilon: float) -> str:
    """What a run at ``run_epsilon`` (at the budget's delta) would leave: one line for `budget show --next-run`."""
    if status.epsilon is None:
        return (f"dataset {status.dataset!r} has no budget: a run at epsilon {run_epsilon:g} needs --unlimited "
                "(or `privsynth budget set`)")
    if status.next_run_epsilon is None or run_epsilon > status.next_run_epsilon * (1.0 + 1e-9):
        return (f"a run at epsilon {run_epsilon:g} would be refused: one more run may spend at most epsilon "
                f"{_fmt(status.next_run_epsilon)} of dataset {status.dataset!r}")
    run = (PrivacyCost.pure(run_epsilon, "next run") if status.delta is None
           else PrivacyCost.zcdp(rho_allowance(run_epsilon, status.delta), "next run"))
    after = next_run_epsilon([*costs, run], status.epsilon, status.delta)
    return (f"a run at epsilon {run_epsilon:g} fits; after it, one more run may spend at most epsilon {_fmt(after)} "
            f"of dataset {status.dataset!r} ({WHY_EPSILONS_DO_NOT_SUBTRACT})")

# ---- public API -------------------------------------------------------------------------
