"""Coded columns: a whole-number column whose mass sits on a few values, read from round 2's one-cell-per-integer
level (post-processing of its noisy counts). A coded column is written as exactly its codes (``Column.values``);
``read_out`` decides whether a column is coded (``coded_values``, ``codes_reach``, ``mass_beyond``) and takes
the values near the codes (``near_codes``)."""

from __future__ import annotations

import math

import numpy as np

from privsynth.discovery.bounds import Bounds, Level, utility_threshold

MAX_CODES = 40  # a whole-number column with at most this many values found is coded (one level per value)
CODED_REST_SHARE = 0.01  # ... when the values found hold all but this share of the column's noisy mass


CODE_GAP_SIGMAS = 2.5  # a run of cells between two codes whose noisy sum passes this many deviations of its noise
# holds values the codes' bar missed (an empty run passes about one time in 160)
CODE_NEXT_SIGMAS = 2.0  # the cell next to the outermost code, when its noisy count passes this many deviations (an
# empty cell: one time in 44, and the code it adds holds the mechanism's noise, not a moved share of the column)


def with_near_codes(noisy: np.ndarray, ok: np.ndarray, sigma: float) -> np.ndarray:
    """The cells a one-cell-per-integer level shows as codes (post-processing): the cells that pass the bar, every
    cell of a run between two of them whose noisy sum passes CODE_GAP_SIGMAS deviations of its noise, and, from
    each end outwards, next cells that pass CODE_NEXT_SIGMAS. The bar keeps an empty cell out one time in a
    thousand per column; a coded column writes a value below it as the code below it. Garage sizes of 2,930
    houses under noise 133 a cell: the 374 three-car garages (13% of the column) missed the bar one run in two
    and were written as two-car garages; the 649 houses of 7 rooms (22%) were written as 6 one run in seven.
    A missed value lies next to a code or between two; an empty cell there costs the mechanism's noise on one
    more level, a missed value its whole share."""
    ok = np.asarray(ok, dtype=bool).copy()
    inside = np.flatnonzero(ok)
    if not len(inside):
        return ok
    start = None
    for i in range(inside[0] + 1, inside[-1] + 1):
        if not ok[i] and start is None:
            start = i
        elif ok[i] and start is not None:
            if noisy[start:i].sum() > CODE_GAP_SIGMAS * sigma * math.sqrt(i - start):
                ok[start:i] = True
            start = None
    low, high = inside[0], inside[-1]
    while high + 1 < len(ok) and noisy[high + 1] > CODE_NEXT_SIGMAS * sigma:
        high += 1
        ok[high] = True
    while low > 0 and noisy[low - 1] > CODE_NEXT_SIGMAS * sigma:
        low -= 1
        ok[low] = True
    return ok


def coded_values(level: Level, step: float = 1.0) -> tuple[float, ...] | None:
    """The whole numbers a one-cell-per-integer level (per multiple of the column's step) shows (post-processing),
    or None when the column is
    not coded: more than MAX_CODES pass the threshold, or the cells that do not pass hold more than
    CODED_REST_SHARE of the noisy mass beyond what their noise explains (a spread-out column)."""
    if level.factor != 1 or len(level.edges) < 2 or not np.all(np.diff(level.edges) == step):
        return None
    ok = level.noisy > utility_threshold(level.sigma, len(level.noisy))
    if not ok.any() or ok.sum() > MAX_CODES:
        return None
    if step > 1.0:
        # The DP facts showed every value a whole multiple of the step: each cell is one value, so a cell the bar
        # missed beside or between codes is a code too (``with_near_codes``), not a spread of the column.
        near = with_near_codes(level.noisy, ok, level.sigma)
        ok = near if near.sum() <= MAX_CODES else ok
    total = float(level.noisy.sum())
    rest = total - float(level.noisy[ok].sum())
    if rest > CODED_REST_SHARE * max(total, 0.0) + 3.0 * level.sigma * math.sqrt(max(int((~ok).sum()), 1)):
        return None
    return tuple(float(v) for v in level.edges[:-1][ok])


def near_codes(level: Level, codes: tuple[float, ...]) -> tuple[float, ...]:
    """A coded column's codes with the values near them (``with_near_codes``; post-processing)."""
    ok = np.isin(level.edges[:-1], codes)
    return tuple(float(v) for v in level.edges[:-1][with_near_codes(level.noisy, ok, level.sigma)])


def codes_reach(codes: tuple[float, ...], bounds: Bounds) -> bool:
    """Whether the codes reach into round 1's outermost passing cells (post-processing). Round 1 saw mass
    up to ``bounds``; codes that stop short of its top (or bottom) octave leave that mass outside every
    code, so the column is a tail of thin cells, not a coded column (clipping it would cut the tail).
    Measured against round 1's threshold-passing span (``core``); the tail octaves it grew into are
    judged by ``mass_beyond``."""
    low, high = bounds.core or (bounds.low, bounds.high)
    top_ok = codes[-1] >= high / 2.0 if high > 1.0 else codes[-1] >= high - 1.0
    if low < 0.0:
        bottom_ok = codes[0] <= low / 2.0
    else:
        bottom_ok = codes[0] <= 2.0 * low
    return top_ok and bottom_ok


CODE_TAIL_SIGMAS = 3.0  # empty cells beyond true codes pass this with probability 0.13% a side
CODE_TAIL_RUN_SIGMAS = 3.5  # ... and some run of them from the codes outwards this, about 0.4% a side (at 3: 1.4%,
# and a survey's 20 coded years lost to 4 quantile bins about one run in fifteen)


def mass_beyond(level: Level, codes: tuple[float, ...]) -> bool:
    """Whether the one-cell-per-integer level holds, outside the codes' range, a tail the codes would clip
    (post-processing): on either side, the noisy sum of every cell beyond the codes above CODE_TAIL_SIGMAS
    deviations of its noise, or a sum of the cells next to the codes, taken outwards one cell at a time, above
    CODE_TAIL_RUN_SIGMAS deviations of its own. A tail crowds next to the codes (visits 2-7 hold 600 of 4,406 rows,
    8-16 another 130): summed only over every cell to round 1's bound, its noise (sqrt(14) deviations) hid it
    about one run in three; the sums outwards miss it about one run in seven."""
    cells = level.edges[:-1]
    for outwards in (level.noisy[cells > codes[-1]], level.noisy[cells < codes[0]][::-1]):
        if not len(outwards):
            continue
        sums = np.cumsum(outwards)
        runs = np.sqrt(np.arange(1, len(sums) + 1))
        if sums[-1] > CODE_TAIL_SIGMAS * level.sigma * runs[-1] or bool(
                np.any(sums > CODE_TAIL_RUN_SIGMAS * level.sigma * runs)):
            return True
    return False


CODE_OFF_SIGMAS = 3.0  # an octave of round 1 whose count passes what its codes hold by this many deviations of
# the difference holds values off the codes (0.13% for a column whose codes hold all its values)


def off_codes(round_one: tuple[np.ndarray, np.ndarray, float], level: Level, codes: tuple[float, ...]) -> bool:
    """Whether round 1's histogram (one cell per octave) shows values off the codes (post-processing): some
    octave's noisy count exceeds the noisy counts of the codes inside it, on round 2's one-cell-per-integer
    ``level``, by CODE_OFF_SIGMAS deviations of the difference. Round 2 spreads its rho over cells one integer
    wide, so a tail of counts thins below every cell's bar (a column of doctor visits, 0 and 1 for 89% of
    4,406 people, 2-3 for 6% and the rest to 26, came back coded 0, 1, 4: 6% written as 1 and the tail as 4);
    round 1 counts the octave [2, 4) whole, at less noise than any sum of cells."""
    edges1, noisy1, sigma1 = round_one
    cells = level.edges[:-1]
    code_set = np.isin(cells, codes)
    for a, b, count in zip(edges1[:-1], edges1[1:], noisy1):
        if b <= level.edges[0] or a >= level.edges[-1]:
            continue
        inside = code_set & (cells >= a) & (cells < b)
        held = float(level.noisy[inside].sum())
        if count - held > CODE_OFF_SIGMAS * math.hypot(sigma1, level.sigma * math.sqrt(int(inside.sum()))):
            return True
    return False
