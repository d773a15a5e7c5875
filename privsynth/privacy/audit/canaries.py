"""Neighbouring tables for the audit: a small public table D and D' = D plus one canary record.

The canary is chosen to be as distinguishable as the release allows: it holds the last level of every
attribute, and no record of D holds the last level of the last attribute, so every marginal cell the
canary touches through that attribute is empty in D and holds exactly the canary in D'. The tables
are synthetic (drawn from a fixed public seed): nothing private is read, so the audit charges no
ledger and authorizes its noise sources itself.

``copies`` > 1 adds the canary that many times: the "sensitivity understated" broken variant, since
every claim is stated for one record.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from privsynth.schema.encoding import Domain
from privsynth.schema.workload import Histogram, Marginal

TINY_DOMAIN = Domain(("a", "b", "c"), (2, 2, 3))
TINY_ROWS = 60


@dataclass(frozen=True)
class Neighbours:
    """D (``table``) and D' (``neighbour``) = D plus ``copies`` x the canary record."""

    domain: Domain
    table: Histogram
    neighbour: Histogram
    canary: tuple[int, ...]
    copies: int = 1

    def tables(self) -> tuple[Histogram, Histogram]:
        return self.table, self.neighbour

    def canary_cell(self, marginal: Marginal, sizes: tuple[int, ...] | None = None,
                    groups: tuple[tuple[int, ...] | None, ...] = ()) -> int:
        """The flat cell of ``marginal`` (row-major, as ``privsynth.schema.workload``) that holds the canary;
        with ``groups`` (a measurement's ``level_groups``) on the merged levels of ``sizes``."""
        levels = [self.canary[a] if not groups or (group := groups[i]) is None else group[self.canary[a]]
                  for i, a in enumerate(marginal)]
        dims = sizes if sizes is not None else tuple(self.domain.sizes[a] for a in marginal)
        return int(np.ravel_multi_index(tuple(levels), dims))


def tiny_table(domain: Domain = TINY_DOMAIN, rows: int = TINY_ROWS, seed: int = 0) -> np.ndarray:
    """``rows`` records drawn uniformly (public seed) among the levels but the last of the last attribute."""
    if domain.sizes[-1] < 2:
        raise ValueError("the last attribute needs at least two levels (one is kept out of D for the canary)")
    rng = np.random.default_rng(seed)
    highs = list(domain.sizes[:-1]) + [domain.sizes[-1] - 1]
    return np.column_stack([rng.integers(0, h, rows) for h in highs]).astype(np.int32)


def neighbours(codes: np.ndarray | None = None, domain: Domain = TINY_DOMAIN, copies: int = 1) -> Neighbours:
    """D from ``codes`` (default ``tiny_table``) and D' = D plus ``copies`` canaries (last level of each
    attribute)."""
    if copies < 1:
        raise ValueError(f"copies must be >= 1, got {copies}")
    codes = tiny_table(domain) if codes is None else np.asarray(codes, dtype=np.int32)
    canary = tuple(s - 1 for s in domain.sizes)
    with_canary = np.concatenate([codes, np.tile(np.asarray(canary, dtype=np.int32), (copies, 1))])
    return Neighbours(domain, Histogram.of_codes(codes), Histogram.of_codes(with_canary), canary, copies)
