"""Marginal workloads and their answers, on level codes or on relaxed (block-simplex) rows.

A marginal is a tuple of attribute indices (ascending); its cells are the level combinations in
row-major (C) order, the order of ``np.ravel_multi_index``. Answers are counts (or weights) per cell.
Statistics are accumulated batch by batch, so one streaming pass over the data suffices and memory is
bounded by a batch plus the statistics.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from privsynth.schema.encoding import Domain

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


def marginal_counts(codes: np.ndarray, domain: Domain, marginal: Marginal,
                    weights: np.ndarray | None = None) -> np.ndarray:
    """Counts (or summed weights) per cell of one marginal."""
    return np.bincount(cell_index(codes, domain, marginal), weights=weights,
                       minlength=domain.size_of(marginal)).astype(np.float64)


@dataclass(frozen=True)
class Histogram:
    """The sparse weighted histogram of a table's level codes: what the engine hands to mechanisms.

    ``codes`` (m x d) holds each distinct record once, ``counts`` (m) how often it occurs; m is at
    most min(n, domain size), so it does not grow with n once the domain is covered. PRIVATE: it is
    the whole table, up to row order. Every marginal follows from it locally (``marginal``).
    """

    codes: np.ndarray
    counts: np.ndarray

    def __post_init__(self) -> None:
        if self.codes.ndim != 2 or self.counts.shape != (self.codes.shape[0],):
            raise ValueError("a histogram needs codes (m x d) and one count per row")
        if self.counts.size and self.counts.min() < 0:
            raise ValueError("histogram counts must be non-negative")

    @staticmethod
    def of_codes(codes: np.ndarray) -> Histogram:
        """The histogram of per-record codes (n x d)."""
        codes = np.asarray(codes)
        if codes.shape[0] == 0:
            return Histogram(codes.reshape(0, codes.shape[1] if codes.ndim == 2 else 0), np.zeros(0, dtype=np.int64))
        unique, counts = np.unique(codes, axis=0, return_counts=True)
        return Histogram(unique, counts.astype(np.int64))

    @staticmethod
    def merge(parts: Iterable[Histogram]) -> Histogram:
        parts = list(parts)
        if not parts:
            raise ValueError("merge needs at least one histogram")
        codes = np.concatenate([p.codes for p in parts])
        weights = np.concatenate([p.counts for p in parts])
        if codes.shape[0] == 0:
            return parts[0]
        unique, inverse = np.unique(codes, axis=0, return_inverse=True)
        return Histogram(unique, np.bincount(inverse.ravel(), weights=weights,
                                             minlength=unique.shape[0]).astype(np.int64))

    @property
    def n(self) -> int:
        """The number of records (private)."""
        return int(self.counts.sum())

    def marginal(self, domain: Domain, marginal: Marginal) -> np.ndarray:
        return marginal_counts(self.codes, domain, marginal, weights=self.counts)

    def iter_codes(self, batch_rows: int = 65_536) -> Iterator[np.ndarray]:
        """Per-record code batches (rows repeated by their count), for code that needs records."""
        for start in range(0, self.codes.shape[0], max(1, batch_rows)):
            stop = start + batch_rows
            yield np.repeat(self.codes[start:stop], self.counts[start:stop], axis=0)


StatisticsInput = Histogram | Iterable[np.ndarray]


def merge_levels(table: np.ndarray, level_groups: Sequence[Sequence[int] | np.ndarray | None]) -> np.ndarray:
    """A marginal table with levels merged per axis: ``level_groups[axis][level]`` is the merged level of
    each original level (None keeps the axis as it is); merged cells hold the sum of their levels."""
    out = np.asarray(table, dtype=np.float64)
    for axis, groups in enumerate(level_groups):
        if groups is None:
            continue
        groups = np.asarray(groups, dtype=np.int64)
        moved = np.moveaxis(out, axis, 0)
        merged = np.zeros((int(groups.max()) + 1,) + moved.shape[1:])
        np.add.at(merged, groups, moved)
        out = np.moveaxis(merged, 0, axis)
    return out


def accumulate_marginals(data: StatisticsInput, domain: Domain,
                         marginals: Sequence[Marginal]) -> tuple[dict[Marginal, np.ndarray], int]:
    """Counts of every marginal and the number of rows (both private), from a Histogram or from
    per-record code batches (one streaming pass). Mechanisms get their marginals only through here."""
    if isinstance(data, Histogram):
        return {m: data.marginal(domain, m) for m in marginals}, data.n
    totals = {m: np.zeros(domain.size_of(m), dtype=np.float64) for m in marginals}
    n = 0
    for codes in data:
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
