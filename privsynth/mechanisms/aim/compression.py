"""Domain compression from the noisy 1-way marginals (post-processing only; McKenna, Miklau & Sheldon,
"Winning the NIST Contest", 2021, MST's ``compress_domain``).

A level whose noisy 1-way count is below ``threshold`` (a multiple of sigma_0, the sigma the rounds start
at) cannot be told apart from noise in the later measurements, and every later marginal that holds it
would spend noise on cells that are almost empty. Such levels of one attribute are merged into one "rare"
level for the rest of the mechanism: later measurements are taken on the compressed domain (the same
L2 sensitivity 1, since the compression is a fixed linear map chosen from DP outputs only), and records
sampled from the model get a rare level expanded back to an original level, drawn in proportion to the
clipped noisy 1-way counts (independently of the other attributes: the model never saw within-group differences).

The bins of a number column are an ordered scale (``Domain.ordered``, a schema fact): its rare bins merge only
with rare neighbours, each run of adjacent rare bins into a coarser bin of its own. One rare level for both
tails of a scale would give the lowest balances the default rate of the highest (credit_default at epsilon
0.3, 30 seeds: 2-way TV 0.0261 -> 0.0243); a rare bin between two kept ones stays a level of its own.

A structural level (``<missing>``, ``<out-of-domain>``: ``Domain.structural``, a schema fact) whose noisy count is
below one deviation of its own noise is read as empty: it joins the attribute's fullest level, its noisy cell is
left out of that level's count (its noise would only blur the fullest level's), and no record is expanded back to
it. A no-schema run's binary column otherwise keeps four levels (yes, no, missing, out-of-domain) or three, and
every marginal that holds it twice or 1.5 times the cells of the column's values; the rounding stage would write
none of them anyway (``report.evidence``: its bar is two deviations). A level that holds rows but reads below one
deviation is lost, as it is in the rounding stage.

An earlier step's DP counts of some levels (a no-schema run's category counts) are joined with the start's 1-way
measurements for the final fit and that expansion (``joined_one_way``); the merge map itself is read from the
start's measurements alone.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from privsynth.mechanisms.aim.model import Clique, NoisyMarginal
from privsynth.mechanisms.base import EarlierCounts
from privsynth.schema.sampling import systematic_indices
from privsynth.schema.workload import merge_levels


@dataclass(frozen=True)
class Compression:
    """For each attribute, the group of every original level (``groups[a][level]``): kept levels and runs of
    an ordered scale's rare levels are numbered in level order, and the other merged rare levels (if any) form
    the last group. ``empty[a]``: the structural levels read as empty, each in the group of a level that is not."""

    groups: tuple[np.ndarray, ...]
    empty: tuple[tuple[int, ...], ...] = ()

    def empty_levels(self, attribute: int) -> tuple[int, ...]:
        return self.empty[attribute] if self.empty else ()

    def regrouped(self, groups: Sequence[np.ndarray]) -> Compression:
        """These levels read as empty on new ``groups``: only those still in a group with a level that is not (a
        group of empty levels alone keeps its noisy count: the model needs a measured value for each cell)."""
        empty = tuple(tuple(level for level in self.empty_levels(a)
                            if not set(np.flatnonzero(g == g[level]).tolist()) <= set(self.empty_levels(a)))
                      for a, g in enumerate(groups))
        return Compression(tuple(groups), empty if any(empty) else ())

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


def compress_levels(noisy_one_way: Sequence[np.ndarray], thresholds: Sequence[float],
                    ordered: Sequence[int] = (), structural: Sequence[int] = (),
                    deviations: Sequence[float] = ()) -> Compression:
    """Merge, per attribute, the levels whose noisy count is below its threshold: among its first
    ``ordered[a]`` levels (an ordered scale) each run of two or more adjacent ones into a level of its own, the
    others into one rare level (when two or more are). Of its last ``structural[a]`` levels, those whose noisy
    count is below ``deviations[a]`` (the 1-way measurement's noise deviation) are read as empty and join its
    fullest level instead (``empty_structural``)."""
    groups, empty = [], []
    for a, (noisy, threshold) in enumerate(zip(noisy_one_way, thresholds)):
        noisy = np.asarray(noisy, dtype=np.float64)
        scale = ordered[a] if ordered else 0
        dead = empty_structural(noisy, structural[a], deviations[a]) if structural and deviations else ()
        is_dead = np.zeros(noisy.size, dtype=bool)
        is_dead[list(dead)] = True
        rare = (noisy < threshold) & ~is_dead
        group = _level_groups(rare[:scale], rare[scale:])
        if dead:
            fullest = int(np.argmax(np.where(is_dead, -np.inf, noisy)))
            group = numbered([("group", int(group[fullest] if is_dead[level] else g))
                              for level, g in enumerate(group)], last=("group", int(group.max())))
        groups.append(group)
        empty.append(dead)
    return Compression(tuple(groups), tuple(empty) if any(empty) else ())


def empty_structural(noisy: np.ndarray, structural: int, deviation: float) -> tuple[int, ...]:
    """The last ``structural`` levels whose noisy count is below ``deviation`` (read as empty), unless every
    level of the attribute would be."""
    size = noisy.size
    dead = tuple(level for level in range(size - structural, size) if noisy[level] < deviation)
    return dead if len(dead) < size else ()


def _level_groups(rare_on_scale: np.ndarray, rare_off_scale: np.ndarray) -> np.ndarray:
    """Group numbers: the scale's levels in order (a run of two or more rare ones shares one number), then the
    other levels in order, their rare ones (two or more) sharing the last number."""
    keys: list[Hashable] = []
    for level, rare in enumerate(rare_on_scale):
        if rare and level > 0 and rare_on_scale[level - 1]:
            keys.append(keys[-1])  # the run the level before started
        elif rare and level + 1 < rare_on_scale.size and rare_on_scale[level + 1]:
            keys.append(("run", level))
        else:
            keys.append(("own", level))
    merge_rest = int(rare_off_scale.sum()) >= 2
    keys += ["rare" if rare and merge_rest else ("own", rare_on_scale.size + offset)
             for offset, rare in enumerate(rare_off_scale)]
    return numbered(keys, last="rare")


def numbered(keys: Sequence[Hashable], last: Hashable) -> np.ndarray:
    """Per level, the number of its group (levels with equal keys form a group): groups numbered in the order of
    their first level, the group keyed ``last`` (if any) last."""
    order: dict[Hashable, int] = {}
    for key in keys:
        if key != last:
            order.setdefault(key, len(order))
    order[last] = len(order)
    return np.array([order[key] for key in keys], dtype=np.int64)


def compressed_one_way(measurement: NoisyMarginal, compression: Compression) -> NoisyMarginal:
    """A noisy 1-way marginal re-expressed on the compressed levels: the rare cell is the sum of the
    merged noisy cells, hence their summed variance."""
    (a,) = measurement.clique
    if compression.is_identity(a):
        return measurement
    values = np.asarray(measurement.values, dtype=np.float64).copy()
    scales = measurement.cell_scales().copy()
    dead = list(compression.empty_levels(a))
    values[dead], scales[dead] = 0.0, 0.0     # read as empty: their noise stays out of the fullest level's count
    values = compression.table(values, (a,))
    scale = np.bincount(compression.groups[a], weights=scales, minlength=compression.sizes[a]).astype(np.float64)
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
    """Records on the compressed levels back to original levels: a level kept alone maps to itself, a merged
    level to one of its original levels in proportion to max(noisy count, 0) (uniform if none is positive; never
    a level read as empty), spread by systematic resampling (``sampling.systematic_indices``: each level gets its
    expected share of the rows to within one)."""
    out = np.empty_like(codes)
    for a, group in enumerate(compression.groups):
        if compression.is_identity(a):
            out[:, a] = codes[:, a]
            continue
        members_of = np.split(np.argsort(group, kind="stable"), np.cumsum(np.bincount(group))[:-1])
        out[:, a] = np.array([members[0] for members in members_of])[codes[:, a]]
        weights = np.clip(np.asarray(noisy_one_way[a], dtype=np.float64), 0.0, None)
        weights[list(compression.empty_levels(a))] = 0.0
        for merged, members in enumerate(members_of):
            rows = np.flatnonzero(codes[:, a] == merged) if members.size > 1 else np.empty(0, dtype=np.int64)
            if rows.size:
                p = weights[members] if weights[members].sum() > 0 else (
                    ~np.isin(members, compression.empty_levels(a))).astype(np.float64)
                out[rows, a] = members[systematic_indices(p, rows.size, rng)]
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
