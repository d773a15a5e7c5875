"""Round 1's bounds against the column's DP count of present numbers: rows its cells do not account for
(post-processing).

Round 1 reads its bounds off cells that pass a threshold and grows them into adjacent octaves with evidence
(``bounds.extend_into_tails``). A column whose values beside a spike are spread thinly over several octaves
passes in no cell but the spike's: a masonry veneer's area is 0 in 60% of 2,930 houses and spread over
[16, 1,600] in the rest, 422 rows in its fullest octave under noise 133 a cell, so the bounds were the zeros'
cell and the run wrote 40% of the column as 0 to 2. The DP facts already counted the column's present numbers
(the class histogram, ``facts.NoisyFacts.numbers_present_pooled``): where they exceed what the bounds' cells hold by
UNACCOUNTED_SIGMAS deviations of the difference, the rows are elsewhere, and the stretch of octaves beyond a
bound that best shows them joins the bounds (``best_stretch``). Both inputs are noisy counts already charged;
nothing here reads the data.
"""

from __future__ import annotations

import math

import numpy as np

from privsynth.discovery.bounds import Bounds, snapped

UNACCOUNTED_SIGMAS = 2.5  # the present numbers exceed the bounds' cells by this many deviations: rows lie outside
STRETCH_SIGMAS = 1.0  # a stretch's own sum shows rows by this many deviations (the empty octaves between dilute it)
JOINT_SIGMAS = 3.0  # ... and a stretch beyond a bound shows them: the two estimates together, this many deviations
OCTAVE_PRICE = 0.5  # log-likelihood a stretch pays an octave: else noise in the octaves past the rows lengthens it
# (a masonry area up to 1,600 was bounded at 32,768 in one draw of three); a clipped row costs more than empty space
UNACCOUNTED_REACH = 12  # octaves that can hold a value, counted from a bound outwards (``bounds.APART_NEAR``)


def can_hold(edges: np.ndarray, step: float) -> np.ndarray:
    """Per cell [e_i, e_{i+1}), whether a value that is a whole multiple of ``step`` (0: any number) can lie in it;
    an integer's octaves inside (0, 1) hold none, so they are neither data nor a gap."""
    if step <= 0:
        return np.ones(len(edges) - 1, dtype=bool)
    starts, ends = edges[:-1], edges[1:]
    first = np.ceil(starts / step) * step  # the first multiple at or after the cell's start
    return first < ends


def held_by(noisy: np.ndarray, edges: np.ndarray, holds: np.ndarray, low: float, high: float
            ) -> tuple[float, int]:
    """The noisy sum of the cells that can hold a value and whose centre lies in [low, high], and their number."""
    centres = (edges[:-1] + edges[1:]) / 2.0
    inside = holds & (centres >= low) & (centres <= high)
    return float(noisy[inside].sum()), int(inside.sum())


def best_stretch(noisy: np.ndarray, sigma: float, edges: np.ndarray, holds: np.ndarray, low: float, high: float,
                 missing: float, missing_sd: float) -> tuple[int, float] | None:
    """(side, new bound) of the stretch of cells from a bound outwards (among the first UNACCOUNTED_REACH that
    can hold a value on that side) that best shows the ``missing`` rows, or None. A stretch qualifies when it ends
    in a cell with a positive count, its noisy sum shows STRETCH_SIGMAS deviations of its noise, and its sum and
    ``missing`` together (weighed by their inverse variances) show JOINT_SIGMAS. Of these, the one that best fits
    "its cells hold rows, the cells beyond none, its sum is what is missing" (Gaussian log-likelihood: an empty
    octave past the rows adds noise, not evidence; a stretch that stops short misses rows), less OCTAVE_PRICE an
    octave it spans. Side 0 lowers ``low``; a bound at 0 does not move (the other sign's octaves are no tail of
    a column's zeros, as in ``bounds.extend_into_tails``)."""
    centres = (edges[:-1] + edges[1:]) / 2.0
    best: tuple[float, int, float] | None = None
    for side in (0, 1):
        if (low if side == 0 else high) == 0.0:
            continue
        cells = np.flatnonzero(holds & (centres < low))[::-1] if side == 0 else np.flatnonzero(holds & (centres > high))
        cells = cells[:UNACCOUNTED_REACH]
        if not len(cells):
            continue
        running = np.cumsum(noisy[cells])
        variance = sigma ** 2 * np.arange(1, len(cells) + 1)
        joint = (running / variance + missing / missing_sd ** 2) / np.sqrt(1.0 / variance + 1.0 / missing_sd ** 2)
        ok = (running >= STRETCH_SIGMAS * np.sqrt(variance)) & (joint >= JOINT_SIGMAS) & (noisy[cells] > 0.0)
        # the log-likelihood of "these cells hold rows, the rest none", less the misfit of their sum to ``missing``
        fit = 0.5 * (np.square(running) / variance - np.square(missing - running) / missing_sd ** 2) \
            - OCTAVE_PRICE * np.arange(1, len(cells) + 1)
        for m in np.flatnonzero(ok):
            if best is None or fit[m] > best[0]:
                cell = int(cells[m])
                best = (float(fit[m]), side, float(edges[cell]) if side == 0 else float(edges[cell + 1]))
    return None if best is None else (best[1], best[2])


def account_for_present(bounds: Bounds, noisy: np.ndarray, sigma: float, edges: np.ndarray, integer: bool,
                        present: float, present_sd: float, step: float) -> Bounds:
    """``bounds`` grown, a side at a time, while the DP count of the column's present numbers (``present``, noise
    deviation ``present_sd``) exceeds the noisy sum of round 1's cells inside them by UNACCOUNTED_SIGMAS
    deviations of the difference, and a stretch beyond a bound shows the rows (``best_stretch``); post-processing.
    ``step``: the column's values are whole multiples of it (0: unknown), so cells that cannot hold one are skipped.
    ``core`` stays round 1's passing span: the stretch is a tail round 2 may trim back to its outer octave."""
    holds = can_hold(edges, step)
    low, high = bounds.low, bounds.high
    for _ in range(2):
        held, k = held_by(noisy, edges, holds, low, high)
        missing, missing_sd = present - held, math.hypot(present_sd, sigma * math.sqrt(max(k, 1)))
        if missing <= UNACCOUNTED_SIGMAS * missing_sd:
            break
        found = best_stretch(noisy, sigma, edges, holds, low, high, missing, missing_sd)
        if found is None:
            break
        side, edge = found
        low, high = snapped(edge, high, integer) if side == 0 else snapped(low, edge, integer)
    return bounds if (low, high) == (bounds.low, bounds.high) else Bounds(low, high, bounds.core)
