"""How a decoder draws: systematic resampling (rows spread over weighted choices with each choice's expected share to
within one row) and whole numbers inside a bin, for any bounds a release holds.

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


# The doubles inside int64's range: an integer column is written as int64, whatever its DP bounds (a uint64 source
# column's octave reaches 2^64)
INT64_DOUBLES = (-(2.0**63), 2.0**63 - 1024.0)
EXACT_WHOLE = 2.0**62  # below this magnitude a bin's whole numbers are drawn exactly as int64


def whole_draws(low: np.ndarray, high: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A whole number uniform on [low, high] per row (doubles holding whole numbers), as int64; total: bounds beyond
    int64's range are cut to it (the values such a column can be written as), a bin beyond 2^62 is drawn as a double
    and floored (its width is far above a double's step there), and an empty bin gives its low end."""
    low = np.clip(low, *INT64_DOUBLES)
    high = np.maximum(np.clip(high, *INT64_DOUBLES), low)
    if float(np.max(np.abs(low), initial=0.0)) < EXACT_WHOLE and float(np.max(np.abs(high), initial=0.0)) < EXACT_WHOLE:
        return rng.integers(low.astype(np.int64), high.astype(np.int64) + 1)
    return np.clip(np.floor(rng.uniform(low, high + 1.0)), low, high).astype(np.int64)
