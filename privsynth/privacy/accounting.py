"""Privacy accounting in one currency: rho-zCDP, with pure epsilon kept where it applies.

All functions are pure and validated; the tests check them against hand-computed values.

Conversions used (Bun & Steinke 2016; Canonne, Kamath & Steinke 2020):
* pure eps-DP  =>  (eps^2 / 2)-zCDP; the exponential mechanism (bounded range)  =>  (eps^2 / 8)-zCDP.
* noise for a cost: Gaussian sigma = Delta_2 / sqrt(2 rho), Laplace b = Delta_1 / eps, Gumbel (noisy max)
  b = 2 Delta / eps. Every module calls these functions; tests/test_privacy_arithmetic.py fails when one
  writes such a conversion out.
* rho-zCDP     =>  (eps, delta)-DP with the *tight* conversion
      eps(rho, delta) = inf_{a > 1}  a*rho + (ln(1/delta) + (a-1) ln(1 - 1/a) - ln a) / (a - 1)
  which is never larger than the classic  rho + 2 sqrt(rho ln(1/delta)).
* RAP's paper (Aydore et al. 2021, Alg. 2) turns a requested (eps, delta) into rho by inverting the
  classic bound: rho = (sqrt(ln(1/delta) + eps) - sqrt(ln(1/delta)))^2.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import minimize_scalar

# The delta of every (epsilon, delta) statement unless the user picks another: far below 1/n for any
# table privsynth is meant for, and the delta a budget set without one takes.
DEFAULT_DELTA = 1e-9


def _is_real(value: object) -> bool:
    # numbers.Real admits numpy scalars (np.int64, np.float32 ...); bool is a number to Python, not to us.
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _check_positive(name: str, value: float) -> float:
    """The value as a Python float (a float32 would silently lower the precision of the math below)."""
    if not _is_real(value) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def _check_delta(delta: float) -> float:
    if not _is_real(delta) or not (0 < delta < 1):
        raise ValueError(f"delta must be a number in (0, 1), got {delta!r}")
    return float(delta)


def rho_from_pure_epsilon(epsilon: float) -> float:
    """A pure eps-DP release is (eps^2/2)-zCDP."""
    epsilon = _check_positive("epsilon", epsilon)
    return epsilon * epsilon / 2.0


def gaussian_sigma(rho: float, l2_sensitivity: float = 1.0) -> float:
    """Noise of the Gaussian mechanism that is rho-zCDP: sigma = Delta_2 / sqrt(2 rho).

    Adding N(0, sigma^2) to each coordinate of a statistic of L2 sensitivity Delta_2 is
    Delta_2^2 / (2 sigma^2)-zCDP (Bun & Steinke 2016, Prop. 1.6); this sigma makes that exactly rho.
    m releases of sensitivity 1 at rho each are one release of sensitivity sqrt(m) at m rho.
    Computed as sqrt(Delta_2^2 / (2 rho)), the form the modules wrote before (same floats).
    """
    rho = _check_positive("rho", rho)
    l2_sensitivity = _check_positive("l2_sensitivity", l2_sensitivity)
    return math.sqrt(l2_sensitivity**2 / (2.0 * rho))


def gaussian_rho(sigma: float, l2_sensitivity: float = 1.0) -> float:
    """zCDP cost of the Gaussian mechanism: rho = Delta_2^2 / (2 sigma^2) (inverse of ``gaussian_sigma``)."""
    sigma = _check_positive("sigma", sigma)
    l2_sensitivity = _check_positive("l2_sensitivity", l2_sensitivity)
    return l2_sensitivity**2 / (2.0 * sigma**2)


def exponential_rho(epsilon: float) -> float:
    """zCDP cost of one eps-DP exponential mechanism (report-noisy-max): rho = eps^2 / 8.

    The exponential mechanism has bounded range, so eps-DP implies eps^2/8-zCDP (Cesar & Rogers 2021),
    four times less than the eps^2/2 of a general pure eps-DP release (``rho_from_pure_epsilon``).
    """
    epsilon = _check_positive("epsilon", epsilon)
    return epsilon**2 / 8.0


def exponential_epsilon(rho: float) -> float:
    """The eps of an exponential mechanism that is rho-zCDP: eps = sqrt(8 rho) (inverse of ``exponential_rho``)."""
    rho = _check_positive("rho", rho)
    return math.sqrt(8.0 * rho)


def noisy_max_scale(epsilon: float, sensitivity: float = 1.0) -> float:
    """Gumbel scale b = 2 Delta / eps of report-noisy-max over scores of sensitivity Delta: the
    eps-DP exponential mechanism (McSherry & Talwar 2007), so exponential_rho(eps)-zCDP."""
    epsilon = _check_positive("epsilon", epsilon)
    sensitivity = _check_positive("sensitivity", sensitivity)
    return 2.0 * sensitivity / epsilon


def gumbel_scale(rho: float, sensitivity: float = 1.0) -> float:
    """Gumbel scale of report-noisy-max that is rho-zCDP: ``noisy_max_scale`` at eps = ``exponential_epsilon(rho)``,
    b = 2 Delta / sqrt(8 rho) = Delta / sqrt(2 rho): the Gaussian sigma at rho, computed as ``gaussian_sigma``
    (a mechanism measuring and selecting at one rho uses one scale for both)."""
    return gaussian_sigma(rho, sensitivity)


def laplace_scale(epsilon: float, l1_sensitivity: float = 1.0) -> float:
    """Scale b = Delta_1 / eps of the Laplace mechanism: Lap(b) noise on each coordinate of a statistic
    of L1 sensitivity Delta_1 is eps-DP (Dwork et al. 2006), so (eps^2/2)-zCDP."""
    epsilon = _check_positive("epsilon", epsilon)
    l1_sensitivity = _check_positive("l1_sensitivity", l1_sensitivity)
    return l1_sensitivity / epsilon


def laplace_epsilon(scale: float, l1_sensitivity: float = 1.0) -> float:
    """eps = Delta_1 / b of Lap(b) noise on a statistic of L1 sensitivity Delta_1 (inverse of ``laplace_scale``)."""
    scale = _check_positive("scale", scale)
    l1_sensitivity = _check_positive("l1_sensitivity", l1_sensitivity)
    return l1_sensitivity / scale


def noisy_max_epsilon(scale: float, sensitivity: float = 1.0) -> float:
    """eps = 2 Delta / b of report-noisy-max with Gumbel scale b over scores of sensitivity Delta (inverse of
    ``noisy_max_scale``); it is exponential_rho(eps) = Delta^2 / (2 b^2)-zCDP."""
    scale = _check_positive("scale", scale)
    sensitivity = _check_positive("sensitivity", sensitivity)
    return 2.0 * sensitivity / scale


def epsilon_from_rho_classic(rho: float, delta: float) -> float:
    """Classic conversion: rho-zCDP => (rho + 2 sqrt(rho ln(1/delta)), delta)-DP."""
    rho = _check_positive("rho", rho)
    delta = _check_delta(delta)
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


def rho_from_epsilon_delta(epsilon: float, delta: float) -> float:
    """Exact inverse of the classic conversion (RAP, Alg. 2 first line)."""
    epsilon = _check_positive("epsilon", epsilon)
    delta = _check_delta(delta)
    log_inv_delta = math.log(1.0 / delta)
    root = math.sqrt(log_inv_delta + epsilon) - math.sqrt(log_inv_delta)
    return root * root


def _tight_objective(alpha: float, rho: float, log_inv_delta: float) -> float:
    return alpha * rho + (log_inv_delta + (alpha - 1.0) * math.log1p(-1.0 / alpha) - math.log(alpha)) / (alpha - 1.0)


def epsilon_from_rho(rho: float, delta: float) -> float:
    """Tight conversion rho-zCDP => (eps, delta)-DP (Canonne-Kamath-Steinke 2020, Prop. 12).

    The objective is convex in alpha on (1, inf); we minimise it numerically in log(alpha - 1) and
    return min(tight, classic) so floating-point slack can only make the answer more conservative
    than the exact infimum by the solver's tolerance, never less than the classic bound allows.
    For tiny rho and a lax delta the infimum can be negative (a valid but meaningless statement);
    the result is floored at 0, since (eps, delta)-DP for eps < 0 implies (0, delta)-DP.
    """
    rho = _check_positive("rho", rho)
    delta = _check_delta(delta)
    log_inv_delta = math.log(1.0 / delta)

    def objective(log_alpha_minus_one: float) -> float:
        return _tight_objective(1.0 + math.exp(log_alpha_minus_one), rho, log_inv_delta)

    result = minimize_scalar(objective, bounds=(-20.0, 20.0), method="bounded", options={"xatol": 1e-10})
    return max(0.0, min(float(result.fun), epsilon_from_rho_classic(rho, delta)))


def epsilon_from_rho_beside(rho: float, delta: float, extra_delta: float) -> float:
    """epsilon of extra_delta-approximate rho-zCDP at ``delta``: the tight conversion at delta - extra_delta."""
    if extra_delta <= 0.0:
        return epsilon_from_rho(rho, delta)
    if delta <= extra_delta:
        return math.inf
    return epsilon_from_rho(rho, delta - extra_delta)


@dataclass(frozen=True)
class PrivacyCost:
    """What one release costs, stated from the configuration alone (never from data).

    rho: the zCDP cost (pure eps mechanisms carry eps^2/2 here).
    pure_epsilon: set when the release is pure eps-DP.
    is_dp: False only for releases with no DP guarantee (k-anonymous microaggregation).
    extra_delta: the additive delta of approximate zCDP (Bun and Steinke 2016): the release is
        rho-zCDP except on an event of probability at most extra_delta (categorical thresholds over the
        observed values). It is (epsilon_from_rho(rho, d), d + extra_delta)-DP for every d; such costs
        compose by adding rho and adding extra_delta.
    """

    rho: float
    pure_epsilon: float | None = None
    is_dp: bool = True
    guarantee: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)
    extra_delta: float = 0.0

    def epsilon_at(self, delta: float) -> float:
        """The (eps, delta)-DP epsilon at this delta: pure eps if smaller, else the tight zCDP conversion
        at delta less the additive delta (inf when the additive delta alone uses all of it)."""
        if not self.is_dp:
            return math.inf
        converted = epsilon_from_rho_beside(self.rho, delta, self.extra_delta)
        return converted if self.pure_epsilon is None else min(self.pure_epsilon, converted)

    @staticmethod
    def pure(epsilon: float, guarantee: str, notes: tuple[str, ...] = ()) -> PrivacyCost:
        return PrivacyCost(rho=rho_from_pure_epsilon(epsilon), pure_epsilon=float(epsilon), guarantee=guarantee,
                           notes=notes)

    @staticmethod
    def zcdp(rho: float, guarantee: str, notes: tuple[str, ...] = (), extra_delta: float = 0.0) -> PrivacyCost:
        rho = _check_positive("rho", rho)
        if not (math.isfinite(extra_delta) and 0.0 <= extra_delta < 1.0):
            raise ValueError(f"extra_delta must be a number in [0, 1), got {extra_delta!r}")
        return PrivacyCost(rho=rho, pure_epsilon=None, guarantee=guarantee, notes=notes, extra_delta=float(extra_delta))

    @staticmethod
    def not_private(guarantee: str, notes: tuple[str, ...] = ()) -> PrivacyCost:
        return PrivacyCost(rho=math.inf, pure_epsilon=None, is_dp=False, guarantee=guarantee, notes=notes)

    def report(self, delta: float) -> dict:
        """Public summary for privacy.json."""
        if not self.is_dp:
            return {"differentially_private": False, "guarantee": self.guarantee, "notes": list(self.notes)}
        return {
            "differentially_private": True,
            "guarantee": self.guarantee,
            "pure_epsilon": self.pure_epsilon,
            "rho_zcdp": self.rho,
            "delta": delta,
            "extra_delta": self.extra_delta,
            # Ten significant digits: the conversion of an allowance is at most the request, and a request of 1
            # reads 1, not 0.9999999999994791 (the unrounded value is epsilon_at(delta)).
            "epsilon_at_delta": float(f"{self.epsilon_at(delta):.10g}"),
            "conversion": "tight zCDP -> (eps, delta) (Canonne-Kamath-Steinke 2020)",
            "notes": list(self.notes),
        }


def compose(costs: list[PrivacyCost]) -> PrivacyCost:
    """Sequential composition: rho adds; pure epsilon adds when every part is pure."""
    if not costs:
        raise ValueError("compose needs at least one cost")
    if not all(c.is_dp for c in costs):
        return PrivacyCost.not_private("composition includes a non-DP release")
    rho = sum(c.rho for c in costs)
    pures = [c.pure_epsilon for c in costs if c.pure_epsilon is not None]
    pure = sum(pures) if len(pures) == len(costs) else None
    notes = tuple(n for c in costs for n in c.notes)
    return PrivacyCost(rho=rho, pure_epsilon=pure, guarantee="; ".join(c.guarantee for c in costs if c.guarantee),
                       notes=notes, extra_delta=math.fsum(c.extra_delta for c in costs))
