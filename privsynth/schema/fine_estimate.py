"""Fine decoding's estimate: where inside its bin a synthetic value falls, from DP sub-bin counts.

Post-processing only: the noisy sub-bin counts (``run.fine_decoding``, charged with the release) are read,
never the data. A column's sub-bin counts are smoothed across its bins (``smoothed_counts``: a density rarely
jumps at a DP quantile), except across a jump the counts show (``density_segments``: a population that ends at a
threshold) and in a bin whose own estimate (``fine_weights``) finds its rows in a few sub-bins (point masses,
heaps); the outermost bins' runs of sub-bins the counts show empty weigh nothing (``empty_run``: a column's DP
bounds are octaves, its rows start inside its outer bins); a value's sub-bin is drawn in proportion to the result
(``column_weights``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from privsynth.schema.sampling import systematic_indices

if TYPE_CHECKING:
    from privsynth.schema import Column

FINE_FLOOR = 2.0  # a group's noisy count below this many noise deviations weighs nothing
FINE_GROUP_SNR = 2 * FINE_FLOOR  # groups whose expected count is this many deviations (each passes the floor
# with probability 97.7%: a real group is seldom lost, an empty one seldom kept)
FINE_PENALTY = 4.0  # each parameter of a bin's estimate must explain this many noise variances
SMOOTH_BANDWIDTHS = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)  # kernel widths, in median sub-bin widths
SMOOTH_PENALTY = 3.0  # noise variances per effective parameter (SURE's 2, raised: its choice is noisy where the
# counts hold nothing to find; at 2 a flat bin of a small table decoded 2.5x further from flat)
SMOOTH_MAX_SUB_BINS = 2048  # the smoother's dense n x n kernel: above this, each bin is estimated alone
SPARSE_SHARE = 0.5  # a bin whose own estimate empties this share of its sub-bins holds point masses: kept as is
HEAP_SIGMAS = 4.0  # a sub-bin this many noise deviations above the smooth fit holds a heap (noise alone: 3e-5)
# of a change point's price an outer bin's empty run must explain (``bench_fine_decoding.py``, --octave-ends and not:
# 1 kept most of the octaves' empty grid; 0.25 cut thin tails of mlb_teams)
EMPTY_PRICE = 0.5
NARROW = 1e-6  # a sub-bin narrower than this many median widths is a point's cell (a DP grid's zeros): not smoothed


def snr_groups(total: float, sub_bins: int, scale: float) -> int:
    """How many equal groups of a bin's ``sub_bins`` its noisy sub-bin counts can tell apart if its rows were
    spread evenly (post-processing): the most groups, of 1, 2, 4, ... up to ``sub_bins``, whose expected count
    (``total`` / groups) stands FINE_GROUP_SNR noise deviations (``scale`` per sub-bin, summed over a group's
    sub-bins) out of the noise: each group then passes the floor with probability 97.7%, so noise seldom
    empties part of a bin that holds rows."""
    candidates = {1, sub_bins, *(2 ** j for j in range(1, max(sub_bins, 1).bit_length()) if 2 ** j < sub_bins)}
    fits = [k for k in candidates if total / k >= FINE_GROUP_SNR * scale * math.sqrt(sub_bins / k)]
    return max(fits, default=1)


def _grouped(y: np.ndarray, widths: np.ndarray, scale: float, k: int) -> tuple[np.ndarray, float]:
    """(per-sub-bin weights, residual sum of squares of the groups' means) of one bin's sub-bins merged into
    ``k`` equal groups (post-processing). A group whose noisy count passes FINE_FLOOR deviations weighs its
    count; what the other groups hold together, when it passes FINE_FLOOR deviations of its noise, is spread
    over them by width (uniform when none passes): an empty remainder (a constant, a column of zeros) stays
    empty, and a thin spread-out part is not piled onto the one group whose noise happened to pass."""
    parts = np.array_split(np.arange(len(y)), k)
    g = np.asarray([float(y[part].sum()) for part in parts])
    size = np.asarray([len(part) for part in parts], dtype=np.float64)
    group_widths = np.asarray([float(widths[part].sum()) for part in parts])
    passing = g > FINE_FLOOR * scale * np.sqrt(size)
    w = np.where(passing, g, 0.0)
    rest = float(g.sum() - w.sum())  # the other groups' noisy total: noise sd scale * sqrt(their sub-bins)
    if (~passing).any() and rest > FINE_FLOOR * scale * math.sqrt(float(size[~passing].sum())):
        w = w + np.where(passing, 0.0, rest * group_widths / group_widths[~passing].sum())
    if w.sum() <= 0:
        w = group_widths
    out, means = np.zeros(len(y)), np.zeros(len(y))
    for part, weight, total, width in zip(parts, w, g, group_widths):
        out[part] = weight * widths[part] / width
        means[part] = total * widths[part] / width  # the least-squares fit of counts proportional to width
    return out, float(np.sum((y - means) ** 2))


def _linear(y: np.ndarray, sub: np.ndarray, scale: float) -> tuple[np.ndarray, float]:
    """(per-sub-bin weights, residual sum of squares) of a density linear across one bin (post-processing). The
    slope is shrunk by (1 - 1/t^2)+ of its t statistic (the empirical-Bayes estimate under a normal prior: a
    slope within its noise is flat), and the fit is clipped at zero."""
    widths = np.diff(sub)
    centres = (sub[:-1] + sub[1:]) / 2.0
    x = (centres - centres.mean()) / max(float(np.ptp(centres)), 1e-300)
    design = np.column_stack([widths, widths * x])
    (level, slope), *_ = np.linalg.lstsq(design, y, rcond=None)
    rss = float(np.sum((y - design @ np.array([level, slope])) ** 2))
    slope_sd = scale * math.sqrt(float(np.linalg.pinv(design.T @ design)[1, 1]))
    t = slope / slope_sd if slope_sd > 0 else 0.0
    shrunk = slope * max(0.0, 1.0 - 1.0 / t ** 2) if t else 0.0
    return np.maximum(design @ np.array([level, shrunk]), 0.0), rss


def fine_weights(y: np.ndarray, sub: np.ndarray, scale: float) -> np.ndarray:
    """Per-sub-bin weights for drawing one bin's values from its noisy sub-bin counts ``y`` over the sub-bin
    edges ``sub`` (post-processing of DP counts; noise deviation ``scale`` per sub-bin).

    The candidates are the bin merged into as many equal groups as its noise can tell apart if its rows were
    spread evenly (``snr_groups``), the bin kept sub-bin by sub-bin (both ``_grouped``), and a density linear
    across the bin (``_linear``, 2 parameters). The one with the least residual sum of squares plus
    FINE_PENALTY scale^2 per parameter wins: Mallows' Cp with twice its penalty, so a refinement must explain
    two noise deviations to be chosen. A flat bin of a small table stays flat (noise alone seldom lifts a
    group of it over the floor); a point mass or two inside a bin is found at any table size; a wide edge bin
    whose rows crowd towards one end (incomes above the last quantile) keeps its slope, which pools every
    sub-bin where groups are too noisy to tell."""
    widths = np.diff(sub)
    if scale <= 0:
        return np.maximum(y, 0.0) if float(np.maximum(y, 0.0).sum()) > 0 else widths
    penalty = FINE_PENALTY * scale ** 2
    best, best_score = widths, math.inf
    for k in sorted({snr_groups(float(y.sum()), len(y), scale), len(y)}):
        w, rss = _grouped(y, widths, scale, k)
        if rss + penalty * k < best_score:
            best, best_score = w, rss + penalty * k
    if len(y) >= 3:
        w, rss = _linear(y, sub, scale)
        if rss + 2 * penalty < best_score and w.sum() > 0:
            best = w
    return best


def smoothed_counts(y: np.ndarray, sub: np.ndarray, scale: float) -> np.ndarray:
    """A column's noisy sub-bin counts ``y`` (edges ``sub``, noise deviation ``scale`` each) smoothed across the
    whole column, clipped at zero (post-processing).

    Across a column the bins are DP quantiles, so a density seldom jumps at their edges: a bin borrows its
    neighbours' counts, where a bin estimated alone had only its own sixteen. ``kernel_fit`` chooses the
    smoothing. A sub-bin standing HEAP_SIGMAS noise deviations above that fit holds a heap (a round figure,
    a default value): it keeps its own count, and the fit is chosen again without it, so a heap neither
    spreads over its neighbours nor pulls the bandwidth down for the whole column. Sub-bins narrower than
    NARROW median widths (the cells of points) keep their own counts."""
    out = np.maximum(y, 0.0).astype(np.float64)
    widths = np.diff(sub)
    if scale <= 0 or not (widths > 0).any():
        return out
    idx = np.flatnonzero(widths > NARROW * float(np.median(widths[widths > 0])))
    if not 4 <= len(idx) <= SMOOTH_MAX_SUB_BINS:
        return out
    counts, w = y[idx], widths[idx]
    centres = ((sub[:-1] + sub[1:]) / 2.0)[idx]
    segments = density_segments(counts, w, jump_penalty(len(idx), scale))
    fit = kernel_fit(counts, w, centres, scale, np.ones(len(idx), dtype=bool), segments)
    heaps = counts - fit > HEAP_SIGMAS * scale
    if heaps.any() and (~heaps).sum() >= 4:
        fit = np.where(heaps, counts, kernel_fit(counts, w, centres, scale, ~heaps, segments))
    out[idx] = np.maximum(fit, 0.0)
    return out


def jump_penalty(sub_bins: int, scale: float) -> float:
    """What one jump of the density must explain, in squared counts: 2 ln(sub_bins) noise variances (the BIC's
    price of a change point among ``sub_bins`` places; a function of public sizes and the noise scale)."""
    return 2.0 * math.log(max(sub_bins, 2)) * scale ** 2


def density_segments(counts: np.ndarray, widths: np.ndarray, penalty: float) -> np.ndarray:
    """Segment number of each sub-bin in the best piecewise-constant density for noisy ``counts`` over sub-bins
    of ``widths`` (post-processing): the partition into runs of consecutive sub-bins, each run's counts fitted
    by one density times the widths (least squares), that minimises the residual sum of squares plus
    ``penalty`` per run. Exact, by dynamic programming over the run's last start (optimal partitioning,
    Jackson et al. 2005): O(len(counts)^2), at most SMOOTH_MAX_SUB_BINS sub-bins."""
    n = len(counts)
    unit = float(np.median(widths)) or 1.0
    w = widths / unit  # the fit is the same in any unit of width; this one keeps the squares in range
    best = np.zeros(n + 1)
    start = np.zeros(n + 1, dtype=np.int64)
    best[0] = -penalty  # the first run pays no boundary
    for end in range(1, n + 1):
        # each run's sums, summed from its end backwards: differences of whole-column cumulative sums lose a
        # run of narrow sub-bins next to wide ones (a sentinel's bin) to rounding
        wy = np.cumsum((counts[:end] * w[:end])[::-1])[::-1]
        ww = np.cumsum((w[:end] ** 2)[::-1])[::-1]
        yy = np.cumsum((counts[:end] ** 2)[::-1])[::-1]
        explained = np.divide(wy ** 2, ww, out=np.zeros(end), where=ww > 0)
        cost = best[:end] + np.maximum(yy - explained, 0.0) + penalty
        start[end] = int(np.argmin(cost))
        best[end] = cost[start[end]]
    runs, end = [], n
    while end > 0:
        runs.append(end)
        end = int(start[end])
    cuts = np.zeros(n, dtype=np.int64)
    cuts[np.asarray(runs[1:], dtype=np.int64)] = 1  # each run's start but the first
    return np.cumsum(cuts)


def kernel_fit(counts: np.ndarray, widths: np.ndarray, centres: np.ndarray, scale: float,
               use: np.ndarray, segments: np.ndarray | None = None) -> np.ndarray:
    """Smoothed sub-bin counts from the sub-bins ``use`` selects (post-processing).

    Candidates: the counts as they are, and a kernel estimate of the density (Nadaraya-Watson: a sub-bin gets
    its width times the Gaussian-weighted counts of its used neighbours over their widths) at each bandwidth
    of SMOOTH_BANDWIDTHS median sub-bin widths; where ``segments`` (``density_segments``) has more than one
    run, the same kernels again with no weight across a run's boundary, each boundary charged
    ``jump_penalty``. Each is a linear smoother S given the segments; over the used sub-bins, the one with the
    least residual sum of squares plus SMOOTH_PENALTY scale^2 trace(S) (plus the boundaries' charge) wins
    (Stein's unbiased risk estimate with a raised penalty): a smooth density keeps its kernel, and a density
    that jumps (piecewise-uniform, a threshold) is not smeared across the jump."""
    unit = float(np.median(widths[use]))
    penalty = SMOOTH_PENALTY * scale ** 2
    best, best_score = counts, penalty * float(use.sum())  # as they are: S = I, residuals 0
    gaps = (centres[:, None] - centres[use][None, :]) ** 2
    boundaries = int(segments[-1] - segments[0]) if segments is not None and len(segments) else 0
    charge = boundaries * jump_penalty(len(counts), scale)  # what the kernels kept within runs pay
    apart = [None] if not boundaries else [None, segments[:, None] == segments[use][None, :]]
    for bandwidth in SMOOTH_BANDWIDTHS:
        across = np.exp(-0.5 * gaps / (bandwidth * unit) ** 2)
        for same_run in apart:
            kernel = across if same_run is None else across * same_run
            mass = kernel @ widths[use]
            with np.errstate(divide="ignore", invalid="ignore"):  # an unused heap far from every used sub-bin
                fit = widths * (kernel @ counts[use]) / mass
            trace = float(np.sum(widths[use] / mass[use]))  # S's diagonal over the used sub-bins: K_ii = 1
            score = float(np.sum((counts[use] - fit[use]) ** 2)) + penalty * trace
            score += 0.0 if same_run is None else charge
            if score < best_score:
                best, best_score = fit, score
    return best


def bin_starts(edges: np.ndarray, sub: np.ndarray) -> np.ndarray:
    """Index of each bin's first sub-bin: bin i holds sub-bins first[i] .. first[i + 1] - 1; the last bin's run to
    the end (a whole-number column's [b, b + 1] too)."""
    first = np.searchsorted(sub, edges, side="left")
    first[-1] = len(sub) - 1
    return first


def empty_run(counts: np.ndarray, scale: float) -> int:
    """How many sub-bins from the start of ``counts`` (noisy, outermost first; noise deviation ``scale``) hold no
    row (post-processing). Candidates: the k whose first k counts sum to at most zero (no evidence of a row there);
    of them, the k whose split "no row in the first k, an even spread after" fits the counts best (least squares),
    when it fits them better than an even spread of the whole bin by more than EMPTY_PRICE of a change point's
    price (``jump_penalty``); else 0. A bin whose rows thin towards its end keeps them (their counts sum above zero);
    a tail as thin as the noise stays where the split does not pay; the empty grid beyond a column's rows (a SMALLINT
    in [-300, 299] inside DP bounds [-512, 512]) goes."""
    n = len(counts)
    if n < 2:
        return 0
    tail_sums = np.cumsum(counts[::-1])[::-1]  # sum of counts[k:], k = 0 .. n - 1
    tail_squares = np.cumsum((counts ** 2)[::-1])[::-1]
    rest = tail_squares - tail_sums ** 2 / (n - np.arange(n))  # squared deviations of counts[k:] from their mean
    split = np.cumsum(counts ** 2)[:-1] + rest[1:]  # k = 1 .. n - 1
    candidates = np.flatnonzero(np.cumsum(counts)[:-1] <= 0.0)  # index j: k = j + 1
    if not len(candidates):
        return 0
    j = int(candidates[np.argmin(split[candidates])])
    return j + 1 if float(rest[0]) - float(split[j]) > EMPTY_PRICE * jump_penalty(n, scale) else 0


def column_weights(edges: np.ndarray, sub: np.ndarray, y: np.ndarray, scale: float) -> np.ndarray:
    """Per-sub-bin weights of a whole column (bin edges ``edges``, sub-bin edges ``sub``, noisy counts ``y``):
    post-processing of DP counts. A bin whose own estimate (``fine_weights``) empties at least SPARSE_SHARE of
    its sub-bins keeps that estimate (its rows sit in a few sub-bins: points, heaps, a gap the kernel would
    fill); every other bin takes the column's ``smoothed_counts``. A bin left with no weight is drawn by width.

    The outermost bins' outer runs of sub-bins that the counts show empty (``empty_run``) weigh nothing: a column's
    DP bounds are grid (octaves), so its rows often start well inside its outer bins, and smoothing the noise of
    the empty sub-bins there (clipped at zero, it is all positive) wrote values the column never holds: 4-7% of a
    SMALLINT in [-300, 299] came back in [-512, -300) and (299, 512]."""
    first = bin_starts(edges, sub)
    smooth = smoothed_counts(y, sub, scale)
    out = np.empty(len(y))
    for i in range(len(edges) - 1):
        part = slice(first[i], first[i + 1])
        inside = sub[first[i]:first[i + 1] + 1]
        own = fine_weights(y[part], inside, scale)
        w = own if len(own) >= 4 and np.mean(own <= 0) >= SPARSE_SHARE else smooth[part]
        keep = np.ones(len(w), dtype=bool)
        if len(edges) > 2 and i in (0, len(edges) - 2):  # an outer bin: its empty outer run weighs nothing
            order = np.arange(len(w)) if i == 0 else np.arange(len(w))[::-1]  # outermost sub-bin first
            keep[order[:min(empty_run(y[part][order], scale), len(w) - 1)]] = False  # the innermost stays
        w = np.where(keep, w, 0.0)
        out[part] = w if w.sum() > 0 else np.diff(inside) * keep
    return out


def fine_draws(col: Column, safe: np.ndarray, fine: dict, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) of a sub-bin drawn for each bin code in proportion to ``column_weights`` (post-processing of the DP
    counts in ``fine``). A bin's rows are spread over its sub-bins by systematic resampling (each sub-bin gets its
    expected share of them to within one row), shuffled among the rows: drawn one by one, a bin of 2,114 rows put
    29 rows too many on one side of a reader's edge with the true counts (a binomial's deviation is 22), about
    as much as the mechanism's own error in that bin."""
    edges = np.asarray(col.bins, dtype=np.float64)
    sub = np.asarray(fine["edges"], dtype=np.float64)
    noisy = np.asarray(fine["noisy_counts"], dtype=np.float64)
    lo, hi = edges[safe].copy(), edges[safe + 1].copy()
    first = bin_starts(edges, sub)
    weights = column_weights(edges, sub, noisy, float(fine.get("scale", 0.0)))
    for i in np.unique(safe):
        rows = np.flatnonzero(safe == i)
        inside = sub[first[i]:first[i + 1] + 1]
        w = weights[first[i]:first[i + 1]]
        pick = systematic_indices(w, len(rows), rng)
        lo[rows], hi[rows] = inside[pick], inside[pick + 1]
    return lo, hi
