"""Marginal workloads: counts against a brute force, the product-query identity, streaming accumulation."""

from __future__ import annotations

import itertools
from math import comb

import numpy as np
import pytest

from privsynth.schema.encoding import Domain, one_hot
from privsynth.schema.workload import (
    accumulate_marginals,
    all_marginals,
    cell_index,
    marginal_counts,
    random_marginals,
    relaxed_marginal,
    total_variation,
)

DOMAIN = Domain(("a", "b", "c", "d"), (3, 2, 4, 1))


def random_codes(n: int, seed: int = 0, domain: Domain = DOMAIN) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.stack([rng.integers(0, s, n) for s in domain.sizes], axis=1).astype(np.int32)


def brute_force_counts(codes: np.ndarray, domain: Domain, marginal: tuple[int, ...], weights=None) -> np.ndarray:
    """Loop over cells in row-major order and count matching rows."""
    weights = np.ones(len(codes)) if weights is None else weights
    cells = itertools.product(*(range(domain.sizes[a]) for a in marginal))
    return np.array([weights[np.all(codes[:, list(marginal)] == np.array(cell), axis=1)].sum() for cell in cells])


def test_all_marginals():
    assert all_marginals(4, 2) == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    assert len(all_marginals(6, 3)) == comb(6, 3)
    assert all_marginals(3, 3) == [(0, 1, 2)]
    for k in (0, 5):
        with pytest.raises(ValueError, match="k must be in"):
            all_marginals(4, k)


def test_random_marginals_deterministic_per_seed():
    a = random_marginals(10, 3, 20, seed=1)
    assert a == random_marginals(10, 3, 20, seed=1)
    assert a != random_marginals(10, 3, 20, seed=2)
    assert len(a) == 20 and len(set(a)) == 20
    assert all(len(m) == 3 and list(m) == sorted(m) and len(set(m)) == 3 for m in a)
    assert a == sorted(a)
    assert random_marginals(5, 2, 100, seed=0) == all_marginals(5, 2)


def test_random_marginals_cover_the_pool_uniformly():
    # Over many seeds every 2-way marginal of 5 attributes is picked about count / pool of the time.
    hits = {m: 0 for m in all_marginals(5, 2)}
    for seed in range(400):
        for m in random_marginals(5, 2, 3, seed):
            hits[m] += 1
    freq = np.array(list(hits.values())) / 400
    assert np.all(np.abs(freq - 0.3) < 0.1)


@pytest.mark.parametrize("marginal", [(0,), (2,), (0, 1), (1, 2), (0, 2, 3), (0, 1, 2), (0, 1, 2, 3)])
def test_marginal_counts_match_brute_force(marginal):
    codes = random_codes(500, seed=len(marginal))
    counts = marginal_counts(codes, DOMAIN, marginal)
    assert counts.shape == (DOMAIN.size_of(marginal),) and counts.dtype == np.float64
    np.testing.assert_array_equal(counts, brute_force_counts(codes, DOMAIN, marginal))
    assert counts.sum() == 500
    weights = np.random.default_rng(1).uniform(size=500)
    np.testing.assert_allclose(marginal_counts(codes, DOMAIN, marginal, weights),
                               brute_force_counts(codes, DOMAIN, marginal, weights))


def test_cell_index_is_row_major():
    codes = np.array([[2, 1, 3, 0]], dtype=np.int32)
    assert cell_index(codes, DOMAIN, (0, 1, 2))[0] == 2 * (2 * 4) + 1 * 4 + 3
    assert cell_index(codes, DOMAIN, (2, 0))[0] == 3 * 3 + 2  # order of the tuple sets the significance


@pytest.mark.parametrize("marginal", [(0,), (0, 1), (1, 2), (0, 1, 2), (0, 2, 3)])
def test_relaxed_marginal_on_one_hot_equals_counts(marginal):
    # Product-query identity (RAP Lemma 3.3): on one-hot rows the product of bits is the cell indicator.
    codes = random_codes(300, seed=7)
    bits = one_hot(codes, DOMAIN).astype(np.float64)
    weights = np.random.default_rng(3).dirichlet(np.ones(300))
    np.testing.assert_allclose(relaxed_marginal(bits, weights, DOMAIN, marginal),
                               marginal_counts(codes, DOMAIN, marginal, weights), atol=1e-12)
    np.testing.assert_allclose(relaxed_marginal(bits, np.ones(300), DOMAIN, marginal),
                               marginal_counts(codes, DOMAIN, marginal), atol=1e-9)


def test_relaxed_marginal_on_simplex_rows():
    # Relaxed rows on the simplex: each row contributes the outer product of its blocks; masses sum to 1.
    rng = np.random.default_rng(5)
    blocks = [rng.dirichlet(np.ones(s), size=4) for s in DOMAIN.sizes]
    points = np.concatenate(blocks, axis=1)
    weights = np.full(4, 0.25)
    out = relaxed_marginal(points, weights, DOMAIN, (0, 2))
    expected = sum(0.25 * np.outer(blocks[0][i], blocks[2][i]).ravel() for i in range(4))
    np.testing.assert_allclose(out, expected, atol=1e-15)
    assert out.sum() == pytest.approx(1.0)
    assert np.all(out >= 0)


def test_accumulate_over_batches_equals_one_shot():
    codes = random_codes(1000, seed=11)
    marginals = all_marginals(4, 2) + [(0, 1, 2)]
    batches = (codes[i: i + 137] for i in range(0, 1000, 137))
    totals, n = accumulate_marginals(batches, DOMAIN, marginals)
    assert n == 1000
    assert set(totals) == set(marginals)
    for m in marginals:
        np.testing.assert_array_equal(totals[m], marginal_counts(codes, DOMAIN, m))
    empty, n0 = accumulate_marginals(iter([]), DOMAIN, [(0, 1)])
    assert n0 == 0 and np.all(empty[(0, 1)] == 0) and empty[(0, 1)].shape == (6,)


def test_total_variation():
    p = np.array([1.0, 0.0, 0.0])
    q = np.array([0.0, 0.0, 5.0])
    assert total_variation(p, p) == 0.0
    assert total_variation(p, q) == pytest.approx(1.0)
    assert total_variation([2, 2], [1, 3]) == pytest.approx(0.25)  # normalised first
    assert total_variation([2, 2], [1, 3]) == total_variation([1, 3], [2, 2])
    rng = np.random.default_rng(0)
    a, b, c = rng.uniform(size=(3, 10))
    assert total_variation(a, c) <= total_variation(a, b) + total_variation(b, c) + 1e-12
