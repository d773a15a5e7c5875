"""The ledger's spending rule: how recorded charges compose and whether one more fits a budget.

Pure functions, no storage (``privsynth.privacy.ledger`` stores charges and calls these):
* A budget is an (epsilon, delta) allowance for one dataset.
* With a delta, the charges compose in zCDP: pure eps-DP charges carry rho = eps^2/2, so every
  charge is in the same currency and the plain rule is
      eps_spent = epsilon_from_rho(sum_i rho_i, delta)          (tight conversion)
  The rule takes the minimum of that and of the splits where the k largest pure charges are
  composed in pure epsilon and the rest in zCDP:
      eps_spent = min_k  [ sum_{i<=k} pure_eps_(i) + epsilon_from_rho(sum of the other rho, delta) ]
  Every split is a valid bound (the pure part is (sum eps, 0)-DP, the rest (eps', delta)-DP, and
  basic composition adds them); k = all is pure composition, which is far tighter than zCDP for a
  few pure charges (two 0.5-DP releases: 1.0, versus 4.4 via rho = 0.25 at delta 1e-9).
  A charge is accepted iff eps_spent including it is <= epsilon.
* With no delta, the budget is a pure-DP allowance: every charge must be pure and
  sum pure_eps_i <= epsilon (a zCDP charge cannot be expressed in pure epsilon and is refused).
* A charge may carry an additive delta (approximate zCDP, ``PrivacyCost.extra_delta``: categorical
  thresholds). These add up too, and the zCDP part is converted at the budget's delta less their sum,
  so the composed statement stays (eps_spent, delta) with every additive delta inside delta.
* Comparisons allow a relative slack of 1e-9 (``TOLERANCE``), so that a budget split as
  0.1 + 0.2 + 0.7 is not refused for floating-point rounding; this is far below the accuracy with
  which the epsilon itself is chosen and below the optimiser tolerance of the tight conversion.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

from scipy.optimize import brentq

from privsynth.privacy.accounting import PrivacyCost, epsilon_from_rho, epsilon_from_rho_beside

TOLERANCE = 1e-9

def check_epsilon(epsilon: float) -> float:
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not math.isfinite(epsilon) or epsilon <= 0:
        raise ValueError(f"epsilon must be a finite number > 0, got {epsilon!r}")
    return float(epsilon)


def check_budget_delta(delta: float | None) -> float | None:
    if delta is None:
        return None
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not math.isfinite(delta) or not 0 < delta < 1:
        raise ValueError(f"delta must be None (pure-DP budget) or a number in (0, 1), got {delta!r}")
    return float(delta)


def check_cost(cost: PrivacyCost) -> None:
    if not isinstance(cost, PrivacyCost):
        raise ValueError(f"cost must be a PrivacyCost, got {type(cost).__name__}")
    if not cost.is_dp:
        return
    if not (isinstance(cost.rho, (int, float)) and math.isfinite(cost.rho) and cost.rho > 0):
        raise ValueError(f"a DP cost needs a finite rho > 0, got {cost.rho!r}")
    if cost.pure_epsilon is not None and not (math.isfinite(cost.pure_epsilon) and cost.pure_epsilon > 0):
        raise ValueError(f"pure_epsilon must be None or a finite number > 0, got {cost.pure_epsilon!r}")
    extra = cost.extra_delta
    if not (isinstance(extra, (int, float)) and math.isfinite(extra) and 0 <= extra < 1):
        raise ValueError(f"extra_delta must be a number in [0, 1), got {cost.extra_delta!r}")
    if cost.pure_epsilon is not None and cost.extra_delta > 0:
        raise ValueError("a pure-DP cost has no additive delta (extra_delta must be 0)")



def total_rho(costs: Sequence[PrivacyCost]) -> float:
    """zCDP composition: rho adds (inf if any part has no DP guarantee)."""
    if any(not c.is_dp for c in costs):
        return math.inf
    return math.fsum(c.rho for c in costs)


def total_extra_delta(costs: Sequence[PrivacyCost]) -> float:
    """Approximate zCDP composition: the additive deltas add."""
    return math.fsum(c.extra_delta for c in costs if c.is_dp)


def total_pure_epsilon(costs: Sequence[PrivacyCost]) -> float | None:
    """Pure composition: epsilons add; None unless every part is pure."""
    pures = [c.pure_epsilon for c in costs if c.is_dp and c.pure_epsilon is not None]
    return math.fsum(pures) if len(pures) == len(costs) else None


def _splits(costs: Sequence[PrivacyCost]) -> Iterator[tuple[float, float]]:
    """(pure epsilon sum, zCDP rho sum) for each way of accounting the k largest pure charges in
    pure epsilon and everything else in zCDP, k = 0 .. number of pure charges."""
    # (pure epsilon, rho) of each pure charge, largest epsilon first (a stable sort: ties keep their order)
    pure = sorted(((c.pure_epsilon, c.rho) for c in costs if c.pure_epsilon is not None), key=lambda p: p[0],
                  reverse=True)
    zcdp_only = [c.rho for c in costs if c.pure_epsilon is None]
    for k in range(len(pure) + 1):
        yield math.fsum(eps for eps, _ in pure[:k]), math.fsum([*zcdp_only, *(rho for _, rho in pure[k:])])


def epsilon_spent(costs: Sequence[PrivacyCost], delta: float | None) -> float:
    """The epsilon the composed charges have spent at ``delta`` (the module docstring states the rule).

    delta None: pure epsilon, inf unless every charge is pure. inf whenever a charge is not DP.
    With a delta: the minimum over the splits of ``_splits`` of
        pure_sum + epsilon_from_rho(rho_sum, delta)
    Each split is a valid bound (the pure part is (pure_sum, 0)-DP, the rest is
    (epsilon_from_rho(rho_sum, delta), delta)-DP, and basic composition adds them); k = 0 is the
    plain zCDP composition of every charge and k = all is pure composition.
    """
    if not costs:
        return 0.0
    if any(not c.is_dp for c in costs):
        return math.inf
    if delta is None:
        pure = total_pure_epsilon(costs)
        return math.inf if pure is None else pure
    extra = total_extra_delta(costs)
    return min(pure_sum + (epsilon_from_rho_beside(rho, delta, extra) if rho > 0 else 0.0)
               for pure_sum, rho in _splits(costs))


def remaining_rho(costs: Sequence[PrivacyCost], epsilon: float, delta: float) -> float:
    """The largest rho of one more zCDP charge that still fits the (epsilon, delta) budget."""
    if any(not c.is_dp for c in costs):
        return 0.0
    zcdp_delta = delta - total_extra_delta(costs)
    if zcdp_delta <= 0:
        return 0.0
    best = 0.0
    for pure_sum, rho in _splits(costs):
        if pure_sum < epsilon:
            best = max(best, rho_allowance(epsilon - pure_sum, zcdp_delta) - rho)
    return best


def fits_budget(costs: Sequence[PrivacyCost], epsilon: float, delta: float | None) -> bool:
    """True iff the composed charges stay within the (epsilon, delta) allowance (relative slack TOLERANCE)."""
    return epsilon_spent(costs, delta) <= epsilon * (1.0 + TOLERANCE)


def rho_allowance(epsilon: float, delta: float) -> float:
    """The largest total rho with epsilon_from_rho(rho, delta) <= epsilon (tight conversion, inverted)."""
    epsilon = check_epsilon(epsilon)
    checked_delta = check_budget_delta(delta)
    if checked_delta is None:
        raise ValueError("rho_allowance needs a delta")
    delta = checked_delta

    def excess(rho: float) -> float:
        return epsilon_from_rho(rho, delta) - epsilon

    # epsilon_from_rho is increasing in rho; bracket the root by doubling.
    lo, hi = 1e-300, max(epsilon, 1e-12)
    while excess(hi) < 0:
        lo, hi = hi, hi * 2.0
    if excess(lo) >= 0:
        return lo
    root = brentq(excess, lo, hi, xtol=1e-15, rtol=1e-12)
    # Never grant more than asked: the conversion of the allowance is at most epsilon, not epsilon plus
    # a rounding error (a request of 1 must not be stated as 1.000000000000001).
    while excess(root) > 0:
        root *= 1.0 - 1e-12
    return float(root)


WHY_EPSILONS_DO_NOT_SUBTRACT = (
    "epsilons do not subtract: the ledger adds the runs' rho (zCDP) and converts the sum to one epsilon, which grows "
    "more slowly than the runs' epsilons added up, so one more run may spend more than 'budget minus spent'")


def next_run_epsilon(costs: Sequence[PrivacyCost], epsilon: float, delta: float | None) -> float:
    """The largest epsilon one more run may spend on this (epsilon, delta) budget: a run at the budget's delta,
    charged as ``rho_allowance(e, delta)`` (every zCDP mechanism; a run with a schema), so it fits iff its rho is
    at most ``remaining_rho``. A pure budget: what the pure charges leave (pure epsilons add). 0 when nothing fits.
    """
    if any(not c.is_dp for c in costs):
        return 0.0
    if delta is None:
        pure = total_pure_epsilon(costs)
        return 0.0 if pure is None else max(epsilon - pure, 0.0)
    left = remaining_rho(costs, epsilon, delta)
    return epsilon_from_rho(left, delta) if left > 0 else 0.0

