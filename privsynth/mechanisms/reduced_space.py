"""Reduced-space reweighting with Laplace noise (Boedihardjo, Strohmer & Vershynin, "Privacy of
synthetic data: a statistical framework", Algorithm 1; spec ``private_sampling.md`` section 2).

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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import cvxpy as cp
import numpy as np
import scipy.sparse as sp
from pydantic import Field, field_validator

from privsynth.mechanisms.base import MechanismConfig, Release, check_memory
from privsynth.privacy.accounting import PrivacyCost
from privsynth.privacy.noise import NoiseSource
from privsynth.schema.encoding import Domain, check_codes, one_hot
from privsynth.schema.workload import (
    Histogram,
    Marginal,
    StatisticsInput,
    accumulate_marginals,
    all_marginals,
    cell_index,
)

NAME = "reduced_space"

WorkloadName = Literal["2way", "1way+2way"]
SpaceName = Literal["auto", "noisy_tree", "noisy_marginals", "uniform"]
# Below this epsilon the tree fitted to the noisy 2-way tables was measured worse than the product
# of noisy 1-way marginals on Adult (2-way TV 0.073 vs 0.066 at eps 0.3; 0.034 vs 0.045 at eps 1).
TREE_MIN_EPSILON = 0.5
ObjectiveName = Literal["l2", "l1", "linf"]


class Config(MechanismConfig):
    """Public configuration of the reduced-space mechanism.

    epsilon: pure-DP budget of the Laplace release.
    delta: accepted for the shared interface; unused (the release is pure epsilon-DP).
    workload: the marginals whose cells are the linear statistics. ``"2way"`` (every 2-way marginal;
        the 1-way marginals are sums of their cells) or ``"1way+2way"``.
    reduced_space: the public density Omega* is drawn from, computed from the same noisy release
        (so free): ``"noisy_tree"`` (Chow-Liu tree on the noisy 2-way tables), ``"noisy_marginals"``
        (product of the noisy 1-way marginals), ``"uniform"``, or ``"auto"`` (the tree from epsilon
        ``TREE_MIN_EPSILON`` on, the product below it: a choice from the config alone).
    points_per_statistic: m = ceil(points_per_statistic * |F|), capped by ``max_points`` and by the
        domain size (a domain with at most m records is used whole).
    objective: ``"l2"`` (least squares, accelerated projected gradient; scales to tens of thousands
        of points), ``"l1"`` (LP: sum of absolute residuals) or ``"linf"`` (the paper's minimax LP).
    iterations: gradient iterations of the ``"l2"`` fit (more overfits the noise: 3-way TV rises).
    time_limit_s: HiGHS time limit; hitting it is an error, never a silently worse release.
    max_memory_gb: ``check_config`` refuses, before the budget is charged, a workload and reduced space
        whose estimated peak memory (``memory_estimate_bytes``) exceeds this.
    """

    workload: WorkloadName = "2way"
    reduced_space: SpaceName = "auto"
    points_per_statistic: float = Field(default=3.5, gt=0, allow_inf_nan=False)
    max_points: int = Field(default=50_000, ge=1)
    objective: ObjectiveName = "l2"
    iterations: int = Field(default=200, ge=1)
    time_limit_s: float = Field(default=300.0, gt=0, allow_inf_nan=False)
    max_memory_gb: float = Field(default=4.0, gt=0, allow_inf_nan=False)

    @field_validator("points_per_statistic", "time_limit_s", "max_points", "iterations", "max_memory_gb",
                     mode="before")
    @classmethod
    def _no_bool(cls, value: object, info) -> object:
        if isinstance(value, bool):
            raise ValueError(f"{info.field_name} must be a number, not a boolean")
        return value


# ------------------------------------------------------------------------------------ privacy

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
    return l1_sensitivity(marginals) / epsilon


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


# ------------------------------------------------------------------------------------ statistics

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


def cell_offsets(domain: Domain, marginals: tuple[Marginal, ...] | list[Marginal]) -> np.ndarray:
    """Start of each marginal's cells in the concatenated statistics vector (length |W| + 1)."""
    return np.concatenate([[0], np.cumsum([domain.size_of(m) for m in marginals])]).astype(np.int64)


# ------------------------------------------------------------------------------------ post-processing

def estimate_total(noisy_counts: np.ndarray, offsets: np.ndarray) -> float:
    """n_hat: inverse-variance weighted mean of the noisy marginal totals (post-processing).

    A marginal with c cells has a total whose noise variance is c * 2b^2, so weights 1/c.
    Floored at 1 so the proportions stay finite.
    """
    totals = np.add.reduceat(noisy_counts, offsets[:-1])
    weights = 1.0 / np.diff(offsets)
    return max(1.0, float(weights @ totals / weights.sum()))


def noisy_one_way(noisy_counts: np.ndarray, domain: Domain, marginals: tuple[Marginal, ...]) -> list[np.ndarray]:
    """Per attribute, a probability vector from the noisy release (post-processing).

    Every marginal containing attribute a gives an estimate of a's counts by summing out the other
    attributes; these are combined with weights inverse to the number of noisy cells summed (their
    noise variance), clipped at 0 and normalised (uniform when nothing positive survives).
    """
    offsets = cell_offsets(domain, marginals)
    sums = [np.zeros(s) for s in domain.sizes]
    weight_sums = np.zeros(domain.n_attributes)
    for j, m in enumerate(marginals):
        table = noisy_counts[offsets[j]: offsets[j + 1]].reshape([domain.sizes[a] for a in m])
        for axis, a in enumerate(m):
            other = tuple(i for i in range(len(m)) if i != axis)
            summed = domain.size_of(m) // domain.sizes[a]
            sums[a] += table.sum(axis=other) / summed
            weight_sums[a] += 1.0 / summed
    out = []
    for a, s in enumerate(sums):
        p = np.clip(s / weight_sums[a], 0.0, None) if weight_sums[a] > 0 else np.zeros_like(s)
        out.append(p / p.sum() if p.sum() > 0 else np.full(s.size, 1.0 / s.size))
    return out


def reduced_space_size(domain: Domain, n_statistics: int, config: Config) -> int:
    """m: ceil(points_per_statistic * |F|), capped by max_points and by the number of records of the domain."""
    m = min(config.max_points, math.ceil(config.points_per_statistic * n_statistics))
    domain_size = math.prod(domain.sizes)
    return max(1, min(m, domain_size))


def whole_domain(domain: Domain) -> np.ndarray:
    """Every record of the domain as codes (only for small domains)."""
    grids = np.meshgrid(*[np.arange(s) for s in domain.sizes], indexing="ij")
    return np.stack([g.ravel() for g in grids], axis=1).astype(np.int32)


Sampler = Callable[[int, np.random.Generator], np.ndarray]


def product_sampler(probabilities: list[np.ndarray]) -> Sampler:
    """Independent attributes with the given level probabilities."""
    def sample(size: int, rng: np.random.Generator) -> np.ndarray:
        return np.stack([rng.choice(p.size, size=size, p=p) for p in probabilities], axis=1).astype(np.int32)
    return sample


@dataclass(frozen=True)
class TreeDensity:
    """A tree-structured density: root level probabilities, then P(child | parent) along the tree."""

    order: tuple[int, ...]                 # attributes in sampling order (order[0] is the root)
    parent: dict[int, int]
    root: np.ndarray
    conditionals: dict[int, np.ndarray]    # child -> (parent levels x child levels), rows sum to 1


def noisy_tree(noisy_counts: np.ndarray, domain: Domain, marginals: tuple[Marginal, ...], scale: float,
               one_way: list[np.ndarray], threshold: float = 2.0, mix: float = 0.1) -> TreeDensity:
    """A Chow-Liu tree fitted to the noisy 2-way tables (post-processing of the release).

    Cells below ``threshold`` noise scales are treated as empty (a Laplace(b) draw exceeds 2b with
    probability e^-2 / 2, so this removes most pure-noise mass from large sparse tables); the
    maximum spanning tree of the resulting mutual informations links the attributes; each
    conditional is mixed with the child's noisy 1-way marginal (weight ``mix``) so that every level
    the 1-way estimate supports can still be drawn.
    """
    offsets = cell_offsets(domain, marginals)
    k = domain.n_attributes
    tables: dict[tuple[int, int], np.ndarray] = {}
    information = np.full((k, k), -np.inf)
    for j, marginal in enumerate(marginals):
        if len(marginal) != 2:
            continue
        a, c = marginal
        t = noisy_counts[offsets[j]: offsets[j + 1]].reshape(domain.sizes[a], domain.sizes[c])
        t = np.where(t > threshold * scale, t, 0.0)
        tables[(a, c)], tables[(c, a)] = t, t.T
        information[a, c] = information[c, a] = mutual_information(t)
    order, parent = [0], {}
    while len(order) < k:  # Prim's algorithm; ties broken by the lowest indices
        _, u, v = max((information[u, v], -u, -v) for u in order for v in range(k) if v not in order)
        parent[-v] = -u
        order.append(-v)
    conditionals = {}
    for v in order[1:]:
        t = tables[(parent[v], v)]
        rows = t.sum(axis=1, keepdims=True)
        cond = np.where(rows > 0, t / np.where(rows > 0, rows, 1.0), one_way[v][None, :])
        conditionals[v] = (1.0 - mix) * cond + mix * one_way[v][None, :]
    return TreeDensity(tuple(order), parent, one_way[0], conditionals)


def mutual_information(table: np.ndarray) -> float:
    """Mutual information of a non-negative 2-way table (0 for an empty table)."""
    total = table.sum()
    if total <= 0:
        return 0.0
    p = table / total
    outer = p.sum(axis=1, keepdims=True) * p.sum(axis=0, keepdims=True)
    nz = p > 0
    return float(np.sum(p[nz] * np.log(p[nz] / outer[nz])))


def tree_sampler(tree: TreeDensity) -> Sampler:
    def sample(size: int, rng: np.random.Generator) -> np.ndarray:
        out = np.zeros((size, len(tree.order)), dtype=np.int32)
        out[:, tree.order[0]] = rng.choice(tree.root.size, size=size, p=tree.root)
        for v in tree.order[1:]:
            cdf = np.cumsum(tree.conditionals[v], axis=1)
            cdf /= cdf[:, -1:]
            u = rng.uniform(size=(size, 1))
            out[:, v] = np.minimum((u > cdf[out[:, tree.parent[v]]]).sum(axis=1), cdf.shape[1] - 1)
        return out
    return sample


def draw_reduced_space(domain: Domain, m: int, sampler: Sampler | None, rng: np.random.Generator,
                       max_rounds: int = 20) -> np.ndarray:
    """Omega*: up to m distinct records (codes) drawn from a public density (``None``: uniform).

    Duplicates carry no information for the LP (they only duplicate a column), so draws are
    repeated until m distinct points are found or ``max_rounds`` rounds have passed. When the
    domain has at most m records, it is used whole.
    """
    if math.prod(domain.sizes) <= m:
        return whole_domain(domain)
    sampler = sampler or product_sampler([np.full(s, 1.0 / s) for s in domain.sizes])
    found = np.empty((0, domain.n_attributes), dtype=np.int32)
    for _ in range(max_rounds):
        stacked = np.concatenate([found, sampler(m - found.shape[0], rng)])
        _, first = np.unique(stacked, axis=0, return_index=True)
        found = stacked[np.sort(first)]  # keep draw order so the result does not depend on sorting
        if found.shape[0] >= m:
            break
    return found[:m]


def space_sampler(noisy_counts: np.ndarray, domain: Domain, marginals: tuple[Marginal, ...],
                  scale: float, space: "SpaceName") -> Sampler | None:
    """The public density Omega* is drawn from, computed from the noisy counts only."""
    if space == "uniform":
        return None
    one_way = noisy_one_way(noisy_counts, domain, marginals)
    if space == "noisy_tree" and domain.n_attributes > 1:
        return tree_sampler(noisy_tree(noisy_counts, domain, marginals, scale, one_way))
    return product_sampler(one_way)


def design_matrix(points: np.ndarray, domain: Domain, marginals: tuple[Marginal, ...]) -> sp.csc_matrix:
    """A (|F| x m, CSC): A[f, i] = 1 iff point i lies in cell f; exactly |W| ones per column."""
    offsets = cell_offsets(domain, marginals)
    rows = np.stack([offsets[j] + cell_index(points, domain, m) for j, m in enumerate(marginals)], axis=0)
    m = points.shape[0]
    cols = np.broadcast_to(np.arange(m), rows.shape)
    data = np.ones(rows.size)
    return sp.csc_matrix((data, (rows.ravel(), cols.ravel())), shape=(int(offsets[-1]), m))


class LPFailedError(RuntimeError):
    """The reweighting LP did not reach an optimal solution."""


def fit_lp(A: sp.spmatrix, y: np.ndarray, objective: Literal["l1", "linf"], time_limit_s: float = 300.0) -> np.ndarray:
    """Weights h on the simplex minimising ||A h - y||_1 or ||A h - y||_inf: an LP, solved by HiGHS.

    ``"linf"`` is [SF] (3.3): min t s.t. -t <= A h - y <= t, h >= 0, sum h = 1. ``"l1"`` replaces t
    by one slack per statistic. Solved in q = m h (variables O(1), not O(1/m)) against m y; the
    solution is clipped at 0 and renormalised. Only the noisy statistics y may be passed here.
    """
    n_rows, m = A.shape
    q = cp.Variable(m, nonneg=True)
    residual = A @ q - m * y
    constraints = [cp.sum(q) == m]
    if objective == "linf":
        t = cp.Variable(nonneg=True)
        constraints += [residual <= t, -residual <= t]
        problem = cp.Problem(cp.Minimize(t), constraints)
    elif objective == "l1":
        s = cp.Variable(n_rows, nonneg=True)
        constraints += [residual <= s, -residual <= s]
        problem = cp.Problem(cp.Minimize(cp.sum(s)), constraints)
    else:
        raise ValueError(f"objective must be 'l1' or 'linf', got {objective!r}")
    # Fixed options: the same y gives the same h. No thread count: HiGHS (highspy >= 1.16) keeps one
    # process-wide thread pool and refuses a different count once any solve (ours, cvxpy's or another
    # mechanism's in a served flow) has run, so setting one here broke later solves.
    problem.solve(solver=cp.HIGHS, time_limit=float(time_limit_s), random_seed=0)
    if problem.status != cp.OPTIMAL or q.value is None:
        raise LPFailedError(f"reweighting LP ended with status {problem.status!r} "
                            f"(|F|={n_rows}, m={m}, time_limit_s={time_limit_s}); "
                            "use objective='l2' or fewer points_per_statistic")
    return _clean_weights(np.asarray(q.value, dtype=np.float64))


def project_simplex(v: np.ndarray) -> np.ndarray:
    """Euclidean projection onto the probability simplex (Duchi et al. 2008)."""
    u = np.sort(v)[::-1]
    cumulative = np.cumsum(u) - 1.0
    ranks = np.arange(1, v.size + 1)
    r = ranks[u - cumulative / ranks > 0][-1]
    return np.maximum(v - cumulative[r - 1] / r, 0.0)


def spectral_norm_squared(A: sp.spmatrix, iterations: int = 50) -> float:
    """||A||_2^2 by power iteration on A^T A from the all-ones vector (deterministic).

    A is non-negative, so the all-ones start is not orthogonal to the Perron vector; the estimate
    approaches the true value from below, hence the 5% margin used by the caller.
    """
    x = np.ones(A.shape[1])
    value = 0.0
    for _ in range(iterations):
        x = A.T @ (A @ x)
        value = float(np.linalg.norm(x))
        x /= value
    return value


def fit_least_squares(A: sp.spmatrix, y: np.ndarray, iterations: int) -> np.ndarray:
    """Weights h on the simplex minimising ||A h - y||_2^2, by accelerated projected gradient (FISTA).

    A fixed number of iterations from the uniform h: deterministic, O(iterations * nnz(A)), and
    scales to m in the tens of thousands where the LPs do not (see the module notes). The
    objective never increases above its value at the uniform start (monotone restart).
    """
    A = sp.csr_matrix(A)
    At = sp.csr_matrix(A.T)
    step = 1.0 / (1.05 * spectral_norm_squared(A))
    m = A.shape[1]
    h = np.full(m, 1.0 / m)
    z, t = h.copy(), 1.0
    value = float(np.sum((A @ h - y) ** 2))
    for _ in range(iterations):
        candidate = project_simplex(z - step * (At @ (A @ z - y)))
        candidate_value = float(np.sum((A @ candidate - y) ** 2))
        t_next = (1.0 + math.sqrt(1.0 + 4.0 * t * t)) / 2.0
        if candidate_value > value:  # restart the momentum (O'Donoghue & Candes 2015)
            z, t = h.copy(), 1.0
            continue
        z = candidate + ((t - 1.0) / t_next) * (candidate - h)
        h, t, value = candidate, t_next, candidate_value
    return _clean_weights(h)


def _clean_weights(h: np.ndarray) -> np.ndarray:
    """Clip solver round-off (tiny negatives, relative dust below 1e-12) and renormalise."""
    h = np.clip(h, 0.0, None)
    h[h < 1e-12 * h.max()] = 0.0
    return h / h.sum()


def fit_weights(A: sp.spmatrix, y: np.ndarray, config: "Config") -> np.ndarray:
    """Dispatch to the configured objective."""
    if config.objective == "l2":
        return fit_least_squares(A, y, config.iterations)
    return fit_lp(A, y, config.objective, config.time_limit_s)


def fit_error(A: sp.spmatrix, h: np.ndarray, y: np.ndarray, objective: ObjectiveName) -> float:
    """The objective at h (a private-side diagnostic; never written to a public artifact)."""
    r = A @ h - y
    if objective == "l1":
        return float(np.abs(r).sum())
    if objective == "linf":
        return float(np.abs(r).max())
    return float(np.sum(r ** 2))


# ------------------------------------------------------------------------------------ run

def run(statistics: Statistics, domain: Domain, config: Config, noise: NoiseSource) -> Release:
    """The DP release: Omega* points (one-hot) weighted by the LP solution. Pure epsilon-DP."""
    marginals = tuple(statistics.marginals)
    if marginals != tuple(workload_marginals(domain, config.workload)):
        raise ValueError("statistics were collected for a different workload or domain")
    offsets = cell_offsets(domain, marginals)
    if statistics.counts.shape != (int(offsets[-1]),):
        raise ValueError("statistics do not match the workload's cell count")
    scale = laplace_scale(config.epsilon, list(marginals))
    noisy = noise.add_laplace(statistics.counts, scale)
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
