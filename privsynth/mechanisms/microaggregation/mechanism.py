"""Microaggregation by covariance loss (Boedihardjo, Strohmer & Vershynin; spec docs/specs/covariance_loss.md).

Records are points of the one-hot space [0,1]^width (each attribute block a vertex of its simplex),
scaled by 1/sqrt(q) onto the unit sphere for the partition. The partition projects them on t
principal directions of the uncentered second-moment matrix, covers the unit ball of that subspace
with the lattice (alpha/sqrt t) Z^t, and puts every record in the cell of its lattice point. The
release is one point per cell (its centroid, every block on the simplex) with a weight; synthetic
rows come from ``privsynth.mechanisms.rounding.round_release`` (resample cells, then one level per attribute
from the block probabilities: the spec's fix for one-hot validity, section 4 option (a)).

Variants (``Config.variant``):

* ``"dp"`` (default; Theorem 5.12, adapted to add/remove neighbours): private PCA, Laplace noise on the
  cell counts, Laplace noise on the centroids (the paper's damped means, or, by default, noisy cell
  sums divided by the damped noisy count: see ``Config.centroids``), projection of the weights onto
  the simplex and of each centroid block onto its simplex, and *every* lattice cell released (empty
  ones too), so the release's shape never depends on the data.
  The PCA step is, by default, the Laplace mechanism on G (input perturbation) instead of the paper's
  exponential mechanism, whose exact sampler is impractical at Adult's width (see ``Config.pca``).
  **Guarantee: pure epsilon-DP with respect to adding or removing one record** (epsilon = the sum of
  the three budget shares); n is never used as public: the weights are normalised noisy counts and
  the automatic damping level is computed from their noisy total. Under replace-one neighbours the
  same release is 2*epsilon-DP. Noise is computed in floating point; with ``SeededNoise`` the run is
  reproducible but not hardened against floating-point attacks.
* ``"k_anonymous"`` (Algorithm 1, Theorem 4.1): exact PCA, the same lattice partition, then
  divide-and-merge into k blocks of floor(n/k) records (the last one takes the n mod k remainder);
  each released point is the exact mean of its block. **NOT differentially private**: it is only
  floor(n/k)-anonymous, and the privacy report says so. It is refused unless
  ``allow_non_private=True`` is also set.

Statistics: the integer co-occurrence counts C = sum one_hot one_hot^T (width x width; G = C / q is the
scaled second-moment matrix) and the sparse weighted histogram of the records: each distinct record
once, as compact level codes, with its count. The cell assignment needs every record after the
(private) PCA, and records with the same codes land in the same cell, so the distinct records and
their counts are all it needs: every cell statistic is weighted by the counts, and the release is
identical to the one computed record by record. Input is a ``privsynth.schema.workload.Histogram`` (what the
engine hands over) or per-record code batches (reduced to the same histogram, in one pass). Memory is
8 width^2 + distinct * (attributes * itemsize + 8) bytes, distinct <= min(n, domain size).

Noise and floating point. The three DP statistics go through ``noise.add_laplace``: with SecureNoise,
OpenDP's Laplace measurement adds the noise to the statistic itself, and its floating-point claim covers
that addition for the stated L1 sensitivity. The co-occurrence counts, cell counts and cell sums are
exact integers in float64 with exact integer sensitivities (q(q+1)/2, 1, q), so for the default
``centroids="noisy_sum"`` and ``pca="laplace"`` the claim covers the whole noisy release; everything
after is post-processing. ``centroids="damped_mean"`` noises sums / max(count, b), which float64 rounds:
its sensitivity 2q/(b+1) holds for the exact values, the claim covers the noise addition only.
``pca="exponential"`` is a rejection sampler whose proposals (``noise.gaussian``/``noise.laplace``) are
not added to any statistic and whose acceptance test is computed in floating point: not covered.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from privsynth.mechanisms.base import MechanismConfig, Release, check_memory
from privsynth.mechanisms.microaggregation import cells as mm
from privsynth.privacy.accounting import PrivacyCost, laplace_scale
from privsynth.privacy.noise import NoiseSource
from privsynth.schema.encoding import Domain, check_codes
from privsynth.schema.workload import Histogram, StatisticsInput

NAME = "microaggregation"


class Config(MechanismConfig):
    """Parameters of the microaggregation mechanism (validated before any data is read).

    epsilon: total pure-DP budget (variant "dp"); ignored by "k_anonymous".
    delta: kept for the pipeline's common interface; the "dp" release is pure, delta is not used.
    variant: "dp" or "k_anonymous" (the latter needs allow_non_private=True).
    pca: how the PCA subspace is made private. "laplace" (default): Laplace noise on the free upper-triangle
        entries of G, then its top-t eigenvectors. "exponential": the paper's PROJ (t exponential-mechanism
        draws from Bingham laws, exact rejection sampler); only practical for narrow domains or small
        epsilon * n: its acceptance rate collapses with width and concentration (about 1e-69 per proposal on
        Adult, width 161), and it raises RuntimeError after 10^6 proposals.
    t: dimension of the PCA subspace (0 gives a single cell: the global mean).
    alpha: covering radius of the lattice (alpha/sqrt(t)) Z^t in the unit ball of the subspace.
    budget_split: shares of epsilon for (PCA, cell weights, centroids); must sum to 1. With t = 0 the
        PCA share is handed to the other two in proportion.
    centroids: "noisy_sum" (default): Laplace(q/eps_c) on every cell's sum of one-hot rows, divided by
        max(noisy count, b); the noise on a centroid then shrinks like 1/|F_j|. "damped_mean": the paper's
        (5.4), Laplace(2q/((b+1) eps_c)) on the damped means sum/max(|F_j|, b), the same noise for every
        cell. Both are eps_c-DP; on Adult noisy_sum is far more accurate (see the tests' module notes).
    damping: integer damping level b (cells with fewer than b records are shrunk toward 0). None:
        for damped_mean b = ceil(sqrt(n_hat * q / (s_hat * eps_c))) from the already released noisy
        counts (post-processing, no extra cost, see ``auto_damping``); for noisy_sum b = 1, since
        count_threshold already drops cells whose counts are noise-dominated.
    count_threshold: noisy counts at or below count_threshold / eps_weights (i.e. this many count-noise
        scales) are set to 0 before the simplex projection (post-processing: it removes the spurious
        mass that Laplace noise gives the many empty cells). 0 gives the paper's pi_{Delta,1} exactly.
    k_blocks: number of blocks k of the k-anonymous variant (blocks of floor(n/k) records).
    max_cells: refuse (t, alpha) whose lattice has more cells than this (every cell is released).
    max_memory_gb: ``check_config`` refuses, before the budget is charged, a lattice and domain whose
        cell statistics would need more memory than this (``memory_estimate_bytes``).
    """

    variant: Literal["dp", "k_anonymous"] = "dp"
    allow_non_private: bool = False
    pca: Literal["laplace", "exponential"] = "laplace"
    t: int = 4
    alpha: float = 0.75
    budget_split: tuple[float, float, float] = (0.2, 0.2, 0.6)
    centroids: Literal["noisy_sum", "damped_mean"] = "noisy_sum"
    damping: int | None = None
    count_threshold: float = 4.0
    k_blocks: int = 1000
    max_cells: int = 200_000
    max_memory_gb: float = Field(default=4.0, gt=0, allow_inf_nan=False)

    @field_validator("t")
    @classmethod
    def _t(cls, v: int) -> int:
        if not 0 <= v <= 12:
            raise ValueError(f"t (PCA dimension) must be in [0, 12], got {v!r}: the lattice grows like (7/alpha)^t")
        return v

    @field_validator("alpha")
    @classmethod
    def _alpha(cls, v: float) -> float:
        if not (math.isfinite(v) and 0 < v <= 2):
            raise ValueError(f"alpha (covering radius) must be in (0, 2], got {v!r}")
        return v

    @field_validator("budget_split")
    @classmethod
    def _split(cls, v: tuple[float, float, float]) -> tuple[float, float, float]:
        if any(not (math.isfinite(x) and x > 0) for x in v) or not math.isclose(sum(v), 1.0, abs_tol=1e-9):
            raise ValueError("budget_split (PCA, weights, centroids) must be three numbers > 0 summing to 1, "
                             f"got {v!r}")
        return v

    @field_validator("damping")
    @classmethod
    def _damping(cls, v: int | None) -> int | None:
        if v is not None and v < 1:
            raise ValueError(f"damping must be an integer >= 1 (or None for automatic), got {v!r}")
        return v

    @field_validator("count_threshold")
    @classmethod
    def _threshold(cls, v: float) -> float:
        if not (math.isfinite(v) and v >= 0):
            raise ValueError(f"count_threshold must be a finite number >= 0, got {v!r}")
        return v

    @field_validator("k_blocks")
    @classmethod
    def _k_blocks(cls, v: int) -> int:
        if v < 1:
            raise ValueError(f"k_blocks must be an integer >= 1, got {v!r}")
        return v

    @field_validator("max_cells")
    @classmethod
    def _max_cells(cls, v: int) -> int:
        if v < 1:
            raise ValueError(f"max_cells must be >= 1, got {v!r}")
        return v

    @model_validator(mode="after")
    def _check(self) -> Config:
        if self.variant == "k_anonymous" and not self.allow_non_private:
            raise ValueError(
                "variant 'k_anonymous' is NOT differentially private (it is only floor(n/k)-anonymous: block "
                "means are exact, and one changed record can move every block); set allow_non_private=True to "
                "ask for it by name, or use variant 'dp'")
        if self.variant == "dp" and mm.lattice_upper_bound(self.t, self.alpha) > self.max_cells:
            try:
                mm.lattice_points(self.t, self.alpha, limit=self.max_cells)
            except ValueError:
                raise ValueError(
                    f"t={self.t} and alpha={self.alpha} give a covering lattice with more than max_cells="
                    f"{self.max_cells} cells (every cell is released with noise); lower t or raise alpha") from None
        return self


def budget_shares(config: Config) -> tuple[float, float, float]:
    """(eps_pca, eps_weights, eps_centroids); with t = 0 there is no PCA and its share goes to the others."""
    p, w, c = config.budget_split
    if config.t == 0:
        p, w, c = 0.0, w / (w + c), c / (w + c)
    return config.epsilon * p, config.epsilon * w, config.epsilon * c


def releases_n_estimate(config: Config) -> bool:
    """The DP release carries n_estimate (sum of noisy cell counts); the k-anonymous one does not."""
    return config.variant == "dp"


def privacy_cost(config: Config) -> PrivacyCost:
    if config.variant == "k_anonymous":
        return PrivacyCost.not_private(
            f"NOT differentially private: k-anonymous microaggregation into k={config.k_blocks} blocks "
            "(each released point is the exact mean of floor(n/k) or more records)",
            notes=("Anonymity is not a privacy guarantee against linkage or differencing attacks: the block "
                   "partition is unstable (one changed record can move every block, paper footnote 6).",))
    eps_pca, eps_w, eps_c = budget_shares(config)
    return PrivacyCost.pure(
        config.epsilon,
        f"pure {config.epsilon:g}-DP (add/remove one record): private PCA {eps_pca:g}, noisy cell counts "
        f"{eps_w:g}, damped noisy centroids {eps_c:g}",
        notes=("Under replace-one neighbours the same release is 2*epsilon-DP.",
               "PCA: Laplace mechanism on the second-moment matrix (default) or the exponential mechanism with "
               "a monotone score, analysed with the textbook bound rather than the paper's Lemma 5.1(3) constant.",
               "Noise is computed in floating point; seeded runs are not hardened against floating-point attacks."),
    )


@dataclass(frozen=True, repr=False)
class MicroaggregationStatistics:
    """Private: the co-occurrence counts C (width x width) and the records' sparse histogram (distinct
    level codes and their counts, canonical order: codes sorted lexicographically, no zero count)."""

    cooccurrence: np.ndarray
    codes: np.ndarray
    counts: np.ndarray

    def __repr__(self) -> str:  # never print private values
        return f"MicroaggregationStatistics(width={self.cooccurrence.shape[0]}, values withheld)"

    @property
    def n(self) -> int:
        return int(self.counts.sum())

    @property
    def second_moment(self) -> np.ndarray:
        """G = sum_i x_hat_i x_hat_i^T = C / q."""
        return self.cooccurrence / self.codes.shape[1]

    def records(self) -> np.ndarray:
        """Every record (rows repeated by their counts, in the canonical order): for the k-anonymous variant."""
        return np.repeat(self.codes, self.counts, axis=0)


def _code_dtype(domain: Domain) -> type:
    top = max(domain.sizes)
    return np.uint8 if top <= 256 else np.uint16 if top <= 65536 else np.int32


# Pending per-batch histograms are merged once they hold this many rows (bounds memory on long streams).
_MERGE_ROWS = 1_000_000


def _histogram_of(data: StatisticsInput, domain: Domain) -> Histogram:
    """The canonical histogram: distinct codes sorted, counts summed, zero counts dropped."""
    empty = Histogram(np.zeros((0, domain.n_attributes), dtype=_code_dtype(domain)), np.zeros(0, dtype=np.int64))
    if isinstance(data, Histogram):
        parts = [Histogram(check_codes(data.codes, domain).astype(_code_dtype(domain)),
                           np.asarray(data.counts, dtype=np.int64))]
    else:
        parts, pending = [], 0
        for batch in data:
            part = Histogram.of_codes(check_codes(batch, domain).astype(_code_dtype(domain)))
            parts.append(part)
            pending += part.codes.shape[0]
            if pending > _MERGE_ROWS:
                parts, pending = [Histogram.merge(parts)], 0
    merged = Histogram.merge([empty] + parts)
    keep = merged.counts > 0
    return Histogram(merged.codes[keep].astype(_code_dtype(domain)), merged.counts[keep].astype(np.int64))


# The co-occurrence counts are built from blocks of about this many one-hot entries (rows x width).
_COOCCURRENCE_ELEMENTS = 4_000_000


def collect_statistics(data: StatisticsInput, domain: Domain, config: Config) -> MicroaggregationStatistics:
    """C and the records' histogram, from a ``Histogram`` or per-record code batches (same result)."""
    hist = _histogram_of(data, domain)
    c = mm.cooccurrence_counts(hist.codes.astype(np.int64), domain, hist.counts,
                               chunk=max(1, _COOCCURRENCE_ELEMENTS // domain.width))
    return MicroaggregationStatistics(cooccurrence=c, codes=hist.codes, counts=hist.counts)


def memory_estimate_bytes(config: Config, domain: Domain) -> int:
    """A rough upper estimate of the release's peak memory from the config and the domain (public).

    Per lattice cell: the cell sums, their noisy copy, the centroids and their projection (4 x width
    float64) plus, with OpenDP, the statistic passed as a Python list (about 32 bytes an entry, twice).
    Per level pair: C, its noisy copy and the eigen-decomposition's workspace (4 x width^2 float64).
    The co-occurrence counts are built from blocks of ``_COOCCURRENCE_ELEMENTS`` one-hot entries: about
    five such float64 blocks at once. The records' histogram itself is not counted: its size depends on the
    data (distinct records, at most min(n, domain size), about attributes + 8 t + 24 bytes each, plus the
    sorting copies of the merge). On Adult (width 161, 297 cells, 42 494 distinct records) this gives
    158 MiB against a measured peak growth of 120 MiB (histogram included).
    """
    if config.variant == "dp":
        cells = mm.lattice_points(config.t, config.alpha, limit=config.max_cells).shape[0]
    else:
        cells = config.k_blocks
    return int(cells * domain.width * (4 * 8 + 2 * 32) + 4 * 8 * domain.width ** 2
               + 5 * 8 * _COOCCURRENCE_ELEMENTS)


def check_config(config: Config, domain: Domain) -> None:
    """Every problem visible from the config and the public domain, as a ValueError naming the option,
    so a run is refused before the budget is charged: a PCA dimension t above the domain's width (one
    eigenvector per one-hot column), and cell statistics above ``max_memory_gb``."""
    if config.t > domain.width:
        raise ValueError(f"t={config.t} exceeds the domain's one-hot width {domain.width}: there are at most "
                         f"{domain.width} principal directions; lower t")
    need = memory_estimate_bytes(config, domain)
    if need > config.max_memory_gb * 2 ** 30:
        cells = (mm.lattice_points(config.t, config.alpha, limit=config.max_cells).shape[0] if config.variant == "dp"
                 else config.k_blocks)
        check_memory("microaggregation", need, config.max_memory_gb,
                     f"cell statistics, t={config.t}, alpha={config.alpha:g}: {cells} cells x width {domain.width}",
                     "lower t or raise alpha")


def forecast(config: Config, domain: Domain, n_public: int | None = None) -> dict:
    """Noise per released figure and memory, in plain words, before anything is charged (config and
    domain only; ``n_public``, a declared public row count, only scales the figures for reading)."""
    if config.variant == "k_anonymous":
        return {"mechanism": NAME, "differentially_private": False,
                "summary": f"NOT differentially private: exact means of {config.k_blocks} blocks of records"}
    eps_pca, eps_w, eps_c = budget_shares(config)
    q = domain.n_attributes
    cells = mm.lattice_points(config.t, config.alpha, limit=config.max_cells).shape[0]
    count_scale = laplace_scale(eps_w)
    if config.centroids == "noisy_sum":
        centroid_scale = laplace_scale(eps_c, mm.sum_l1_sensitivity(q))
        centroid_words = (f"Laplace({centroid_scale:.3g}) on every cell's sum of one-hot rows, i.e. about "
                          f"{centroid_scale:.3g} / (records in the cell) on each centroid entry")
    else:
        b = config.damping or 1
        centroid_scale = laplace_scale(eps_c, mm.centroid_l1_sensitivity(q, b))
        centroid_words = f"Laplace({centroid_scale:.3g}) on every damped centroid entry (damping b={b})"
    memory = memory_estimate_bytes(config, domain)
    out = {
        "mechanism": NAME, "differentially_private": True, "cells": int(cells),
        "count_noise_scale": count_scale, "centroid_noise_scale": centroid_scale,
        "pca_noise_scale": (laplace_scale(eps_pca, mm.cooccurrence_l1_sensitivity(q))
                            if (config.t and config.pca == "laplace") else None),
        "memory_bytes": memory,
    }
    words = (f"{cells} lattice cells, every one released: Laplace({count_scale:.3g}) on each cell's record count "
             f"(about {math.sqrt(2) * count_scale:.3g} records standard deviation), {centroid_words}; "
             f"about {memory / 2 ** 20:.0f} MiB of memory.")
    if config.t and config.pca == "exponential":
        words += (" Warning: pca='exponential' uses an exact rejection sampler whose acceptance rate collapses with "
                  "the domain's width and epsilon * n (about 1e-69 per proposal on Adult, width 161); it stops with "
                  "an error after 10^6 proposals, after the budget is charged. Prefer pca='laplace' on wide domains.")
    if n_public:
        out["count_noise_total_fraction"] = cells * count_scale / n_public
        words += (f" With about {n_public} records the count noise adds up to about "
                  f"{100 * cells * count_scale / n_public:.2g}% of the total mass (before thresholding).")
    out["summary"] = words
    return out


def auto_damping(n_hat: float, occupied_hat: float, n_attributes: int, eps_centroids: float) -> int:
    """b = ceil(sqrt(n_hat * q / (s_hat * eps_c))), the minimiser of q/(b eps_c) + s_hat b / n_hat.

    This is the paper's balance (section 5.8: centroid-noise error p/(b eps) against the mass s b/n of
    damped cells) with p -> q (the L1 norm of a one-hot record) and s -> s_hat, the number of cells
    whose noisy count is positive (cells the resampler can pick). Inputs are released values only.
    """
    s_hat = max(occupied_hat, 1.0)
    return max(1, math.ceil(math.sqrt(max(n_hat, 1.0) * n_attributes / (s_hat * eps_centroids))))


def _run_dp(stats: MicroaggregationStatistics, domain: Domain, config: Config, noise: NoiseSource) -> Release:
    eps_pca, eps_w, eps_c = budget_shares(config)
    q = domain.n_attributes
    if config.pca == "laplace":
        basis = mm.private_pca_laplace(stats.cooccurrence, domain, config.t, eps_pca, noise)
    else:
        basis = mm.private_pca_exponential(stats.second_moment, config.t, eps_pca, noise)
    lattice = mm.lattice_points(config.t, config.alpha, limit=config.max_cells)
    s = lattice.shape[0]
    codes = stats.codes.astype(np.int64)
    record_counts = stats.counts
    # Records with the same codes share a cell: assign the distinct records, weight by their counts.
    cells = mm.assign_cells(mm.project_codes(codes, domain, basis), lattice, config.alpha)
    counts = mm.cell_counts(cells, s, record_counts)
    # Counts move by 1 in one cell per added/removed record: L1 sensitivity 1, Lap(1/eps_w).
    noisy_counts = noise.add_laplace(counts, laplace_scale(eps_w), sensitivity=1.0)
    weights = mm.simplex_l1_projection(
        mm.threshold_counts(noisy_counts, config.count_threshold / eps_w))
    if config.centroids == "damped_mean":
        b = config.damping if config.damping is not None else auto_damping(
            float(noisy_counts.sum()), float((noisy_counts > 0).sum()), q, eps_c)
        centroid_sensitivity = mm.centroid_l1_sensitivity(q, b)
        centroid_scale = laplace_scale(eps_c, centroid_sensitivity)
        centroids = mm.damped_centroids(mm.cell_sums(codes, domain, cells, s, record_counts), counts, b)
        noisy_centroids = noise.add_laplace(centroids, centroid_scale, sensitivity=centroid_sensitivity)
    else:
        b = config.damping if config.damping is not None else 1
        # One record adds its one-hot row to one cell's sum: L1 sensitivity q.
        sum_sensitivity = mm.sum_l1_sensitivity(q)
        centroid_scale = laplace_scale(eps_c, sum_sensitivity)
        noisy_sums = noise.add_laplace(mm.cell_sums(codes, domain, cells, s, record_counts), centroid_scale,
                                       sensitivity=sum_sensitivity)
        noisy_centroids = noisy_sums / np.maximum(noisy_counts, float(b))[:, None]
    points = mm.project_blocks(noisy_centroids, domain)
    facts = {
        "variant": "dp", "differentially_private": True, "neighbours": "add/remove one record",
        "t": config.t, "alpha": config.alpha, "cells": int(s), "damping": int(b),
        "epsilon_pca": eps_pca, "epsilon_weights": eps_w, "epsilon_centroids": eps_c,
        "centroids": config.centroids, "count_threshold": config.count_threshold,
        "count_noise_scale": laplace_scale(eps_w), "centroid_noise_scale": centroid_scale,
        # Post-processing of the noisy cell counts: the default number of synthetic rows.
        "n_estimate": float(max(1.0, noisy_counts.sum())),
    }
    return Release(mechanism=NAME, points=points, weights=weights, exact=False, public_facts=facts)


def _run_k_anonymous(stats: MicroaggregationStatistics, domain: Domain, config: Config) -> Release:
    n = stats.n
    if config.k_blocks > n:
        raise ValueError(f"k_blocks={config.k_blocks} exceeds the number of records")
    codes = stats.records().astype(np.int64)  # the divide-and-merge step needs the records one by one
    basis = mm.top_eigenvectors(stats.second_moment, config.t)
    lattice = mm.lattice_points(config.t, config.alpha, limit=config.max_cells)
    cells = mm.assign_cells(mm.project_codes(codes, domain, basis), lattice, config.alpha)
    blocks = mm.equipartition(cells, config.k_blocks)
    sizes = mm.cell_counts(blocks, config.k_blocks)
    points = mm.cell_sums(codes, domain, blocks, config.k_blocks) / sizes[:, None]
    # Block sizes follow from (n, k) and are not covered by any guarantee: keep them out of public_facts.
    facts = {"variant": "k_anonymous", "differentially_private": False, "k_blocks": config.k_blocks,
             "t": config.t, "alpha": config.alpha}
    return Release(mechanism=NAME, points=points, weights=sizes / n, exact=False, public_facts=facts)


def run(statistics: MicroaggregationStatistics, domain: Domain, config: Config, noise: NoiseSource) -> Release:
    """The release: one point per cell (blocks on the simplex) and weights summing to 1.

    "dp": pure epsilon-DP under add/remove neighbours (see the module docstring); "k_anonymous": not DP.
    """
    if (statistics.codes.shape[1] != domain.n_attributes
            or statistics.cooccurrence.shape != (domain.width, domain.width)):
        raise ValueError("statistics do not match the domain")
    if config.variant == "k_anonymous":
        if statistics.n == 0:
            raise ValueError("the k-anonymous variant needs at least one record")
        return _run_k_anonymous(statistics, domain, config)
    return _run_dp(statistics, domain, config, noise)
