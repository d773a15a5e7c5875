"""What discovery's bounds leave outside (docs/design.md 7): a DP estimate of a column's values beyond its final
bounds, which the run clips into its edge bins, from the same noisy histograms that placed the bounds."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from privsynth.discovery.bounds import Bounds, Level


@dataclass(frozen=True)
class BeyondBounds:
    """DP estimate of a column's present values beyond its final bounds, which the run clips into its edge
    bins (``on_out_of_domain: clip``): the noisy counts of the cells wholly below and wholly above the
    bounds, their noise standard deviations, and the noisy count of present values (its deviation).

    Guarantee: post-processing of discovery's Gaussian histograms (rho-zCDP, charged), so free and public.
    Unbiased: a sum of m noisy cells carries N(0, m sigma^2) noise; negative sums are kept as drawn (a
    clipped sum would be biased) and only the stated share is cut to [0, 1]."""

    below: float
    below_sd: float
    above: float
    above_sd: float
    present: float
    present_sd: float

    def share(self, side: str, z: float = 1.959964) -> tuple[float, float]:
        """(share of present values beyond the bound on ``side`` ('below' or 'above'), 95% half-width).

        The half-width treats numerator and denominator as independent (delta method), which is
        conservative where they share cells (a count inside the total makes the ratio less noisy)."""
        count, sd = (self.below, self.below_sd) if side == "below" else (self.above, self.above_sd)
        total = max(self.present, 1.0)
        raw = count / total
        half = z * math.sqrt(sd ** 2 + (raw * self.present_sd) ** 2) / total
        return float(min(1.0, max(0.0, raw))), float(half)

    @classmethod
    def from_json(cls, data: dict) -> BeyondBounds:
        """Back from ``to_json`` (discovery.json: a resumed run reuses its folder's discovery)."""
        return cls(*(float(data[k]) for k in ("below_count", "below_sd", "above_count", "above_sd", "present_count",
                                              "present_sd")))

    def to_json(self) -> dict:
        out: dict = {"below_count": self.below, "below_sd": self.below_sd, "above_count": self.above,
                     "above_sd": self.above_sd, "present_count": self.present, "present_sd": self.present_sd}
        for side in ("below", "above"):
            share, half = self.share(side)
            out[f"{side}_share"], out[f"{side}_error_bar"] = share, half
        return out


def _wholly_beyond(lower: np.ndarray, upper: np.ndarray, low: float, high: float,
                   integer: bool) -> tuple[np.ndarray, np.ndarray]:
    """Masks of the cells [lower, upper) wholly below ``low`` and at or above ``high`` (integers: a cell must
    hold a whole number beyond ``high``, so [high, high + 1) is inside; cells that hold no whole number are
    left out, a public fact of the type). A cell from ``high`` on also holds ``high`` itself: counted."""
    below, above = upper <= low, lower >= high
    if integer:
        holds = np.ceil(lower) < upper
        below, above = below & holds, above & holds & (np.ceil(upper) - 1.0 > high)
    return below, above


def beyond_bounds(round_one: tuple[np.ndarray, np.ndarray, float], coarse: Bounds, levels: list[Level],
                  low: float, high: float, integer: bool) -> BeyondBounds:
    """The DP estimate of the present values beyond the final bounds [low, high] (post-processing).

    Round 2's grid spans round 1's bounds ``coarse`` and its outermost cells also hold every value beyond
    them (``cell_counts``): where the final bound was trimmed inside ``coarse`` on a side, the finest round-2
    cells wholly beyond it count that side (the outermost cell included); where it was not, round 1's cells
    wholly beyond ``coarse`` do. The present count is the coarsest round-2 level's total (fewest cells)."""
    edges1, noisy1, sigma1 = round_one
    fine = levels[0]
    below1, above1 = _wholly_beyond(edges1[:-1], edges1[1:], coarse.low, coarse.high, integer)
    below2, above2 = _wholly_beyond(fine.edges[:-1], fine.edges[1:], low, high, integer)
    sides = []
    for trimmed, cells2, cells1 in ((low > coarse.low, below2, below1), (high < coarse.high, above2, above1)):
        noisy, mask, sigma = (fine.noisy, cells2, fine.sigma) if trimmed else (noisy1, cells1, sigma1)
        sides.append((float(noisy[mask].sum()), float(sigma * math.sqrt(int(mask.sum())))))
    top = levels[-1]
    return BeyondBounds(sides[0][0], sides[0][1], sides[1][0], sides[1][1], float(top.noisy.sum()),
                        float(top.sigma * math.sqrt(len(top.noisy))))
