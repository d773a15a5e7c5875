"""Noise sources: the authorize gate, reproducibility, and the distributions of every draw.

Statistical checks use fixed seeds (SeededNoise) and tolerances of about 5 standard errors, so a
correct sampler passes with overwhelming probability and a wrong scale (e.g. 2x, or variance for
std) fails. SecureNoise (OpenDP) is slow per draw, so its samples are modest.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from scipy import stats

from privsynth.privacy.noise import BudgetNotChargedError, SecureNoise, SeededNoise, make_noise_source


def seeded(seed: int = 0) -> SeededNoise:
    noise = SeededNoise(seed, "test-key")
    noise.authorize("test")
    return noise


@pytest.fixture(scope="module")
def secure() -> SecureNoise:
    noise = SecureNoise()
    noise.authorize("test")
    return noise


def softmax(scores: np.ndarray, scale: float) -> np.ndarray:
    z = np.exp((scores - scores.max()) / scale)
    return z / z.sum()


def chi_square_pvalue(observed: np.ndarray, probabilities: np.ndarray) -> float:
    expected = probabilities * observed.sum()
    return float(stats.chisquare(observed, expected).pvalue)


# ---------------------------------------------------------------- gate and validation

@pytest.mark.parametrize("factory", [lambda: SeededNoise(1, "test-key"), SecureNoise])
def test_draws_refused_before_authorize(factory):
    noise = factory()
    for draw in (lambda: noise.laplace(1.0, 3), lambda: noise.gaussian(1.0, 3),
                 lambda: noise.noisy_max(np.ones(3), 1.0), lambda: noise.noisy_top_k(np.ones(3), 1.0, 2),
                 lambda: noise.choice(np.array([0.5, 0.5]), 2)):
        with pytest.raises(BudgetNotChargedError):
            draw()
    # Post-processing randomness needs no charge.
    assert noise.post_rng.uniform() < 1.0
    with pytest.raises(ValueError, match="reference"):
        noise.authorize("")
    noise.authorize("ledger-charge-1")
    assert noise.charge_reference == "ledger-charge-1"
    assert noise.laplace(1.0, 3).shape == (3,)


@pytest.mark.parametrize("bad", [0, 0.0, -1.0, float("nan"), float("inf"), True, "1", None])
def test_bad_scale_rejected(bad):
    noise = seeded()
    for draw in (lambda: noise.laplace(bad, 2), lambda: noise.gaussian(bad, 2),
                 lambda: noise.noisy_max(np.ones(2), bad), lambda: noise.noisy_top_k(np.ones(2), bad, 1)):
        with pytest.raises(ValueError, match="scale"):
            draw()


def test_numpy_scalar_scale_accepted():
    noise = seeded()
    assert noise.laplace(np.float32(1.5), 2).shape == (2,)
    assert noise.gaussian(np.float64(1.5), 2).shape == (2,)
    assert noise.laplace(np.int64(2), 2).shape == (2,)


def test_bad_scores_and_k_rejected():
    noise = seeded()
    for scores in (np.array([]), np.ones((2, 2)), np.array([0.0, np.nan]), np.array([1.0, np.inf])):
        with pytest.raises(ValueError, match="scores"):
            noise.noisy_max(scores, 1.0)
        with pytest.raises(ValueError, match="scores"):
            noise.noisy_top_k(scores, 1.0, 1)
    for k in (0, 4, -1, 1.5, True):
        with pytest.raises(ValueError, match="k"):
            noise.noisy_top_k(np.ones(3), 1.0, k)


@pytest.mark.parametrize("p", [[0.5, 0.6], [-0.1, 1.1], [], [[0.5, 0.5]], [np.nan, 1.0]])
def test_bad_choice_probabilities_rejected(p):
    with pytest.raises(ValueError, match="probability"):
        seeded().choice(np.array(p, dtype=float), 3)


@pytest.mark.parametrize("seed", [-1, True, 1.5, "3", None])
def test_bad_seed_rejected(seed):
    with pytest.raises(ValueError, match="seed"):
        SeededNoise(seed, "test-key")


# ---------------------------------------------------------------- reproducibility and description

def test_seeded_reproducible_and_seed_dependent():
    def draws(seed: int) -> tuple:
        n = seeded(seed)
        return (n.laplace(1.0, 5), n.gaussian(2.0, 5), n.noisy_max(np.arange(10.0), 5.0),
                n.noisy_top_k(np.arange(10.0), 5.0, 3), n.choice(np.full(10, 0.1), 5), n.post_rng.uniform(size=5))

    a, b, c = draws(7), draws(7), draws(8)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a[0], c[0])
    assert not np.array_equal(a[1], c[1])
    assert not np.array_equal(a[5], c[5])


def test_post_rng_is_a_separate_stream():
    # Post-processing draws must not shift the privacy noise stream (and vice versa).
    plain, busy = seeded(3), seeded(3)
    busy.post_rng.uniform(size=1000)
    np.testing.assert_array_equal(plain.laplace(1.0, 10), busy.laplace(1.0, 10))
    noise = seeded(3)
    assert not np.allclose(noise.post_rng.uniform(size=10), seeded(3).laplace(1.0, 10))


def test_secure_sources_are_not_reproducible(secure):
    other = SecureNoise()
    other.authorize("test")
    assert not np.array_equal(secure.laplace(1.0, 8), other.laplace(1.0, 8))
    assert not np.array_equal(SecureNoise().post_rng.uniform(size=4), SecureNoise().post_rng.uniform(size=4))


def test_describe_and_factory():
    s = SeededNoise(5, "test-key").describe()
    assert s["reproducible"] is True and s["hardened_against_floating_point_attacks"] is False and s["seed"] == 5
    assert "not hardened" in s["note"]
    h = SecureNoise().describe()
    assert h["reproducible"] is False and h["hardened_against_floating_point_attacks"] is True and h["seed"] is None
    assert "OpenDP" in h["sampler"]
    assert isinstance(make_noise_source(None, "k"), SecureNoise) and make_noise_source(None, "k").secure
    made = make_noise_source(5, "k", b"s" * 32)
    assert isinstance(made, SeededNoise) and made.seed == 5 and not made.secure
    with pytest.raises(ValueError, match="secret"):  # never a stream from the public seed and key alone
        make_noise_source(5, "k")


# ---------------------------------------------------------------- distributions (seeded)

def test_seeded_laplace_scale_and_tail():
    scale, n = 2.5, 200_000
    x = seeded(11).laplace(scale, n)
    # |X| ~ Exponential(scale): mean scale, std scale.
    assert abs(np.abs(x).mean() - scale) < 5 * scale / math.sqrt(n)
    assert abs(x.mean()) < 5 * scale * math.sqrt(2) / math.sqrt(n)
    for t in (1.0, 5.0, 10.0):
        p = math.exp(-t / scale)
        assert abs(np.mean(np.abs(x) > t) - p) < 5 * math.sqrt(p * (1 - p) / n)


def test_seeded_gaussian_std():
    scale, n = 0.7, 200_000
    x = seeded(12).gaussian(scale, n)
    assert abs(x.mean()) < 5 * scale / math.sqrt(n)
    # The sample variance has relative std sqrt(2 / n).
    assert abs(x.var() / scale**2 - 1) < 5 * math.sqrt(2 / n)
    assert abs(np.mean(np.abs(x) > 2 * scale) - 2 * stats.norm.sf(2)) < 0.003


def test_seeded_noisy_max_follows_softmax():
    # Gumbel-max: P(argmax = i) = exp(s_i / scale) / sum_j exp(s_j / scale).
    scores, scale = np.array([0.0, 1.0, 2.0, 2.0, -3.0]), 1.3
    noise = seeded(13)
    picks = np.array([noise.noisy_max(scores, scale) for _ in range(4000)])
    observed = np.bincount(picks, minlength=scores.size)
    assert chi_square_pvalue(observed, softmax(scores, scale)) > 1e-4


def test_noisy_top_k_distinct_and_exact_with_tiny_scale():
    noise = seeded(14)
    rng = np.random.default_rng(0)
    for _ in range(50):
        scores = rng.permutation(40).astype(float) * 3.0  # distinct, gaps of 3
        top = noise.noisy_top_k(scores, 1e-3, 7)
        assert len(top) == 7 and len(set(top.tolist())) == 7
        np.testing.assert_array_equal(top, np.argsort(-scores)[:7])
    assert sorted(noise.noisy_top_k(np.zeros(5), 1.0, 5).tolist()) == [0, 1, 2, 3, 4]


def test_noisy_top_k_uniform_with_huge_scale():
    scores = np.arange(8, dtype=float)  # differences are negligible next to the scale
    noise = seeded(15)
    picks = np.array([noise.noisy_top_k(scores, 1e6, 3) for _ in range(4000)])
    assert all(len(set(row)) == 3 for row in picks.tolist())
    for position in range(3):
        observed = np.bincount(picks[:, position], minlength=8)
        assert chi_square_pvalue(observed, np.full(8, 1 / 8)) > 1e-4


def test_noisy_top_k_matches_peeling():
    # One-shot Gumbel top-k must have the law of k peeled noisy-max calls: P(first = i, second = j) =
    # softmax_i * softmax_j restricted to the remaining items (Plackett-Luce).
    scores, scale = np.array([0.0, 0.5, 1.5]), 1.0
    noise = seeded(16)
    counts = Counter(tuple(noise.noisy_top_k(scores, scale, 2).tolist()) for _ in range(6000))
    p = softmax(scores, scale)
    pairs = [(i, j) for i in range(3) for j in range(3) if i != j]
    expected = np.array([p[i] * p[j] / (1 - p[i]) for i, j in pairs])
    observed = np.array([counts[pair] for pair in pairs])
    assert chi_square_pvalue(observed, expected) > 1e-4


def test_seeded_choice_frequencies():
    p = np.array([0.1, 0.0, 0.6, 0.3])
    draws = seeded(17).choice(p, 50_000)
    observed = np.bincount(draws, minlength=4)
    assert observed[1] == 0
    nonzero = p > 0
    assert chi_square_pvalue(observed[nonzero], p[nonzero]) > 1e-4


# ---------------------------------------------------------------- distributions (OpenDP)

def test_secure_laplace_scale(secure):
    scale, n = 3.0, 2000
    x = secure.laplace(scale, n)
    assert x.shape == (n,) and x.dtype == np.float64
    assert abs(np.abs(x).mean() - scale) < 5 * scale / math.sqrt(n)
    assert abs(np.mean(np.abs(x) > 2 * scale) - math.exp(-2)) < 5 * math.sqrt(math.exp(-2) / n)


def test_secure_gaussian_std(secure):
    scale, n = 0.5, 1500
    x = secure.gaussian(scale, n)
    assert x.shape == (n,)
    assert abs(x.std() / scale - 1) < 5 / math.sqrt(2 * n)


def test_secure_noisy_max_and_top_k(secure):
    scores, scale = np.array([0.0, 1.0, 2.0]), 1.0
    picks = np.array([secure.noisy_max(scores, scale) for _ in range(800)])
    assert chi_square_pvalue(np.bincount(picks, minlength=3), softmax(scores, scale)) > 1e-4
    assert secure.noisy_max(np.array([0.0, 100.0, 0.0]), 0.01) == 1
    top = secure.noisy_top_k(np.arange(10.0) * 10, 0.01, 3)
    np.testing.assert_array_equal(top, [9, 8, 7])


def test_secure_choice_frequencies(secure):
    p = np.array([0.25, 0.0, 0.75])
    draws = secure.choice(p, 4000)
    observed = np.bincount(draws, minlength=3)
    assert observed[1] == 0
    assert chi_square_pvalue(observed[[0, 2]], p[[0, 2]]) > 1e-4
