"""Mass points of a number column: a sentinel (-1, 99, 9999999) or a round value (100, 1000) that many rows
hold becomes a point of the domain, a bin of its own written back exactly, instead of a share of a quantile
bin that decoding smears over its width (an income with 5% at 9999999 came back spread over 4.6-10.2
million, none of it 9999999).

A heap anywhere else (a default price, a common term, a narrow band many rows share) is found on round 2's own
noisy histogram, at no cost (``heaps``): a cell far denser than the cells around it becomes a bin of its own, an
integer cell its one value, a wider cell a narrow bin that fine decoding resolves inside.

The candidates are PUBLIC (this module's list, inside the column's DP bounds); each row equals at most one of
them, so their exact counts have L2 sensitivity 1 and the Gaussian histogram of them is rho-zCDP. A candidate
is a point when its noisy count passes the threshold that finds data on a grid of that many cells and holds
at least POINT_SHARE of the column's noisy present count (post-processing). Zero is not a candidate: round 1's
log grid counts it in a cell of its own already (the zeros' cell), so ``zero_point`` reads that count, at no cost.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from privsynth.discovery.bounds import Level, cell_per_value, noisy_cells, utility_threshold, zeros_cell
from privsynth.discovery.categories import threshold
from privsynth.discovery.codes import CODED_REST_SHARE

NINES = tuple(10 ** k - 1 for k in range(1, 10))  # 9, 99, ..., 999999999: "not applicable", "refused", top codes
# 1, 2, 5, 10, 20, 50, ..., 5e9 (the 1-2-5 series of banknotes and preferred numbers): prices, caps, and the
# sizes a form offers as numbers (a company of 1, 10, 20, 100, 500, 1,000, 5,000 or 10,000 people)
ROUND = tuple(m * 10 ** k for k in range(0, 10) for m in (1, 2, 5))
SENTINELS = tuple(sorted({-1, *(-x for x in NINES), *NINES, *ROUND}))
# Dates a table writes for "no date" or "never ends" (a history table's open rows run to 9999-12-31), and the
# epochs of spreadsheets and Unix: a temporal column's public candidates, with the last second of the calendar
SENTINEL_DAYS = ("0001-01-01", "1900-01-01", "1970-01-01", "9999-01-01", "9999-12-31")
POINT_SHARE = 0.02  # a candidate held by at least this share of the present values is a point
POINTS_RHO_SHARE = 0.2  # of a number column's round-2 rho, when a candidate lies inside its bounds
POINT_WIDTH = 5e-10  # a float point's bin, relative to max(1, |value|): under the decoder's POINT_WIDTH
HEAP_WINDOW = 8  # a heap cell is judged against the density of this many cells on each side (their median)
HEAP_RATIO = 4.0  # ... holding at least this many times what that density puts in it ...
HEAP_SIGMAS = 5.0  # ... by at least this many noise deviations of the cell
MAX_HEAPS = 4  # the fullest heaps of a column, at most this many, become bins
HEAP_ZOOM_CELLS = 64  # a heap wider than a value is measured again on this many cells of its own


def candidates(low: float, high: float, integer: bool, step: float = 1.0) -> tuple[float, ...]:
    """The public candidates inside the bounds' span (a point needs room for its bin); none for a short
    integer range, whose round-2 grid has a cell per integer (per multiple of its ``step``) already, and whose
    rare codes need all the rho."""
    if cell_per_value(low, high, integer, step):
        return ()
    return tuple(float(c) for c in SENTINELS if low <= c < high)


def temporal_candidates(low: float, high: float, kind: str) -> tuple[float, ...]:
    """The public candidates of a date or timestamp column inside its bounds (upper bound included: the calendar's
    last day is one), in its unit (days or seconds since the epoch)."""
    days = [float(np.datetime64(d, "D").astype(np.int64)) for d in SENTINEL_DAYS]
    found = days if kind == "date" else [x * 86_400.0 for x in days] + [days[-1] * 86_400.0 + 86_399.0]
    return tuple(sorted(c for c in found if low <= c <= high))


HOLDS_SIGMAS = 2.0  # points hold the column when what they leave is within this many deviations of its noise: at
# three, hourly rainfall (93% zeros) came back as zeros alone one run in two, its 1,749 rainy hours lost; a column
# its points do hold is missed one run in 44, and keeps its points as bins of their own
MAX_LOOK_VALUES = 1000  # a number column whose noisy distinct count is at most this has its own values measured


def value_points(values: np.ndarray, counts: np.ndarray, cands: tuple[float, ...], rho: float, noise,
                 present: float, delta_tau: float | None) -> tuple[tuple[float, ...], float, float]:
    """The column's points, the noisy count they hold and its noise sigma (one Gaussian histogram at ``rho``):
    the public candidates, each a cell counted whether or not the column holds it, and, with ``delta_tau``, every
    other value the column holds, a cell of its own. One row is in one cell: L2 sensitivity 1, rho-zCDP for a
    fixed set of cells. A candidate is a point when its noisy count passes the threshold that finds data on a grid
    of that many cells; an observed value when its noisy count passes tau = 1 + sigma z(delta_tau), so a value one
    neighbour holds alone is released with probability at most ``delta_tau`` (``categories.threshold``); either
    must also hold POINT_SHARE of ``present`` (a DP estimate). Wind speeds converted from knots (36 values,
    6.904679999999999 mph) have no decimals grid: as points, the values most rows hold are written exactly.
    ``values`` and ``counts``: the column's exact distinct values and counts (private)."""
    values = np.asarray(values, dtype=np.float64)
    counts = np.asarray(counts, dtype=np.float64)
    listed = np.isin(values, np.asarray(cands, dtype=np.float64))
    exact = np.asarray([float(counts[values == c].sum()) for c in cands], dtype=np.float64)
    observed = values[~listed] if delta_tau is not None else np.zeros(0)
    exact = np.concatenate([exact, counts[~listed] if delta_tau is not None else np.zeros(0)])
    if not len(exact):
        return (), 0.0, 0.0
    noisy, sigma = noisy_cells(exact, rho, noise)
    share = POINT_SHARE * max(present, 0.0)
    bars = np.concatenate([np.full(len(cands), max(utility_threshold(sigma, max(len(cands), 1)), share)),
                           np.full(len(observed), max(threshold(sigma, delta_tau), share) if delta_tau else 0.0)])
    passing = noisy > bars
    points = np.concatenate([np.asarray(cands, dtype=np.float64), observed])[passing]
    order = np.argsort(points)
    return tuple(float(p) for p in points[order]), float(noisy[passing].sum()), sigma


def holds_the_column(held: float, points: int, sigma: float, level: Level) -> bool:
    """Whether the points hold the column (post-processing): the noisy count they hold (``held``, ``points`` cells
    at noise ``sigma``) is within CODED_REST_SHARE of the column's noisy present count (round 2's coarsest
    ``level``, the one over its bounds) and HOLDS_SIGMAS deviations of the noise of the two. Such a column holds
    its points' values alone, as a coded integer column holds its codes."""
    present = float(level.noisy.sum())
    noise = math.hypot(level.sigma * math.sqrt(len(level.noisy)), sigma * math.sqrt(max(points, 1)))
    return points > 0 and present - held <= CODED_REST_SHARE * max(present, 0.0) + HOLDS_SIGMAS * noise


def zero_point(round_one: tuple[np.ndarray, np.ndarray, float], present: float) -> tuple[float, ...]:
    """(0.0,) when round 1's zeros' cell [-2^-32, 2^-32) passed round 1's threshold and holds POINT_SHARE of
    ``present`` (a DP estimate), else () (post-processing of round 1's histogram). A second floor's area is 0
    in 57% of the houses: inside a quantile bin [0, 79) the zeros came back as whole numbers 0-4 drawn
    uniformly, 12% zeros; as a point they are written as 0."""
    edges, noisy, sigma = round_one
    i = zeros_cell(edges)
    if i is None:  # a grid with no zeros' cell (years)
        return ()
    count = float(noisy[i])
    return (0.0,) if count > utility_threshold(sigma, len(noisy)) and count >= POINT_SHARE * present else ()


def heaps(level: Level, present: float, low: float, high: float, integer: bool) -> tuple[tuple[float, float], ...]:
    """The cells of a round-2 level inside [low, high], never its outermost two (they also hold what the grid
    clips), that hold a heap (post-processing of its noisy counts): a cell passing the level's data threshold,
    holding POINT_SHARE of ``present`` (a DP estimate), and more than HEAP_RATIO times, and HEAP_SIGMAS noise
    deviations above, what the median density of the HEAP_WINDOW cells on each side puts in its width. The
    MAX_HEAPS fullest, as (start, end) spans; an integer column's span has whole ends (a one-wide cell: its value
    alone). Where the rows spread smoothly, no cell stands out of its neighbours: a smooth column keeps its
    quantile bins."""
    edges, noisy, sigma = level.edges, level.noisy, level.sigma
    n = len(noisy)
    if n < 3:
        return ()
    widths = np.diff(edges)
    density = noisy / widths
    bar = max(utility_threshold(sigma, n), POINT_SHARE * max(present, 0.0))
    found = []
    inner = np.zeros(n, dtype=bool)
    inner[1:-1] = True  # the grid's outermost cells also hold what it clips: a tail beyond the bounds is no heap
    for i in np.flatnonzero(inner & (edges[:-1] >= low) & (edges[1:] <= high) & (noisy > bar)):
        around = np.r_[density[max(0, i - HEAP_WINDOW):i], density[i + 1:i + 1 + HEAP_WINDOW]]
        expected = max(float(np.median(around)), 0.0) * widths[i]
        if noisy[i] > HEAP_RATIO * expected and noisy[i] - expected > HEAP_SIGMAS * sigma:
            found.append((float(noisy[i]), i))
    return tuple(sorted(whole_span(float(edges[i]), float(edges[i + 1]), integer)
                        for _, i in sorted(found, reverse=True)[:MAX_HEAPS]))


def whole_span(start: float, end: float, integer: bool) -> tuple[float, float]:
    """[start, end), widened to whole ends for an integer column (its values are whole: none is lost)."""
    return (float(math.floor(start)), float(math.ceil(end))) if integer else (start, end)


def needs_zoom(spans: tuple[tuple[float, float], ...], integer: bool, step: float = 1.0) -> bool:
    """Whether a heap is wider than one value (a float's always is): its cell holds more than the heap. An integer
    column whose values are whole multiples of ``step`` holds one value in a cell that wide."""
    return any(not integer or end - start > step for start, end in spans)


def narrowed_heaps(values: np.ndarray, counts: np.ndarray, spans: tuple[tuple[float, float], ...], rho: float,
                   noise, integer: bool) -> tuple[tuple[float, float], ...]:
    """Each heap narrowed to the cells of a fresh public grid over it (HEAP_ZOOM_CELLS equal cells; one per
    value for an integer heap of fewer values) whose noisy count passes the threshold and holds HEAP_RATIO times
    the grid's median cell (the rows the heap's cell holds beside the heap), first to last; a heap none of whose
    cells pass (a dense stretch as wide as its cell) keeps its span. The spans are disjoint and each row lies in
    one of them at most: one Gaussian histogram over all their cells has L2 sensitivity 1 and is rho-zCDP.
    ``values`` and ``counts``: the column's exact distinct values and counts (private); the grids depend on
    earlier DP outputs only (adaptive composition)."""
    values, counts = np.asarray(values, dtype=np.float64), np.asarray(counts, dtype=np.float64)
    grids = [np.arange(start, end + 1.0) if integer and end - start <= HEAP_ZOOM_CELLS
             else np.linspace(start, end, HEAP_ZOOM_CELLS + 1) for start, end in spans]
    exact = np.concatenate([_half_open_counts(values, counts, grid) for grid in grids])
    noisy, sigma = noisy_cells(exact, rho, noise)
    bar = utility_threshold(sigma, len(noisy))
    out, at = [], 0
    for span, grid in zip(spans, grids):
        cells = noisy[at:at + len(grid) - 1]
        at += len(grid) - 1
        passing = np.flatnonzero((cells > bar) & (cells > HEAP_RATIO * max(float(np.median(cells)), 0.0)))
        out.append(whole_span(float(grid[passing[0]]), float(grid[passing[-1] + 1]), integer) if len(passing)
                   else span)
    return tuple(out)


def _half_open_counts(values: np.ndarray, counts: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Counts of the cells [g_i, g_{i+1}) of ``grid``; values outside [g_0, g_last) are not counted."""
    inside = (values >= grid[0]) & (values < grid[-1])
    idx = np.searchsorted(grid, values[inside], side="right") - 1
    return np.bincount(idx, weights=counts[inside], minlength=len(grid) - 1).astype(np.float64)


def with_spans(edges: tuple[float, ...], spans: tuple[tuple[float, float], ...]) -> tuple[float, ...]:
    """Bin edges with each span [start, end) a bin of its own (one inside the outer edges); edges inside a span
    go."""
    out = [float(e) for e in edges]
    for start, end in spans:
        if not (out[0] <= start < end <= out[-1]):
            continue
        out = sorted({*(e for e in out if not start < e < end), start, end})
    return tuple(out)


def with_points(edges: tuple[float, ...], points: tuple[float, ...], integer: bool,
                shows_data: Callable[[float, float], bool] | None = None) -> tuple[float, ...]:
    """Bin edges with each point's own bin [c, c + width) (an integer's width 1: the bin holds c alone; a
    float's a relative 5e-10, which the decoder writes as c exactly); edges inside a point's bin go, and so do
    a float point's slivers (``without_slivers``). A whole-number point at the upper bound (9999-12-31, the last
    day a calendar holds) gets the last bin [c - 1, c], which holds c and its neighbour: fine decoding's sub-bin
    [c, c + 1) holds c alone."""
    spans = tuple((c - 1.0, c) if integer and c == edges[-1] else
                  (c, c + (1.0 if integer else POINT_WIDTH * max(1.0, abs(c)))) for c in points)
    out = with_spans(edges, spans)
    return out if integer else without_slivers(out, spans, shows_data)


SLIVER = 1e-3  # a bin beside a float point's bin, this many times narrower than the bin beyond it, is a sliver


def without_slivers(edges: tuple[float, ...], spans: tuple[tuple[float, float], ...],
                    shows_data: Callable[[float, float], bool] | None = None) -> tuple[float, ...]:
    """Edges less the cuts that bound slivers beside a float point's bin [c, c + width), outwards from it: a bin
    next to it that holds no data (``shows_data``, on round 2's noisy counts) or is SLIVER times narrower than the
    bin beyond (post-processing). The point's own mass, and the noise of the grid's finest cells next to it, move
    the noisy CDF across quantiles there, so cuts land beside the point; with the point's bin in place the
    slivers between them hold no row (a card balance, 0 for 5% of the customers, got bins [0, 5e-10),
    [5e-10, 3.9e-8), [3.9e-8, 3.5e-6), [3.5e-6, 0.32), [0.32, 70)), yet each was a level of the mechanism's and
    sixteen of fine decoding's sub-bins. A sliver joins the bin beyond it; the outer edges stay."""
    out = list(edges)
    taken = {x for span in spans for x in span}
    for start, end in spans:
        for side in (1, -1):  # outwards: above the point's bin, then below it
            edge_of_point = end if side == 1 else start
            cleared = edge_of_point  # the sliver so far: from the point's bin to here, no data in it
            while edge_of_point in out:
                i = out.index(edge_of_point) + side  # the edge bounding the bin beside the point
                if not (0 < i < len(out) - 1) or out[i] in taken:
                    break
                edge, far = out[i], out[i + side]
                empty = shows_data is not None and not shows_data(min(cleared, edge), max(cleared, edge))
                if not (empty or abs(edge - edge_of_point) < SLIVER * abs(far - edge)):
                    break
                cleared = edge
                del out[i]
    return tuple(out)
