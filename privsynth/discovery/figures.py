"""Bin edges at round figures: each DP quantile cut moved to the roundest number near it (post-processing).

A reader's questions lie at round figures: incomes of 50,000 to 60,000, balances above 2,000, latitudes
north of 44.95. A cut placed where a noisy CDF crossed i/bins (47,616; 1,920; 44.9409) splits none of
them, so every such question is answered by how fine decoding spreads values inside a bin, which carries
no relation to the other columns. Each interior cut moves to the roundest number within a quarter of the
bins on either side of it: the bins stay near the DP quantiles, in the same order, and none merges.
The bounds are not moved (they are the column's domain). Nothing here reads data: the inputs are edges
already released.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from privsynth.schema.grid import holds_precision_value

ROUND_REACH = 0.25  # a cut moves at most this share of the bin on the side it moves into
ROUND_STEPS = (1.0, 0.5, 0.2)  # within a decade, from the roundest: 100,000, 50,000, 20,000, then 10,000 (the next
# decade's first); a step of 2.5 (25,000) would write one digit more than the next decade's 10,000s
MAX_DECADES = 6  # below the window's width by this many decades the cut stays where it is
WIDE_BIN_FACTOR = 3.0  # a bin wider than this many times the mean interior width is split (``split_wide_bins``)
MIN_BINS_TO_SPLIT = 4  # ... in a column of at least this many bins (the interior's mean needs two bins)
LOG_SPAN = 100.0  # ... widths read on the log scale where the last edge is this many times the middle one


def roundest_in(low: float, high: float, near: float, integer: bool = False) -> float | None:
    """The roundest number in [low, high] (the largest step of ROUND_STEPS x 10^k with a multiple there: the
    fewest significant digits, then a multiple of 5 before one of 2),
    the multiple nearest ``near`` among those of that step; None when no step down to MAX_DECADES decades
    below the width (at least 1 for an integer column) has one."""
    if not (math.isfinite(low) and math.isfinite(high)) or high < low:
        return None
    width = high - low
    top = math.floor(math.log10(width)) + 1 if width > 0 else math.floor(math.log10(max(abs(near), 1e-300)))
    for k in range(top, top - MAX_DECADES - 1, -1):
        for step in ROUND_STEPS:
            unit = step * 10.0 ** k
            if integer and unit < 1.0:
                return None
            first, last = math.ceil(low / unit - 1e-9), math.floor(high / unit + 1e-9)
            if first <= last:
                best = min(max(round(near / unit), first), last) * unit
                return float(round(best, 12 - k if k < 12 else 0))
    return None


def round_figure_edges(edges: list[float], integer: bool = False,
                       shows_data: Callable[[float, float], bool] | None = None) -> list[float]:
    """``edges`` (sorted) with every interior edge moved to ``roundest_in`` the window a quarter
    (ROUND_REACH) of each neighbouring bin around it; the windows of two cuts never meet, so the edges keep
    their order and count. The first and last edge (the bounds) stay, and so does a cut where either bin
    beside it, after the move, would show no data (``shows_data(low, high)``, from noisy counts already
    released): such a cut marks where the data begin (ages from 6.6 after empty space from 4), and moved to
    6.5 it would hand the empty tenth to a bin of data, where values would be drawn."""
    if len(edges) < 3:
        return list(edges)
    out = list(edges)
    for i in range(1, len(edges) - 1):
        low = edges[i] - ROUND_REACH * (edges[i] - edges[i - 1])
        high = edges[i] + ROUND_REACH * (edges[i + 1] - edges[i])
        moved = roundest_in(low, high, edges[i], integer)
        if moved is None or not edges[i - 1] < moved < edges[i + 1]:
            continue
        if shows_data is None or (shows_data(out[i - 1], moved) and shows_data(moved, edges[i + 1])):
            out[i] = moved
    return out


def split_wide_bins(edges: list[float], integer: bool = False, factor: float = WIDE_BIN_FACTOR,
                    shows_data: Callable[[float, float], bool] | None = None) -> list[float]:
    """``edges`` (sorted, released) with every bin wider than ``factor`` times the mean width
    of the interior bins (all but the first and the last) cut into the fewest equal parts no wider than that, each
    new cut at the roundest number within a quarter (ROUND_REACH) of a part around it; a new cut stays only where
    the parts on both sides of it show data (``shows_data(low, high)``, from noisy counts already released), so a
    thin tail's empty reach stays one bin. Fewer than MIN_BINS_TO_SPLIT bins stay as they are. Where the last edge is
    LOG_SPAN or more times the middle interior edge (a heavy tail), widths and parts are read on the log scale (a
    bin from 0 or below is then not split): a reader bins such a column by decades (votes at 100, 200, 500, 1,000,
    5,000; dollars spent from 0), and even parts of votes' tail bin [1,328, 16,384) would be eight bins no reader
    asks for.

    Why: quantile bins follow the mass, so where it thins (a tail: balances above 1,500 of a column whose middle
    half lies in 500-1,200) one bin spans what a reader's evenly spaced round figures split several times, and
    inside a bin decoding draws values without regard to the other columns, while a rare outcome often gathers
    just there (defaults rise from 15% to 80% across that bin). A bin several times the typical width is split so
    the reader's edges fall on ours. Each split adds a level to every marginal of the column, so only a bin well
    beyond the typical width is split. Measured (benchmarks/README.md, round 5 session 15; paired seeds, 2-way
    error / independent columns', epsilon 1): credit_default 0.253 -> 0.235 (80 seeds), mpls_stops 0.122 -> 0.117
    (20); star, nmes, gss_vocab level. At a factor of 2: 0.232 and 0.126 (more levels on a geographic column whose
    thin edges hold little the reader asks of). Post-processing of released edges: nothing here reads data."""
    if len(edges) - 1 < MIN_BINS_TO_SPLIT:
        return list(edges)
    middle = sorted(edges[1:-1])[(len(edges) - 2) // 2]
    logarithmic = middle > 0 and edges[-1] >= LOG_SPAN * middle
    forward, back = (math.log, math.exp) if logarithmic else (float, float)
    scaled = [forward(e) if e > 0 or not logarithmic else -math.inf for e in edges]
    cap = factor * (scaled[-2] - scaled[1]) / (len(edges) - 3)
    if not (math.isfinite(cap) and cap > 0):
        return list(edges)
    out = [edges[0]]
    for high, s_low, s_high in zip(edges[1:], scaled[:-1], scaled[1:]):
        parts = max(1, math.ceil((s_high - s_low) / cap - 1e-9)) if math.isfinite(s_low) else 1
        part = (s_high - s_low) / parts
        for k in range(1, parts):
            even, before, after = (back(s_low + part * j) for j in (k, k - 1, k + 1))
            if k + 1 == parts:
                after = high
            cut = roundest_in(even - ROUND_REACH * (even - before), even + ROUND_REACH * (after - even), even, integer)
            cut = even if cut is None else cut
            if shows_data is None or (shows_data(out[-1], cut) and shows_data(cut, after)):
                out.append(cut)
        out.append(high)
    return out


def edges_holding_values(edges: tuple[float, ...], precision: int) -> tuple[float, ...]:
    """Bin edges where every bin holds a number written with ``precision`` decimals (post-processing of released
    edges): a bin that holds none merges with the next (the last with the one before). Such a bin could only be
    drawn as a value the column never holds (a constant 7.5 read out into bins inside [7.49995, 7.50007], a sliver
    [5e-10, 0.00053) beside a point at 0); the bounds stay. Where no bin holds one, the domain is one bin grown
    to the nearer number of the precision: a mostly-missing count column whose DP bounds were a noise cell
    [0.25, 0.5], written whole, came back as 0.3125 in every row; it is now [0, 0.5], drawn as 0."""
    top = edges[-1]
    if not any(holds_precision_value(a, b, precision, b >= top) for a, b in zip(edges[:-1], edges[1:])):
        step = 10.0 ** -precision
        below, above = math.floor(edges[0] / step) * step, math.ceil(top / step) * step
        grown = (round(below, max(precision, 0)), top) if edges[0] - below <= above - top else \
            (edges[0], round(above, max(precision, 0)))
        return tuple(float(x) for x in grown)
    out = [edges[0]]
    for e in edges[1:-1]:
        if holds_precision_value(out[-1], e, precision, False):
            out.append(e)
    if len(out) > 1 and not holds_precision_value(out[-1], top, precision, True):
        out.pop()
    return (*out, top)
