"""Randomized rounding (spec rap.md section 7.6) and the Release contract."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

from privsynth.mechanisms.base import WEIGHT_COLUMN, Release
from privsynth.mechanisms.rounding import draw_levels, level_cdf, round_release
from privsynth.schema.encoding import Domain, one_hot
from privsynth.schema.sampling import systematic_indices
from privsynth.schema.workload import all_marginals, marginal_counts, relaxed_marginal

DOMAIN = Domain(("a", "b", "c"), (3, 2, 4))


def relaxed_release(m: int, seed: int) -> Release:
    """m relaxed rows on the block simplex, with Dirichlet weights (some exactly zero)."""
    rng = np.random.default_rng(seed)
    points = np.concatenate([rng.dirichlet(np.full(s, 0.7), size=m) for s in DOMAIN.sizes], axis=1)
    weights = rng.dirichlet(np.ones(m))
    weights[0] = 0.0
    weights /= weights.sum()
    return Release("test", points, weights)


# ---------------------------------------------------------------- systematic resampling

def test_systematic_counts_within_one():
    rng = np.random.default_rng(0)
    for trial in range(200):
        m = int(rng.integers(1, 30))
        w = rng.dirichlet(np.full(m, 0.5))
        if trial % 3 == 0:
            w[rng.integers(0, m)] = 0.0
            w = w / w.sum() if w.sum() > 0 else np.full(m, 1 / m)
        rows = int(rng.integers(1, 500))
        picks = systematic_indices(w, rows, rng)
        assert picks.shape == (rows,)
        counts = np.bincount(picks, minlength=m)
        assert np.all(np.abs(counts - rows * w) < 1 + 1e-9)
        assert np.all(counts[w == 0] == 0)


def test_systematic_is_unbiased_and_shuffled():
    w = np.array([0.1, 0.25, 0.05, 0.6])
    rng = np.random.default_rng(1)
    mean = np.mean([np.bincount(systematic_indices(w, 7, rng), minlength=4) for _ in range(4000)], axis=0)
    np.testing.assert_allclose(mean, 7 * w, atol=0.05)
    picks = systematic_indices(np.full(4, 0.25), 400, rng)
    assert not np.all(np.diff(picks) >= 0)  # shuffled, not sorted by index


def test_systematic_unnormalised_weights_and_rows_check():
    rng = np.random.default_rng(2)
    counts = np.bincount(systematic_indices(np.array([2.0, 6.0]), 8, rng), minlength=2)
    np.testing.assert_array_equal(counts, [2, 6])
    with pytest.raises(ValueError, match="rows"):
        systematic_indices(np.ones(3), 0, rng)


# ---------------------------------------------------------------- level sampling

def sample_levels(probabilities, rng):
    """One level per row, drawn as round_release draws them (its cumulative probabilities, then a uniform)."""
    return draw_levels(level_cdf(probabilities), rng)


def test_sample_levels_valid_and_frequencies():
    rng = np.random.default_rng(3)
    p = np.array([0.2, 0.0, 0.5, 0.3])
    levels = sample_levels(np.tile(p, (40_000, 1)), rng)
    assert levels.min() >= 0 and levels.max() <= 3
    freq = np.bincount(levels, minlength=4) / 40_000
    assert freq[1] == 0
    assert np.all(np.abs(freq - p) < 4 * np.sqrt(p * (1 - p) / 40_000) + 1e-12)
    # One-hot rows are deterministic; rows need not be normalised; tiny negative noise is clipped.
    np.testing.assert_array_equal(sample_levels(np.eye(4), rng), [0, 1, 2, 3])
    np.testing.assert_array_equal(sample_levels(np.array([[0.0, 3.0], [-1e-12, 2.0]]), rng), [1, 1])


# ---------------------------------------------------------------- round_release

def test_round_release_shapes_and_validity():
    release = relaxed_release(12, seed=4)
    codes = round_release(release, DOMAIN, 250, np.random.default_rng(0))
    assert codes.shape == (250, 3) and codes.dtype == np.int32
    assert np.all(codes >= 0) and np.all(codes < np.array(DOMAIN.sizes))
    np.testing.assert_array_equal(round_release(release, DOMAIN, 250, np.random.default_rng(0)), codes)


def test_deterministic_rows_round_to_themselves():
    codes = np.array([[0, 1, 3], [2, 0, 0], [1, 1, 2]], dtype=np.int32)
    release = Release("test", one_hot(codes, DOMAIN).astype(float), np.full(3, 1 / 3))
    out = round_release(release, DOMAIN, 30, np.random.default_rng(0))
    # Each row appears exactly 10 times (systematic resampling of equal weights).
    rows, counts = np.unique(out, axis=0, return_counts=True)
    np.testing.assert_array_equal(rows, codes[np.lexsort(codes.T[::-1])])
    np.testing.assert_array_equal(counts, [10, 10, 10])


def test_rows_across_chunks_keep_their_own_point(monkeypatch):
    """Rows are drawn a chunk at a time, one attribute after another: every row's levels still come from the
    one point it picked (a row's codes are one of the points', never a mix of two points')."""
    import privsynth.mechanisms.rounding as rounding

    monkeypatch.setattr(rounding, "ROUNDING_CHUNK_ROWS", 7)
    codes = np.array([[0, 1, 3], [2, 0, 0], [1, 1, 2], [2, 1, 1]], dtype=np.int32)
    release = Release("test", one_hot(codes, DOMAIN).astype(float), np.array([0.1, 0.2, 0.3, 0.4]))
    out = round_release(release, DOMAIN, 50, np.random.default_rng(3))
    rows, counts = np.unique(out, axis=0, return_counts=True)
    assert {tuple(r) for r in rows} == {tuple(c) for c in codes}
    assert sorted(counts) == [5, 10, 15, 20]


def test_round_release_is_unbiased_on_marginals():
    # Spec 7.6 item 26: the average rounded answer -> the relaxed answer, tolerance 4 sqrt(p(1-p)/(rows R)).
    release = relaxed_release(8, seed=5)
    rows, repetitions = 40, 400
    rng = np.random.default_rng(6)
    marginals = all_marginals(3, 1) + all_marginals(3, 2)
    sums = {m: np.zeros(DOMAIN.size_of(m)) for m in marginals}
    for _ in range(repetitions):
        codes = round_release(release, DOMAIN, rows, rng)
        for m in marginals:
            sums[m] += marginal_counts(codes, DOMAIN, m) / rows
    for m in marginals:
        expected = relaxed_marginal(release.points, release.weights, DOMAIN, m)
        observed = sums[m] / repetitions
        tolerance = 4 * np.sqrt(expected * (1 - expected) / (rows * repetitions)) + 1e-3
        assert np.all(np.abs(observed - expected) <= tolerance), (m, observed, expected)


def test_blocks_are_rounded_independently():
    # Spec 7.6 item 28: one row with p = (0.5, 0.5) in two blocks -> every joint cell ~ 0.25.
    domain = Domain(("x", "y"), (2, 2))
    release = Release("test", np.array([[0.5, 0.5, 0.5, 0.5]]), np.array([1.0]))
    codes = round_release(release, domain, 20_000, np.random.default_rng(7))
    joint = marginal_counts(codes, domain, (0, 1)) / 20_000
    assert np.all(np.abs(joint - 0.25) < 4 * math.sqrt(0.25 * 0.75 / 20_000))


def test_exact_release_returned_once():
    codes = np.array([[0, 1, 3], [2, 0, 0], [2, 0, 0], [1, 1, 2]], dtype=np.int32)
    release = Release("private_sampling", one_hot(codes, DOMAIN).astype(float), np.full(4, 0.25), exact=True)
    for rows in (None, 4):
        np.testing.assert_array_equal(round_release(release, DOMAIN, rows, np.random.default_rng(0)), codes)
    with pytest.raises(ValueError, match="exactly 4 records"):
        round_release(release, DOMAIN, 5, np.random.default_rng(0))
    with pytest.raises(ValueError, match="exactly 4 records"):
        round_release(release, DOMAIN, 3, np.random.default_rng(0))


def test_weighted_release_needs_rows():
    with pytest.raises(ValueError, match="rows is required"):
        round_release(relaxed_release(3, 0), DOMAIN, None, np.random.default_rng(0))


# ---------------------------------------------------------------- Release validation

@pytest.mark.parametrize("points, weights, problem", [
    (np.zeros(9), np.ones(1), "points"),
    (np.zeros((2, 9)), np.ones(3) / 3, "one weight per point"),
    (np.zeros((0, 9)), np.zeros(0), "at least one point"),
    (np.zeros((2, 9)), np.array([1.5, -0.5]), "non-negative"),
    (np.zeros((2, 9)), np.array([0.5, 0.4]), "sum to 1"),
    (np.zeros((2, 9)), np.array([np.nan, 1.0]), "sum to 1"),
])
def test_release_validation(points, weights, problem):
    with pytest.raises(ValueError, match=problem):
        Release("test", points, weights)


def test_release_check_domain():
    good = relaxed_release(3, 0)
    good.check_domain(DOMAIN)
    with pytest.raises(ValueError, match="width 9 does not match the domain width 10"):
        good.check_domain(Domain(("a", "b", "c"), (3, 2, 5)))
    bad = good.points.copy()
    bad[0, 1] += bad[0, 0] + 0.05  # the block still sums to 1, with one entry at -0.05
    bad[0, 0] = -0.05
    with pytest.raises(ValueError, match="negative"):
        Release("test", bad, good.weights).check_domain(DOMAIN)
    off = good.points.copy()
    off[1, 3:5] *= 0.5
    with pytest.raises(ValueError, match="simplex"):
        Release("test", off, good.weights).check_domain(DOMAIN)
    nan = good.points.copy()
    nan[2, 0] = np.nan
    with pytest.raises(ValueError, match="simplex"):
        Release("test", nan, good.weights).check_domain(DOMAIN)
    with pytest.raises(ValueError):
        round_release(Release("test", off, good.weights), DOMAIN, 10, np.random.default_rng(0))


def test_release_arrow_round_trip():
    release = relaxed_release(5, 1)
    names = [f"c{j}" for j in range(DOMAIN.width)]
    table = release.to_arrow(names)
    assert isinstance(table, pa.Table) and table.column_names == names + [WEIGHT_COLUMN]
    back = Release.from_arrow(table)
    np.testing.assert_array_equal(back.points, release.points)
    np.testing.assert_array_equal(back.weights, release.weights)
    assert back.mechanism == "test" and back.exact is False
    exact = Release("ps", one_hot(np.zeros((2, 3), dtype=np.int32), DOMAIN).astype(float), np.full(2, 0.5), exact=True)
    assert Release.from_arrow(exact.to_arrow(names)).exact is True


def test_a_one_hot_release_is_written_and_read_a_row_group_at_a_time_as_bytes(tmp_path):
    """AIM's points are 0/1: held as uint8 (a byte a level), written in row groups of RELEASE_BATCH_ROWS
    and read back group by group into one uint8 array, the same points and weights."""
    from privsynth.mechanisms.base import RELEASE_BATCH_ROWS
    from privsynth.run.releases import read_release, write_release

    rng = np.random.default_rng(3)
    m = 2 * RELEASE_BATCH_ROWS + 17
    codes = np.stack([rng.integers(0, k, m) for k in DOMAIN.sizes], axis=1).astype(np.int32)
    release = Release("aim", one_hot(codes, DOMAIN), np.full(m, 1.0 / m))
    assert release.points.dtype == np.uint8
    names = [f"c{j}" for j in range(DOMAIN.width)]
    write_release(tmp_path / "release.parquet", release, names)
    import pyarrow.parquet as pq

    assert pq.ParquetFile(tmp_path / "release.parquet").num_row_groups == 3
    back = read_release(tmp_path / "release.parquet")
    assert back.points.dtype == np.uint8
    np.testing.assert_array_equal(back.points, release.points)
    np.testing.assert_array_equal(back.weights, release.weights)
    np.testing.assert_array_equal(round_release(back, DOMAIN, m, np.random.default_rng(0)).sum(axis=0),
                                  codes.sum(axis=0))  # equal weights, one draw per point: the records themselves


def test_the_simplex_check_reads_every_batch_of_points():
    """check_domain goes a batch of points at a time (reduceat casts its whole input first); a bad block
    after the first batch is still found."""
    from privsynth.mechanisms.base import RELEASE_BATCH_ROWS

    m = RELEASE_BATCH_ROWS + 5
    points = one_hot(np.zeros((m, 3), dtype=np.int32), DOMAIN)
    points[m - 1, 0] = 0  # the last point's first block is empty
    with pytest.raises(ValueError, match="simplex"):
        Release("aim", points, np.full(m, 1.0 / m)).check_domain(DOMAIN)
