"""Privacy accounting of private sampling (Boedihardjo, Strohmer & Vershynin, [PS] section 12;
spec docs/specs/private_sampling.md sections 1.3 and 3).

Releasing k i.i.d. draws from a density h(X) on the reduced space S is (k * L)-DP whenever every
ratio h(X1)_i / h(X2)_i over neighbours is at most e^L (Private Sampling Lemma, [PS] Lemma 3.3).
Two valid bounds on that ratio are combined here:

* **Box (always valid).** h* lies in [delta/m, Delta/m]^S for every dataset, so the ratio is at most
  Delta/delta: one draw costs ln(Delta/delta), whatever n, p, m and whatever the solver did, as long
  as the released density is in that box (the mechanism enforces it by clipping).
* **Theorem 12.2 (Lemma 12.1).** If S is well conditioned and the datasets have at least n rows,
  ||h*_1 - h*_2||_inf <= eta, so the ratio is at most 1 + eta m / delta, with
      eta = 4 sqrt(2) Delta^{3/2} e^{d/2} N^{1/4} / (sqrt(delta n) m^{1/4})        (Lemma 12.1).
  The paper then uses 1 + x <= e^x (eps = k eta m / delta); we keep ln(1 + x), which is also valid.

**Conservative constant (spec section 1.3 flag).** Lemma 10.1 is stated with 4 max(dist(r,K1),
dist(r,K2)), but completing its rendered proof gives 18 max(...). ``conservative=True`` (the
default everywhere in the mechanism) uses 18: eta grows by sqrt(18/4) = sqrt(4.5) ~ 2.12, so the
Theorem 12.2 k-bound shrinks by sqrt(2)/3 ~ 0.471. ``conservative=False`` gives the paper's figures
(used to reproduce its tables).

**Where the Theorem 12.2 path applies.** Lemma 12.1 instantiates Lemmas 10.4 and 11.3 with
a = 2 delta/m, b = (Delta - delta)/m, c = 1/m, which needs delta < 1/2, Delta + delta > 2 and
delta (4 Delta - 3) <= Delta; it also assumes exact LP/QP solutions. Outside that region, or when n
or p is not known, only the box bound is used. The box bound needs neither.

Combined accountant (spec section 1.3):  eps(k) = k * ln(min(Delta/delta, 1 + eta m / delta)).
For realistic n the box bound is the binding one.
"""

from __future__ import annotations

import math

LEMMA_10_1_PAPER = 4.0
LEMMA_10_1_CONSERVATIVE = 18.0

# The sampler draws from q / sum(q) with q clipped to the box and |sum(q)/m - 1| <= SUM_TOLERANCE
# (checked at run time), so a density ratio can exceed the exact bound by (1 + tol) / (1 - tol).
SUM_TOLERANCE = 1e-9


def numerical_slack(sum_tolerance: float = SUM_TOLERANCE) -> float:
    """Extra epsilon per draw for the normalisation of the released density: ln((1 + tol) / (1 - tol))."""
    if not 0 <= sum_tolerance < 1:
        raise ValueError(f"sum_tolerance must be in [0, 1), got {sum_tolerance!r}")
    return math.log1p(sum_tolerance) - math.log1p(-sum_tolerance)


def _positive(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def _positive_int(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return value


def _box(delta: float, Delta: float) -> tuple[float, float]:
    _positive("delta (box lower factor)", delta)
    _positive("Delta (box upper factor)", Delta)
    if not Delta > delta:
        raise ValueError(f"Delta must exceed delta, got delta={delta}, Delta={Delta}")
    return float(delta), float(Delta)


def binom_le(p: int, d: int) -> int:
    """N = binom(p, <= d) = sum_{j <= d} C(p, j)."""
    if isinstance(p, bool) or isinstance(d, bool) or p < 0 or d < 0:
        raise ValueError(f"p and d must be integers >= 0, got p={p!r}, d={d!r}")
    return sum(math.comb(p, j) for j in range(min(p, d) + 1))


def lemma_12_1_applicable(delta: float, Delta: float) -> bool:
    """The box parameters for which Lemma 12.1's instantiation of Lemmas 10.4 and 11.3 is valid."""
    delta, Delta = _box(delta, Delta)
    return delta < 0.5 and Delta + delta > 2.0 and delta * (4.0 * Delta - 3.0) <= Delta


def well_conditioning_threshold(m: int, d: int) -> float:
    """[PS] (9.1): S is well conditioned iff s_min(M) >= sqrt(m) / (2 e^d)."""
    _positive_int("m", m)
    return math.sqrt(m) / (2.0 * math.exp(d))


def eta_lemma_12_1(n: float, m: int, p: int, d: int, delta: float, Delta: float,
                   conservative: bool = True, s_min: float | None = None) -> float:
    """Lemma 12.1: sup-norm sensitivity of h* between neighbours with at least n rows.

    eta = sqrt(C/4) * 4 sqrt(2) Delta^{3/2} e^{d/2} N^{1/4} / (sqrt(delta n) m^{1/4}), C = 4 (paper) or
    18 (conservative). With a known s_min(M) (data-independent) the factor sqrt(m)/(2e^d) in the chain is
    replaced by s_min: eta = sqrt(C/4) * 4 Delta^{3/2} N^{1/4} / sqrt(delta n s_min).
    """
    _positive("n", n)
    _positive_int("m", m)
    delta, Delta = _box(delta, Delta)
    N = binom_le(p, d)
    factor = math.sqrt((LEMMA_10_1_CONSERVATIVE if conservative else LEMMA_10_1_PAPER) / 4.0)
    if s_min is None:
        core = 4.0 * math.sqrt(2.0) * Delta ** 1.5 * math.exp(d / 2.0) * N ** 0.25 / (math.sqrt(delta * n) * m ** 0.25)
    else:
        threshold = well_conditioning_threshold(m, d)
        if s_min < threshold:
            raise ValueError(f"s_min={s_min} is below the well-conditioning threshold {threshold}; Lemma 12.1 does not "
                             "apply")
        core = 4.0 * Delta ** 1.5 * N ** 0.25 / math.sqrt(delta * n * s_min)
    return factor * core


def k_bound_theorem_12_2(epsilon: float, n: float, m: int, p: int, d: int, delta: float, Delta: float,
                         conservative: bool = True) -> float:
    """Theorem 12.2's real-valued bound on k (not floored):
    (1/(4 sqrt 2)) eps (delta/Delta)^{3/2} e^{-d/2} N^{-1/4} sqrt(n) / m^{3/4}, times sqrt(2)/3 if conservative."""
    _positive("epsilon", epsilon)
    return epsilon * delta / (m * eta_lemma_12_1(n, m, p, d, delta, Delta, conservative))


def k_max_theorem_12_2(epsilon: float, n: float, m: int, p: int, d: int, delta: float, Delta: float,
                       conservative: bool = True) -> int:
    """The largest k Theorem 12.2 allows: k with k * eta m / delta <= eps."""
    k = math.floor(k_bound_theorem_12_2(epsilon, n, m, p, d, delta, Delta, conservative))
    while k > 0 and epsilon_theorem_12_2(k, n, m, p, d, delta, Delta, conservative) > epsilon:
        k -= 1  # floating-point guard: the returned k never overspends
    return k


def epsilon_theorem_12_2(k: int, n: float, m: int, p: int, d: int, delta: float, Delta: float,
                         conservative: bool = True) -> float:
    """The paper's epsilon for k draws: k * eta * m / delta (proof of Thm 12.2)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValueError(f"k must be an integer >= 0, got {k!r}")
    return k * eta_lemma_12_1(n, m, p, d, delta, Delta, conservative) * m / delta


def per_sample_epsilon_box(delta: float, Delta: float) -> float:
    """ln(Delta/delta): the always-valid cost of one draw."""
    delta, Delta = _box(delta, Delta)
    return math.log(Delta / delta)


def epsilon_box(k: int, delta: float, Delta: float) -> float:
    """k * ln(Delta/delta): always valid, for any n, p, m, S and neighbour relation."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValueError(f"k must be an integer >= 0, got {k!r}")
    return k * per_sample_epsilon_box(delta, Delta)


def k_max_box(epsilon: float, delta: float, Delta: float) -> int:
    """The largest k with k * ln(Delta/delta) <= eps."""
    _positive("epsilon", epsilon)
    per = per_sample_epsilon_box(delta, Delta)
    k = math.floor(epsilon / per)
    while k > 0 and k * per > epsilon:
        k -= 1
    return k


def per_sample_epsilon(delta: float, Delta: float, n: float | None = None, m: int | None = None,
                       p: int | None = None, d: int | None = None, conservative: bool = True,
                       slack: float = 0.0) -> tuple[float, str]:
    """The cost of one draw under the combined accountant, and which bound gave it ("box" or "theorem_12_2").

    ln(min(Delta/delta, 1 + eta m / delta)) + slack; the Theorem 12.2 term is used only when n, m, p, d
    are all given and ``lemma_12_1_applicable(delta, Delta)``. ``slack`` is the numerical allowance
    (``numerical_slack()`` in the mechanism, 0 for the paper's exact figures).
    """
    if not (math.isfinite(slack) and slack >= 0):
        raise ValueError(f"slack must be a finite number >= 0, got {slack!r}")
    box = per_sample_epsilon_box(delta, Delta)
    if n is None or m is None or p is None or d is None or not lemma_12_1_applicable(delta, Delta):
        return box + slack, "box"
    theorem = math.log1p(eta_lemma_12_1(n, m, p, d, delta, Delta, conservative) * m / delta)
    return (theorem + slack, "theorem_12_2") if theorem < box else (box + slack, "box")


def epsilon_combined(k: int, delta: float, Delta: float, n: float | None = None, m: int | None = None,
                     p: int | None = None, d: int | None = None, conservative: bool = True,
                     slack: float = 0.0) -> float:
    """eps(k) = k * (ln(min(Delta/delta, 1 + eta m / delta)) + slack) (spec section 1.3)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValueError(f"k must be an integer >= 0, got {k!r}")
    return k * per_sample_epsilon(delta, Delta, n, m, p, d, conservative, slack)[0]


def k_max_combined(epsilon: float, delta: float, Delta: float, n: float | None = None, m: int | None = None,
                   p: int | None = None, d: int | None = None, conservative: bool = True,
                   slack: float = 0.0) -> int:
    """The largest k with epsilon_combined(k) <= eps."""
    _positive("epsilon", epsilon)
    per, _ = per_sample_epsilon(delta, Delta, n, m, p, d, conservative, slack)
    k = math.floor(epsilon / per)
    while k > 0 and k * per > epsilon:
        k -= 1
    return k


def n_needed_theorem_12_2(k: int, epsilon: float, m: int, p: int, d: int, delta: float, Delta: float,
                          conservative: bool = True) -> float:
    """The smallest n for which Theorem 12.2 (paper form, eps = k eta m / delta) allows k draws."""
    _positive_int("k", k)
    _positive("epsilon", epsilon)
    eta_at_n1 = eta_lemma_12_1(1.0, m, p, d, delta, Delta, conservative)  # eta = eta_at_n1 / sqrt(n)
    return (k * eta_at_n1 * m / (delta * epsilon)) ** 2


def n_needed_combined(k: int, epsilon: float, m: int, p: int, d: int, delta: float, Delta: float,
                      conservative: bool = True, slack: float = 0.0) -> float | None:
    """The smallest public n for which the combined accountant allows k draws.

    0 when the box bound alone allows them (any n works); None when even n -> infinity cannot help
    (never: the Theorem 12.2 cost tends to 0, unless Lemma 12.1 does not apply to the box).
    """
    _positive_int("k", k)
    _positive("epsilon", epsilon)
    if k * (per_sample_epsilon_box(delta, Delta) + slack) <= epsilon:
        return 0.0
    if not lemma_12_1_applicable(delta, Delta) or epsilon / k <= slack:
        return None
    # ln(1 + eta m / delta) + slack <= eps / k  <=>  eta <= delta (e^{eps/k - slack} - 1) / m,  eta = eta_1 / sqrt(n)
    eta_at_n1 = eta_lemma_12_1(1.0, m, p, d, delta, Delta, conservative)
    return (eta_at_n1 * m / (delta * math.expm1(epsilon / k - slack))) ** 2
