"""DP quantiles by the exponential mechanism over a public grid (``dp_quantile``).

Utility ``-|#{x < g} - q n|`` has sensitivity 1 under add/remove-one; report-noisy-max with Gumbel
noise of scale ``1/sqrt(2 rho)`` is rho-zCDP (bounded-range exponential mechanism, Cesar & Rogers
2021). The draft's bin edges come from the round-2 histogram (``bounds.quantile_cuts``), which serves
bounds, small domains and edges at once; this mechanism remains for callers that want one quantile.
"""

from __future__ import annotations

import numpy as np

from privsynth.privacy.accounting import gumbel_scale

GRID_POINTS = 101


def quantile_scores(values: np.ndarray, counts: np.ndarray, grid: np.ndarray, q: float) -> np.ndarray:
    """Utility -|#{x < g} - q n| of each grid point (sensitivity 1 under add/remove one record).

    ``values`` are the sorted distinct values and ``counts`` their multiplicities.
    """
    below = np.concatenate([[0], np.cumsum(counts)])[np.searchsorted(values, grid, side="left")]
    return -np.abs(below - q * float(np.sum(counts)))


def dp_quantile(values: np.ndarray, counts: np.ndarray, grid: np.ndarray, q: float, rho: float, noise) -> float:
    """A grid point near the q-quantile: exponential mechanism (Gumbel noisy max), rho-zCDP."""
    scores = quantile_scores(values, counts, grid, q)
    return float(grid[noise.noisy_max(scores, gumbel_scale(rho), sensitivity=1.0)])


def linear_grid(low: float, high: float, integer: bool) -> np.ndarray:
    """GRID_POINTS evenly spaced public points of [low, high] (integers for an integer column)."""
    grid = np.linspace(low, high, GRID_POINTS)
    return np.unique(np.round(grid)) if integer else grid
