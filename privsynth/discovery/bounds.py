"""DP bounds and DP bin edges of numeric and temporal columns (pure functions + noise).

Both rounds are the same mechanism: a Gaussian histogram over PUBLIC cells. Under add/remove-one a
record moves one cell count by one (L2 sensitivity 1), so noise N(0, sigma^2) with
sigma = 1/sqrt(2 rho) on every cell (empty ones included) is rho-zCDP; everything read from the noisy
counts afterwards is post-processing.

* Round 1 (bounds, as in Google's DP library's approximate bounds): cells of a public log-scale grid
  over the whole real line (one cell per octave and sign, a zero cell); for dates and timestamps one
  cell per calendar year from 1000 to 3000 (in UTC, as the encoder reads them), and one cell for each of
  the calendar's ends beyond (years 1-999, and 3000 to the calendar's last day, where the "valid to"
  dates of a warehouse's history tables lie: 9999-12-31). The bounds are the
  outer edges of the lowest and highest cells whose noisy count passes ``utility_threshold`` (a
  false-alarm rate, not a privacy parameter: the cells are public; a thin cluster apart from the data's
  fullest cell passes a stricter one, ``passing_cells``). No cell passing: the column holds
  too few values to draft, and is proposed dropped.
* Round 2 (edges): a finer public grid inside the round-1 bounds (one cell per integer when the range
  is short, else linear and log-spaced points; months or years for temporal columns). Its noisy counts
  tighten the bounds (the same threshold), show a small domain (one level per integer value), and give
  the k-1 inner edges as the cells where the clipped noisy CDF crosses i/k.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

from privsynth.privacy.accounting import gaussian_sigma

MIN_OCTAVE, MAX_OCTAVE = -32, 64  # |x| in [2^-32, 2^64): beyond, values fall in the outermost cells
FALSE_ALARM = 0.001  # chance that some empty cell of a grid passes the threshold (a bogus bound is a wrong domain)
SMALL_INTEGER_DOMAIN = 48  # an integer range of at most this many values: one level per value
FINE_INTEGER_CELLS = 4096  # an integer range of at most this many values: one round-2 cell per value
FINE_POINTS = 257
CALENDAR_CELLS = 2400  # round 2 of a temporal column: months up to 200 years, then coarser
FINE_PER_OCTAVE = 8
YEAR_RANGE = (1000, 3000)


def utility_threshold(sigma: float, cells: int, false_alarm: float = FALSE_ALARM) -> float:
    """A noisy count above sigma * Phi^{-1}(1 - false_alarm / cells): an empty cell passes
    w.p. <= false_alarm / cells."""
    return sigma * float(norm.isf(false_alarm / max(cells, 1)))


def log_edges() -> np.ndarray:
    """The public round-1 grid: -2^64 ... -2^-32, 2^-32 ... 2^64 (one cell per octave and sign, a zero cell)."""
    pos = 2.0 ** np.arange(MIN_OCTAVE, MAX_OCTAVE + 1)
    return np.concatenate([-pos[::-1], pos])


def year_edges(kind: str) -> np.ndarray:
    """The public round-1 grid of a temporal column: 1 January of each year of YEAR_RANGE, and the calendar's first
    day and last day (a timestamp's: its last second), in the column's unit."""
    years = np.arange(str(YEAR_RANGE[0]), str(YEAR_RANGE[1] + 1), dtype="datetime64[Y]")
    days = years.astype("datetime64[D]").astype(np.int64).astype(np.float64)
    first, last = (float(np.datetime64(d, "D").astype(np.int64)) for d in ("0001-01-01", "9999-12-31"))
    if kind == "date":
        return np.concatenate([[first], days, [last]])
    return np.concatenate([[first], days, [last + 1.0 - 1.0 / 86_400.0]]) * 86_400.0


def cell_counts(values: np.ndarray, counts: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Counts of cells [e_i, e_{i+1}); values beyond the grid fall in its outermost cells."""
    idx = np.clip(np.searchsorted(edges, values, side="right") - 1, 0, len(edges) - 2)
    return np.bincount(idx, weights=counts, minlength=len(edges) - 1).astype(np.float64)


def noisy_cells(true_counts: np.ndarray, rho: float, noise) -> tuple[np.ndarray, float]:
    """The Gaussian histogram (rho-zCDP, L2 sensitivity 1) and its sigma."""
    sigma = gaussian_sigma(rho)
    return np.asarray(noise.add_gaussian(np.asarray(true_counts, dtype=np.float64), sigma,
                                         sensitivity=1.0)), sigma


# A cluster of passing cells apart from the fullest cell's (more than APART_GAP cells that could hold a value
# between) stands only when it holds APART_SHARE of the passing cells' sum and, more than APART_NEAR such cells
# from the fullest cell's cluster and from the zeros' cell, a cell of it passes the bar of APART_FALSE_ALARM. An
# empty cell passes the usual bar in 0.1% of read-outs: a false cell at 2^62 beside 4,000 scores between 0 and
# 49 held 37 rows (0.9%) and bounded the column at 4.6e18; at a 74-column table's noise a false cell holds a
# fifth of 2,930 rows, and one at 2^47 took a count of bathrooms there. A real cluster apart lies within a few
# octaves (a second floor's area beyond its zeros, nine octaves up; a sentinel 99,999 beside values under 64)
# and holds a share of the rows. The zeros' cell keeps the usual bar (zeros beside positive amounts are the
# commonest cluster apart); an integer column's octaves inside (-1, 1) hold no value, so they are no gap.
APART_GAP = 1
APART_SHARE = 0.01
APART_NEAR = 16
APART_FALSE_ALARM = 1e-5


def zeros_cell(cell_edges: np.ndarray) -> int | None:
    """The index of the cell holding 0 inside it (the log grid's zeros' cell, or a merged cell containing it);
    None on a grid without one (years; public arithmetic)."""
    i = int(np.searchsorted(cell_edges, 0.0, side="right")) - 1
    return i if 0 <= i < len(cell_edges) - 1 and cell_edges[i] < 0.0 < cell_edges[i + 1] else None


def passing_cells(noisy: np.ndarray, sigma: float, cell_edges: np.ndarray, integer: bool,
                  factor: int = 1) -> np.ndarray:
    """Indices of the cells whose noisy count passes the threshold, less the clusters apart from the fullest
    passing cell's that hold under APART_SHARE of the passing sum, or that lie far from it and from the zeros
    (APART_NEAR octaves; each cell spans ``factor``) and pass no cell over the APART_FALSE_ALARM bar (the cell
    holding 0 is never apart; post-processing)."""
    ok = np.flatnonzero(noisy > utility_threshold(sigma, len(noisy)))
    if len(ok) < 2:
        return ok
    can_hold = np.ceil(cell_edges[:-1]) < cell_edges[1:] if integer else np.ones(len(noisy), dtype=bool)
    position = np.cumsum(can_hold)  # cells that could hold a value, counted from the grid's start
    cluster = np.concatenate([[0], np.cumsum(position[ok[1:] - 1] - position[ok[:-1]] > APART_GAP)])
    holds_zero = ok == zeros_cell(cell_edges)
    anchors = position[ok[(cluster == cluster[int(np.argmax(noisy[ok]))]) | holds_zero]]
    strict = utility_threshold(sigma, len(noisy), APART_FALSE_ALARM)
    total = float(noisy[ok].sum())
    stands = np.zeros(len(ok), dtype=bool)
    for c in np.unique(cluster):
        mine = cluster == c
        cells = ok[mine]
        near = bool(np.min(np.abs(position[cells][:, None] - anchors[None, :])) * factor <= APART_NEAR)
        stands[mine] = bool(np.any(np.isin(position[cells], anchors))) or (
            float(noisy[cells].sum()) >= APART_SHARE * total and (near or bool(np.any(noisy[cells] > strict))))
    return ok[stands]


@dataclass(frozen=True)
class Bounds:
    """DP bounds; ``core``: round 1's span of threshold-passing cells before it grew into tail octaves."""

    low: float
    high: float
    core: tuple[float, float] | None = None


def merged(noisy: np.ndarray, cell_edges: np.ndarray, factor: int) -> tuple[np.ndarray, np.ndarray]:
    """Adjacent cells summed in groups of ``factor`` (post-processing: the noise of a sum of m cells has
    standard deviation sigma sqrt(m))."""
    if factor <= 1:
        return noisy, cell_edges
    starts = np.arange(0, len(noisy), factor)
    return np.add.reduceat(noisy, starts), np.append(cell_edges[starts], cell_edges[-1])


# A finer read-out is kept unless a merge's passing cells hold more, by TIGHT_SIGMAS noise deviations of the
# two sums and by 1 - TIGHT_SHARE of the most (merged sums of many noisy cells: a low bar is a false tail)
TIGHT_SIGMAS = 3.0
TIGHT_SHARE = 0.75
COARSE_FACTORS = (1, 2, 4, 8, 16)  # a spread-out column (a date over decades) passes only merged
FULLEST_MERGE = 4  # where no cell passes: the fullest of the cells merged by this many (``fullest_cell``)
ZERO_CELL = 2.0 ** MIN_OCTAVE  # the log grid's cell [-2^-32, 2^-32) holds the zeros


@dataclass(frozen=True)
class MergedReadOut:
    """Round 1's histogram read merged by one factor (post-processing): its passing cells' noisy sum and that
    sum's noise deviation, the span from the first passing cell to the last, and each passing cell
    (low, high, noisy count)."""

    mass: float
    mass_sd: float
    low: float
    high: float
    passing: tuple[tuple[float, float, float], ...]

    def misses_a_cell_of(self, coarser: MergedReadOut, bar: float) -> bool:
        """Whether a passing cell of a coarser read-out lies wholly outside this span and holds ``bar``."""
        return any((b <= self.low or a >= self.high) and count >= bar for a, b, count in coarser.passing)


def coarse_bounds(noisy: np.ndarray, sigma: float, edges: np.ndarray, integer: bool) -> Bounds | None:
    """Round 1: the outer edges of the outermost passing cells (integers: rounded outwards).

    A spread-out column may have no single cell above the threshold: the cells are also read merged by
    2, 4, 8 and 16 (post-processing; a sum of m cells has noise sigma sqrt(m)); the finest merge whose
    passing cells hold as much as the most any merge holds, within TIGHT_SIGMAS deviations of the two
    sums' noise and within 1 - TIGHT_SHARE of it, and whose span meets every passing cell of the coarser
    merges that holds 1 - TIGHT_SHARE of the most, sets the bounds (more is a tail that thin cells hid: a second
    floor's area is 0 in 57% of 2,930 houses and spread over [128, 2048) in the rest, where no single octave
    passes in one draw of four, and the zeros' cell alone clipped 43% of the column to 2; a thin tail spread
    over twenty octaves beyond a gap stays outside, its share stated as clipped);
    they then grow into adjacent octaves with evidence (``extend_into_tails``). An outermost passing
    cell that is the zeros' cell bounds the column at 0 (its other edge, 2^-32, is grid, not data)."""
    found: list[MergedReadOut] = []
    for factor in COARSE_FACTORS:
        cells, cell_edges = merged(noisy, edges, factor)
        s = sigma * math.sqrt(factor)
        ok = passing_cells(cells, s, cell_edges, integer, factor)
        if len(ok):
            passing = tuple((float(cell_edges[i]), float(cell_edges[i + 1]), float(cells[i])) for i in ok)
            found.append(MergedReadOut(float(cells[ok].sum()), s * math.sqrt(len(ok)), float(cell_edges[ok[0]]),
                                       float(cell_edges[ok[-1] + 1]), passing))
    if not found:
        return None
    most = max(found, key=lambda f: (f.mass, f.mass_sd))
    bar = (1.0 - TIGHT_SHARE) * most.mass  # a thin far tail holds less than this

    def holds_the_most(f: MergedReadOut) -> bool:
        return f.mass >= most.mass - max(TIGHT_SIGMAS * math.hypot(f.mass_sd, most.mass_sd), bar)

    chosen = next((f for i, f in enumerate(found)
                   if holds_the_most(f) and not any(f.misses_a_cell_of(later, bar) for later in found[i + 1:])),
                  found[-1])
    core = snapped(chosen.low, chosen.high, integer)
    low, high = snapped(*extend_into_tails(noisy, edges, sigma, chosen.low, chosen.high), integer)
    return Bounds(low, high, core)


def fullest_cell(noisy: np.ndarray, sigma: float, edges: np.ndarray, integer: bool) -> Bounds | None:
    """Where no cell passes the threshold: the cell with the largest noisy count, read merged by FULLEST_MERGE
    (more rows per cell against the same noise, bounds a few octaves wide), as bounds, when it stands a
    deviation above the largest that noise alone gives m cells (sqrt(2 ln m) deviations); else None
    (post-processing)."""
    cells, cell_edges = merged(noisy, edges, FULLEST_MERGE)
    best = int(np.argmax(cells))
    if cells[best] <= (math.sqrt(2.0 * math.log(len(cells))) + 1.0) * sigma * math.sqrt(FULLEST_MERGE):
        return None
    low, high = snapped(float(cell_edges[best]), float(cell_edges[best + 1]), integer)
    return Bounds(low, high, (low, high))


UNIT_SPAN = Bounds(0.0, 1.0, (0.0, 1.0))  # the bounds of a column whose DP facts show no present value


def snapped(low: float, high: float, integer: bool) -> tuple[float, float]:
    """Grid edges as bounds: the zeros' cell is 0, integers round outwards, never empty."""
    low = 0.0 if low == -ZERO_CELL else low
    high = 0.0 if high == ZERO_CELL else high
    if integer:
        low, high = float(math.floor(low)), float(math.ceil(high))
    if not low < high:
        high = low + 1.0
    return low, high


TAIL_SIGMAS = 2.0  # an octave next to the data joins the bounds when its noisy count shows this many deviations


def extend_into_tails(noisy: np.ndarray, edges: np.ndarray, sigma: float, low: float,
                      high: float) -> tuple[float, float]:
    """The bounds grown outwards one octave at a time while the next cell's noisy count exceeds TAIL_SIGMAS
    noise deviations (post-processing). Next to the data a tail is expected, so the bar is lower than
    the threshold that finds the data anywhere on the grid (an empty neighbour passes with probability
    2.3%, two in a row 0.05%); a heavy tail's thin octaves are what per-cell thresholds cut. A side that ends
    at the zeros' cell does not grow: the tiny octaves of the other sign are no tail of a column's zeros (and
    a bound 4.7e-10 below zero would write the zeros as tiny negatives)."""
    bar = TAIL_SIGMAS * sigma
    start_top = top = int(np.searchsorted(edges, high, side="left"))  # first cell at or above high
    while high != ZERO_CELL and top < len(noisy) and noisy[top] > bar:
        top += 1
    start_bottom = bottom = int(np.searchsorted(edges, low, side="right")) - 2  # the cell just below low
    while low != -ZERO_CELL and bottom >= 0 and noisy[bottom] > bar:
        bottom -= 1
    return (low if bottom == start_bottom else float(edges[bottom + 1]),
            high if top == start_top else float(edges[top]))


def cell_per_value(low: float, high: float, integer: bool, step: float = 1.0) -> bool:
    """Whether round 2's grid over [low, high] has a cell per value: an integer range of at most FINE_INTEGER_CELLS
    integers (multiples of ``step``, where the column's values are whole multiples of it: whole tens)."""
    return integer and high - low <= FINE_INTEGER_CELLS * step


def fine_edges(low: float, high: float, integer: bool, cells: int = FINE_POINTS - 1, step: float = 1.0) -> np.ndarray:
    """The public round-2 grid inside [low, high]: one cell per value for a short integer range
    (``cell_per_value``), else about ``cells`` cells, half evenly spaced, half evenly spaced in log scale."""
    if cell_per_value(low, high, integer, step):
        first = math.floor(low / step) * step
        return first + step * np.arange(0.0, math.floor((high - first) / step) + 2.0)  # the last cell holds high
    half = max(2, cells // 2)
    points = [np.linspace(low, high, half + 1)]
    mags = 2.0 ** (np.arange(MIN_OCTAVE * FINE_PER_OCTAVE, MAX_OCTAVE * FINE_PER_OCTAVE + 1) / FINE_PER_OCTAVE)
    both = np.concatenate([-mags[::-1], [0.0], mags])
    inside = both[(both > low) & (both < high)]
    if len(inside) > half:
        inside = inside[np.linspace(0, len(inside) - 1, half).round().astype(int)]
    points.append(inside)
    grid = np.unique(np.concatenate(points))
    if integer:
        grid = np.unique(np.round(grid))
    return grid


CALENDAR_STEPS = (("M", 1), ("M", 3), ("Y", 1), ("Y", 5), ("Y", 10), ("Y", 50))


def calendar_edges(low: float, high: float, kind: str, cells: int) -> np.ndarray:
    """Public calendar boundaries inside [low, high] (in the column's unit): months, quarters, years, 5, 10
    or 50 years, the finest that gives at most ``cells`` cells."""
    per_day = 1.0 if kind == "date" else 86_400.0
    for unit, step in CALENDAR_STEPS:
        start = np.datetime64(int(low // per_day), "D").astype(f"datetime64[{unit}]")
        stop = np.datetime64(int(high // per_day), "D").astype(f"datetime64[{unit}]") + 1
        steps = np.arange(start, stop + 1, step)
        edges = steps.astype("datetime64[D]").astype(np.int64).astype(np.float64) * per_day
        edges = np.unique(np.concatenate([[low], edges[(edges > low) & (edges < high)], [high]]))
        if len(edges) - 1 <= cells:
            return edges
    return np.array([low, high])


@dataclass(frozen=True)
class FineResult:
    low: float
    high: float
    edges: tuple[float, ...]  # the bin edges (low ... high)
    small_domain: bool  # one level per integer value
    codes: tuple[float, ...] | None = None  # a coded column: exactly these values (``Column.values``)
    # heaps measured on a grid of their own (``points.narrowed_heaps``); None: read them off round 2's levels
    heaps: tuple[tuple[float, float], ...] | None = None


def quantile_cuts(noisy: np.ndarray, cell_edges: np.ndarray, bins: int, floor: float = 0.0) -> list[float]:
    """Cell boundaries where the clipped noisy CDF crosses i/bins (post-processing)."""
    mass = np.where(noisy > floor, noisy, 0.0)  # noise in empty cells would spread mass everywhere
    total = float(mass.sum())
    if total <= 0:
        return []
    cdf = np.cumsum(mass) / total
    cuts = [float(cell_edges[min(int(np.searchsorted(cdf, i / bins, side="left")) + 1, len(cell_edges) - 1)])
            for i in range(1, bins)]
    return cuts


LEVEL_FACTORS = (1, 8, 64, 512)


@dataclass(frozen=True)
class Level:
    factor: int  # fine cells per cell of this level
    edges: np.ndarray
    noisy: np.ndarray
    sigma: float


SINGLE_LEVEL_CELLS = 64  # a grid of at most this many cells is measured at one level (codes need all the rho)


def level_factors(n_cells: int) -> tuple[int, ...]:
    """The hierarchy's merge factors for ``n_cells`` fine cells (public: from the grid alone). A short grid
    (a coded column's integers) is one level: a rare code needs every bit of the rho to pass."""
    if n_cells <= SINGLE_LEVEL_CELLS:
        return (1,)
    return tuple(f for f in LEVEL_FACTORS if f == 1 or n_cells / f >= 2)


def measure_levels(values: np.ndarray, counts: np.ndarray, cell_edges: np.ndarray, rho: float, noise) -> list[Level]:
    """Round 2: a Gaussian histogram at each level of a hierarchy of the public fine grid (cells merged by
    1, 8, 64, 512), rho / L-zCDP each (L levels, L2 sensitivity 1 each): rho-zCDP in all."""
    factors = level_factors(len(cell_edges) - 1)
    fine = cell_counts(values, counts, cell_edges)
    out = []
    for factor in factors:
        true, edges = merged(fine, cell_edges, factor)  # exact sums of the fine counts: still one cell per record
        noisy, sigma = noisy_cells(true, rho / len(factors), noise)
        out.append(Level(factor, edges, noisy, sigma))
    return out


TRIM_CELLS = 32  # trimming reads the level nearest this many cells: fine enough to place an end, coarse
# enough that a thin tail's mass adds up within few cells (a sequential test over many cells loses it)
TRIM_SIGMAS = 3.0  # a run of empty cells' noisy sum stays under this many deviations of its sum (long runs: a
# random walk that a one-deviation bar stops early, keeping most of an empty stretch)


def trim_empty_ends(level: Level, low: float, high: float, integer: bool,
                    sigmas: float = 1.0) -> tuple[float, float]:
    """The bounds without the outer cells that hold no evidence of data: from each end inwards, cells are
    cut while their noisy total stays within ``sigmas`` noise deviations of zero and each cell's own count
    within TRIM_SIGMAS (post-processing). A tail with mass, however thin per cell, adds up and stays; a round-1
    false alarm's empty region goes. The cell's own count matters where an empty cell's noise at the grid's end
    would dilute the next: 64 years holding 40% of 2,930 houses (877 under noise 267) were cut with the empty
    cell beyond them (-137), and the column was clipped at 1984."""
    noisy, edges, n = level.noisy, level.edges, len(level.noisy)
    ok = np.flatnonzero(noisy > utility_threshold(level.sigma, n))
    if not len(ok):
        return low, high
    bar, alone = sigmas * level.sigma, max(sigmas, TRIM_SIGMAS) * level.sigma
    top, total = n, 0.0
    for j in range(n - 1, int(ok[-1]), -1):
        total += float(noisy[j])
        if total > bar * math.sqrt(n - j) or noisy[j] > alone:
            break
        top = j
    bottom, total = 0, 0.0
    for j in range(0, int(ok[0])):
        total += float(noisy[j])
        if total > bar * math.sqrt(j + 1) or noisy[j] > alone:
            break
        bottom = j + 1
    new_low, new_high = max(low, float(edges[bottom])), min(high, float(edges[top]))
    if integer:
        new_low, new_high = float(math.floor(new_low)), float(math.ceil(new_high))
    return (new_low, new_high) if new_low < new_high else (low, high)


def outer_octaves(bounds: Bounds) -> tuple[float, float]:
    """(the end of the octave holding the low bound, the start of the octave holding the high bound)."""
    high_floor = bounds.high / 2.0 if bounds.high > 0 else bounds.high * 2.0 if bounds.high < 0 else bounds.high
    low_ceiling = bounds.low * 2.0 if bounds.low > 0 else bounds.low / 2.0 if bounds.low < 0 else bounds.low
    return low_ceiling, high_floor


def within_outer_octaves(low: float, high: float, bounds: Bounds) -> tuple[float, float]:
    """Trimmed bounds kept inside round 1's outermost octaves: a trim may cut empty space inside the octave
    round 1 found the data in (a latitude in [32, 64)), never an octave it found significant (a tail)."""
    low_ceiling, high_floor = outer_octaves(bounds)
    new_low, new_high = min(low, low_ceiling), max(high, high_floor)
    return (new_low, new_high) if new_low < new_high else (bounds.low, bounds.high)
