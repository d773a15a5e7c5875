"""Round 2 in two halves: find where the data lie, then zoom a fresh public grid onto a narrow span.

A column whose values sit in a narrow range far from zero (a latitude 44.88-45.06 inside the octave [32, 64),
a decimal year, a price band) falls in one or two cells of round 2's public grid over its DP bounds, so its
quantile edges cannot be placed inside the data. The first half of round 2's rho measures that grid and
finds the span; the second measures a fresh public grid over it (its edges depend only on the first half's
noisy counts: adaptive composition, rho-zCDP in all), or, where no zoom is due, the same grid again, averaged
with the first (the same as one measurement at the whole rho).
"""

from __future__ import annotations

import math

import numpy as np

from privsynth.discovery.bounds import (
    TRIM_SIGMAS,
    Bounds,
    FineResult,
    Level,
    fine_edges,
    measure_levels,
    utility_threshold,
)
from privsynth.discovery.read_out import read_out, trimmed_span

ZOOM_CELLS = 16  # round 2 measures a finer grid over the data when its span covers at most this many fine cells


def averaged(first: list[Level], second: list[Level]) -> list[Level]:
    """Two measurements of one hierarchy at equal rho, averaged cell by cell: the same as one measurement at
    their summed rho (sigma / sqrt 2; post-processing)."""
    return [Level(a.factor, a.edges, (a.noisy + b.noisy) / 2.0, a.sigma / math.sqrt(2.0))
            for a, b in zip(first, second)]


def passing_span(levels: list[Level]) -> tuple[float, float] | None:
    """The finest level's cells that pass the threshold, with a cell of margin on each side, when they hold
    all the noisy mass (the coarsest level's total, the least noisy) but its noise; else None
    (post-processing). Unlike a trim from the ends, one noise excursion in the empty cells cannot hold it."""
    fine, coarsest = levels[0], levels[-1]
    n = len(fine.noisy)
    passing = np.flatnonzero(fine.noisy > utility_threshold(fine.sigma, n))
    if not len(passing):
        return None
    rest = float(coarsest.noisy.sum() - fine.noisy[passing].sum())
    if rest > TRIM_SIGMAS * math.hypot(coarsest.sigma * math.sqrt(len(coarsest.noisy)),
                                       fine.sigma * math.sqrt(len(passing))):
        return None
    first, last = max(int(passing[0]) - 1, 0), min(int(passing[-1]) + 1, n - 1)
    return float(fine.edges[first]), float(fine.edges[last + 1])


def zoom_span(levels: list[Level], bounds: Bounds, integer: bool) -> tuple[float, float] | None:
    """Where the data lie within round 1's DP bounds, from a first round-2 measurement: the span when it covers
    at most ZOOM_CELLS cells of the fine grid; else None (post-processing). The span is ``read_out``'s trim with
    the thin tails it would keep as bins (``trimmed_span``: ages 8.5-10.9, a tenth of the rows, are no empty
    space to zoom past), or where a noise excursion stopped that trim early, ``passing_span``."""
    fine = levels[0]
    if integer and len(fine.noisy) - 1 >= bounds.high - bounds.low:  # one cell per integer already
        return None
    low, high, reach = trimmed_span(levels, bounds, integer)  # a thin tail beyond the trim is part of the data's span
    low, high = (low if reach[0] is None else reach[0]), (high if reach[1] is None else reach[1])
    if low < high and int(((fine.edges[1:] > low) & (fine.edges[:-1] < high)).sum()) <= ZOOM_CELLS:
        return low, high
    span = passing_span(levels)
    if span is None or int(((fine.edges[1:] > span[0]) & (fine.edges[:-1] < span[1])).sum()) > ZOOM_CELLS:
        return None
    return span


def measure_and_read(values: np.ndarray, counts: np.ndarray, cell_edges: np.ndarray, rho: float, noise,
                     bounds: Bounds, integer: bool, coded: bool, bins: int, public: bool,
                     numeric: bool) -> tuple[list[Level], FineResult]:
    """Round 2 at ``rho`` in all (module docstring): zoomed for DP bounds of a number column where
    ``zoom_span`` finds a narrow span, the zoomed grid's own ``passing_span`` tightening it. Returns the
    first grid's levels (they span ``bounds``) and the read-out."""
    levels = measure_levels(values, counts, cell_edges, rho / 2.0, noise)
    span = zoom_span(levels, bounds, integer) if numeric and not public else None
    if span is None:
        levels = averaged(levels, measure_levels(values, counts, cell_edges, rho / 2.0, noise))
        return levels, read_out(levels, coded, bins, bounds, public=public, octave_grid=numeric)
    zoomed = measure_levels(values, counts, fine_edges(*span, integer), rho / 2.0, noise)
    tight = passing_span(zoomed)
    if tight is not None:
        span = (max(span[0], tight[0]), min(span[1], tight[1]))
        if integer:
            span = (float(math.floor(span[0])), float(math.ceil(span[1])))
    return levels, read_out(zoomed, coded, bins, Bounds(*span, span))
