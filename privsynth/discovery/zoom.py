"""Round 2 in parts: find where the data lie, then zoom a fresh public grid onto a narrow span, and again.

A column whose values sit in a narrow range far from zero (a latitude 44.88-45.06 inside the octave [32, 64),
a decimal year, a price band) falls in one or two cells of round 2's public grid over its DP bounds, so its
quantile edges cannot be placed inside the data. Round 2's rho is spent in MAX_ZOOMS + 1 equal parts. The
first measures that grid and finds the span; the next measures a fresh public grid over it (its edges depend
only on the earlier noisy counts: adaptive composition, rho-zCDP in all), and where the data still lie in a
few of that grid's cells (a longitude -93.33..-93.19 inside the 3.5-wide span the octave's grid gave), the
next zooms again. The parts left when no further zoom is due measure the last grid again, averaged with it
(the same as one measurement at their summed rho). Where no zoom is due and the first grid shows heaps wider than
one value (``points.heaps``: a float's cell 24 wide holding a band 0.6 wide with 16% of the rows), one of those
parts measures each heap's cell again on a grid of its own (``points.narrowed_heaps``), so the heap's bin is the
band, not the cell.

Where a small table's cells hold a few hundred rows under noise of about 400, a zoomed grid's own evidence is
weak: a run of its empty cells swallows a real one and a lone noise excursion passes its threshold (a zoom onto
such a window kept 1% of a 2,930-row latitude). So what is read on a zoomed grid to narrow the span again (the
next zoom's span, and the passing cells that tighten a zoom) is taken only where the mass it could leave out
unseen (three noise deviations of the cells a trim cut, or of the test that the passing cells hold all the
rows) is at most LOSS_SHARE of the rows. The first zoom reads the grid over round 1's bounds, as the unzoomed
read-out would, and is not held to that bar: without it a small table's longitude keeps bins 4 wide around data
0.12 wide, and decoding spreads its values over them.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from privsynth.discovery import points as P
from privsynth.discovery.bounds import (
    TRIM_SIGMAS,
    Bounds,
    FineResult,
    Level,
    fine_edges,
    measure_levels,
    utility_threshold,
)
from privsynth.discovery.read_out import read_out, trim_level, trimmed_span

ZOOM_CELLS = 16  # round 2 measures a finer grid over the data when its span covers at most this many fine cells
MAX_ZOOMS = 2  # a grid of 128 cells zoomed twice resolves a span 16^2 times narrower than the bounds
LOSS_SHARE = 0.1  # a zoom's span is taken only when the mass it could leave out unseen is at most this share


def averaged(*measurements: list[Level]) -> list[Level]:
    """k measurements of one hierarchy at equal rho, averaged cell by cell: the same as one measurement at
    their summed rho (sigma / sqrt k; post-processing)."""
    k = len(measurements)
    return [Level(same[0].factor, same[0].edges, sum(lv.noisy for lv in same) / k, same[0].sigma / math.sqrt(k))
            for same in zip(*measurements)]


def passing_span(levels: list[Level], guarded: bool = True) -> tuple[float, float] | None:
    """The finest level's cells that pass the threshold, with a cell of margin on each side, when they hold
    all the noisy mass (the coarsest level's total, the least noisy) but its noise, and (``guarded``) that test
    could not miss more than LOSS_SHARE of the rows; else None (post-processing). Unlike a trim from the ends,
    one noise excursion in the empty cells cannot hold it."""
    fine, coarsest = levels[0], levels[-1]
    n = len(fine.noisy)
    passing = np.flatnonzero(fine.noisy > utility_threshold(fine.sigma, n))
    if not len(passing):
        return None
    total = float(coarsest.noisy.sum())
    bar = TRIM_SIGMAS * math.hypot(coarsest.sigma * math.sqrt(len(coarsest.noisy)),
                                   fine.sigma * math.sqrt(len(passing)))
    if total - float(fine.noisy[passing].sum()) > bar or (guarded and bar > LOSS_SHARE * total):
        return None
    first, last = max(int(passing[0]) - 1, 0), min(int(passing[-1]) + 1, n - 1)
    return float(fine.edges[first]), float(fine.edges[last + 1])


def trim_bar(levels: list[Level], low: float, high: float) -> float:
    """The most mass a trim to [low, high] can have cut unseen (post-processing): TRIM_SIGMAS deviations of the
    noise of the cut cells of the level ``trimmed_span`` trims on (``trim_empty_ends`` cuts a run of cells while
    its noisy sum stays under that bar, so rows under it go with the empty space)."""
    level = trim_level(levels)
    cut = int(((level.edges[1:] <= low) | (level.edges[:-1] >= high)).sum())
    return TRIM_SIGMAS * level.sigma * math.sqrt(cut)


def zoom_span(levels: list[Level], bounds: Bounds, integer: bool, zoomed: bool = False,
              step: float = 1.0) -> tuple[float, float] | None:
    """Where the data lie within ``bounds`` (round 1's DP bounds, or the span a zoom measured: ``zoomed``), from
    the last round-2 measurement: the span when it covers at most ZOOM_CELLS cells of its grid; else None
    (post-processing). The span is ``read_out``'s trim with the thin tails it would keep as bins
    (``trimmed_span``: ages 8.5-10.9, a tenth of the rows, are no empty space to zoom past), on a zoomed grid
    only where ``trim_bar`` is under LOSS_SHARE of the rows; or where a noise excursion stopped that trim early,
    ``passing_span``."""
    fine = levels[0]
    if integer and len(fine.noisy) - 1 >= (bounds.high - bounds.low) / step:  # one cell per value already
        return None
    low, high, reach = trimmed_span(levels, bounds, integer)  # a thin tail beyond the trim is part of the data's span
    low, high = (low if reach[0] is None else reach[0]), (high if reach[1] is None else reach[1])
    trusted = not zoomed or trim_bar(levels, low, high) <= LOSS_SHARE * float(levels[-1].noisy.sum())
    if trusted and low < high and int(((fine.edges[1:] > low) & (fine.edges[:-1] < high)).sum()) <= ZOOM_CELLS:
        return low, high
    span = passing_span(levels, guarded=zoomed)
    if span is None or int(((fine.edges[1:] > span[0]) & (fine.edges[:-1] < span[1])).sum()) > ZOOM_CELLS:
        return None
    return span


def measure_and_read(values: np.ndarray, counts: np.ndarray, cell_edges: np.ndarray, rho: float, noise,
                     bounds: Bounds, integer: bool, coded: bool, bins: int, public: bool,
                     numeric: bool, round_one: tuple[np.ndarray, np.ndarray, float] | None = None,
                     step: float = 1.0) -> tuple[list[Level], FineResult]:
    """Round 2 at ``rho`` in all, in MAX_ZOOMS + 1 parts of equal rho (module docstring): for DP bounds of a
    number column, each part zooms a fresh grid onto the span ``zoom_span`` finds in the last measurement,
    that grid's own ``passing_span`` tightening it; the parts no zoom needs measure the last grid again and
    are averaged with it, but for one part that narrows the first grid's heaps where one is wider than a value
    (the read-out's ``heaps``). Returns the first grid's levels (they span ``bounds``) and the read-out; round 1's
    histogram (``round_one``) judges a coded read-out of the grid spanning the bounds only (a zoomed grid
    spans part of round 1's octaves). ``step``: an integer column's values are whole multiples of it (its DP
    precision), so its short grids have a cell per multiple."""
    part = rho / (MAX_ZOOMS + 1)
    first = measure_levels(values, counts, cell_edges, part, noise)
    zoomable = numeric and not public
    last, edges, span, left = first, cell_edges, bounds, MAX_ZOOMS
    while left and zoomable:
        found = zoom_span(last, span, integer, zoomed=left < MAX_ZOOMS, step=step)
        if found is None:
            break
        edges = fine_edges(*found, integer, step=step)
        last, left = measure_levels(values, counts, edges, part, noise), left - 1
        tight = passing_span(last)
        if tight is not None:
            found = (max(found[0], tight[0]), min(found[1], tight[1]))
            found = P.whole_span(*found, integer)
        span = Bounds(*found, found)
    heaps = P.heaps(first[0], float(first[-1].noisy.sum()), bounds.low, bounds.high, integer) \
        if numeric and left == MAX_ZOOMS else ()
    narrowed = P.needs_zoom(heaps, integer, step)
    if narrowed:  # one part measures the heaps on grids of their own instead
        heaps, left = P.narrowed_heaps(values, counts, heaps, part, noise, integer), left - 1
    levels = averaged(last, *(measure_levels(values, counts, edges, part, noise) for _ in range(left)))
    if last is first:  # no zoom: the parts measured the first grid
        fine = read_out(levels, coded, bins, bounds, public=public, octave_grid=numeric, round_one=round_one,
                        step=step)
        return levels, dataclasses.replace(fine, heaps=heaps) if narrowed else fine
    fine = read_out(levels, coded, bins, span, step=step)
    if not numeric:
        return first, fine
    return first, dataclasses.replace(fine, heaps=zoomed_heaps(first, levels, span, fine, integer))


def zoomed_heaps(first: list[Level], zoomed: list[Level], span: Bounds, fine: FineResult,
                 integer: bool) -> tuple[tuple[float, float], ...]:
    """The heaps of a zoomed round 2 (post-processing of its noisy counts): the first grid's heaps outside the
    zoomed span, and inside it the zoomed grid's, whose cells are 16 to 256 times narrower. Read off the first
    grid alone, a heap inside the span kept that grid's cell: a test result of 45.00 held by 94% of a column kept
    the bin [44.875, 45.25), and decoding wrote 45.01 for nearly half of those rows."""
    present = float(first[-1].noisy.sum())  # the column's present count, on the grid that spans the bounds
    outside = tuple(h for h in P.heaps(first[0], present, fine.low, fine.high, integer)
                    if h[1] <= span.low or h[0] >= span.high)
    return tuple(sorted(outside + P.heaps(zoomed[0], present, span.low, span.high, integer)))
