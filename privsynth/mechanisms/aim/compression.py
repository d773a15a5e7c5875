"""Domain compression from the noisy 1-way marginals (post-processing only; McKenna, Miklau & Sheldon,
"Winning the NIST Contest", 2021, MST's ``compress_domain``).

A level whose noisy 1-way count is below ``threshold`` (a multiple of sigma_0, the sigma the rounds start
at) cannot be told apart from noise in the later measurements, and every later marginal that holds it
would spend noise on cells that are almost empty. Such levels of one attribute are merged into one "rare"
level for the rest of the mechanism: later measurements are taken on the compressed domain (the same
L2 sensitivity 1, since the compression is a fixed linear map chosen from DP outputs only), and records
sampled from the model get a rare level expanded back to an original level, drawn in proportion to the
clipped noisy 1-way counts (independently of the other attributes: the model never saw within-group differences).

An earlier step's DP counts of some levels (a no-schema run's category counts) are joined with the start's 1-way
measurements for the final fit and that expansion (``joined_one_way``); the merge map itself is read from the
start's measurements alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from privsynth.mechanisms.aim.model import Clique, NoisyMarginal
from privsynth.mechanisms.base import EarlierCounts
from privsynth.schema.sampling import systematic_indices
from privsynth.schema.workload import merge_levels


@dataclass(frozen=True)
class Compression:
    """For each attribute, the group of every original level (``groups[a][level]``); the kept
    levels come first, in their order, and the merged rare levels (if any) form the last group."""

    groups: tuple[np.ndarray, ...]

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(int(g.max()) + 1 for g in self.groups)

    def is_identity(self, attribute: int) -> bool:
        g = self.groups[attribute]
        return bool(np.array_equal(g, np.arange(g.size)))

    def level_groups(self, marginal: Clique) -> tuple[np.ndarray | None, ...]:
        """Per attribute of ``marginal``: its level groups, or None where nothing is merged."""
        return tuple(None if self.is_identity(a) else self.groups[a] for a in marginal)

    def published_groups(self, marginal: Clique) -> tuple[tuple[int, ...] | None, ...]:
        """``Measurement.level_groups`` of a measurement of ``marginal`` on the compressed levels."""
        groups = self.level_groups(marginal)
        if all(g is None for g in groups):
            return ()
        return tuple(None if g is None else tuple(int(x) for x in g) for g in groups)

    def table(self, counts: np.ndarray, marginal: Clique) -> np.ndarray:
        """A marginal table (shape = original sizes of ``marginal``) summed into the compressed levels."""
        return merge_levels(counts, self.level_groups(marginal))


def compress_levels(noisy_one_way: Sequence[np.ndarray], thresholds: Sequence[float]) -> Compression:
    """Merge, per attribute, the levels whose noisy count is below its threshold (when two or more are)."""
    groups = []
    for noisy, threshold in zip(noisy_one_way, thresholds):
        keep = np.asarray(noisy) >= threshold
        if (~keep).sum() < 2:
            groups.append(np.arange(len(noisy)))
            continue
        group = np.empty(len(noisy), dtype=np.int64)
        group[keep] = np.arange(int(keep.sum()))
        group[~keep] = int(keep.sum())
        groups.append(group)
    return Compression(tuple(groups))


def compressed_one_way(measurement: NoisyMarginal, compression: Compression) -> NoisyMarginal:
    """A noisy 1-way marginal re-expressed on the compressed levels: the rare cell is the sum of the
    merged noisy cells, hence their summed variance."""
    (a,) = measurement.clique
    if compression.is_identity(a):
        return measurement
    values = compression.table(measurement.values, (a,))
    scale = np.bincount(compression.groups[a], weights=measurement.cell_scales(),
                        minlength=compression.sizes[a]).astype(np.float64)
    return NoisyMarginal((a,), values, measurement.sigma, scale)


def with_earlier_counts(measurement: NoisyMarginal, levels: Sequence[int], counts: Sequence[float],
                        sigmas: Sequence[float]) -> NoisyMarginal:
    """A noisy 1-way marginal joined with earlier independent Gaussian counts of some of its levels: each such
    level becomes the inverse-variance weighted mean of its two counts, whose variance is 1 / (sum of the
    precisions), kept as the cell's ``variance_scale`` (post-processing of two DP outputs)."""
    values = np.asarray(measurement.values, dtype=np.float64).copy()
    variance = measurement.sigma**2 * measurement.cell_scales()
    at = np.asarray(levels, dtype=np.int64)
    w_now, w_then = 1.0 / variance[at], 1.0 / np.asarray(sigmas, dtype=np.float64) ** 2
    values[at] = (w_now * values[at] + w_then * np.asarray(counts, dtype=np.float64)) / (w_now + w_then)
    variance[at] = 1.0 / (w_now + w_then)
    return NoisyMarginal(measurement.clique, values, measurement.sigma, variance / measurement.sigma**2)


def expand_codes(codes: np.ndarray, compression: Compression, noisy_one_way: Sequence[np.ndarray],
                 rng: np.random.Generator) -> np.ndarray:
    """Records on the compressed levels back to original levels: a kept level maps to itself, the rare
    level to one of its original levels in proportion to max(noisy count, 0) (uniform if none is positive),
    spread by systematic resampling (``sampling.systematic_indices``: each level gets its expected share of
    the rows to within one)."""
    out = np.empty_like(codes)
    for a, group in enumerate(compression.groups):
        if compression.is_identity(a):
            out[:, a] = codes[:, a]
            continue
        originals = np.argsort(group, kind="stable")   # kept levels in group order, then the rare ones
        rare_group = int(group.max())
        rare_levels = np.flatnonzero(group == rare_group)
        out[:, a] = originals[np.minimum(codes[:, a], rare_group)]
        rows = np.flatnonzero(codes[:, a] == rare_group)
        weights = np.clip(np.asarray(noisy_one_way[a], dtype=np.float64)[rare_levels], 0.0, None)
        if rows.size:
            p = weights if weights.sum() > 0 else np.ones(rare_levels.size)
            out[rows, a] = rare_levels[systematic_indices(p, rows.size, rng)]
    return out


def joined_one_way(one_way: list[NoisyMarginal], earlier: Sequence[EarlierCounts]) -> list[NoisyMarginal]:
    """The start's 1-way measurements, each joined with the earlier counts of its attribute (post-processing).

    Joined for the final fit and the expansion of merged levels only, never for the rounds: the rounds' path
    (compression, selection, annealing) stays the one the start's own measurements give. Joined from the start,
    mpls_stops' 64-level `neighborhood`, known 5 times more precisely, made its 2-way marginals anneal early, so
    the rounds ran out of budget before covering other pairs, and 2-way error rose by 60% (8 seeds of 8)."""
    out = list(one_way)
    for counts in earlier:
        a = counts.attribute
        out[a] = with_earlier_counts(one_way[a], counts.levels, counts.noisy_counts, counts.sigmas)
    return out
