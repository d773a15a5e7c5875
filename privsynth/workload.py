"""Marginal workloads and their answers, on level codes or on relaxed (block-simplex) rows.

A marginal is a tuple of attribute indices (ascending); its cells are the level combinations in
row-major (C) order, the order of ``np.ravel_multi_index``. Answers are counts (or weights) per cell.
Statistics are accumulated batch by batch, so one streaming pass over the data suffices and memory is
bounded by a batch plus the statistics.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

import numpy as np

from privsynth.encoding import Domain

Marginal = tuple[int, ...]


def all_marginals(n_attributes: int, k: int) -> list[Marginal]:
    """Every k-way marginal, in lexicographic order."""
    if not 1 <= k <= n_attributes:
        raise ValueError(f"k must be in [1, {n_attributes}], got {k}")
    return list(itertools.combinations(range(n_attributes), k))


def random_marginals(n_attributes: int, k: int, count: int, seed: int) -> list[Marginal]:
    """``count`` distinct k-way marginals drawn uniformly with a public seed (no data involved)."""
    pool = all_marginals(n_attributes, k)
    if count >= len(pool):
        return pool
    picks = np.random.default_rng(seed).choice(len(pool), size=count, replace=False)
    return [pool[i] for i in sorted(picks)]


def cell_index(codes: np.ndarray, domain: Domain, marginal: Marginal) -> np.ndarray:
    """Flat cell index of every row in one marginal."""
    dims = tuple(domain.sizes[a] for a in marginal)
    return np.ravel_multi_index(tuple(codes[:, a] for a in marginal), dims)


def marginal_counts(codes: np.ndarray, domain: Domain, marginal: Marginal, weights: np.ndarray | None = None) -> np.ndarray:
    """Counts (or summed weights) per cell of one marginal."""
    return np.bincount(cell_index(codes, domain, marginal), weights=weights,
                       minlength=domain.size_of(marginal)).astype(np.float64)


def accumulate_marginals(batches: Iterable[np.ndarray], domain: Domain, marginals: Sequence[Marginal]) -> tuple[dict[Marginal, np.ndarray], int]:
    """One streaming pass: counts of every marginal and the number of rows seen (both private)."""
    totals = {m: np.zeros(domain.size_of(m), dtype=np.float64) for m in marginals}
    n = 0
    for codes in batches:
        n += codes.shape[0]
        for m in marginals:
            totals[m] += marginal_counts(codes, domain, m)
    return totals, n


def relaxed_marginal(points: np.ndarray, weights: np.ndarray, domain: Domain, marginal: Marginal) -> np.ndarray:
    """Expected cell masses of a weighted set of relaxed rows: sum_i w_i * outer(block_a1(i), ..., block_ak(i)).

    For one-hot rows this equals ``marginal_counts`` with the same weights (the product-query identity).
    """
    out = weights[:, None]
    for a in marginal:
        block = points[:, domain.offsets[a]: domain.offsets[a + 1]]
        out = (out[:, :, None] * block[:, None, :]).reshape(points.shape[0], -1)
    return out.sum(axis=0)


def total_variation(p: np.ndarray, q: np.ndarray) -> float:
    """TV distance of two cell-mass vectors after normalising each to a distribution."""
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    return 0.5 * float(np.abs(p / p.sum() - q / q.sum()).sum())
