"""Values on a column's precision grid (money in cents, ages in tenths, whole tens), and where on it they fall.

Post-processing of a release: a decoded value is drawn inside its sub-bin (``fine_estimate``) and put on the grid of
the column's stated ``precision``. Uniform on the grid, a column of whole hours with a few halves writes 37.3 as often
as 37.0; with ``place_shares`` (the share of the column's values by the decimal place they are whole in, a DP fact of
discovery's places histogram) each grid point weighs its place's share over that place's share of the grid's points,
so a column that is 67% whole numbers writes whole numbers two times in three, and one whose shares are the grid's
own is drawn uniformly.
"""

from __future__ import annotations

import numpy as np

TOP_PLACE = 3  # the places histogram's coarsest place: multiples of 10^3 (discovery.forms.TENS)


def place_exponents(precision: int) -> np.ndarray:
    """The decimal places of ``place_shares``, coarsest first: 3 (multiples of 1000), 2, 1, 0 (whole), -1, ...,
    -precision (written with ``precision`` decimals); a negative precision (whole tens: -1) stops above 0."""
    return np.arange(TOP_PLACE, -precision - 1, -1)


def place_density(precision: int) -> np.ndarray:
    """The share of the 10^-precision grid's points whole in each place of ``place_exponents`` and in no coarser
    one: 10^-(3 + p) for the multiples of 1000, 9 x 10^-(e + p + 1) for place e."""
    return np.asarray([10.0 ** -(TOP_PLACE + precision) if e == TOP_PLACE else 9.0 * 10.0 ** -(e + precision + 1)
                       for e in place_exponents(precision)])


def _multiples(low: np.ndarray, high: np.ndarray, e: int) -> np.ndarray:
    """How many multiples of 10^e lie in [low, high] (grid points, ends included)."""
    return np.maximum(np.floor(high / 10.0 ** e + 1e-6) - np.ceil(low / 10.0 ** e - 1e-6) + 1.0, 0.0)


def place_draws(low: np.ndarray, high: np.ndarray, precision: int, shares: tuple[float, ...],
                rng: np.random.Generator) -> np.ndarray:
    """One point of the 10^-precision grid in [low, high] per row (both ends grid points), each point weighing its
    place's share over that place's density on the grid (``place_density``); NaN where no point weighs anything."""
    places = place_exponents(precision)
    weight_of = np.asarray(shares, dtype=np.float64) / place_density(precision)
    at_least = np.stack([_multiples(low, high, int(e)) for e in places], axis=1)  # multiples of 10^e, coarsest first
    exactly = at_least - np.concatenate([np.zeros((len(low), 1)), at_least[:, :-1]], axis=1)
    weights = np.maximum(exactly, 0.0) * weight_of[None, :]
    total = weights.sum(axis=1)
    pick = np.minimum((np.cumsum(weights, axis=1) < (rng.uniform(size=len(low)) * total)[:, None]).sum(axis=1),
                      len(places) - 1)
    out = np.full(len(low), np.nan)
    for i, e in enumerate(places):
        rows = np.flatnonzero((pick == i) & (total > 0))
        first = np.ceil(low[rows] / 10.0 ** e - 1e-6)
        count = at_least[rows, i]
        k = first + np.floor(rng.uniform(size=len(rows)) * count)
        for _ in range(40):  # a multiple of 10^(e+1) belongs to a coarser place: drawn again (one in ten)
            coarse = (np.mod(k, 10.0) == 0) if e != TOP_PLACE else np.zeros(len(rows), dtype=bool)
            if not coarse.any():
                break
            k[coarse] = first[coarse] + np.floor(rng.uniform(size=int(coarse.sum())) * count[coarse])
        out[rows] = np.round(k * 10.0 ** e, max(precision, 0))
    return out


def _grid_points(lo: np.ndarray, hi: np.ndarray, step: float, precision: int,
                 last: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first and last multiples of ``step`` in [lo, hi) ([lo, hi] where ``last``); first > last: none."""
    low_grid = np.round(np.ceil(lo / step - 1e-9) * step, precision)
    high_steps = np.where(last, np.floor(hi / step + 1e-9), np.ceil(hi / step - 1e-9) - 1)
    return low_grid, np.round(high_steps * step, precision)


def holds_precision_value(lo: float, hi: float, precision: int, last: bool) -> bool:
    """Whether the bin [lo, hi) ([lo, hi] where ``last``) holds a number written with ``precision`` decimals (the
    decoder's rule, ``on_precision_grid``)."""
    low_grid, high_grid = _grid_points(np.asarray([lo]), np.asarray([hi]), 10.0 ** -precision, precision,
                                       np.asarray([last]))
    return bool(low_grid[0] <= high_grid[0])


def on_precision_grid(draws: np.ndarray, precision: int, sub: tuple[np.ndarray, np.ndarray],
                      bin_: tuple[np.ndarray, np.ndarray], top: float, step: float | None = None,
                      shares: tuple[float, ...] | None = None, rng: np.random.Generator | None = None) -> np.ndarray:
    """Draws rounded to the schema's stated precision (money in cents: 2; ages in tenths: 1), kept on the
    grid points of their sub-bin, else of their bin (post-processing). A sub-bin narrower than the grid step
    can hold no such value: its draws go to the nearest grid point of the bin, which holds the level's values
    (an age written in tenths drawn at 6.583 is 6.6, never 6.583, and never below the bin). Every value encodes
    back to its own level; a bin without a grid point keeps its unrounded draws. The last bin is [lo, hi].
    ``step``: a grid of whole multiples of it instead (a timestamp's grain in seconds; ``precision`` 0).
    ``shares`` (with ``rng``): the column's ``place_shares``; the point is drawn by them (``place_draws``)."""
    grid_step = 10.0 ** -precision if step is None else step
    rounded = np.round(draws, precision) if step is None else np.round(np.asarray(draws) / step) * step
    out = np.asarray(draws, dtype=np.float64).copy()
    for lo, hi in (bin_, sub):  # the sub-bin's grid where it has one, else the bin's
        low_grid, high_grid = _grid_points(lo, hi, grid_step, precision, hi >= top)
        has = low_grid <= high_grid
        on_grid = np.clip(rounded, low_grid, np.maximum(low_grid, high_grid))
        if shares is not None and rng is not None and step is None:
            weighted = place_draws(low_grid, np.maximum(low_grid, high_grid), precision, shares, rng)
            on_grid = np.where(np.isnan(weighted), on_grid, weighted)
        out = np.where(has, on_grid, out)
    return np.minimum(out, top)  # never past the upper bound (9999-12-31 23:59:59 is no whole day's start)
