"""Reduced-space reweighting with Laplace noise (Boedihardjo, Strohmer & Vershynin, "Privacy of
synthetic data: a statistical framework", Algorithm 1; spec docs/specs/private_sampling.md section 2).

The algorithm, as implemented here:

1. **Statistics.** The linear statistics are the cells of a marginal workload W (default: every
   2-way marginal). They are gathered as *counts* c(X) in one streaming pass.
2. **Laplace noise.** ``c~ = c(X) + Lap(|W| / epsilon)`` independently per cell.
3. **Reduced space.** Omega* = m distinct points of the schema domain drawn from a public density
   computed from c~ alone: a Chow-Liu tree fitted to the noisy 2-way tables (default), the product
   of the noisy 1-way marginals, or the uniform density. [SF] Thm 2.2 holds for any Omega*; one
   computed from the release keeps the whole output a function of the release, so it costs nothing.
4. **Reweighting.** Proportions ``y = c~ / n_hat`` with ``n_hat`` estimated from c~; the weights
   h on Omega* solve ``min_h ||A h - y||`` over the simplex, where ``A[f, i] = 1`` iff point i lies
   in cell f (sparse, |W| ones per column). ``objective="linf"`` is the paper's minimax LP (3.3)
   and ``"l1"`` the sum-of-absolute-residuals LP (the Laplace maximum-likelihood fit), both in
   cvxpy with HiGHS; ``"l2"`` (default) is least squares solved by accelerated projected gradient.
5. **Release.** The points of Omega* with non-zero weight, one-hot, and their weights h.
   Resampling any number of rows from it is post-processing.

Privacy (add-or-remove-one neighbours; n itself stays private).
    Every record x falls in exactly one cell of every marginal of W, so adding or removing x changes
    the count vector c by +-1 in exactly |W| coordinates (one per marginal) and nowhere else:
        ||c(X + x) - c(X)||_1 = |W|   for every X and every x
    (the sensitivity is attained by every record and does not depend on n). Laplace noise of scale
    b = |W| / epsilon on each coordinate is therefore epsilon-DP (Dwork et al. 2006; [SF] Lemma 3.1).
    Everything after the noise (n_hat, the 1-way marginals that define the reduced-space density,
    Omega*, the LP, the release, any resampling) reads only c~ and public randomness, so it is
    post-processing. Hence:  **this release is pure epsilon-DP; delta is not used.**
    Noise and floating point: the counts are exact integers in float64 (from a ``Histogram``, weighted
    by its counts, or from per-record batches: the same integers) with exact L1 sensitivity |W|, and
    the noise is added by ``noise.add_laplace``: with SecureNoise, OpenDP's Laplace measurement adds it
    to the counts, so its floating-point claim covers the whole noisy release c~.
    [SF] Thm 2.2 normalises by the private n first (sensitivity 2|F|/n); noising counts avoids
    treating n as public and has the same accuracy up to the factor 2.

Choices, measured on Adult (15 attributes, n = 48842; all 2-way marginals: |W| = 105, |F| = 11423):
* Objective. The LPs do not scale on this |F|: HiGHS needs 2.2 / 3.0 / 4.8 s for the minimax LP at
  m = 572 / 1143 / 2285 but > 150 s at m = 22846, and 50-60 s for the L1 LP already at m = 572-1143
  (the constraint matrix couples every pair of cells a point touches, so IPM normal equations are
  dense and simplex needs tens of thousands of pivots). The minimax LP also fits badly: it only
  bounds the largest residual, so at m = 1143 its vertex solution has 162 points and 2-way mean TV
  0.18 (eps = 1), against 0.086 for the L1 LP and 0.096 for least squares at the same m. Least
  squares by FISTA costs O(iterations * nnz(A)): 6.6 s at m = 22846 and fits better as m grows, so
  it is the default; the LPs stay available for small domains and for the paper's algorithm.
* m. Thm 2.3's m >= delta^-2 K |F| / gamma is astronomically large (K is the Renyi condition number
  of the data against the reduced-space density). In practice m = 3.5 |F| capped at 50 000 (about
  40 000 on Adult): 2-way TV 0.054 / 0.048 / 0.045 at m = |F| / 2|F| / 3.5|F| (product space, eps 1).
* Workload. All 2-way only: adding the 1-way marginals raises |W| from 105 to 120 (more noise per
  cell) and gave no gain (2-way TV 0.0486 vs 0.0478 at eps 1).
* Space. The noisy tree beats the product of noisy 1-way marginals (eps 1: 2-way TV 0.034 vs 0.045,
  3-way 0.078 vs 0.108; eps 3: 0.018 / 0.049), but not at eps 0.3 (0.073 / 0.154 vs 0.066 / 0.140),
  where thresholding at 2 noise scales removes real cells: prefer "noisy_marginals" below eps ~0.5.
  The uniform density over a 3e13-record domain is hopeless (2-way TV 0.40).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from privsynth.mechanisms.base import Release, check_memory
from privsynth.mechanisms.reduced_space.config import TREE_MIN_EPSILON, Config, WorkloadName
from privsynth.mechanisms.reduced_space.fit import fit_weights
from privsynth.mechanisms.reduced_space.space import (
    cell_offsets,
    design_matrix,
    draw_reduced_space,
    estimate_total,
    reduced_space_size,
    space_sampler,
)
from privsynth.privacy import accounting
from privsynth.privacy.accounting import PrivacyCost
from privsynth.privacy.noise import NoiseSource
from privsynth.schema.encoding import Domain, check_codes, one_hot
from privsynth.schema.workload import Histogram, Marginal, StatisticsInput, accumulate_marginals, all_marginals

NAME = "reduced_space"


def workload_marginals(domain: Domain, workload: WorkloadName) -> list[Marginal]:
    """The marginals of the workload (public: from the domain and the config only).

    A one-attribute domain has no 2-way marginal; its workload is the single 1-way marginal.
    """
    k = domain.n_attributes
    if k == 1:
        return [(0,)]
    pairs = all_marginals(k, 2)
    return (all_marginals(k, 1) + pairs) if workload == "1way+2way" else pairs


def l1_sensitivity(marginals: list[Marginal]) -> int:
    """L1 sensitivity of the concatenated cell counts under adding or removing one record: |W|."""
    return len(marginals)


def laplace_scale(epsilon: float, marginals: list[Marginal]) -> float:
    """Laplace scale per cell count for epsilon-DP: |W| / epsilon."""
    return accounting.laplace_scale(epsilon, l1_sensitivity(marginals))


def resolved_space(config: Config) -> str:
    """The reduced-space density actually used ("auto" resolved from epsilon, never from data)."""
    if config.reduced_space != "auto":
        return config.reduced_space
    return "noisy_tree" if config.epsilon >= TREE_MIN_EPSILON else "noisy_marginals"


def releases_n_estimate(config: Config) -> bool:
    """The release carries n_estimate (from the noisy counts), the default row count."""
    return True


def privacy_cost(config: Config) -> PrivacyCost:
    """Pure epsilon-DP (add-or-remove-one neighbours), from the config alone."""
    return PrivacyCost.pure(
        config.epsilon,
        guarantee=(f"pure {config.epsilon:g}-DP (add/remove one record): Laplace(|W|/epsilon) on the "
                   f"cell counts of the {config.workload} marginal workload, L1 sensitivity |W|; "
                   "reduced space, LP reweighting and resampling are post-processing"),
        notes=("delta is not used: the release is pure epsilon-DP",
               "the number of records n is not released; it is estimated from the noisy counts"),
    )


def n_statistics(domain: Domain, config: Config) -> int:
    """|F|: the number of cells of the workload (public)."""
    return sum(domain.size_of(m) for m in workload_marginals(domain, config.workload))


# Bytes per non-zero of the design matrix A: COO construction (row, column, value), CSC, CSR and the
# CSR transpose of the least-squares fit. cvxpy's canonicalisation of the LPs copies A several more times.
_BYTES_PER_NONZERO = {"l2": 80, "l1": 320, "linf": 320}


def memory_estimate_bytes(config: Config, domain: Domain) -> int:
    """A rough upper estimate of the release's peak memory from the config and the domain (public).

    Per cell of the workload: the counts, the noisy counts, the proportions and the noisy-tree tables
    (float64), plus the statistic passed to OpenDP as a Python list (about 32 bytes an entry, twice);
    per non-zero of the |F| x m design matrix (|W| per point): ``_BYTES_PER_NONZERO``; per point of the
    reduced space: its codes while drawing (about 5 copies of int32) and its one-hot row (float64, twice).
    On Adult (|F| = 11 423, 105 marginals, m = 39 981) this gives 431 MiB against a measured growth of 366 MiB.
    """
    marginals = workload_marginals(domain, config.workload)
    cells = n_statistics(domain, config)
    m = reduced_space_size(domain, cells, config)
    return int(cells * (5 * 8 + 2 * 32) + len(marginals) * m * _BYTES_PER_NONZERO[config.objective]
               + m * (5 * 4 * domain.n_attributes + 2 * 8 * domain.width))


def check_config(config: Config, domain: Domain) -> None:
    """Every problem visible from the config and the public domain, as a ValueError naming the option,
    so a run is refused before the budget is charged: a workload (``workload``) and reduced space
    (``points_per_statistic``, ``max_points``) whose estimated memory exceeds ``max_memory_gb``."""
    need = memory_estimate_bytes(config, domain)
    if need > config.max_memory_gb * 2 ** 30:
        cells = n_statistics(domain, config)
        check_memory("reduced_space", need, config.max_memory_gb,
                     f"workload={config.workload!r}: {cells} cells; {reduced_space_size(domain, cells, config)} "
                     f"reduced-space points, objective={config.objective!r}",
                     "lower points_per_statistic or max_points, use objective='l2', coarsen the schema's bins")


def forecast(config: Config, domain: Domain, n_public: int | None = None) -> dict:
    """Noise per measured cell and per marginal, and memory, in plain words, before anything is charged
    (config and domain only; ``n_public``, a declared public row count, only scales the figures)."""
    marginals = workload_marginals(domain, config.workload)
    scale = laplace_scale(config.epsilon, marginals)
    sizes = [domain.size_of(m) for m in marginals]
    cells = sum(sizes)
    memory = memory_estimate_bytes(config, domain)
    out = {"mechanism": NAME, "marginals": len(marginals), "cells": cells, "laplace_scale": scale,
           "cell_noise_std": math.sqrt(2) * scale, "largest_marginal_cells": max(sizes),
           "reduced_space_points": reduced_space_size(domain, cells, config), "memory_bytes": memory}
    words = (f"{len(marginals)} marginals ({cells} cells) measured once each with Laplace({scale:.3g}) noise: about "
             f"{math.sqrt(2) * scale:.3g} records standard deviation per cell, and {np.mean(sizes) * scale:.3g} "
             f"records of absolute noise per marginal on average (its cells times {scale:.3g}); "
             f"about {memory / 2 ** 20:.0f} MiB of memory.")
    if n_public:
        tv = [size * scale / (2 * n_public) for size in sizes]
        out["marginal_noise_tv_mean"] = float(np.mean(tv))
        out["marginal_noise_tv_max"] = float(np.max(tv))
        words += (f" With about {n_public} records that is a total-variation noise of about {np.mean(tv):.2g} per "
                  f"marginal on average (at most {np.max(tv):.2g}), before the fit smooths it.")
    out["summary"] = words
    return out


@dataclass(frozen=True)
class Statistics:
    """Private: the exact cell counts of every workload marginal (n is deliberately not kept)."""

    marginals: tuple[Marginal, ...]
    counts: np.ndarray  # concatenated cell counts, marginal by marginal, each in row-major cell order

    def __repr__(self) -> str:  # never print private counts
        return f"Statistics(marginals={len(self.marginals)}, cells={self.counts.size})"


def collect_statistics(data: StatisticsInput, domain: Domain, config: Config) -> Statistics:
    """The cell counts of every marginal of the workload, from a ``Histogram`` (weighted by its counts)
    or per-record code batches (one streaming pass), through ``accumulate_marginals``: the same counts."""
    marginals = workload_marginals(domain, config.workload)
    if isinstance(data, Histogram):
        data = Histogram(check_codes(data.codes, domain), data.counts)
    else:
        data = (check_codes(batch, domain) for batch in data)
    totals, _n = accumulate_marginals(data, domain, marginals)
    return Statistics(tuple(marginals), np.concatenate([totals[m] for m in marginals]))


def run(statistics: Statistics, domain: Domain, config: Config, noise: NoiseSource) -> Release:
    """The DP release: Omega* points (one-hot) weighted by the LP solution. Pure epsilon-DP."""
    marginals = tuple(statistics.marginals)
    if marginals != tuple(workload_marginals(domain, config.workload)):
        raise ValueError("statistics were collected for a different workload or domain")
    offsets = cell_offsets(domain, marginals)
    if statistics.counts.shape != (int(offsets[-1]),):
        raise ValueError("statistics do not match the workload's cell count")
    scale = laplace_scale(config.epsilon, list(marginals))
    noisy = noise.add_laplace(statistics.counts, scale, sensitivity=l1_sensitivity(list(marginals)))
    # ---- everything below reads only `noisy` and public randomness: post-processing
    del statistics
    n_hat = estimate_total(noisy, offsets)
    y = noisy / n_hat
    rng = noise.post_rng
    m = reduced_space_size(domain, y.size, config)
    sampler = space_sampler(noisy, domain, marginals, scale, resolved_space(config))
    points = draw_reduced_space(domain, m, sampler, rng)
    A = design_matrix(points, domain, marginals)
    h = fit_weights(A, y, config)
    keep = h > 0
    return Release(
        mechanism=NAME,
        points=one_hot(points[keep], domain, dtype=np.float64),
        weights=h[keep] / h[keep].sum(),
        exact=False,
        public_facts={
            "workload": config.workload,
            "marginals": len(marginals),
            "statistics": int(y.size),
            "laplace_scale_counts": scale,
            "reduced_space": resolved_space(config),
            "reduced_space_points_requested": m,
            "objective": config.objective,
            # n_hat reads only the noisy counts, so it is covered by the guarantee; the flow uses it
            # as the default number of synthetic rows.
            "n_estimate": n_hat,
        },
    )
