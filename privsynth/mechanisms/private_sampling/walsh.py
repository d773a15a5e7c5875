"""Walsh features of degree <= d on the Boolean cube {-1,1}^p (spec docs/specs/private_sampling.md section 0).

Convention, used everywhere in privsynth (data rows, the reduced space S and decoding):
    sign = 2 * bit - 1,   i.e. bit 1 <-> +1 and bit 0 <-> -1.

The Walsh function of a subset J of [p] is w_J(x) = prod_{j in J} x(j), with w_{} = 1. Subsets are
enumerated in one fixed order: the empty set first, then by size, then lexicographically; so for
d = 2 the features are [1, x_1..x_p, x_a x_b (a < b)]. There are N = binom(p, <= d) of them.

We never use 2^-p-normalised Fourier coefficients (they underflow for large p): the moments are
unnormalised, c_J(f) = sum_x f(x) w_J(x) = E_{Z~f} w_J(Z). A marginal of dimension |J| <= d is then
    P{x_J = theta_J} = 2^-|J| sum_{J' subset of J} theta^{J'} c_{J'}      ([PS] section 4.1).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from functools import lru_cache

import numpy as np

Subset = tuple[int, ...]

# Rows per chunk when materialising features: bounds the temporary to about chunk * N floats.
_CHUNK_ELEMENTS = 4_000_000


def n_walsh(p: int, d: int) -> int:
    """N = binom(p, <= d) = sum_{j <= d} C(p, j): the number of Walsh functions of degree <= d."""
    if p < 0 or d < 0:
        raise ValueError(f"p and d must be >= 0, got p={p}, d={d}")
    return sum(math.comb(p, j) for j in range(min(p, d) + 1))


@lru_cache(maxsize=32)
def walsh_subsets(p: int, d: int) -> tuple[Subset, ...]:
    """The subsets J with |J| <= d in the fixed feature order (empty set, then by size, then lexicographic)."""
    n_walsh(p, d)  # validates
    return tuple(J for r in range(min(p, d) + 1) for J in itertools.combinations(range(p), r))


@lru_cache(maxsize=32)
def walsh_index(p: int, d: int) -> dict[Subset, int]:
    """Column index of every subset in the feature order."""
    return {J: i for i, J in enumerate(walsh_subsets(p, d))}


@lru_cache(maxsize=32)
def _recursion_plan(p: int, d: int) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """For each degree r >= 1: (column of the prefix J[:-1], last element J[-1]) of every subset of size r."""
    index = walsh_index(p, d)
    plan = []
    for r in range(1, min(p, d) + 1):
        subsets = [J for J in walsh_subsets(p, d) if len(J) == r]
        prefix = np.array([index[J[:-1]] for J in subsets], dtype=np.int64)
        last = np.array([J[-1] for J in subsets], dtype=np.int64)
        plan.append((prefix, last))
    return tuple(plan)


def bits_to_signs(bits: np.ndarray) -> np.ndarray:
    """{0,1} -> {-1,1} with the package convention sign = 2 * bit - 1 (int8)."""
    bits = np.asarray(bits)
    if bits.size and (bits.min() < 0 or bits.max() > 1):
        raise ValueError("bits must be 0 or 1")
    return (2 * bits.astype(np.int8) - 1).astype(np.int8)


def signs_to_bits(signs: np.ndarray) -> np.ndarray:
    """{-1,1} -> {0,1}, the inverse of ``bits_to_signs`` (uint8)."""
    signs = np.asarray(signs)
    if signs.size and not np.all(np.abs(signs) == 1):
        raise ValueError("signs must be -1 or +1")
    return ((signs.astype(np.int16) + 1) // 2).astype(np.uint8)


def walsh_features(signs: np.ndarray, d: int, dtype=np.float64) -> np.ndarray:
    """The r x N matrix [w_J(x_i)] of rows x_i in {-1,1}^p, columns in ``walsh_subsets(p, d)`` order.

    Built degree by degree: w_J = w_{J minus max J} * x(max J), one vectorised product per degree.
    """
    signs = np.asarray(signs)
    if signs.ndim != 2:
        raise ValueError(f"signs must be a 2-d array (rows x p), got shape {signs.shape}")
    r, p = signs.shape
    out = np.empty((r, n_walsh(p, d)), dtype=dtype)
    out[:, 0] = 1
    x = signs.astype(dtype, copy=False)
    start = 1
    for prefix, last in _recursion_plan(p, d):
        stop = start + prefix.size
        out[:, start:stop] = out[:, prefix] * x[:, last]
        start = stop
    return out


def walsh_moment_sums(signs: np.ndarray, d: int, weights: np.ndarray | None = None) -> np.ndarray:
    """sum_i weight_i w_J(x_i) for every |J| <= d (weights default to 1: one per row; float64, exact for
    integer weights while the sums stay below 2^53).

    A row with weight c counts as c identical rows, so a sparse histogram (distinct rows and their
    counts) gives exactly the sums of the rows it stands for. d <= 2 uses the Gram matrix X^T W X (BLAS)
    instead of the r x N feature matrix; higher d streams row chunks so the temporary stays near
    ``_CHUNK_ELEMENTS`` floats.
    """
    signs = np.asarray(signs)
    r, p = signs.shape
    if weights is not None:
        weights = np.asarray(weights, dtype=np.float64)
        if weights.shape != (r,) or not np.all(np.isfinite(weights)) or (r and weights.min() < 0):
            raise ValueError(f"weights must be {r} finite numbers >= 0, one per row")
    N = n_walsh(p, d)
    x = signs.astype(np.float64)
    if d <= 2:
        sums = np.empty(N, dtype=np.float64)
        sums[0] = r if weights is None else weights.sum()
        if d >= 1 and p:
            sums[1: 1 + p] = x.sum(axis=0) if weights is None else weights @ x
        if d >= 2 and p >= 2:
            # A C-ordered copy of X^T: numpy's matmul of the transposed view by another matrix was 10x slower.
            gram = x.T @ x if weights is None else np.ascontiguousarray(x.T) @ (x * weights[:, None])
            iu, ju = np.triu_indices(p, 1)  # row-major (a < b): the lexicographic order of pairs
            sums[1 + p:] = gram[iu, ju]
        return sums
    chunk = max(1, _CHUNK_ELEMENTS // max(N, 1))
    sums = np.zeros(N, dtype=np.float64)
    for start in range(0, r, chunk):
        features = walsh_features(x[start: start + chunk], d)
        sums += features.sum(axis=0) if weights is None else weights[start: start + chunk] @ features
    return sums


def accumulate_moment_sums(sign_batches: Iterable[np.ndarray], p: int, d: int) -> tuple[np.ndarray, int]:
    """One streaming pass: the Walsh moment sums and the number of rows."""
    sums = np.zeros(n_walsh(p, d), dtype=np.float64)
    n = 0
    for batch in sign_batches:
        if batch.ndim != 2 or batch.shape[1] != p:
            raise ValueError(f"every batch must have {p} sign columns, got shape {batch.shape}")
        sums += walsh_moment_sums(batch, d)
        n += batch.shape[0]
    return sums, n


def marginal_from_moments(moments: np.ndarray, p: int, d: int, J: Sequence[int], theta: Sequence[int]) -> float:
    """P{x_J = theta} of a density from its unnormalised Walsh moments (|J| <= d, theta in {-1,1}^|J|)."""
    J = tuple(int(j) for j in J)
    if len(J) > d or len(set(J)) != len(J) or list(J) != sorted(J):
        raise ValueError(f"J must be a sorted set of at most d={d} distinct coordinates, got {J}")
    if len(theta) != len(J) or any(t not in (-1, 1) for t in theta):
        raise ValueError("theta must give one sign (+1 or -1) per coordinate of J")
    index = walsh_index(p, d)
    total = 0.0
    for r in range(len(J) + 1):
        for pos in itertools.combinations(range(len(J)), r):
            sign = int(np.prod([theta[i] for i in pos])) if pos else 1
            total += sign * moments[index[tuple(J[i] for i in pos)]]
    return total / 2 ** len(J)


def all_marginals_from_moments(moments: np.ndarray, p: int, d: int) -> np.ndarray:
    """Every marginal cell of dimension 1..d, as one vector (order: subsets, then sign patterns)."""
    cells = []
    for J in walsh_subsets(p, d)[1:]:
        for theta in itertools.product((-1, 1), repeat=len(J)):
            cells.append(marginal_from_moments(moments, p, d, J, theta))
    return np.asarray(cells)
