"""The reduced space (post-processing of the noisy counts): the total's estimate, the noisy 1-way
marginals and the Chow-Liu tree fitted to the noisy 2-way tables, the samplers that draw the space's
points from them, and the design matrix of the workload's statistics on those points.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from privsynth.mechanisms.reduced_space.config import Config, SpaceName
from privsynth.schema.encoding import Domain
from privsynth.schema.workload import Marginal, cell_index


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
                  scale: float, space: SpaceName) -> Sampler | None:
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


def cell_offsets(domain: Domain, marginals: tuple[Marginal, ...] | list[Marginal]) -> np.ndarray:
    """Start of each marginal's cells in the concatenated statistics vector (length |W| + 1)."""
    return np.concatenate([[0], np.cumsum([domain.size_of(m) for m in marginals])]).astype(np.int64)
