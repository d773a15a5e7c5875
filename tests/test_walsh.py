"""Walsh features on {-1,1}^p (spec private_sampling.md section 6, T1-T4)."""

import itertools
import math

import numpy as np
import pytest

from privsynth.mechanisms.private_sampling.walsh import (
    accumulate_moment_sums,
    all_marginals_from_moments,
    bits_to_signs,
    marginal_from_moments,
    n_walsh,
    signs_to_bits,
    walsh_features,
    walsh_index,
    walsh_moment_sums,
    walsh_subsets,
)


def full_cube(p: int) -> np.ndarray:
    return np.array(list(itertools.product((-1, 1), repeat=p)), dtype=np.int8)


@pytest.mark.parametrize("p,d", [(1, 1), (5, 2), (6, 3), (4, 4), (12, 2)])
def test_column_count_constant_column_and_signs(p, d):  # T1
    N = sum(math.comb(p, j) for j in range(d + 1))
    assert n_walsh(p, d) == N == len(walsh_subsets(p, d))
    X = np.random.default_rng(0).choice([-1, 1], size=(50, p))
    F = walsh_features(X, d)
    assert F.shape == (50, N)
    assert np.all(F[:, 0] == 1)
    assert set(np.unique(F)) <= {-1.0, 1.0}


def test_feature_order_and_values():
    assert walsh_subsets(3, 2) == ((), (0,), (1,), (2,), (0, 1), (0, 2), (1, 2))
    x = np.array([[1, -1, -1]])
    np.testing.assert_array_equal(walsh_features(x, 2)[0], [1, 1, -1, -1, -1, -1, 1])
    F = walsh_features(np.random.default_rng(1).choice([-1, 1], size=(20, 6)), 3)
    for J, col in walsh_index(6, 3).items():
        X = np.random.default_rng(1).choice([-1, 1], size=(20, 6))
        np.testing.assert_array_equal(F[:, col], np.prod(X[:, list(J)], axis=1) if J else np.ones(20))


@pytest.mark.parametrize("p,d", [(5, 2), (6, 3), (4, 4)])
def test_orthogonality_on_full_cube(p, d):  # T2
    M = walsh_features(full_cube(p), d)
    np.testing.assert_array_equal(M.T @ M, 2 ** p * np.eye(n_walsh(p, d)))
    assert np.linalg.svd(M, compute_uv=False).min() == pytest.approx(math.sqrt(2 ** p))


def test_feature_norm_is_N_for_every_point():  # T3
    F = walsh_features(full_cube(6), 2)
    np.testing.assert_array_equal((F ** 2).sum(axis=1), n_walsh(6, 2))


def test_marginal_identity_pointwise():  # T4: 1{x1=1, x2=-1} = (w_{} + w_1 - w_2 - w_12)/4
    X = full_cube(4)
    F = walsh_features(X, 2)
    idx = walsh_index(4, 2)
    indicator = ((X[:, 0] == 1) & (X[:, 1] == -1)).astype(float)
    np.testing.assert_array_equal(indicator,
                                  (F[:, idx[()]] + F[:, idx[(0,)]] - F[:, idx[(1,)]] - F[:, idx[(0, 1)]]) / 4)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_marginals_from_moments_match_brute_force_counts(d):  # T4, general product formula
    rng = np.random.default_rng(2)
    p = 6
    X = np.where(rng.random((3000, p)) < np.linspace(0.1, 0.9, p), 1, -1).astype(np.int8)
    X[:, 1] = np.where(rng.random(3000) < 0.7, X[:, 0], X[:, 1])  # correlation
    moments = walsh_moment_sums(X, d) / len(X)
    for r in range(1, d + 1):
        for J in itertools.combinations(range(p), r):
            for theta in itertools.product((-1, 1), repeat=r):
                brute = np.mean(np.all(X[:, list(J)] == np.array(theta), axis=1))
                assert marginal_from_moments(moments, p, d, J, theta) == pytest.approx(brute, abs=1e-12)
    cells = all_marginals_from_moments(moments, p, d)
    assert cells.size == sum(2 ** r * math.comb(p, r) for r in range(1, d + 1))


@pytest.mark.parametrize("d", [1, 2, 3])
def test_moment_sums_agree_with_feature_matrix_and_stream(d):
    X = np.random.default_rng(3).choice([-1, 1], size=(1001, 9)).astype(np.int8)
    direct = walsh_features(X, d).sum(axis=0)
    np.testing.assert_array_equal(walsh_moment_sums(X, d), direct)
    sums, n = accumulate_moment_sums((X[i:i + 128] for i in range(0, 1001, 128)), 9, d)
    assert n == 1001
    np.testing.assert_array_equal(sums, direct)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_weighted_moment_sums_count_a_row_as_many_rows(d):
    rng = np.random.default_rng(4)
    X = rng.choice([-1, 1], size=(60, 7)).astype(np.int8)
    counts = rng.integers(0, 5, 60)
    counts[0] = 10 ** 9  # weights far beyond any batch: still exact integers in float64
    expanded = walsh_moment_sums(np.repeat(X[1:], counts[1:], axis=0), d) + 10 ** 9 * walsh_features(X[:1], d)[0]
    np.testing.assert_array_equal(walsh_moment_sums(X, d, weights=counts), expanded)
    np.testing.assert_array_equal(walsh_moment_sums(X, d, weights=np.ones(60)), walsh_moment_sums(X, d))
    with pytest.raises(ValueError, match="weights"):
        walsh_moment_sums(X, d, weights=-np.ones(60))
    with pytest.raises(ValueError, match="weights"):
        walsh_moment_sums(X, d, weights=np.ones(59))


def test_sign_convention_roundtrip():
    bits = np.array([[0, 1, 1, 0]], dtype=np.uint8)
    np.testing.assert_array_equal(bits_to_signs(bits), [[-1, 1, 1, -1]])  # sign = 2 bit - 1
    np.testing.assert_array_equal(signs_to_bits(bits_to_signs(bits)), bits)
    with pytest.raises(ValueError):
        bits_to_signs(np.array([[2]]))
    with pytest.raises(ValueError):
        signs_to_bits(np.array([[0]]))


def test_marginal_argument_checks():
    m = np.zeros(n_walsh(4, 2))
    with pytest.raises(ValueError):
        marginal_from_moments(m, 4, 2, (0, 1, 2), (1, 1, 1))
    with pytest.raises(ValueError):
        marginal_from_moments(m, 4, 2, (0,), (0,))
