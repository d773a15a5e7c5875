"""Privacy accounting against hand-computed values, an independent brute force and OpenDP's converter."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privsynth.privacy.accounting import (
    PrivacyCost,
    compose,
    epsilon_from_rho,
    epsilon_from_rho_classic,
    rho_from_epsilon_delta,
    rho_from_pure_epsilon,
)

ADULT_DELTA = 1.0 / 48842**2
LOANS_DELTA = 1.0 / 42535**2

# spec rap.md section 7.1 item 1 (values computed by the spec's author, quoted to 7 digits).
SPEC_TABLE = [
    (0.05, 2.891151e-05, 2.928613e-05),
    (0.10, 1.155126e-04, 1.170076e-04),
    (0.15, 2.596039e-04, 2.629598e-04),
    (0.20, 4.609872e-04, 4.669396e-04),
    (0.25, 7.194655e-04, 7.287446e-04),
    (0.50, 2.861463e-03, 2.898155e-03),
    (1.00, 1.131741e-02, 1.146090e-02),
]


def brute_force_tight_epsilon(rho: float, delta: float) -> float:
    """min over a fine log-spaced alpha grid of the CKS 2020 Prop. 12 bound, written out independently:
    delta = exp((a-1)(a rho - eps)) / (a-1) * (1 - 1/a)^a, solved for eps."""
    alpha = 1.0 + np.logspace(-8, 8, 400_001)
    log_delta = math.log(delta)
    eps = alpha * rho + (alpha * np.log(1.0 - 1.0 / alpha) - np.log(alpha - 1.0) - log_delta) / (alpha - 1.0)
    return float(eps.min())


# ---------------------------------------------------------------- (eps, delta) -> rho

@pytest.mark.parametrize("epsilon, delta, expected", [(1.0, 1e-5, 2.08199383e-02), (1.0, 1e-6, 1.74689048e-02)])
def test_rho_from_epsilon_delta_generic_values(epsilon, delta, expected):
    assert rho_from_epsilon_delta(epsilon, delta) == pytest.approx(expected, rel=1e-8)


@pytest.mark.parametrize("epsilon, rho_adult, rho_loans", SPEC_TABLE)
def test_rho_from_epsilon_delta_spec_table(epsilon, rho_adult, rho_loans):
    assert rho_from_epsilon_delta(epsilon, ADULT_DELTA) == pytest.approx(rho_adult, rel=1e-6)
    assert rho_from_epsilon_delta(epsilon, LOANS_DELTA) == pytest.approx(rho_loans, rel=1e-6)


@pytest.mark.parametrize("epsilon", [1e-3, 0.05, 0.5, 1.0, 3.0, 10.0, 100.0])
@pytest.mark.parametrize("delta", [1e-12, ADULT_DELTA, 1e-6, 1e-3, 0.5])
def test_classic_round_trip(epsilon, delta):
    rho = rho_from_epsilon_delta(epsilon, delta)
    assert epsilon_from_rho_classic(rho, delta) == pytest.approx(epsilon, rel=1e-12)


def test_rho_from_pure_epsilon():
    assert rho_from_pure_epsilon(1) == 0.5
    assert rho_from_pure_epsilon(0.2) == pytest.approx(0.02, rel=1e-15)


# ---------------------------------------------------------------- tight conversion

def test_tight_hand_checked_value():
    # rho = 0.5, delta = 1e-6: the optimum is at alpha ~ 5.907; OpenDP's make_zCDP_to_approxDP and a
    # 400k-point alpha grid both give 5.2215344445 (the classic bound gives 0.5 + 2 sqrt(0.5 ln 1e6) = 5.7565).
    assert epsilon_from_rho(0.5, 1e-6) == pytest.approx(5.2215344445, abs=1e-9)
    assert epsilon_from_rho_classic(0.5, 1e-6) == pytest.approx(0.5 + 2 * math.sqrt(0.5 * math.log(1e6)), rel=1e-15)


@pytest.mark.parametrize("rho", [1e-6, 1e-4, 2.08199383e-02, 0.1, 0.5, 2.0, 10.0])
@pytest.mark.parametrize("delta", [1e-12, ADULT_DELTA, 1e-5, 1e-2])
def test_tight_matches_brute_force_and_beats_classic(rho, delta):
    tight = epsilon_from_rho(rho, delta)
    brute = brute_force_tight_epsilon(rho, delta)
    classic = epsilon_from_rho_classic(rho, delta)
    assert tight <= classic + 1e-15
    # The grid minimum is >= the true infimum; the solver may only be slack by its tolerance.
    assert tight <= max(brute, 0.0) * (1 + 1e-9)
    assert tight == pytest.approx(max(brute, 0.0), rel=1e-6, abs=1e-12)
    assert tight >= 0


def test_tight_is_floored_at_zero():
    # rho = 1e-6 at delta = 0.01: the CKS infimum is about -0.0023; a negative epsilon is meaningless.
    assert brute_force_tight_epsilon(1e-6, 1e-2) < 0
    assert epsilon_from_rho(1e-6, 1e-2) == 0.0


def test_tight_matches_opendp():
    dp = pytest.importorskip("opendp.prelude")
    dp.enable_features("contrib")
    for rho in (1e-3, 0.05, 0.5, 3.0):
        # A Gaussian with scale s on sensitivity 1 is (1 / (2 s^2))-zCDP.
        scale = math.sqrt(1.0 / (2.0 * rho))
        gauss = dp.m.make_gaussian(dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale=scale)
        profile = dp.c.make_zCDP_to_approxDP(gauss).map(1.0)
        for delta in (1e-9, 1e-6, 1e-3):
            assert epsilon_from_rho(rho, delta) == pytest.approx(profile.epsilon(delta), rel=1e-7)


def test_tight_round_trip_is_below_requested_epsilon():
    # RAP picks rho from the classic inverse, so the tight epsilon actually spent is at most the request.
    for epsilon in (0.1, 1.0, 5.0):
        rho = rho_from_epsilon_delta(epsilon, ADULT_DELTA)
        assert epsilon_from_rho(rho, ADULT_DELTA) < epsilon


def test_tight_is_monotone():
    eps_by_rho = [epsilon_from_rho(r, 1e-6) for r in np.geomspace(1e-5, 10, 25)]
    assert all(b > a for a, b in zip(eps_by_rho, eps_by_rho[1:]))
    eps_by_delta = [epsilon_from_rho(0.1, d) for d in np.geomspace(1e-12, 0.1, 25)]
    assert all(b < a for a, b in zip(eps_by_delta, eps_by_delta[1:]))


# ---------------------------------------------------------------- PrivacyCost and composition

def test_compose_adds_rho_and_pure_epsilon():
    a, b = PrivacyCost.pure(0.5, "a"), PrivacyCost.pure(0.25, "b")
    total = compose([a, b])
    assert total.pure_epsilon == pytest.approx(0.75)
    assert total.rho == pytest.approx(0.5**2 / 2 + 0.25**2 / 2)
    assert total.guarantee == "a; b"

    mixed = compose([a, PrivacyCost.zcdp(0.01, "z")])
    assert mixed.pure_epsilon is None
    assert mixed.rho == pytest.approx(0.125 + 0.01)
    assert mixed.is_dp


def test_compose_with_non_private_is_not_private():
    total = compose([PrivacyCost.pure(1.0, "a"), PrivacyCost.not_private("k-anon")])
    assert not total.is_dp
    assert total.epsilon_at(1e-6) == math.inf
    assert total.report(1e-6)["differentially_private"] is False


def test_compose_needs_a_cost():
    with pytest.raises(ValueError, match="at least one"):
        compose([])


def test_epsilon_at_uses_min_of_pure_and_converted():
    # Small pure epsilon: the pure bound is the smaller one.
    small = PrivacyCost.pure(0.1, "pure")
    assert small.epsilon_at(1e-6) == pytest.approx(0.1)
    # At a lax delta the zCDP conversion of eps^2/2 is the smaller one (eps = 1, delta = 0.5: ~0.189).
    one = PrivacyCost.pure(1.0, "pure")
    converted = epsilon_from_rho(0.5, 0.5)
    assert converted < 1.0
    assert one.epsilon_at(0.5) == pytest.approx(converted)
    assert one.epsilon_at(1e-6) == pytest.approx(1.0)
    zc = PrivacyCost.zcdp(0.5, "z")
    assert zc.epsilon_at(1e-6) == pytest.approx(epsilon_from_rho(0.5, 1e-6))


def test_report_fields():
    report = PrivacyCost.pure(1.0, "pure 1-DP", notes=("n",)).report(1e-6)
    assert report["differentially_private"] is True
    assert report["pure_epsilon"] == 1.0
    assert report["rho_zcdp"] == 0.5
    assert report["delta"] == 1e-6
    assert report["epsilon_at_delta"] == pytest.approx(1.0)
    assert report["notes"] == ["n"]


# ---------------------------------------------------------------- input validation

BAD_POSITIVE = [0, 0.0, -1.0, float("nan"), float("inf"), True, "1", None]
BAD_DELTA = [0, 0.0, 1, 1.0, -1e-6, 1.5, float("nan"), float("inf"), True, False, "1e-6", None]


@pytest.mark.parametrize("bad", BAD_POSITIVE)
def test_bad_epsilon_rejected(bad):
    with pytest.raises(ValueError, match="epsilon"):
        rho_from_pure_epsilon(bad)
    with pytest.raises(ValueError, match="epsilon"):
        rho_from_epsilon_delta(bad, 1e-6)
    with pytest.raises(ValueError, match="epsilon"):
        PrivacyCost.pure(bad, "x")


@pytest.mark.parametrize("bad", BAD_POSITIVE)
def test_bad_rho_rejected(bad):
    with pytest.raises(ValueError, match="rho"):
        epsilon_from_rho(bad, 1e-6)
    with pytest.raises(ValueError, match="rho"):
        epsilon_from_rho_classic(bad, 1e-6)
    with pytest.raises(ValueError, match="rho"):
        PrivacyCost.zcdp(bad, "x")


@pytest.mark.parametrize("bad", BAD_DELTA)
def test_bad_delta_rejected(bad):
    for call in (lambda: rho_from_epsilon_delta(1.0, bad), lambda: epsilon_from_rho(0.1, bad),
                 lambda: epsilon_from_rho_classic(0.1, bad), lambda: PrivacyCost.zcdp(0.1, "z").epsilon_at(bad)):
        with pytest.raises(ValueError, match="delta"):
            call()


def test_numpy_scalars_accepted():
    assert rho_from_pure_epsilon(np.float64(1.0)) == 0.5
    assert rho_from_pure_epsilon(np.int64(1)) == 0.5
    assert rho_from_pure_epsilon(np.float32(0.5)) == 0.125
    assert rho_from_epsilon_delta(np.float32(1.0), np.float64(1e-5)) == pytest.approx(2.08199383e-02, rel=1e-7)
    with pytest.raises(ValueError, match="epsilon"):
        rho_from_pure_epsilon(np.bool_(True))
    assert epsilon_from_rho(np.float64(0.5), np.float64(1e-6)) == pytest.approx(5.2215344445, abs=1e-9)


@pytest.mark.parametrize("epsilon", [0.1, 0.3, 1.0, 3.0, 10.0])
@pytest.mark.parametrize("delta", [1e-9, 1e-6, 1e-5])
def test_the_allowance_never_converts_above_the_request_and_reads_as_the_request(epsilon, delta):
    # Found on a first run: privacy.json said epsilon_at_delta 1.000000000000001 for a request of 1.
    from privsynth.privacy.spending import rho_allowance

    rho = rho_allowance(epsilon, delta)
    assert epsilon_from_rho(rho, delta) <= epsilon
    assert epsilon_from_rho(rho, delta) == pytest.approx(epsilon, rel=1e-9)
    assert PrivacyCost.zcdp(rho, "g").report(delta)["epsilon_at_delta"] == epsilon


def test_additive_deltas_compose_inside_the_budgets_delta():
    """Approximate zCDP (categorical thresholds): rhos add, additive deltas add, and the zCDP part is
    converted at the budget's delta less their sum; a pure cost carries none."""
    from privsynth.privacy.accounting import PrivacyCost, epsilon_from_rho
    from privsynth.privacy.spending import check_cost, epsilon_spent, fits_budget, remaining_rho

    delta = 1e-6
    a = PrivacyCost.zcdp(0.02, "a", extra_delta=1e-9)
    b = PrivacyCost.zcdp(0.03, "b", extra_delta=2e-9)
    assert a.epsilon_at(delta) == pytest.approx(epsilon_from_rho(0.02, delta - 1e-9))
    assert epsilon_spent([a, b], delta) == pytest.approx(epsilon_from_rho(0.05, delta - 3e-9))
    assert epsilon_spent([a, b], delta) > epsilon_spent([PrivacyCost.zcdp(0.05, "plain")], delta)
    assert PrivacyCost.zcdp(0.1, "c", extra_delta=delta).epsilon_at(delta) == math.inf
    eps = epsilon_spent([a, b], delta)
    assert fits_budget([a, b], eps, delta) and not fits_budget([a, b], eps * 0.999, delta)
    assert remaining_rho([a], 1.0, delta) == pytest.approx(
        remaining_rho([PrivacyCost.zcdp(0.02, "x")], 1.0, delta - 1e-9), rel=1e-9)
    with pytest.raises(ValueError, match="additive delta"):
        check_cost(PrivacyCost(rho=0.5, pure_epsilon=1.0, extra_delta=1e-9))
