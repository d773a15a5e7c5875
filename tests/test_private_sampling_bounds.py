"""Privacy accounting of private sampling against hand-computed values (spec T13, T14, section 1.3)."""

import math

import pytest

from privsynth.mechanisms.private_sampling import bounds as b


def paper_k_bound(eps, n, m, p, d, delta, Delta):
    """Independent evaluation of Thm 12.2: (1/(4 sqrt2)) eps (delta/Delta)^{3/2} e^{-d/2} N^{-1/4} sqrt(n) m^{-3/4}."""
    N = sum(math.comb(p, j) for j in range(d + 1))
    return eps * (delta / Delta) ** 1.5 * math.exp(-d / 2) * N ** -0.25 * math.sqrt(n) * m ** -0.75 / (4 * math.sqrt(2))


def test_k_formula_at_fixed_point():  # T13
    args = dict(epsilon=1.0, n=1e12, m=422, p=20, d=2, delta=0.25, Delta=2.0)
    assert paper_k_bound(1.0, 1e12, 422, 20, 2, 0.25, 2.0) == pytest.approx(8.099e-6 * 1e6, rel=1e-3)
    assert b.k_bound_theorem_12_2(**args, conservative=False) == pytest.approx(paper_k_bound(1.0, 1e12, 422, 20, 2,
                                                                                             0.25, 2.0), rel=1e-12)
    assert b.k_max_theorem_12_2(**args, conservative=False) == 8
    # conservative Lemma 10.1 constant (18 instead of 4): the bound shrinks by sqrt(2)/3
    assert b.k_bound_theorem_12_2(**args) == pytest.approx(8.0994 * math.sqrt(2) / 3, rel=1e-3)
    assert b.k_max_theorem_12_2(**args) == 3


def test_eta_hand_value_and_s_min_form():
    # eta = 4 sqrt2 Delta^1.5 e^{d/2} N^{1/4} / (sqrt(delta n) m^{1/4}); p=10, d=2 -> N=56
    eta = 4 * math.sqrt(2) * 2 ** 1.5 * math.e * 56 ** 0.25 / (math.sqrt(0.25 * 2000) * 120 ** 0.25)
    assert b.eta_lemma_12_1(2000, 120, 10, 2, 0.25, 2.0, conservative=False) == pytest.approx(eta, rel=1e-12)
    assert b.eta_lemma_12_1(2000, 120, 10, 2, 0.25, 2.0) == pytest.approx(eta * math.sqrt(4.5), rel=1e-12)
    threshold = math.sqrt(120) / (2 * math.exp(2))
    assert b.well_conditioning_threshold(120, 2) == pytest.approx(threshold)
    assert b.eta_lemma_12_1(2000, 120, 10, 2, 0.25, 2.0, False, s_min=threshold) == pytest.approx(eta, rel=1e-12)
    assert b.eta_lemma_12_1(2000, 120, 10, 2, 0.25, 2.0, False, s_min=4 * threshold) == pytest.approx(eta / 2,
                                                                                                      rel=1e-12)
    with pytest.raises(ValueError):
        b.eta_lemma_12_1(2000, 120, 10, 2, 0.25, 2.0, s_min=threshold / 2)


def test_monotonicity_of_k_bound():  # T13
    base = dict(epsilon=1.0, n=1e12, m=422, p=20, d=2, delta=0.25, Delta=2.0)
    k0 = b.k_bound_theorem_12_2(**base)
    for key, factor, direction in [("epsilon", 2, 1), ("n", 2, 1), ("delta", 1.2, 1), ("Delta", 1.5, -1),
                                   ("m", 2, -1), ("p", 2, -1), ("d", 1.5, -1)]:
        args = dict(base)
        args[key] = type(base[key])(base[key] * factor) if key not in ("p", "d") else int(base[key] * factor)
        k1 = b.k_bound_theorem_12_2(**args)
        assert (k1 - k0) * direction > 0, key


def test_box_bound_hand_values():
    assert b.per_sample_epsilon_box(0.25, 2.0) == pytest.approx(math.log(8))
    assert b.epsilon_box(3, 0.25, 2.0) == pytest.approx(3 * math.log(8))
    assert b.k_max_box(1.0, 0.25, 2.0) == 0
    assert b.k_max_box(3.0, 0.25, 2.0) == 1
    assert b.k_max_box(3 * math.log(8), 0.25, 2.0) == 3
    assert b.numerical_slack() == pytest.approx(2e-9, rel=1e-6)


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0795, 3.0, 7.3, 50.0])
@pytest.mark.parametrize("n", [1e4, 1e12, 1e30])
def test_accounting_invariant(eps, n):  # T14
    common = dict(delta=0.25, Delta=2.0)
    k = b.k_max_theorem_12_2(eps, n, 422, 20, 2, **common)
    assert b.epsilon_theorem_12_2(k, n, 422, 20, 2, **common) <= eps < b.epsilon_theorem_12_2(k + 1, n, 422, 20, 2,
                                                                                              **common)
    k = b.k_max_box(eps, **common)
    assert b.epsilon_box(k, **common) <= eps < b.epsilon_box(k + 1, **common)
    slack = b.numerical_slack()
    k = b.k_max_combined(eps, n=n, m=422, p=20, d=2, slack=slack, **common)
    used = b.epsilon_combined(k, n=n, m=422, p=20, d=2, slack=slack, **common)
    assert used <= eps < b.epsilon_combined(k + 1, n=n, m=422, p=20, d=2, slack=slack, **common)


def test_combined_accountant_takes_the_smaller_bound():
    # realistic n: the box bound binds
    per, which = b.per_sample_epsilon(0.25, 2.0, n=48842, m=10208, p=50, d=2)
    assert which == "box" and per == pytest.approx(math.log(8))
    # astronomically large n: Theorem 12.2 binds, with ln(1 + eta m / delta)
    eta = b.eta_lemma_12_1(1e40, 422, 20, 2, 0.25, 2.0)
    per, which = b.per_sample_epsilon(0.25, 2.0, n=1e40, m=422, p=20, d=2)
    assert which == "theorem_12_2" and per == pytest.approx(math.log1p(eta * 422 / 0.25), rel=1e-12)
    assert b.k_max_combined(1.0, 0.25, 2.0, n=1e40, m=422, p=20, d=2) >= b.k_max_theorem_12_2(1.0, 1e40, 422, 20, 2,
                                                                                              0.25, 2.0)
    # unknown n: only the box bound
    assert b.per_sample_epsilon(0.25, 2.0, n=None, m=422, p=20, d=2)[1] == "box"
    # a box outside Lemma 12.1's region: only the box bound
    assert not b.lemma_12_1_applicable(0.45, 1.4)
    assert b.per_sample_epsilon(0.45, 1.4, n=1e40, m=422, p=20, d=2)[1] == "box"


def test_lemma_12_1_region():
    assert b.lemma_12_1_applicable(0.25, 2.0)
    assert b.lemma_12_1_applicable(0.45, 1.6)
    assert not b.lemma_12_1_applicable(0.5, 3.0)       # delta < 1/2
    assert not b.lemma_12_1_applicable(0.25, 1.7)      # Delta + delta > 2
    assert not b.lemma_12_1_applicable(0.4, 6.0)       # delta (4 Delta - 3) <= Delta: 8.4 > 6


def test_n_needed_is_the_threshold():
    k, eps = 5, 1.0
    n_thm = b.n_needed_theorem_12_2(k, eps, 422, 20, 2, 0.25, 2.0)
    assert b.k_max_theorem_12_2(eps, n_thm * 1.0001, 422, 20, 2, 0.25, 2.0) >= k
    assert b.k_max_theorem_12_2(eps, n_thm * 0.999, 422, 20, 2, 0.25, 2.0) < k
    n_comb = b.n_needed_combined(k, eps, 422, 20, 2, 0.25, 2.0)
    assert n_comb > 0
    assert b.k_max_combined(eps, 0.25, 2.0, n=n_comb * 1.0001, m=422, p=20, d=2) >= k
    assert b.k_max_combined(eps, 0.25, 2.0, n=n_comb * 0.999, m=422, p=20, d=2) < k
    assert b.n_needed_combined(1, 3.0, 422, 20, 2, 0.25, 2.0) == 0.0  # the box bound suffices


def test_argument_validation():
    with pytest.raises(ValueError):
        b.k_max_box(0.0, 0.25, 2.0)
    with pytest.raises(ValueError):
        b.per_sample_epsilon_box(0.5, 0.4)
    with pytest.raises(ValueError):
        b.epsilon_box(-1, 0.25, 2.0)
    with pytest.raises(ValueError):
        b.binom_le(-1, 2)
