"""Tests for the reduced-space mechanism ([SF] Algorithm 1; spec private_sampling.md section 2, T17-T21)."""

from __future__ import annotations

import math

import numpy as np
import pydantic
import pytest
from conftest import StatisticNoise

from privsynth.mechanisms import get_mechanism
from privsynth.mechanisms import reduced_space as rs
from privsynth.mechanisms.rounding import round_release
from privsynth.privacy.noise import BudgetNotChargedError, SeededNoise
from privsynth.schema.encoding import Domain
from privsynth.schema.workload import Histogram, all_marginals, marginal_counts, relaxed_marginal, total_variation

DOMAIN = Domain(("a", "b", "c", "d"), (3, 4, 2, 3))


def random_codes(n: int, domain: Domain = DOMAIN, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    # correlated columns, so the marginals are not a product
    base = rng.integers(0, 6, size=n)
    return np.stack([(base + rng.integers(0, 2, size=n)) % s for s in domain.sizes], axis=1).astype(np.int32)


def authorized(seed: int = 0) -> SeededNoise:
    noise = SeededNoise(seed, "test-key")
    noise.authorize("test")
    return noise


def counts_of(codes: np.ndarray, config: rs.Config, domain: Domain = DOMAIN) -> np.ndarray:
    return rs.collect_statistics([codes], domain, config).counts


def noise_free_y(codes: np.ndarray, config: rs.Config, domain: Domain = DOMAIN) -> np.ndarray:
    return counts_of(codes, config, domain) / codes.shape[0]


# ------------------------------------------------------------------------------ privacy

@pytest.mark.parametrize("workload", ["2way", "1way+2way"])
def test_sensitivity_on_neighbours_is_exactly_the_number_of_marginals(workload):
    config = rs.Config(epsilon=1.0, workload=workload)
    marginals = rs.workload_marginals(DOMAIN, workload)
    expected = len(all_marginals(4, 2)) + (4 if workload == "1way+2way" else 0)
    assert rs.l1_sensitivity(marginals) == len(marginals) == expected
    X = random_codes(200)
    base = counts_of(X, config)
    adversarial = [np.zeros(4, np.int32), np.array([s - 1 for s in DOMAIN.sizes], np.int32),
                   X[0].copy(), np.array([2, 0, 1, 0], np.int32)]
    for record in adversarial:  # add one record
        added = counts_of(np.vstack([X, record]), config)
        assert np.abs(added - base).sum() == len(marginals)
    for i in (0, 57, 199):  # remove one record
        removed = counts_of(np.delete(X, i, axis=0), config)
        assert np.abs(removed - base).sum() == len(marginals)
    # batching does not change the statistics (one streaming pass)
    assert np.array_equal(rs.collect_statistics([X[:70], X[70:]], DOMAIN, config).counts, base)


def test_sensitivity_does_not_depend_on_n():
    config = rs.Config(epsilon=1.0)
    for n in (1, 10, 1000):
        X = random_codes(n, seed=n)
        diff = counts_of(np.vstack([X, X[:1]]), config) - counts_of(X, config)
        assert np.abs(diff).sum() == 6


def test_privacy_cost_is_pure_epsilon_from_config():
    for eps in (0.3, 1.0, 3.0):
        cost = rs.privacy_cost(rs.Config(epsilon=eps, delta=1e-6))
        assert cost.pure_epsilon == eps
        assert cost.rho == pytest.approx(eps * eps / 2)
        assert cost.epsilon_at(1e-9) == eps  # pure eps beats the zCDP conversion here
        assert cost.is_dp


def test_laplace_scale_is_sensitivity_over_epsilon():
    marginals = rs.workload_marginals(DOMAIN, "2way")
    assert rs.laplace_scale(0.5, marginals) == pytest.approx(6 / 0.5)
    adult_like = Domain(tuple("abcdefghijklmno"), (2,) * 15)
    assert rs.laplace_scale(1.0, rs.workload_marginals(adult_like, "2way")) == 105.0


class SpyNoise(SeededNoise):
    def __init__(self, seed: int) -> None:
        super().__init__(seed, "test-key")
        self.calls: list[tuple[float, int]] = []

    def _laplace(self, scale: float, size: int) -> np.ndarray:
        self.calls.append((scale, size))
        return super()._laplace(scale, size)


def test_run_draws_one_laplace_vector_of_the_calibrated_scale():
    config = rs.Config(epsilon=0.7)
    stats = rs.collect_statistics([random_codes(300)], DOMAIN, config)
    noise = SpyNoise(3)
    noise.authorize("test")
    release = rs.run(stats, DOMAIN, config, noise)
    assert noise.calls == [(6 / 0.7, stats.counts.size)]
    assert release.public_facts["laplace_scale_counts"] == pytest.approx(6 / 0.7)




def test_noise_is_added_to_the_counts_by_the_measurement():
    config = rs.Config(epsilon=0.7)
    stats = rs.collect_statistics([random_codes(300)], DOMAIN, config)
    noise = StatisticNoise(3)
    rs.run(stats, DOMAIN, config, noise)
    assert noise.added == [((stats.counts.size,), pytest.approx(6 / 0.7))]


def test_histogram_statistics_and_release_equal_the_per_record_path():
    codes = random_codes(700, seed=5)
    config = rs.Config(epsilon=1.0)
    per_record = rs.collect_statistics([codes[i:i + 100] for i in range(0, 700, 100)], DOMAIN, config)
    histogram = Histogram.of_codes(codes)
    assert histogram.codes.shape[0] < 700
    weighted = rs.collect_statistics(histogram, DOMAIN, config)
    np.testing.assert_array_equal(weighted.counts, per_record.counts)
    a, b = (rs.run(st, DOMAIN, config, authorized(9)) for st in (per_record, weighted))
    bad = np.array([[0, 4, 0, 0]])
    for data in ([bad], Histogram(bad, np.array([1]))):
        with pytest.raises(ValueError, match="outside the domain"):
            rs.collect_statistics(data, DOMAIN, config)
    np.testing.assert_array_equal(a.points, b.points)
    np.testing.assert_array_equal(a.weights, b.weights)


def test_check_config_refuses_memory_before_the_charge_and_forecast_speaks_plainly():
    rs.check_config(rs.Config(epsilon=1.0), DOMAIN)
    huge = Domain(("a", "b", "c"), (20_000, 20_000, 3))  # the a x b table alone has 4e8 cells
    with pytest.raises(ValueError, match="workload='2way'.*max_memory_gb=4"):
        rs.check_config(rs.Config(epsilon=1.0), huge)
    wide = Domain(tuple(f"x{j}" for j in range(40)), (10,) * 40)  # 780 marginals, 78 000 cells, 50 000 points
    rs.check_config(rs.Config(epsilon=1.0), wide)
    with pytest.raises(ValueError, match="objective='l1'"):
        rs.check_config(rs.Config(epsilon=1.0, objective="l1", max_memory_gb=1), wide)
    assert rs.memory_estimate_bytes(rs.Config(epsilon=1.0, objective="l1"), wide) > \
        rs.memory_estimate_bytes(rs.Config(epsilon=1.0), wide)
    f = rs.forecast(rs.Config(epsilon=2.0), DOMAIN, n_public=1000)
    assert f["marginals"] == 6 and f["cells"] == 53 and f["laplace_scale"] == pytest.approx(3.0)
    assert f["marginal_noise_tv_max"] == pytest.approx(12 * 3.0 / 2000)
    assert "Laplace(3)" in f["summary"] and "total-variation" in f["summary"]
    assert "marginal_noise_tv_mean" not in rs.forecast(rs.Config(epsilon=2.0), DOMAIN)


def test_laplace_noise_has_the_stated_tail():
    # T17: P(|lambda| > t) = exp(-t / b)
    noise = authorized(11)
    b = rs.laplace_scale(2.0, rs.workload_marginals(DOMAIN, "2way"))
    draws = noise.laplace(b, 200_000)
    for t in (0.5 * b, b, 2 * b):
        assert np.mean(np.abs(draws) > t) == pytest.approx(math.exp(-t / b), abs=0.005)


def test_run_refuses_before_the_budget_is_charged():
    config = rs.Config(epsilon=1.0)
    stats = rs.collect_statistics([random_codes(50)], DOMAIN, config)
    with pytest.raises(BudgetNotChargedError):
        rs.run(stats, DOMAIN, config, SeededNoise(0, "test-key"))


def test_statistics_hold_no_row_count_and_do_not_print_counts():
    stats = rs.collect_statistics([random_codes(50)], DOMAIN, rs.Config(epsilon=1.0))
    assert not hasattr(stats, "n")
    assert repr(stats) == "Statistics(marginals=6, cells=53)"


# ------------------------------------------------------------------------------ post-processing pieces

def test_total_and_one_way_estimates_are_exact_without_noise():
    X = random_codes(400)
    config = rs.Config(epsilon=1.0)
    stats = rs.collect_statistics([X], DOMAIN, config)
    offsets = rs.cell_offsets(DOMAIN, stats.marginals)
    assert rs.estimate_total(stats.counts, offsets) == pytest.approx(400)
    for a, p in enumerate(rs.noisy_one_way(stats.counts, DOMAIN, stats.marginals)):
        assert np.allclose(p, marginal_counts(X, DOMAIN, (a,)) / 400)


def test_one_way_estimate_is_a_distribution_even_when_noise_is_negative():
    counts = -np.ones(53)
    probs = rs.noisy_one_way(counts, DOMAIN, tuple(rs.workload_marginals(DOMAIN, "2way")))
    for p, s in zip(probs, DOMAIN.sizes):
        assert np.allclose(p, 1.0 / s)


def test_design_matrix_has_one_cell_per_marginal_and_answers_marginals():
    marginals = tuple(rs.workload_marginals(DOMAIN, "2way"))
    points = random_codes(40, seed=5)
    A = rs.design_matrix(points, DOMAIN, marginals)
    assert A.shape == (53, 40)
    assert np.array_equal(np.asarray(A.sum(axis=0)).ravel(), np.full(40, len(marginals)))
    w = np.random.default_rng(0).random(40)
    offsets = rs.cell_offsets(DOMAIN, marginals)
    answers = A @ w
    for j, m in enumerate(marginals):
        assert np.allclose(answers[offsets[j]: offsets[j + 1]], marginal_counts(points, DOMAIN, m, weights=w))


def test_reduced_space_points_are_distinct_and_follow_the_density():
    big = Domain(("a", "b", "c", "d", "e"), (10, 10, 10, 10, 10))
    probs = [np.array([0.0] * 9 + [1.0])] + [np.full(10, 0.1)] * 4
    points = rs.draw_reduced_space(big, 500, rs.product_sampler(probs), np.random.default_rng(0))
    assert points.shape == (500, 5)
    assert np.unique(points, axis=0).shape[0] == 500
    assert np.all(points[:, 0] == 9)  # zero-probability levels never appear
    # small domains are used whole
    whole = rs.draw_reduced_space(DOMAIN, 1000, None, np.random.default_rng(0))
    assert whole.shape == (72, 4) and np.unique(whole, axis=0).shape[0] == 72


def test_noisy_tree_links_dependent_attributes_and_samples_valid_records():
    big = Domain(("a", "b", "c", "d"), (4, 3, 4, 5))
    rng = np.random.default_rng(0)
    a = rng.integers(0, 4, 5000)
    d = rng.integers(0, 5, 5000)
    X = np.stack([a, rng.integers(0, 3, 5000), (a + 1) % 4, d], axis=1).astype(np.int32)  # c is a function of a
    marginals = tuple(rs.workload_marginals(big, "2way"))
    counts = rs.collect_statistics([X], big, rs.Config(epsilon=1.0)).counts
    one_way = rs.noisy_one_way(counts, big, marginals)
    tree = rs.noisy_tree(counts, big, marginals, scale=1.0, one_way=one_way, mix=0.0)
    assert sorted(tree.order) == [0, 1, 2, 3] and tree.order[0] == 0
    assert tree.parent[2] == 0
    for cond in tree.conditionals.values():
        assert np.allclose(cond.sum(axis=1), 1.0)
    sample = rs.tree_sampler(tree)(4000, np.random.default_rng(1))
    assert sample.shape == (4000, 4) and np.all(sample < np.array(big.sizes))
    assert np.all(sample[:, 2] == (sample[:, 0] + 1) % 4)  # the functional dependence is kept
    assert total_variation(marginal_counts(sample, big, (1,)), marginal_counts(X, big, (1,))) < 0.05


def test_mutual_information():
    assert rs.mutual_information(np.eye(3)) == pytest.approx(math.log(3))
    assert rs.mutual_information(np.ones((3, 4))) == pytest.approx(0.0)
    assert rs.mutual_information(np.zeros((2, 2))) == 0.0


def test_reduced_space_size_rule():
    big = Domain(tuple("abcdef"), (10,) * 6)
    assert rs.reduced_space_size(big, 1000, rs.Config(epsilon=1.0, points_per_statistic=2.5)) == 2500
    assert rs.reduced_space_size(big, 1000, rs.Config(epsilon=1.0, max_points=700)) == 700
    assert rs.reduced_space_size(DOMAIN, 53, rs.Config(epsilon=1.0)) == 72


def test_project_simplex():
    v = np.array([0.3, -2.0, 1.5, 0.2])
    p = rs.project_simplex(v)
    assert p.sum() == pytest.approx(1.0) and np.all(p >= 0)
    assert np.allclose(rs.project_simplex(np.array([0.2, 0.3, 0.5])), [0.2, 0.3, 0.5])


# ------------------------------------------------------------------------------ the fit (T19, T20)

@pytest.mark.parametrize("objective", ["linf", "l1"])
def test_lp_fits_noise_free_statistics_exactly_when_the_space_covers_the_data(objective):
    X = random_codes(300)
    config = rs.Config(epsilon=1.0, objective=objective)
    marginals = tuple(rs.workload_marginals(DOMAIN, "2way"))
    y = noise_free_y(X, config)
    space = rs.whole_domain(DOMAIN)
    A = rs.design_matrix(space, DOMAIN, marginals)
    h = rs.fit_lp(A, y, objective)
    assert np.all(h >= 0) and h.sum() == pytest.approx(1.0)
    assert rs.fit_error(A, h, y, "linf") < 1e-7
    for m in all_marginals(4, 2):
        assert np.allclose(marginal_counts(space, DOMAIN, m, weights=h), marginal_counts(X, DOMAIN, m) / 300, atol=1e-7)


def test_least_squares_fit_approaches_noise_free_statistics():
    X = random_codes(300)
    config = rs.Config(epsilon=1.0)
    y = noise_free_y(X, config)
    A = rs.design_matrix(rs.whole_domain(DOMAIN), DOMAIN, tuple(rs.workload_marginals(DOMAIN, "2way")))
    h = rs.fit_least_squares(A, y, iterations=3000)
    assert np.all(h >= 0) and h.sum() == pytest.approx(1.0)
    assert rs.fit_error(A, h, y, "linf") < 2e-3


@pytest.mark.parametrize("objective", ["linf", "l1", "l2"])
def test_fit_beats_uniform_weights_on_noisy_statistics_and_is_deterministic(objective):
    X = random_codes(300)
    config = rs.Config(epsilon=0.5, objective=objective)
    stats = rs.collect_statistics([X], DOMAIN, config)
    noisy = stats.counts + authorized(4).laplace(rs.laplace_scale(0.5, list(stats.marginals)), stats.counts.size)
    y = noisy / rs.estimate_total(noisy, rs.cell_offsets(DOMAIN, stats.marginals))
    points = rs.draw_reduced_space(DOMAIN, 40, None, np.random.default_rng(1))
    A = rs.design_matrix(points, DOMAIN, stats.marginals)
    h = rs.fit_weights(A, y, config)
    assert np.all(h >= 0) and h.sum() == pytest.approx(1.0)
    uniform = np.full(40, 1 / 40)
    assert rs.fit_error(A, h, y, objective) <= rs.fit_error(A, uniform, y, objective) + 1e-9
    assert np.array_equal(rs.fit_weights(A, y.copy(), config), h)  # T20: same y, same h


def test_lp_failure_is_reported_not_hidden():
    A = rs.design_matrix(rs.whole_domain(DOMAIN), DOMAIN, tuple(rs.workload_marginals(DOMAIN, "2way")))
    with pytest.raises(ValueError, match="objective"):
        rs.fit_lp(A, np.zeros(53), "l3")


# ------------------------------------------------------------------------------ full runs

@pytest.mark.parametrize("space", ["noisy_tree", "noisy_marginals", "uniform"])
def test_full_run_on_a_small_random_table(space):
    big = Domain(("a", "b", "c", "d", "e", "f"), (4, 5, 3, 6, 2, 5))  # 3600 records > m, so Omega* is drawn
    X = random_codes(3000, big, seed=8)
    config = rs.Config(epsilon=4.0, reduced_space=space, points_per_statistic=2.0)
    stats = rs.collect_statistics([X[:1000], X[1000:]], big, config)
    release = rs.run(stats, big, config, authorized(2))
    release.check_domain(big)
    assert not release.exact and release.mechanism == "reduced_space"
    assert release.weights.sum() == pytest.approx(1.0) and np.all(release.weights > 0)
    n_stats = sum(big.size_of(m) for m in all_marginals(6, 2))
    assert release.public_facts["statistics"] == n_stats
    assert release.public_facts["reduced_space_points_requested"] == math.ceil(2.0 * n_stats)
    assert set(release.public_facts) == {"workload", "marginals", "statistics", "laplace_scale_counts",
                                         "reduced_space", "reduced_space_points_requested", "objective",
                                         "n_estimate"}
    assert release.public_facts["n_estimate"] == pytest.approx(3000, rel=0.05)
    synthetic = round_release(release, big, 3000, np.random.default_rng(0))
    assert synthetic.shape == (3000, 6)
    tv2 = np.mean([total_variation(marginal_counts(X, big, m),
                                   relaxed_marginal(release.points, release.weights, big, m))
                   for m in all_marginals(6, 2)])
    assert tv2 < 0.1
    # the same seed gives the same release
    again = rs.run(stats, big, config, authorized(2))
    assert np.array_equal(again.weights, release.weights) and np.array_equal(again.points, release.points)


def test_run_rejects_statistics_of_another_workload():
    stats = rs.collect_statistics([random_codes(50)], DOMAIN, rs.Config(epsilon=1.0, workload="1way+2way"))
    with pytest.raises(ValueError, match="workload"):
        rs.run(stats, DOMAIN, rs.Config(epsilon=1.0), authorized())


def test_single_attribute_domain_uses_its_one_way_marginal():
    single = Domain(("a",), (5,))
    X = np.random.default_rng(0).integers(0, 5, size=(500, 1)).astype(np.int32)
    config = rs.Config(epsilon=5.0)
    release = rs.run(rs.collect_statistics([X], single, config), single, config, authorized())
    assert release.public_facts["marginals"] == 1
    release.check_domain(single)


def test_registered_under_its_name():
    assert get_mechanism("reduced_space") is rs and rs.NAME == "reduced_space"


# ------------------------------------------------------------------------------ config

@pytest.mark.parametrize("field, value", [
    ("epsilon", 0.0), ("epsilon", -1.0), ("epsilon", float("inf")), ("epsilon", True),
    ("delta", 0.0), ("delta", 1.0), ("points_per_statistic", 0.0), ("max_points", 0),
    ("iterations", 0), ("time_limit_s", -1.0), ("workload", "3way"), ("reduced_space", "gaussian"),
    ("objective", "l3"),
])
def test_config_errors_name_the_parameter(field, value):
    kwargs = {"epsilon": 1.0, field: value}
    with pytest.raises(pydantic.ValidationError, match=field):
        rs.Config(**kwargs)


def test_config_is_frozen_and_forbids_unknown_fields():
    config = rs.Config(epsilon=1.0)
    with pytest.raises(pydantic.ValidationError):
        config.epsilon = 2.0
    with pytest.raises(pydantic.ValidationError, match="sigma"):
        rs.Config(epsilon=1.0, sigma=3.0)


def test_auto_space_is_chosen_from_epsilon_alone():
    from privsynth.mechanisms.reduced_space import TREE_MIN_EPSILON, Config, resolved_space

    assert resolved_space(Config(epsilon=TREE_MIN_EPSILON)) == "noisy_tree"
    assert resolved_space(Config(epsilon=TREE_MIN_EPSILON / 2)) == "noisy_marginals"
    assert resolved_space(Config(epsilon=0.1, reduced_space="uniform")) == "uniform"
