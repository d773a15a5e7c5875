"""AIM's private statistics: the histogram of the records, and count tables read from it on demand.

PRIVATE: everything here is exact counts of the records; only noisy measurements leave the mechanism.

Counting cost. Each count table is one pass over the histogram's distinct records (m of them, up to n),
and AIM asks for hundreds (every candidate of the first round). Tables are therefore counted in groups:
the requested marginals are covered greedily by larger attribute sets (at most ``cover_cells`` cells,
chosen from m and the level counts, never from the counts themselves), each set is counted in one
pass, and every marginal it covers is summed from it. On a 10^7-row table over Adult's domain this
takes the 575 passes of a 3-way workload's closure down to a few dozen.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from privsynth.mechanisms.aim.compression import Compression
from privsynth.mechanisms.aim.tables import cells, sum_to
from privsynth.schema.encoding import Domain
from privsynth.schema.workload import Histogram

Marginal = tuple[int, ...]

COUNT_CACHE_CELLS = 1 << 23
COVER_FROM_RECORDS = 1 << 16      # count tables kept across rounds: 64 MB of float64


class CountCache:
    """PRIVATE: count tables already read, kept across rounds up to ``COUNT_CACHE_CELLS`` cells (the
    oldest dropped first: a wide table's pools are fresh random subsets, rarely asked again)."""

    def __init__(self, statistics: AimStatistics, max_cells: int = COUNT_CACHE_CELLS) -> None:
        self.statistics = statistics
        self.max_cells = max_cells
        self.tables: dict[Marginal, np.ndarray] = {}
        self.cells = 0

    def get(self, marginals: list[Marginal]) -> dict[Marginal, np.ndarray]:
        missing = [r for r in marginals if r not in self.tables]
        fresh = self.statistics.tables(missing) if missing else {}
        out = {r: self.tables[r] if r in self.tables else fresh[r] for r in marginals}
        for r, table in fresh.items():
            self.tables[r] = table
            self.cells += table.size
        wanted = set(marginals)
        for r in list(self.tables):
            if self.cells <= self.max_cells:
                break
            if r not in wanted:
                self.cells -= self.tables.pop(r).size
        return out


def _mask(attrs: Sequence[int]) -> int:
    return sum(1 << a for a in attrs)


def cover_cells(distinct_records: int) -> int:
    """The largest table one pass builds: about a quarter of the records (counting a set costs a pass
    over the records plus a pass over its cells per marginal it covers), between 2^12 and 2^22."""
    return int(min(1 << 22, max(1 << 12, distinct_records // 4)))


def covering_sets(marginals: Sequence[Marginal], sizes: Sequence[int],
                  cap: int) -> list[tuple[Marginal, list[Marginal]]]:
    """Attribute sets of at most ``cap`` cells that together hold every marginal, each with the
    marginals it serves: the largest marginal not yet served starts a set, which then takes, one at a
    time, the attribute that serves the most further marginals, while it fits. Public structure only."""
    remaining = {tuple(r): _mask(r) for r in marginals}
    by_attribute: dict[int, set[Marginal]] = {}
    for r in remaining:
        for a in r:
            by_attribute.setdefault(a, set()).add(r)
    plans = []
    for r in sorted(remaining, key=lambda q: (-cells(q, sizes), q)):
        if r not in remaining:
            continue
        chosen, mask, size = set(r), remaining[r], cells(r, sizes)
        while True:
            best, best_gain = -1, 0
            for a in by_attribute:
                if a in chosen or size * sizes[a] > cap:
                    continue
                bit = 1 << a
                gain = sum(1 for q in by_attribute.get(a, ()) if q in remaining and remaining[q] & ~mask == bit)
                if gain > best_gain:
                    best, best_gain = a, gain
            if best < 0:
                break
            chosen.add(best)
            mask |= 1 << best
            size *= sizes[best]
        attrs = tuple(sorted(chosen))
        served = sorted({q for a in attrs for q in by_attribute.get(a, ()) if q in remaining
                         and remaining[q] & ~mask == 0})
        for q in served:
            del remaining[q]
        plans.append((attrs, served))
    return plans


@dataclass(frozen=True)
class AimStatistics:
    """PRIVATE: the histogram of the records (distinct level codes and their counts). Never publish.

    AIM asks for the count tables of the candidates it scores, round by round (``tables``); on a wide
    table the workload's closure holds tens of thousands of marginals, so none is counted before it is
    needed. ``level_groups`` (from ``on_levels``) maps every original level to its merged level."""

    histogram: Histogram = field(repr=False)
    domain: Domain
    level_groups: tuple[np.ndarray, ...] | None = field(default=None, repr=False)

    @cached_property
    def _weights(self) -> np.ndarray:
        return np.asarray(self.histogram.counts, dtype=np.float64)

    @cached_property
    def _merged_columns(self) -> tuple[np.ndarray, ...]:
        """Per attribute, the merged level of every distinct record, in the smallest integer type."""
        codes = self.histogram.codes
        out = []
        for a, size in enumerate(self.domain.sizes):
            dtype = np.uint8 if size <= 1 << 8 else np.uint16 if size <= 1 << 16 else np.int32
            out.append(np.ascontiguousarray(self.level_groups[a][codes[:, a]], dtype=dtype))
        return tuple(out)

    def _column(self, a: int) -> np.ndarray:
        # Original levels are read in place (the 1-way counts only); merged ones are made once.
        return self.histogram.codes[:, a] if self.level_groups is None else self._merged_columns[a]

    def _count(self, attrs: Marginal) -> np.ndarray:
        sizes = self.domain.sizes
        m = self.histogram.codes.shape[0]
        total = cells(attrs, sizes)
        index = np.zeros(m, dtype=np.int32 if total < 2**31 else np.int64)
        for a in attrs:
            index *= sizes[a]
            index += self._column(a)
        weights = self._weights if self.level_groups is not None else self.histogram.counts.astype(np.float64)
        return np.bincount(index, weights=weights, minlength=total).reshape([sizes[a] for a in attrs])

    def tables(self, marginals: list[Marginal]) -> dict[Marginal, np.ndarray]:
        """Count tables (shape = the marginal's level counts), each read off a covering set's table."""
        out: dict[Marginal, np.ndarray] = {}
        wanted = list(dict.fromkeys(tuple(r) for r in marginals))
        m = self.histogram.codes.shape[0]
        # Below COVER_FROM_RECORDS records a pass costs less than planning the cover: one pass each.
        plans = covering_sets(wanted, self.domain.sizes, cover_cells(m)) if m >= COVER_FROM_RECORDS else \
            [(r, [r]) for r in wanted]
        for attrs, served in plans:
            table = self._count(attrs)
            for r in served:
                out[r] = np.ascontiguousarray(sum_to(table, attrs, r))
        return {r: out[r] for r in wanted}

    def on_levels(self, compression: Compression) -> AimStatistics:
        """The same records with every level replaced by its merged level (the histogram is shared)."""
        return AimStatistics(self.histogram, Domain(self.domain.names, compression.sizes),
                             tuple(np.asarray(g, dtype=np.int64) for g in compression.groups))
