"""Which ``<missing>`` and ``<out-of-domain>`` levels a release shows evidence of (the rounding stage writes
none of the others, and the report states the count that decided).

Guarantee: post-processing of DP outputs only (the release's noisy measurements and their noise scales), so
free and public; no real row is read. A structural level the data does not hold still gets the model's share
of the measurements' noise, which a user would read as missing or out-of-domain values the table never had;
a level below the evidence bar is therefore not written (``rounding.suppress_levels``).
"""

from __future__ import annotations

import numpy as np

from privsynth.mechanisms.base import Measurement
from privsynth.report.uncertainty import Estimate, estimate
from privsynth.schema.encoding import Domain

EVIDENCE_SIGMAS = 2.0  # a structural level is kept when its noisy count shows this many noise deviations


def level_evidence(measurements: tuple[Measurement, ...], attribute: int, level: int,
                   domain: Domain) -> tuple[float, float, float] | None:
    """(noisy count, noisy total, noise standard deviation) of one level of ``attribute``, from DP outputs only:
    every Gaussian measurement holding the attribute where the level is a cell of its own, projected onto the
    attribute and combined with inverse-variance weights (``report.uncertainty.estimate``: a 2-way measurement
    at sigma summed over c cells carries sigma^2 c); where that is not available (Laplace noise, the level merged
    with others), the 1-way measurement's own count (Laplace's deviation: sqrt(2) b); None without either."""
    return _evidence(estimate(measurements, (attribute,), domain), measurements, attribute, level)


def _evidence(est: Estimate | None, measurements: tuple[Measurement, ...], attribute: int,
              level: int) -> tuple[float, float, float] | None:
    """``level_evidence`` from the attribute's 1-way estimate ``est`` (computed once per attribute)."""
    return _group_evidence(est, measurements, attribute, (level,))


def _cells_of(est: Estimate, levels: tuple[int, ...]) -> list[int] | None:
    """The cells of a 1-way estimate that hold ``levels`` and no other level (None: one is merged with another)."""
    groups = est.groups[0]
    if groups is None:
        return list(levels)
    cells = {int(groups[level]) for level in levels}
    if any(int(g) in cells for other, g in enumerate(groups) if other not in levels):
        return None
    return sorted(cells)


def _group_evidence(est: Estimate | None, measurements: tuple[Measurement, ...], attribute: int,
                    levels: tuple[int, ...]) -> tuple[float, float, float] | None:
    """(noisy count, noisy total, noise deviation) of ``levels`` together: the cells that hold them in the
    attribute's 1-way estimate ``est`` (independent cells: the deviation of k of them is sqrt(k) a cell's), else
    the 1-way measurement's own counts; None without either."""
    if est is not None and est.cell_sd is not None and (cells := _cells_of(est, levels)) is not None:
        values = np.asarray(est.values, dtype=np.float64)
        return float(values[cells].sum()), float(values.sum()), float(est.cell_sd) * float(np.sqrt(len(cells)))
    one_way = next((m for m in measurements if m.attributes == (attribute,) and not m.level_groups), None)
    if one_way is None or max(levels) >= len(one_way.noisy_counts):
        return None
    counts = np.asarray(one_way.noisy_counts, dtype=np.float64)
    scale = one_way.scale * (np.sqrt(2.0) if one_way.noise == "laplace" else 1.0)
    return float(counts[list(levels)].sum()), float(counts.sum()), float(scale) * float(np.sqrt(len(levels)))


def unsupported_levels(structural: dict[int, tuple[int, ...]], measurements: tuple[Measurement, ...],
                       domain: Domain, sigmas: float = EVIDENCE_SIGMAS) -> dict[int, tuple[int, ...]]:
    """Of each attribute's structural levels (``<missing>``, ``<out-of-domain>``), those the release's noisy
    measurements give no evidence of: their combined count (``level_evidence``) below ``sigmas`` noise
    deviations (post-processing of DP measurements). A level the data does not hold still gets the model's
    share of the noise; a user would see missing or out-of-domain values the table never had. Every
    measurement holding the attribute counts: a nativeBorn column's 87 missing answers (of 28,867) are 1.7
    deviations of the 1-way start's noise (51) and 2.4 of the combined noise (37) of the measurements that hold
    the column."""
    out: dict[int, tuple[int, ...]] = {}
    for j, levels in structural.items():
        est = estimate(measurements, (j,), domain)
        empty = []
        for level in levels:
            evidence = _evidence(est, measurements, j, level)
            if evidence is not None and evidence[0] < sigmas * evidence[2]:
                empty.append(level)
        if empty:
            out[j] = tuple(empty)
    return out


def unsupported_values(structural: dict[int, tuple[int, ...]], measurements: tuple[Measurement, ...],
                       domain: Domain, sigmas: float = EVIDENCE_SIGMAS) -> dict[int, tuple[int, ...]]:
    """Of each attribute with structural levels, its value levels (every other level) when together the release's
    noisy measurements give no evidence of them: their combined count below ``sigmas`` deviations of its noise
    (post-processing of DP measurements). A column whose rows are all missing (a retired column, a text column of
    "nan") still gets the model's share of the noise on its values; a user would see values the column never
    held, each outside its real form. The rounding stage writes the column's supported structural levels
    instead; a column with a few values below the bar loses them, as a structural level below it is lost."""
    out: dict[int, tuple[int, ...]] = {}
    for j, levels in structural.items():
        values = tuple(level for level in range(domain.sizes[j]) if level not in levels)
        if not levels or not values:
            continue
        evidence = _group_evidence(estimate(measurements, (j,), domain), measurements, j, values)
        if evidence is not None and evidence[0] < sigmas * evidence[2]:
            out[j] = values
    return out
