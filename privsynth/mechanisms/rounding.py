"""Randomized rounding: a weighted set of relaxed rows -> records (level codes).

Post-processing of a DP release, so free of privacy cost. For a non-exact release we draw the
requested number of row indices by *systematic resampling* of the weights (every point i appears
floor(rows * w_i) or that plus one times; unbiased, and with far less variance than i.i.d. draws),
then draw each attribute's level independently from that row's block probabilities (RAP section 4,
Lemma 4.7 of the covariance-loss paper). Each output row is thus a valid record with exactly one
level per attribute, and the expected answer of every product query equals the relaxed answer.

An exact release (private sampling) is published as is: its points are records already, and drawing
more rows from it would spend privacy that was never charged.
"""

from __future__ import annotations

import numpy as np

from privsynth.mechanisms.base import Measurement, Release
from privsynth.report.uncertainty import estimate
from privsynth.schema.encoding import Domain, from_one_hot
from privsynth.schema.sampling import systematic_indices

ROUNDING_CHUNK_ROWS = 65_536


def level_cdf(probabilities: np.ndarray) -> np.ndarray:
    """Each row's cumulative level probabilities (rows x levels), negative entries read as 0, last column 1."""
    cdf = np.cumsum(np.clip(probabilities, 0.0, None), axis=1)
    cdf /= cdf[:, -1:]
    return cdf


def draw_levels(cdf: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One level per row from its cumulative probabilities (``level_cdf``), independently."""
    u = rng.uniform(size=(cdf.shape[0], 1))
    return np.minimum((u > cdf).sum(axis=1), cdf.shape[1] - 1)


def round_release(release: Release, domain: Domain, rows: int | None, rng: np.random.Generator) -> np.ndarray:
    """Records (rows x attributes level codes) from a release.

    Exact releases return their points once each; ``rows`` must then be None or equal their count.
    """
    release.check_domain(domain)
    if release.exact:
        if rows is not None and rows != release.points.shape[0]:
            raise ValueError(f"the {release.mechanism} release holds exactly {release.points.shape[0]} records; "
                             f"it cannot be resampled to {rows} rows without spending uncharged privacy")
        return from_one_hot(release.points, domain)
    if rows is None:
        raise ValueError("rows is required to round a weighted release")
    picks = systematic_indices(release.weights, rows, rng)
    codes = np.empty((rows, domain.n_attributes), dtype=np.int32)
    # One attribute at a time, its cumulative probabilities once per point, gathered for a chunk of rows:
    # memory stays at points x levels + chunk x levels floats, never rows x width (a chunk of 65,536 rows
    # gathered at the full width of a 200-column table, 1,807 levels, held 0.9 GB).
    for j in range(domain.n_attributes):
        cdf = level_cdf(release.points[:, domain.offsets[j]: domain.offsets[j + 1]])
        for start in range(0, rows, ROUNDING_CHUNK_ROWS):
            chosen = picks[start: start + ROUNDING_CHUNK_ROWS]
            codes[start: start + chosen.size, j] = draw_levels(cdf[chosen], rng)
    return codes


EVIDENCE_SIGMAS = 2.0  # a structural level is kept when its noisy count shows this many noise deviations


def level_evidence(measurements: tuple[Measurement, ...], attribute: int, level: int,
                   domain: Domain) -> tuple[float, float, float] | None:
    """(noisy count, noisy total, noise standard deviation) of one level of ``attribute``, from DP outputs only:
    every Gaussian measurement holding the attribute where the level is a cell of its own, projected onto the
    attribute and combined with inverse-variance weights (``report.uncertainty.estimate``: a 2-way measurement
    at sigma summed over c cells carries sigma^2 c); where that is not available (Laplace noise, the level merged
    with others), the 1-way measurement's own count (Laplace's deviation: sqrt(2) b); None without either."""
    est = estimate(measurements, (attribute,), domain)
    if est is not None and est.cell_sd is not None:
        groups = est.groups[0]
        cell = level if groups is None else int(groups[level])
        if groups is None or sum(1 for g in groups if int(g) == cell) == 1:
            values = np.asarray(est.values, dtype=np.float64)
            return float(values[cell]), float(values.sum()), float(est.cell_sd)
    one_way = next((m for m in measurements if m.attributes == (attribute,) and not m.level_groups), None)
    if one_way is None or level >= len(one_way.noisy_counts):
        return None
    counts = np.asarray(one_way.noisy_counts, dtype=np.float64)
    scale = one_way.scale * (np.sqrt(2.0) if one_way.noise == "laplace" else 1.0)
    return float(counts[level]), float(counts.sum()), float(scale)


def unsupported_levels(structural: dict[int, tuple[int, ...]], measurements: tuple[Measurement, ...],
                       domain: Domain, sigmas: float = EVIDENCE_SIGMAS) -> dict[int, tuple[int, ...]]:
    """Of each attribute's structural levels (``<missing>``, ``<out-of-domain>``), those the release's noisy
    measurements give no evidence of: their combined count (``level_evidence``) below ``sigmas`` noise
    deviations (post-processing of DP measurements). A level the data does not hold still gets the model's
    share of the noise; a user would see missing or out-of-domain values the table never had. Every
    measurement holding the attribute counts: a nativeBorn column's 87 missing answers (of 28,867) showed 1.7
    deviations on the 1-way start alone and 2.4 with the 2-way measurements that hold the column."""
    out: dict[int, tuple[int, ...]] = {}
    for j, levels in structural.items():
        empty = []
        for level in levels:
            evidence = level_evidence(measurements, j, level, domain)
            if evidence is not None and evidence[0] < sigmas * evidence[2]:
                empty.append(level)
        if empty:
            out[j] = tuple(empty)
    return out


def suppress_levels(codes: np.ndarray, empty: dict[int, tuple[int, ...]], rng: np.random.Generator) -> np.ndarray:
    """Records without the levels in ``empty``: each such value is replaced by the attribute's value in
    a random other record that holds a supported level (post-processing; the attribute's other levels
    keep their proportions). An attribute with no supported value left is kept as it is."""
    out = codes.copy()
    for j, levels in empty.items():
        bad = np.isin(out[:, j], levels)
        donors = np.flatnonzero(~bad)
        if bad.any() and donors.size:
            out[bad, j] = out[rng.choice(donors, size=int(bad.sum())), j]
    return out
