"""Round 2's read-out (post-processing): a numeric column's DP bin edges, or its codes, from the noisy
histograms of ``bounds.measure_levels`` inside round 1's DP bounds.

The ends are trimmed of empty space (``bounds.trim_empty_ends``), a thin tail the trim would cut is kept as a
bin of its own (``tail_bin_ends``), and a trim that cut mass round 1 counted is undone (``trims_that_cut_mass``).
Nothing here reads the data: every input is a noisy count already charged.
"""

from __future__ import annotations

import math

import numpy as np

from privsynth.discovery.bounds import (
    TRIM_CELLS,
    TRIM_SIGMAS,
    Bounds,
    FineResult,
    Level,
    outer_octaves,
    quantile_cuts,
    trim_empty_ends,
    within_outer_octaves,
)
from privsynth.discovery.codes import coded_values, codes_reach, mass_beyond, near_codes, off_codes
from privsynth.discovery.figures import round_figure_edges, split_wide_bins

MIN_SIGNAL = 10.0  # round 2 tightens the bounds only when the passing cells hold this many noise sigmas


def read_out(levels: list[Level], integer: bool, bins: int, bounds: Bounds, public: bool = False,
             octave_grid: bool = True, keep_ends: tuple[bool, bool] = (False, False),
             round_one: tuple[np.ndarray, np.ndarray, float] | None = None, step: float = 1.0) -> FineResult:
    """Round 2 read-out (post-processing) inside round 1's DP bounds: a coded column's values (``coded_values``), else
    ``bins`` edges where the noisy CDF of the finest level with signal crosses i/bins (equal widths when the noise
    leaves too little to place them), a bin wider than three times the interior's mean split evenly where the parts
    show data (``figures.split_wide_bins``, numbers only), each cut moved to a round figure near it
    (``figures.round_figure_edges``, numbers only) where both bins beside it show data. DP bounds on the octave grid
    lose empty space at their ends (``trim_empty_ends`` on the level nearest TRIM_CELLS cells) but never an octave
    round 1 found data in; other grids (years) are trimmed on the coarsest level's evidence. With round 1's
    histogram (``round_one``: ``levels`` span whole octaves), a level that looks coded gets edges when round 1 saw
    values off its codes (``off_codes``). ``step``: an integer column's values are whole multiples of it, and its
    short grid has a cell per multiple."""
    low, high = bounds.low, bounds.high
    if integer:
        codes = coded_values(levels[0], step)
        if codes is not None:
            near = near_codes(levels[0], codes)
            # On a grid of whole tens (the facts showed every value one), round 1's octaves are weighed against the
            # codes with the values beside them; on a grid of integers against the codes alone, so that a tail
            # thinning below the bar (doctor visits 2-26) is seen as values off the codes, never clipped into them.
            weighed = near if step > 1.0 else codes
            if public or (codes_reach(codes, bounds) and not mass_beyond(levels[0], codes)
                          and not (round_one is not None and off_codes(round_one, levels[0], weighed))):
                return FineResult(near[0], near[-1] + 1.0, (*near, near[-1] + 1.0), True, near)
    outer: tuple[float | None, float | None] = (None, None)  # a tail bin's outer edge, where a trim cut mass
    if not public and octave_grid:  # public bounds are facts, not estimates: never trimmed
        low, high, outer = trimmed_span(levels, bounds, integer, keep_ends)
    elif not public:
        low, high = trim_empty_ends(levels[-1], low, high, integer, 1.0)
        low, high = (bounds.low if keep_ends[0] else low), (bounds.high if keep_ends[1] else high)
    chosen = quantile_level(levels, low, high)
    inside = (chosen.edges[1:] > low) & (chosen.edges[:-1] < high)
    cuts = quantile_cuts(np.where(inside, chosen.noisy, 0.0), chosen.edges, bins, floor=chosen.sigma)
    out = sorted({low, high, *(c for c in cuts if low < c < high)})
    if len(out) - 1 < max(2, bins // 2):
        out = sorted(set(np.linspace(low, high, bins + 1).tolist()))
    if octave_grid:  # inside the span: a trim's tail bin (``outer``) holds what the noise left of a thin tail
        out = split_wide_bins(out, integer, shows_data=lambda u, v: any(shows_data(level, u, v) for level in levels))
    out = sorted({*out, *(edge for edge in outer if edge is not None)})
    if integer:
        out = sorted({float(round(e)) for e in out})
    if octave_grid:  # numbers: the cuts at round figures (a calendar's bins are its own)
        out = round_figure_edges(out, integer, lambda u, v: shows_data(chosen, u, v))
    if len(out) < 2:
        out = [low, low + 1.0]
    return FineResult(out[0], out[-1], tuple(out), False)


NOISE_OVER_SIGMA = 0.2420  # E[X 1{X > sigma}] / sigma for X ~ N(0, sigma^2): what an empty cell adds to a signal


def quantile_level(levels: list[Level], low: float, high: float) -> Level:
    """The level the quantile cuts are read on (post-processing): the finest whose cells meeting [low, high]
    that pass one noise deviation hold half the coarsest level's noisy total and MIN_SIGNAL deviations, after
    what noise alone would add there (NOISE_OVER_SIGMA deviations a cell), else the coarsest. Counted over the
    whole grid, the noise passing in empty cells outweighed the data: 1,537 one-wide cells under noise 427
    around a 100,000-row column spanning 280 of them put three of seven cuts outside the data."""
    n_hat = float(levels[-1].noisy.sum())
    for level in levels:
        inside = (level.edges[1:] > low) & (level.edges[:-1] < high)
        cells = level.noisy[inside]
        signal = float(cells[cells > level.sigma].sum()) - NOISE_OVER_SIGMA * level.sigma * len(cells)
        if signal >= 0.5 * n_hat and signal >= MIN_SIGNAL * level.sigma:
            return level
    return levels[-1]


def shows_data(level: Level, low: float, high: float) -> bool:
    """Whether the cells of ``level`` whose centres lie in [low, high) hold a noisy sum above TAIL_BIN_SIGMAS
    deviations of its noise (post-processing)."""
    centres = (level.edges[:-1] + level.edges[1:]) / 2.0
    inside = (centres >= low) & (centres < high)
    k = int(inside.sum())
    return k > 0 and float(level.noisy[inside].sum()) > TAIL_BIN_SIGMAS * level.sigma * math.sqrt(k)


TAIL_BIN_SIGMAS = 2.0  # a trim at this bar marks how far a thin tail reaches beyond the trim at TRIM_SIGMAS (at 1,
# a run of empty cells passed it about one time in three: a tail bin of noise, its values wrong)


def tail_bin_ends(level: Level, bounds: Bounds, low: float, high: float, integer: bool,
                  keep_ends: tuple[bool, bool] = (False, False), present: float | None = None
                  ) -> tuple[float | None, float | None]:
    """The outer edges of the tail bins beyond a trim of ``bounds`` to [low, high], or None where that end is
    clipped (post-processing). The trim cuts cells while their noisy total stays within TRIM_SIGMAS deviations
    of zero, so a thin tail spread over a few cells (income above 55,680 in a 10,000-row table: 4% of the rows
    under noise 100 a cell) can go with the empty space. The same trim at TAIL_BIN_SIGMAS stops where such a
    tail's mass begins to show: the stretch between the two trims is a bin of its own, which the mechanism
    measures, and only what lies beyond the second is clipped; a tail clipped costs its whole mass, an empty
    tail bin only the noise the mechanism draws into it. Where round 1 counted mass the trim cut
    (``keep_ends``, ``trims_that_cut_mass``) and the cells show none, the tail bin reaches round 1's bound. Where
    the cut could hide more than UNSEEN_SHARE of the ``present`` rows, it reaches at least where the cut cells'
    running sum peaks (``mass_beyond_trim``); of these, the furthest out."""
    reach_low, reach_high = trim_empty_ends(level, bounds.low, bounds.high, integer, TAIL_BIN_SIGMAS)
    seen_low, seen_high = mass_beyond_trim(level, bounds, low, high, present)
    lows = [e for e in (reach_low if reach_low < low else None, bounds.low if keep_ends[0] and bounds.low < low
                        else None, seen_low) if e is not None]
    highs = [e for e in (reach_high if reach_high > high else None, bounds.high if keep_ends[1] and bounds.high > high
                         else None, seen_high) if e is not None]
    lower, upper = (min(lows) if lows else None), (max(highs) if highs else None)
    return lower, upper


# A trim at TRIM_SIGMAS cuts up to 3 deviations of the cut cells' noise: on STAR's 6,000-row reading scores
# under noise ~100 a cell, 900 rows next to the bulk (15%) went with the empty space, and clipped onto the edge
# bin; round 2's clipped share averaged 6.5% over its 20 number columns (3 draws). A cut that could hide more than
# UNSEEN_SHARE of the rows is read again from the trim outwards: a stretch of empty cells costs only the noise
# the mechanism and the fine decoding draw into it, a clipped tail its whole mass.
UNSEEN_SHARE = 0.02
SEEN_SIGMAS = 1.0  # the cut cells' running sum shows rows where it peaks above this many deviations of its noise


def mass_beyond_trim(level: Level, bounds: Bounds, low: float, high: float, present: float | None
                     ) -> tuple[float | None, float | None]:
    """Where the cells a trim of ``bounds`` to [low, high] cut could hide more than UNSEEN_SHARE of the ``present`` rows
    (TRIM_SIGMAS deviations of their summed noise), the edge outward from the trim at which their running noisy
    sum peaks, when that peak shows SEEN_SIGMAS deviations of its noise and UNSEEN_SHARE of the rows (less is not
    worth a stretch of empty space: on 51,920 rows under noise ~300 a cell, 1-deviation excursions of empty cells
    widened a latitude's end bins and its 2-way error rose 9%); else None (post-processing)."""
    if present is None or present <= 0:
        return None, None
    starts, ends = level.edges[:-1], level.edges[1:]
    out: list[float | None] = []
    for side in (0, 1):
        idx = np.flatnonzero((ends <= low) & (starts >= bounds.low))[::-1] if side == 0 else \
            np.flatnonzero((starts >= high) & (ends <= bounds.high))
        if not len(idx) or TRIM_SIGMAS * level.sigma * math.sqrt(len(idx)) <= UNSEEN_SHARE * present:
            out.append(None)
            continue
        running = np.cumsum(level.noisy[idx])
        peak = int(np.argmax(running))
        if running[peak] <= max(SEEN_SIGMAS * level.sigma * math.sqrt(peak + 1), UNSEEN_SHARE * present):
            out.append(None)
            continue
        cell = int(idx[peak])
        out.append(float(level.edges[cell]) if side == 0 else float(level.edges[cell + 1]))
    return out[0], out[1]


def trim_level(levels: list[Level]) -> Level:
    """The level a trim reads: the one nearest TRIM_CELLS cells (public: the grid alone)."""
    return min(levels, key=lambda lv: abs(len(lv.noisy) - TRIM_CELLS))


def trimmed_span(levels: list[Level], bounds: Bounds, integer: bool, keep_ends: tuple[bool, bool] = (False, False)
                 ) -> tuple[float, float, tuple[float | None, float | None]]:
    """(low, high, the tail bins' outer edges) of DP bounds on the octave grid (post-processing): empty space at
    the ends trimmed (``trim_empty_ends`` at TRIM_SIGMAS on the level nearest TRIM_CELLS cells), never past an
    octave round 1 found data in (``within_outer_octaves``), and the thin tails that trim cut
    (``tail_bin_ends``). ``read_out`` places its bins in it; ``zoom.zoom_span`` zooms onto it."""
    level = trim_level(levels)
    low, high = within_outer_octaves(*trim_empty_ends(level, bounds.low, bounds.high, integer, TRIM_SIGMAS), bounds)
    return low, high, tail_bin_ends(level, bounds, low, high, integer, keep_ends, float(levels[-1].noisy.sum()))


TRIM_CHECK_SIGMAS = 3.0  # a trim that leaves this many deviations of round 1's octave count outside is undone


def _interval_mass(edges: np.ndarray, noisy: np.ndarray, sigma: float, u: float, v: float,
                   overlapping: bool = False) -> tuple[float, float, int]:
    """The noisy mass of the cells lying inside [u, v] (``overlapping``: of every cell that meets it), its noise
    deviation and the number of cells."""
    tol = 1e-9 * max(1.0, abs(u), abs(v))
    if overlapping:
        inside = (edges[1:] > u + tol) & (edges[:-1] < v - tol)
    else:
        inside = (edges[:-1] >= u - tol) & (edges[1:] <= v + tol)
    k = int(inside.sum())
    return float(noisy[inside].sum()), sigma * math.sqrt(k), k


def trims_that_cut_mass(round_one: tuple[np.ndarray, np.ndarray, float], level: Level, bounds: Bounds,
                        low: float, high: float) -> tuple[bool, bool]:
    """Whether round 2's trim of each end of round 1's DP bounds to ``low`` / ``high`` left mass outside
    (post-processing). Round 1 counted each outermost octave (``within_outer_octaves``) as one cell; round 2's
    cells inside the kept part of that octave should hold that count. When round 1's count exceeds what
    round 2 kept by TRIM_CHECK_SIGMAS deviations of the difference, the trim cut a thin tail (income's
    octave [4, 8) spread over 16 cells of 40 rows under noise 100: no run of them passes a trim's bar, but
    round 1 counted its 660 rows), and that end keeps round 1's bound: clipping a tail costs its whole mass,
    an empty stretch kept costs only the noise drawn into it."""
    edges1, noisy1, sigma1 = round_one
    outer = outer_octaves(bounds)
    out = []
    for trimmed, octave, kept in ((low > bounds.low, (bounds.low, outer[0]), (low, outer[0])),
                                  (high < bounds.high, (outer[1], bounds.high), (outer[1], high))):
        if not trimmed:
            out.append(False)
            continue
        count, sd1, k1 = _interval_mass(edges1, noisy1, sigma1, *octave)
        held, sd2, _ = _interval_mass(level.edges, level.noisy, level.sigma, *kept, overlapping=True)
        out.append(k1 > 0 and count - held > TRIM_CHECK_SIGMAS * math.hypot(sd1, sd2))
    return out[0], out[1]

