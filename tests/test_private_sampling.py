"""Private sampling: the algorithm's oracle properties (spec private_sampling.md section 6, T5-T16),
fast solvers against the cvxpy reference, and the mechanism contract."""

import itertools
import json
import math

import numpy as np
import pytest
from scipy.stats import chisquare

from privsynth.mechanisms.private_sampling import bounds as bounds
from privsynth.mechanisms.private_sampling import mechanism as ps
from privsynth.mechanisms.private_sampling import space as ps_space
from privsynth.mechanisms.private_sampling.solvers import (
    fit_density,
    projection_qp_cvxpy,
    projection_qp_newton,
    released_density,
    shrinkage_feasible,
    shrinkage_lp_cvxpy,
    shrinkage_lp_highs,
    shrinkage_lp_ipm,
)
from privsynth.mechanisms.private_sampling.walsh import n_walsh, walsh_features, walsh_moment_sums
from privsynth.privacy.noise import BudgetNotChargedError, SeededNoise
from privsynth.schema.encoding import Domain
from privsynth.schema.workload import Histogram

DELTA, BIG_DELTA = 0.25, 2.0


def full_cube(p):
    return np.array(list(itertools.product((-1, 1), repeat=p)), dtype=np.int8)


def skewed_data(n, p, seed, skew=0.7):
    rng = np.random.default_rng(seed)
    X = np.where(rng.random((n, p)) < np.linspace(0.2, 0.8, p), 1, -1).astype(np.int8)
    X[:, 1] = np.where(rng.random(n) < skew, X[:, 0], X[:, 1])
    return X


def reduced_space(p, d, m, seed):
    return ps_space.draw_reduced_space(np.random.default_rng(seed), m, p, d, max_redraws=20)


def authorized(seed=0):
    noise = SeededNoise(seed, "test-key")
    noise.authorize("test")
    return noise


# ------------------------------------------------------------------ well-conditioning (T5)

def test_threshold_and_rank_deficiency():  # T5
    assert bounds.well_conditioning_threshold(100, 2) == pytest.approx(10 / (2 * math.e ** 2))
    with pytest.raises(ps_space.ReducedSpaceError, match="m=10 < N=16"):
        ps_space.draw_reduced_space(np.random.default_rng(0), 10, 5, 2, 5)
    # duplicated S rows cannot raise the rank: s_min of a rank-deficient M is 0 -> the test fails
    S = np.repeat(full_cube(3), 4, axis=0)[:, [0, 1, 2, 0]]  # a repeated coordinate duplicates Walsh columns
    M = walsh_features(S, 2)
    assert ps_space.smallest_singular_value(M.T @ M) < bounds.well_conditioning_threshold(len(S), 2)


def test_full_cube_is_well_conditioned():  # T2/T5
    M = walsh_features(full_cube(6), 2)
    assert ps_space.smallest_singular_value(M.T @ M) == pytest.approx(8.0)


def test_redraws_are_bounded_and_reported():
    # m just above N rarely passes: we must fail cleanly after max_redraws
    with pytest.raises(ps_space.ReducedSpaceError, match="no well-conditioned reduced space in 3 draws"):
        ps_space.draw_reduced_space(np.random.default_rng(0), 57, 10, 2, 3)
    space = reduced_space(10, 2, 120, 0)
    assert space.s_min >= space.threshold and 1 <= space.attempts <= 20


# ------------------------------------------------------------------ LP and QP (T6-T11)

@pytest.fixture(scope="module")
def instance():
    p, d, m = 8, 2, 300
    space = reduced_space(p, d, m, 1)
    X = skewed_data(5000, p, 2)
    b = walsh_moment_sums(X, d) / len(X)
    fit = fit_density(space.M, b, DELTA, BIG_DELTA, gram=space.gram)
    return space, X, b, fit


def test_qp_output_properties(instance):  # T6
    space, _, b, fit = instance
    m = space.M.shape[0]
    c_S = space.M.mean(axis=0)
    assert 0 <= fit.lam < 1
    np.testing.assert_allclose(space.M.T @ fit.q / m, (1 - fit.lam) * b + fit.lam * c_S, atol=1e-8)
    assert fit.h.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.all(fit.q >= DELTA) and np.all(fit.q <= BIG_DELTA)
    h = released_density(fit.q, DELTA, BIG_DELTA)
    assert h.sum() == pytest.approx(1.0, abs=1e-15)
    assert np.all(h >= DELTA / m * (1 - 1e-9)) and np.all(h <= BIG_DELTA / m * (1 + 1e-9))


def test_lambda_is_minimal(instance):  # T8
    space, _, b, fit = instance
    assert fit.lam > 1e-2  # the skewed data needs shrinkage at m ~ 8N
    assert not shrinkage_feasible(space.M, b, fit.lam - 1e-3, 2 * DELTA, BIG_DELTA - DELTA)
    assert shrinkage_feasible(space.M, b, min(1.0, fit.lam + 1e-3), 2 * DELTA, BIG_DELTA - DELTA)
    assert shrinkage_feasible(space.M, b, 1.0, 2 * DELTA, BIG_DELTA - DELTA)


def test_marginal_bias_identity(instance):  # T10
    space, X, b, fit = instance
    p, d = 8, 2
    q_moments = space.M.T @ fit.h
    u_moments = space.M.mean(axis=0)
    from privsynth.mechanisms.private_sampling.walsh import all_marginals_from_moments
    P_h = all_marginals_from_moments(q_moments, p, d)
    P_f = all_marginals_from_moments(b, p, d)
    P_u = all_marginals_from_moments(u_moments, p, d)
    np.testing.assert_allclose(P_h - P_f, fit.lam * (P_u - P_f), atol=1e-9)
    assert np.all(np.abs(P_h - P_f) <= fit.lam * np.abs(P_u - P_f) + 1e-9)


def test_data_equal_to_S_needs_no_shrinkage():  # T7
    space = reduced_space(7, 2, 200, 3)
    b = space.M.mean(axis=0)  # X = S: the data moments are those of u_m
    fit = fit_density(space.M, b, DELTA, BIG_DELTA, gram=space.gram)
    assert fit.lam == pytest.approx(0.0, abs=1e-9)
    np.testing.assert_allclose(fit.q, 1.0, atol=1e-8)  # h* = u_m


def test_no_shrinkage_means_exact_marginals():  # T7, T11: regular data, m >= 8N
    p, d = 14, 2
    N = n_walsh(p, d)
    space = reduced_space(p, d, 8 * N, 4)
    X = np.random.default_rng(5).choice(np.array([-1, 1], dtype=np.int8), size=(100_000, p))
    b = walsh_moment_sums(X, d) / len(X)
    fit = fit_density(space.M, b, DELTA, BIG_DELTA, gram=space.gram)
    assert fit.lam == pytest.approx(0.0, abs=1e-8)
    np.testing.assert_allclose(space.M.T @ fit.h, b, atol=1e-9)


def closed_form_lambda(q_data, delta, Delta):
    lam = 0.0
    for q in q_data:
        if q < 2 * delta:
            lam = max(lam, (2 * delta - q) / (1 - q))
        if q > Delta - delta:
            lam = max(lam, (q - (Delta - delta)) / (q - 1))
    return lam


@pytest.mark.parametrize("Delta", [2.0, 4.0])
def test_closed_form_lambda_when_H_is_a_point(Delta):  # T9
    p = 4
    S = full_cube(p)
    M = walsh_features(S, p)  # d = p: square orthogonal M, dim H = 0
    rng = np.random.default_rng(6)
    weights = rng.dirichlet(np.full(2 ** p, 0.3))
    rows = rng.choice(2 ** p, size=4000, p=weights)
    f_n = np.bincount(rows, minlength=2 ** p) / 4000
    b = M.T @ f_n
    fit = fit_density(M, b, DELTA, Delta)
    expected = closed_form_lambda(2 ** p * f_n, DELTA, Delta)
    assert expected > 0
    assert fit.lam == pytest.approx(expected, abs=1e-8)
    np.testing.assert_allclose(fit.h, (1 - expected) * f_n + expected / 2 ** p, atol=1e-9)


# ------------------------------------------------------------------ fast solvers vs cvxpy

@pytest.mark.parametrize("seed,m", [(7, 120), (8, 400)])
def test_fast_solvers_agree_with_cvxpy(seed, m):
    p, d = 9, 2
    space = reduced_space(p, d, m, seed)
    X = skewed_data(3000, p, seed, skew=0.9)
    b = walsh_moment_sums(X, d) / len(X)
    lam_ipm = shrinkage_lp_ipm(space.M, b, DELTA, BIG_DELTA)
    lam_highs = shrinkage_lp_highs(space.M, b, DELTA, BIG_DELTA)
    lam_cvx = shrinkage_lp_cvxpy(space.M, b, DELTA, BIG_DELTA)
    assert lam_ipm == pytest.approx(lam_cvx, abs=1e-8)
    assert lam_highs == pytest.approx(lam_cvx, abs=1e-8)
    target = (1 - lam_cvx) * b + lam_cvx * space.M.mean(axis=0)
    newton = projection_qp_newton(space.M, target, DELTA, BIG_DELTA)
    q_cvx = projection_qp_cvxpy(space.M, target, DELTA, BIG_DELTA, tol=1e-12)
    assert np.max(np.abs(newton.q - q_cvx)) < 1e-6
    # Newton's point is optimal at least as precisely: lower objective, smaller equality residual
    assert np.sum((newton.q - 1) ** 2) <= np.sum((q_cvx - 1) ** 2) + 1e-9
    assert np.max(np.abs(space.M.T @ newton.q / m - target)) <= 1e-11


def test_newton_kkt_certificate():
    space = reduced_space(8, 2, 250, 9)
    b = walsh_moment_sums(skewed_data(2000, 8, 9, skew=0.95), 2) / 2000
    lam = shrinkage_lp_ipm(space.M, b, DELTA, BIG_DELTA)
    target = (1 - lam) * b + lam * space.M.mean(axis=0)
    res = projection_qp_newton(space.M, target, DELTA, BIG_DELTA)
    # stationarity + complementarity hold exactly: q = clip(1 + M y) is the Lagrangian minimiser
    np.testing.assert_array_equal(res.q, np.clip(1 + space.M @ res.y, DELTA, BIG_DELTA))
    assert np.any(res.q == DELTA) or np.any(res.q == BIG_DELTA)  # the box is active on this skewed instance
    assert res.residual <= 1e-12
    assert "values" not in repr(res) and str(res.q[0]) not in repr(res)


# ------------------------------------------------------------------ sensitivity (T12)

@pytest.mark.parametrize("neighbour", ["add_all_minus", "add_all_plus", "replace_one", "remove_one"])
def test_empirical_sensitivity_within_lemma_bound(neighbour):  # T12
    p, d, m, n = 10, 2, 120, 2000
    space = reduced_space(p, d, m, 10)
    X1 = skewed_data(n, p, 11, skew=0.3)
    if neighbour == "add_all_minus":
        X2 = np.vstack([X1, -np.ones((1, p), dtype=np.int8)])
    elif neighbour == "add_all_plus":
        X2 = np.vstack([X1, np.ones((1, p), dtype=np.int8)])
    elif neighbour == "replace_one":
        X2 = X1.copy()
        X2[0] = -X2[0]
    else:
        X2 = X1[1:]
    n_min = min(len(X1), len(X2))
    h = []
    for X in (X1, X2):
        fit = fit_density(space.M, walsh_moment_sums(X, d) / len(X), DELTA, BIG_DELTA, gram=space.gram)
        h.append(released_density(fit.q, DELTA, BIG_DELTA))
    eta = bounds.eta_lemma_12_1(n_min, m, p, d, DELTA, BIG_DELTA, conservative=False)
    assert np.max(np.abs(h[0] - h[1])) <= eta
    ratio = np.max(np.maximum(h[0] / h[1], h[1] / h[0]))
    assert ratio <= min(BIG_DELTA / DELTA, 1 + eta * m / DELTA)
    assert math.log(ratio) <= bounds.per_sample_epsilon(DELTA, BIG_DELTA, slack=bounds.numerical_slack())[0]


@pytest.mark.parametrize("neighbour", ["add_all_minus", "add_all_plus", "remove_one", "empty_vs_one"])
def test_padded_moments_keep_lemma_bound_below_n_public(neighbour):  # T12 for datasets smaller than n_public
    """Below n_public the moments are padded with the uniform density on S up to n_public rows, so the
    sensitivity is Lemma 12.1's bound for n = n_public whatever the datasets' sizes."""
    p, d, m, n_public = 10, 2, 120, 2000
    space = reduced_space(p, d, m, 10)
    c_S = space.M.mean(axis=0)
    X1 = skewed_data(40, p, 12, skew=0.9)
    X2 = {"add_all_minus": lambda: np.vstack([X1, -np.ones((1, p), dtype=np.int8)]),
          "add_all_plus": lambda: np.vstack([X1, np.ones((1, p), dtype=np.int8)]),
          "remove_one": lambda: X1[1:],
          "empty_vs_one": lambda: X1[:1]}[neighbour]()
    if neighbour == "empty_vs_one":
        X1 = X1[:0]
    h = []
    for X in (X1, X2):
        stats = ps.PrivateSamplingStatistics(walsh_moment_sums(X, d), len(X), p, d)
        fit = fit_density(space.M, stats.moments(n_public, c_S), DELTA, BIG_DELTA, gram=space.gram)
        h.append(released_density(fit.q, DELTA, BIG_DELTA))
    eta = bounds.eta_lemma_12_1(n_public, m, p, d, DELTA, BIG_DELTA, conservative=False)
    assert 0 < np.max(np.abs(h[0] - h[1])) <= eta
    # the padded vector is the moment vector of (sum_i 1_{x_i} + (D - n) u_S) / D
    padded = ps.PrivateSamplingStatistics(walsh_moment_sums(X2, d), len(X2), p, d).moments(n_public, c_S)
    np.testing.assert_allclose(padded, (walsh_moment_sums(X2, d) + (n_public - len(X2)) * c_S) / n_public)
    with pytest.raises(ValueError, match="filler"):
        ps.PrivateSamplingStatistics(walsh_moment_sums(X2, d), len(X2), p, d).moments(n_public)


# ------------------------------------------------------------------ mechanism contract

DOMAIN = Domain(("a", "b", "c"), (4, 3, 2))  # 2 + 2 + 1 = 5 bits; b has an invalid binary code (3)


def codes_for(n, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 4, n)
    b = np.where(rng.random(n) < 0.7, a % 3, rng.integers(0, 3, n))
    c = (rng.random(n) < 0.3).astype(int)
    return np.column_stack([a, b, c]).astype(np.int32)


def test_config_validation():
    with pytest.raises(ValueError, match="box_upper \\+ box_lower must exceed 2"):
        ps.Config(epsilon=1.0, box_lower=0.25, box_upper=1.5)
    with pytest.raises(ValueError, match="box_lower"):
        ps.Config(epsilon=1.0, box_lower=0.5)
    with pytest.raises(ValueError, match="m=10 is below the number of Walsh features N=16"):
        ps.Config(epsilon=1.0, bits=5, m=10)
    with pytest.raises(ValueError, match="epsilon"):
        ps.Config(epsilon=True)
    with pytest.raises(ValueError):
        ps.Config(epsilon=1.0, unknown=1)


def test_feasibility_check_before_data():
    with pytest.raises(ps.InfeasibleRequestError) as err:
        ps.check_feasible(ps.Config(epsilon=1.0))
    msg = str(err.value)
    assert "2.0794" in msg and "at most 0 row(s)" in msg and "reduced_space" in msg and "rap" in msg
    assert isinstance(err.value, ValueError)
    with pytest.raises(ps.InfeasibleRequestError, match="cannot release 2 row"):
        ps.check_feasible(ps.Config(epsilon=3.0, k=2))
    report = ps.check_feasible(ps.Config(epsilon=10.0))
    assert report.k == report.k_allowed == 4 and report.binding_bound == "box"
    assert report.epsilon_used == pytest.approx(4 * (math.log(8) + bounds.numerical_slack()))
    json.dumps(report.to_json(), allow_nan=False)
    cost = ps.privacy_cost(ps.Config(epsilon=10.0, k=3))
    assert (cost.pure_epsilon == pytest.approx(3 * (math.log(8) + bounds.numerical_slack()))
            and cost.pure_epsilon <= 10.0)


def test_configure_for_fills_only_data_free_facts():
    cfg = ps.configure_for(ps.Config(epsilon=3.0), DOMAIN)
    assert cfg.bits == 5 and cfg.n_public is None
    assert ps.configure_for(ps.Config(epsilon=3.0, n_public=99), DOMAIN).n_public == 99
    with pytest.raises(TypeError):
        ps.configure_for(ps.Config(epsilon=3.0), DOMAIN, input_rows=1234)  # no data path into the config
    with pytest.raises(ValueError):
        ps.Config(epsilon=3.0, n_public=5, n_public_is_row_count=True)
    with pytest.raises(ValueError, match="bits=7 does not match"):
        ps.configure_for(ps.Config(epsilon=3.0, bits=7), DOMAIN)
    assert "n_treated_as_public" not in ps.check_feasible(cfg).to_json()


def test_check_config_refuses_before_the_charge():
    ps.check_config(ps.Config(epsilon=3.0), DOMAIN)
    with pytest.raises(ps.InfeasibleRequestError, match="epsilon=1"):
        ps.check_config(ps.Config(epsilon=1.0), DOMAIN)
    with pytest.raises(ValueError, match="bits=7"):
        ps.check_config(ps.Config(epsilon=3.0, bits=7), DOMAIN)
    with pytest.raises(ValueError, match="m=20 is below the number of Walsh features"):
        ps.check_config(ps.Config(epsilon=3.0, m=20), Domain(("a", "b"), (64, 64)))
    wide = Domain(tuple(f"x{j}" for j in range(60)), (2,) * 60)
    with pytest.raises(ValueError, match="max_memory_gb=4"):  # d = 3 on 60 bits: N = 36 051, m = 288 408
        ps.check_config(ps.Config(epsilon=3.0, degree=3), wide)
    ps.check_config(ps.Config(epsilon=3.0, degree=1), wide)
    assert ps.memory_estimate_bytes(ps.configure_for(ps.Config(epsilon=3.0), DOMAIN), DOMAIN, 1) == (
        8 * (4 * 128 * 16 + 4 * 16 * 16) + 128 * 5 + 8 * 9 + 8 * 3 + 5)
    with pytest.raises(ValueError, match="k=.* released rows.*max_memory_gb"):  # a huge declared n allows ~1e17 rows
        ps.check_config(ps.Config(epsilon=3.0, n_public=10 ** 40), DOMAIN)


def test_forecast_speaks_plainly():
    ok = ps.forecast(ps.Config(epsilon=7.0), DOMAIN)
    assert ok["feasible"] and ok["rows"] == 3 and ok["noise"] == "none" and "3 exact record(s)" in ok["summary"]
    json.dumps(ok, allow_nan=False)
    assert not ps.forecast(ps.Config(epsilon=1.0), DOMAIN)["feasible"]
    assert ps.forecast(ps.Config(epsilon=3.0), DOMAIN, n_public=10 ** 9)["binding_bound"] == "theorem_12_2"


def test_collect_statistics_streams():
    codes = codes_for(1000, 0)
    cfg = ps.Config(epsilon=3.0)
    one = ps.collect_statistics([codes], DOMAIN, cfg)
    many = ps.collect_statistics([codes[i:i + 97] for i in range(0, 1000, 97)], DOMAIN, cfg)
    assert one.n_rows == many.n_rows == 1000 and one.bits == 5
    np.testing.assert_array_equal(one.moment_sums, many.moment_sums)
    assert "withheld" in repr(one)
    with pytest.raises(ValueError, match="outside the domain"):
        ps.collect_statistics([np.array([[0, 3, 0]], dtype=np.int32)], DOMAIN, cfg)
    with pytest.raises(ValueError, match="outside the domain"):
        ps.collect_statistics(Histogram.of_codes(np.array([[0, 3, 0]], dtype=np.int32)), DOMAIN, cfg)


def test_histogram_statistics_and_release_equal_the_per_record_path():
    codes = codes_for(3000, 1)
    cfg = ps.configure_for(ps.Config(epsilon=7.0, reduced_space_seed=5), DOMAIN)
    per_record = ps.collect_statistics([codes[i:i + 512] for i in range(0, 3000, 512)], DOMAIN, cfg)
    histogram = Histogram.of_codes(codes)
    assert histogram.codes.shape[0] < 3000  # a real histogram: distinct rows with counts
    weighted = ps.collect_statistics(histogram, DOMAIN, cfg)
    assert weighted.n_rows == per_record.n_rows == 3000
    np.testing.assert_array_equal(weighted.moment_sums, per_record.moment_sums)  # exact integers
    a = ps.run(per_record, DOMAIN, cfg, authorized(4))
    b = ps.run(weighted, DOMAIN, cfg, authorized(4))
    np.testing.assert_array_equal(a.points, b.points)
    assert a.public_facts == b.public_facts


def test_n_never_comes_from_the_data_attack():
    """Issue 10 item 3. The old pipeline set n_public to the input's exact row count, and refused a
    dataset smaller than a declared n_public: around the n where Theorem 12.2 starts to bind (~10^8 rows
    here, ~10^9 on Adult) two neighbours (n_public - 1 and n_public rows) got a different charge or a
    different number of rows (0 vs k), i.e. an unbounded privacy loss. Now the charge and k come from the
    config alone and a smaller dataset is padded, so both neighbours get the same charge and k rows."""
    T = 10 ** 9
    base = ps.Config(epsilon=3.0, n_public=T, reduced_space_seed=1)
    cfg = ps.configure_for(base, DOMAIN)
    report = ps.check_feasible(cfg)
    assert report.binding_bound == "theorem_12_2" and report.k == 2  # the box bound alone allows 1 row
    small = Histogram.of_codes(codes_for(3000, 6))
    counts = small.counts * (T // 3000)
    counts[0] += T - 1 - counts.sum()
    below = Histogram(small.codes, counts)                       # n_public - 1 rows
    at = Histogram(small.codes, counts + np.eye(counts.size, dtype=np.int64)[0])  # one more row: n_public
    assert below.n == T - 1 and at.n == T
    charges, facts = [], []
    for data in (below, at):
        charges.append(ps.privacy_cost(ps.configure_for(base, DOMAIN)).pure_epsilon)
        release = ps.run(ps.collect_statistics(data, DOMAIN, cfg), DOMAIN, cfg, authorized(7))
        assert release.points.shape[0] == report.k
        facts.append({k: v for k, v in release.public_facts.items() if k != "released_invalid_fields"})
    assert charges[0] == charges[1] == report.epsilon_used
    assert facts[0] == facts[1] and not any("n_public" in key or "n_rows" in key for key in facts[0])


def test_release_contract_and_public_facts():
    codes = codes_for(3000, 1)
    cfg = ps.configure_for(ps.Config(epsilon=7.0, reduced_space_seed=5), DOMAIN)
    stats = ps.collect_statistics([codes], DOMAIN, cfg)
    release = ps.run(stats, DOMAIN, cfg, authorized(1))
    assert release.exact and release.mechanism == "private_sampling"
    assert release.points.shape == (3, DOMAIN.width)  # floor(7 / ln 8) = 3 rows, never more
    np.testing.assert_allclose(release.weights, 1 / 3)
    release.check_domain(DOMAIN)
    facts = release.public_facts
    json.dumps(facts, allow_nan=False)
    assert facts["rows"] == 3 and facts["epsilon_used"] <= 7.0
    assert not any("lambda" in key.lower() or "moment" in key.lower() for key in facts)
    # lambda and h* never reach the facts: no fact equals the fitted values
    space = ps_space.draw_reduced_space(np.random.default_rng(5), facts["m"], 5, 2, cfg.max_redraws)
    fit = fit_density(space.M, stats.moments(), DELTA, BIG_DELTA)
    numbers = [v for v in facts.values() if isinstance(v, float)]
    assert all(not math.isclose(v, fit.lam) for v in numbers)


def test_sampling_follows_h_and_rows_come_from_S():  # T15, T16
    domain = Domain(("a", "b"), (4, 4))  # 4 bits, every code valid
    codes = codes_for(2000, 2)[:, :1].repeat(2, axis=1)
    codes[:, 1] = (codes[:, 1] + np.random.default_rng(3).integers(0, 2, 2000)) % 4
    k = 6000
    cfg = ps.Config(epsilon=k * (math.log(8) + 1e-8), k=k, reduced_space_seed=11)
    stats = ps.collect_statistics([codes], domain, cfg)
    release = ps.run(stats, domain, cfg, authorized(2))
    assert release.points.shape[0] == k
    m = release.public_facts["m"]
    space = ps_space.draw_reduced_space(np.random.default_rng(11), m, 4, 2, cfg.max_redraws)
    h = released_density(fit_density(space.M, stats.moments(), DELTA, BIG_DELTA, gram=space.gram).q, DELTA, BIG_DELTA)
    # aggregate h* over the distinct cube points of S, in code space
    s_codes, invalid = ps_space.decode_points(space.signs, domain)
    assert not invalid.any()
    s_cells = s_codes[:, 0] * 4 + s_codes[:, 1]
    expected = np.bincount(s_cells, weights=h, minlength=16)
    from privsynth.schema.encoding import from_one_hot
    out = from_one_hot(release.points, domain)
    observed = np.bincount(out[:, 0] * 4 + out[:, 1], minlength=16)
    assert set(np.flatnonzero(observed)) <= set(np.flatnonzero(expected))  # every row is a point of S
    support = expected > 0
    assert chisquare(observed[support], k * expected[support]).pvalue > 1e-4
    # T15: S depends on the seed only, not on the data
    other = ps.collect_statistics([codes_for(500, 9)[:, :2] % 4], domain, cfg)
    release2 = ps.run(other, domain, cfg, authorized(3))
    assert release2.public_facts["s_min"] == release.public_facts["s_min"]


def test_invalid_codes_decode_deterministically():
    signs = np.array([[1, 1, 1, 1, -1]], dtype=np.int8)  # a = 3, b = 3 (invalid: size 3), c = 0
    codes, invalid = ps_space.decode_points(signs, DOMAIN)
    np.testing.assert_array_equal(codes, [[3, 0, 0]])
    np.testing.assert_array_equal(invalid, [[False, True, False]])


def test_noise_must_be_authorized_and_a_small_dataset_is_padded_not_refused():
    codes = codes_for(500, 4)
    cfg = ps.Config(epsilon=3.0, reduced_space_seed=1)
    stats = ps.collect_statistics([codes], DOMAIN, cfg)
    with pytest.raises(BudgetNotChargedError):
        ps.run(stats, DOMAIN, cfg, SeededNoise(0, "test-key"))
    # a large public n makes Theorem 12.2 the binding bound; a dataset of 500 rows is padded
    # with the uniform density on S up to n_public rows: the same k rows, no refusal that would reveal n
    big = ps.configure_for(ps.Config(epsilon=3.0, reduced_space_seed=1, n_public=10 ** 12), DOMAIN)
    report = ps.check_feasible(big)
    assert report.binding_bound == "theorem_12_2"
    release = ps.run(ps.collect_statistics([codes], DOMAIN, big), DOMAIN, big, authorized())
    assert release.points.shape[0] == report.k
    # an empty input is padded too (box bound: b = c_S), rather than an error that depends on n
    empty = ps.collect_statistics([codes[:0]], DOMAIN, cfg)
    assert ps.run(empty, DOMAIN, cfg, authorized()).points.shape[0] == 1
    with pytest.raises(ValueError, match="does not match"):
        ps.run(stats, DOMAIN, ps.Config(epsilon=3.0, bits=7), authorized())
