"""Systematic resampling: rows spread over weighted choices with each choice's expected share to within one row.

Post-processing of weights a release already holds (a relaxed release's rows, a bin's sub-bin counts, a rare
group's noisy level counts): free of privacy cost. Drawn one by one, ``n`` rows miss a share ``p`` by a
binomial's deviation sqrt(n p (1 - p)); spread systematically they miss it by less than one row, and the rows
that get each choice are shuffled, so which row gets which choice carries no order.
"""

from __future__ import annotations

import numpy as np


def systematic_indices(weights: np.ndarray, rows: int, rng: np.random.Generator) -> np.ndarray:
    """``rows`` indices with E[count of i] = rows * w_i and |count - rows * w_i| < 1, shuffled."""
    if rows < 1:
        raise ValueError(f"rows must be >= 1, got {rows}")
    cdf = np.cumsum(weights / weights.sum())
    cdf[-1] = 1.0
    positions = (rng.uniform() + np.arange(rows)) / rows
    picks = np.minimum(np.searchsorted(cdf, positions, side="right"), weights.size - 1)
    return rng.permutation(picks)
