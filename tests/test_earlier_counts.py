"""Discovery's category counts as measurements of the run (issue 37.2, docs/design.md section 2): the counts a
discover stage released are joined with the mechanism's own 1-way measurements by inverse variance, at no new
cost, and only where the selection that kept a category barely touched its count."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import Exact

from privsynth.discovery.categories import (
    CANDIDATE_SIGMAS,
    EARLIER_MARGIN_SIGMAS,
    CategoryRelease,
    category_counts,
    dp_categories,
    threshold,
)
from privsynth.mechanisms.aim import mechanism as aim
from privsynth.mechanisms.aim.compression import compress_levels, compressed_one_way, with_earlier_counts
from privsynth.mechanisms.aim.model import NoisyMarginal
from privsynth.mechanisms.base import EarlierCounts
from privsynth.mechanisms.catalogue import load
from privsynth.privacy.accounting import gaussian_sigma
from privsynth.privacy.noise import SeededNoise
from privsynth.run.earlier_counts import earlier_counts
from privsynth.schema import parse_schema
from privsynth.schema.encoding import Domain
from privsynth.schema.workload import Histogram


def test_joined_counts_are_the_inverse_variance_mean_with_its_variance():
    start = NoisyMarginal((0,), np.array([100.0, 50.0, 10.0]), 4.0)
    joined = with_earlier_counts(start, [0, 2], [110.0, 30.0], [2.0, 4.0])
    # level 0: weights 1/16 and 1/4 -> (100/16 + 110/4) / (1/16 + 1/4) = 108; variance 1 / (5/16) = 3.2
    # level 2: equal weights -> 20, variance 8; level 1 untouched
    np.testing.assert_allclose(joined.values, [108.0, 50.0, 20.0])
    np.testing.assert_allclose(joined.variance_scale * 16.0, [3.2, 16.0, 8.0])
    assert joined.sigma == 4.0 and joined.total_variance() == pytest.approx(3.2 + 16.0 + 8.0)
    np.testing.assert_array_equal(start.values, [100.0, 50.0, 10.0])  # the measurement itself is not changed


def test_a_merged_level_sums_the_variances_of_joined_cells():
    joined = with_earlier_counts(NoisyMarginal((0,), np.array([500.0, 2.0, 3.0]), 2.0), [1], [4.0], [2.0])
    merged = compressed_one_way(joined, compress_levels([joined.values], [10.0]))
    np.testing.assert_allclose(merged.values, [500.0, 3.0 + 3.0])
    np.testing.assert_allclose(merged.variance_scale, [1.0, 0.5 + 1.0])


def test_a_look_says_each_kept_values_noise_and_bar():
    values, counts = ["paid", "free", "rare"], np.array([3000.0, 400.0, 7.0])
    rho = 5e-5
    first = dp_categories(values, counts, rho, 1e-9, Exact())
    look = dp_categories(values, counts, rho, 1e-9, Exact(), prior=first, candidates=("free",))
    assert look.categories == ("free", "paid")
    # "free" was a public candidate: this look's noise and its 3-deviation bar; "paid": both looks' and tau
    assert look.noisy_sigmas == pytest.approx((gaussian_sigma(rho), gaussian_sigma(2 * rho)))
    assert look.bars == pytest.approx((CANDIDATE_SIGMAS * gaussian_sigma(rho), look.tau))


def test_only_counts_well_past_their_bar_are_handed_on():
    sigma, tau = 10.0, 60.0
    margin = tau + EARLIER_MARGIN_SIGMAS * sigma
    release = CategoryRelease(("a", "b", "c ", "c"), sigma, tau, noisy=(margin + 1, margin - 1, 500.0, 300.0),
                              noisy_sigmas=(sigma,) * 4, bars=(tau,) * 4)
    counts = category_counts(release)
    assert set(counts) == {"a", "c "}  # "b" passed its bar by less than the margin: its count is biased upwards
    # two spellings of one value ("c ", "c"): one category (the larger's spelling), their counts summed
    assert counts["c "] == pytest.approx((800.0, sigma * 2**0.5))
    assert counts["a"] == pytest.approx((margin + 1, sigma))


def test_the_margin_keeps_the_selection_bias_small():
    """A value's count near its bar is biased upwards by the selection: over many draws the counts handed on
    are unbiased to a tenth of a deviation, while every kept count would not be."""
    sigma = gaussian_sigma(1e-4)
    tau = threshold(sigma, 1e-9)
    true = tau + sigma  # a value that passes its bar about 84% of the time
    rng = np.random.default_rng(0)
    kept_all, handed_on, total = [], [], 20_000
    for _ in range(total):
        y = true + rng.normal(0.0, sigma)
        if y > tau:
            kept_all.append(y)
            got = category_counts(CategoryRelease(("v",), sigma, tau, noisy=(y,), noisy_sigmas=(sigma,), bars=(tau,)))
            if got:
                handed_on.append(got["v"][0])
    assert np.mean(kept_all) - true > 0.2 * sigma
    # counts handed on come from draws far above the bar: their bias is E[y - true | y > tau + 2 sigma] (about
    # 1.5 sigma here), but they are few (Q(1) = 16%): the bias each kept value carries on average is
    assert abs(np.sum(np.asarray(handed_on) - true)) / total < 0.3 * sigma


def test_counts_land_on_the_schemas_levels():
    schema = parse_schema({"name": "t", "columns": [
        {"name": "drop_me", "type": "categorical", "categories": ["x"], "drop": True},
        {"name": "colour", "type": "categorical", "categories": ["blue", "green", "red"], "nullable": True},
        {"name": "age", "type": "integer", "bounds": [0, 10], "bins": [0, 5, 10]}]})
    got = earlier_counts(schema, {"colour": {"red": (40.0, 3.0), "blue": (10.0, 3.0), "gone": (5.0, 3.0)},
                                  "drop_me": {"x": (1.0, 1.0)}, "age": {"1": (3.0, 1.0)}})
    assert got == (EarlierCounts(0, (0, 2), (10.0, 40.0), (3.0, 3.0)),)


def test_earlier_counts_need_one_count_and_a_positive_sigma_per_level():
    with pytest.raises(ValueError, match="one noisy count"):
        EarlierCounts(0, (0, 1), (1.0,), (1.0, 1.0))
    with pytest.raises(ValueError, match="positive sigmas"):
        EarlierCounts(0, (0,), (1.0,), (0.0,))


def _aim_release(earlier=(), seed=0):
    domain = Domain(("a", "b"), (3, 2))
    rng = np.random.default_rng(1)
    codes = np.column_stack([rng.choice(3, 4000, p=[0.7, 0.2, 0.1]), rng.integers(0, 2, 4000)]).astype(np.int32)
    config = aim.Config(epsilon=0.05, delta=1e-9, k=2)
    noise = SeededNoise(seed, "earlier")
    noise.authorize("earlier")
    return aim.run(aim.collect_statistics(Histogram.of_codes(codes), domain, config), domain, config, noise,
                   earlier=earlier), codes


def test_aim_joins_earlier_counts_at_no_cost_and_publishes_its_own_measurements():
    plain, codes = _aim_release()
    exact = np.bincount(codes[:, 0], minlength=3).astype(float)
    config = aim.Config(epsilon=0.05, delta=1e-9, k=2)
    start_sigma = aim.start_sigmas(config, (3, 2))[0]
    earlier = (EarlierCounts(0, (0, 1, 2), tuple(exact), (start_sigma / 2,) * 3),)
    joined, _ = _aim_release(earlier)
    # the same draws: the start's 1-way measurements are published as measured, the cost is the config's
    assert [m.noisy_counts.tolist() for m in joined.measurements[:2]] == \
        [m.noisy_counts.tolist() for m in plain.measurements[:2]]
    assert joined.public_facts["rho"] == plain.public_facts["rho"]
    # the rounds' path is the start's own: the same marginals at the same sigmas (the counts join the final fit)
    for fact in ("measured_marginals", "sigmas", "compressed_levels"):
        assert joined.public_facts[fact] == plain.public_facts[fact]
    assert joined.public_facts["earlier_counts_joined"] == {"a": 3}
    assert plain.public_facts["earlier_counts_joined"] == {}

    def error(release) -> float:  # the release's 1-way error on attribute a (levels 0-2 are its one-hot columns)
        share = np.array([release.weights[release.points[:, i] == 1].sum() for i in range(3)])
        return float(np.abs(share - exact / exact.sum()).sum())

    # counts four times as precise as the start's, exact here: over seeds, the joined 1-way error is smaller
    seeds = range(6)
    assert np.mean([error(_aim_release(earlier, s)[0]) for s in seeds]) < \
        0.75 * np.mean([error(_aim_release((), s)[0]) for s in seeds])


def test_only_a_mechanism_that_takes_earlier_counts_is_handed_them():
    assert load("aim").takes_earlier_counts
    assert not any(load(name).takes_earlier_counts for name in ("rap", "reduced_space", "microaggregation"))
