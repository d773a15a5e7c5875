"""The graphical model AIM fits to its noisy measurements (post-processing only).

A discrete Markov random field whose potentials live on the measured cliques (as in private-pgm /
mbi, McKenna et al. 2019): the structure (junction tree, its maximal cliques, and the model size in
MB that AIM caps) comes from ``mbi.junction_tree``; estimation, inference and sampling are numpy
code in this module. Why not mbi's own estimator (``mbi.estimation.MirrorDescent``): its jitted step
is compiled per set of measured cliques (on Adult, 1-way plus eight 3-way measurements: 11.5 s for
the first 100-iteration fit, 0.07 s for a second fit with the same cliques) and AIM changes that set
every round; and its out-of-model marginals (``MarkovRandomField.project``, variable elimination)
took about 1.3 s per 3-way query, while AIM scores several hundred candidates per round. The numpy code below
does the same mirror descent (Armijo line search, McKenna et al. 2019 Alg. 1), warm started across
rounds, and answers every candidate from one calibration per round.

Everything here reads only noisy measurements (DP outputs) and public structure: no private data.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

Clique = tuple[int, ...]


def _mbi():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from mbi import Domain, junction_tree
    return Domain, junction_tree


def mbi_model_size_mb(sizes: Sequence[int], cliques: Sequence[Clique]) -> float:
    """mbi's own ``hypothetical_model_size`` (networkx; about 5 ms a call): the reference for ``model_size_mb``."""
    Domain, junction_tree = _mbi()
    return float(junction_tree.hypothetical_model_size(Domain(tuple(range(len(sizes))), tuple(sizes)), list(cliques)))


def model_size_mb(sizes: Sequence[int], cliques: Sequence[Clique]) -> float:
    """The size in MB (8 bytes per cell) of the maximal cliques of the triangulation that mbi's greedy
    elimination order gives (``mbi.junction_tree.greedy_order``: eliminate the attribute whose
    neighbourhood has the fewest cells, ties to the lowest index). Same definition as mbi's
    ``hypothetical_model_size``, on adjacency bit masks: O(d^2) per call, fast enough to test every
    AIM candidate every round on wide tables."""
    d = len(sizes)
    cells: dict[int, int] = {}

    def size_of(mask: int) -> int:
        if mask not in cells:
            out, a, rest = 1, 0, mask
            while rest:
                if rest & 1:
                    out *= sizes[a]
                rest >>= 1
                a += 1
            cells[mask] = out
        return cells[mask]

    adjacent = [0] * d
    for c in cliques:
        mask = sum(1 << a for a in set(c))
        for a in set(c):
            adjacent[a] |= mask
    for a in range(d):
        adjacent[a] &= ~(1 << a)
    unmarked = list(range(d))
    order: list[int] = []
    later: list[int] = []                # the neighbours of each eliminated attribute when it went
    for _ in range(d):
        best, best_cost = -1, None
        for a in unmarked:
            cost = size_of(adjacent[a] | (1 << a))
            if best_cost is None or cost < best_cost:
                best, best_cost = a, cost
        bit, neighbours = 1 << best, adjacent[best]
        unmarked.remove(best)
        order.append(best)
        later.append(neighbours)
        rest = neighbours
        while rest:                      # eliminating ``best`` joins its neighbours pairwise
            low = rest & -rest
            b = low.bit_length() - 1
            adjacent[b] = (adjacent[b] | neighbours) & ~low & ~bit
            rest ^= low
    # The elimination order is perfect for the filled graph, so (Blair & Peyton 1993, Lemma 4.5) the
    # clique {v_i} + later(i) is maximal unless an attribute eliminated before, whose first later
    # neighbour is v_i, has exactly one more later neighbour.
    position = {v: i for i, v in enumerate(order)}
    maximal = [True] * d
    for j in range(d):
        if later[j]:
            first = min((b for b in range(d) if later[j] >> b & 1), key=position.__getitem__)
            i = position[first]
            if later[j].bit_count() == later[i].bit_count() + 1:
                maximal[i] = False
    return sum(size_of(later[i] | (1 << order[i])) for i in range(d) if maximal[i]) * 8 / 2**20


def maximal_subsets(cliques: Sequence[Clique]) -> list[Clique]:
    """The cliques not contained in another one (first occurrence order, duplicates dropped)."""
    unique = list(dict.fromkeys(tuple(sorted(c)) for c in cliques))
    return [c for c in unique if not any(set(c) < set(o) for o in unique)]


def downward_closure(cliques: Sequence[Clique]) -> set[Clique]:
    """Every non-empty subset of every clique (as sorted tuples)."""
    out: set[Clique] = set()
    for c in cliques:
        for r in range(1, len(c) + 1):
            out.update(itertools.combinations(sorted(c), r))
    return out


@dataclass(frozen=True)
class NoisyMarginal:
    """One Gaussian measurement: noisy counts of a marginal (shape = its attributes' sizes) and sigma.

    ``variance_scale`` (same shape, optional): cell i has variance sigma^2 * variance_scale[i], as a
    cell that sums several independently noised cells does (domain compression)."""

    clique: Clique
    values: np.ndarray
    sigma: float
    variance_scale: np.ndarray | None = None

    def total_variance(self) -> float:
        scale = self.values.size if self.variance_scale is None else float(self.variance_scale.sum())
        return self.sigma**2 * scale


def _lse(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    if not axes:
        return x
    mx = np.max(x, axis=axes, keepdims=True)
    mx = np.where(np.isfinite(mx), mx, 0.0)
    return np.squeeze(np.log(np.sum(np.exp(x - mx), axis=axes, keepdims=True)) + mx, axis=axes)


def _broadcast_shape(sub: Clique, full: Clique, sizes: Sequence[int]) -> tuple[int, ...]:
    return tuple(sizes[a] if a in sub else 1 for a in full)


def _sum_to(x: np.ndarray, full: Clique, sub: Clique) -> np.ndarray:
    """Marginal over ``sub`` (a subset of ``full``; both ascending) of a table over ``full``."""
    axes = tuple(i for i, a in enumerate(full) if a not in sub)
    return x.sum(axis=axes) if axes else x


class JunctionTree:
    """Maximal cliques of mbi's junction tree over the model cliques, joined into one tree (components
    are linked by empty separators), rooted at clique 0, with the host clique of every model clique."""

    def __init__(self, sizes: Sequence[int], model_cliques: Sequence[Clique]) -> None:
        Domain, junction_tree = _mbi()
        self.sizes = tuple(int(s) for s in sizes)
        d = len(self.sizes)
        cliques = list(model_cliques) + [(a,) for a in range(d) if not any(a in c for c in model_cliques)]
        graph, _ = junction_tree.make_junction_tree(Domain(tuple(range(d)), self.sizes), cliques)
        nodes = sorted(tuple(sorted(n)) for n in graph.nodes)
        index = {n: i for i, n in enumerate(nodes)}
        adjacency: list[list[int]] = [[] for _ in nodes]
        for u, v in graph.edges:
            i, j = index[tuple(sorted(u))], index[tuple(sorted(v))]
            adjacency[i].append(j)
            adjacency[j].append(i)
        # Link the components (a spanning forest when cliques share no attribute) by empty separators.
        seen: set[int] = set()
        roots: list[int] = []
        for start in range(len(nodes)):
            if start in seen:
                continue
            roots.append(start)
            queue = deque([start])
            seen.add(start)
            while queue:
                u = queue.popleft()
                for v in adjacency[u]:
                    if v not in seen:
                        seen.add(v)
                        queue.append(v)
        for a, b in zip(roots, roots[1:]):
            adjacency[a].append(b)
            adjacency[b].append(a)
        self.cliques: list[Clique] = nodes
        self.adjacency = adjacency
        self.parent: list[int] = [-1] * len(nodes)
        self.order: list[int] = []           # BFS from the root: parents before children
        queue = deque([0])
        visited = {0}
        while queue:
            u = queue.popleft()
            self.order.append(u)
            for v in adjacency[u]:
                if v not in visited:
                    visited.add(v)
                    self.parent[v] = u
                    queue.append(v)
        self.children: list[list[int]] = [[] for _ in nodes]
        for v in self.order[1:]:
            self.children[self.parent[v]].append(v)
        self.separator: list[Clique] = [
            () if self.parent[v] < 0 else tuple(a for a in nodes[v] if a in nodes[self.parent[v]]) for v in range(len(nodes))]

    def host(self, clique: Clique) -> int:
        """A maximal clique containing ``clique``, or -1."""
        s = set(clique)
        for i, c in enumerate(self.cliques):
            if s <= set(c):
                return i
        return -1

    def shape(self, i: int) -> tuple[int, ...]:
        return tuple(self.sizes[a] for a in self.cliques[i])


class GraphicalModel:
    """Potentials on the model cliques (maximal measured cliques), calibrated on a junction tree.

    ``beliefs[i]`` is the marginal over maximal clique i scaled to ``total``.
    """

    def __init__(self, sizes: Sequence[int], model_cliques: Sequence[Clique], total: float,
                 potentials: dict[Clique, np.ndarray] | None = None) -> None:
        self.sizes = tuple(int(s) for s in sizes)
        self.model_cliques = maximal_subsets(model_cliques)
        self.total = float(total)
        self.tree = JunctionTree(self.sizes, self.model_cliques)
        self.hosts = {c: self.tree.host(c) for c in self.model_cliques}
        self.potentials = {c: np.zeros(tuple(self.sizes[a] for a in c)) for c in self.model_cliques}
        if potentials:
            self._warm_start(potentials)
        self.beliefs = self._calibrate(self.potentials)

    def _warm_start(self, old: dict[Clique, np.ndarray]) -> None:
        """Carry old potentials over: each old clique is added into a model clique that contains it."""
        for c_old, theta in old.items():
            target = next((c for c in self.model_cliques if set(c_old) <= set(c)), None)
            if target is None:
                continue
            self.potentials[target] = self.potentials[target] + theta.reshape(_broadcast_shape(c_old, target, self.sizes))

    # ---------------------------------------------------------------- inference

    def _calibrate(self, potentials: dict[Clique, np.ndarray]) -> list[np.ndarray]:
        """Beliefs of every maximal clique (Shafer-Shenoy sum-product on the junction tree, in
        probability space: each clique's potential is exponentiated once, shifted by its maximum,
        and messages are rescaled to a maximum of 1; beliefs are normalised per clique). Falls back to
        log space if a belief underflows."""
        tree = self.tree
        log_psi = [np.zeros(tree.shape(i)) for i in range(len(tree.cliques))]
        for c, theta in potentials.items():
            h = self.hosts[c]
            log_psi[h] = log_psi[h] + theta.reshape(_broadcast_shape(c, tree.cliques[h], self.sizes))
        psi = [np.exp(lp - lp.max()) for lp in log_psi]
        up: dict[int, np.ndarray] = {}
        for v in reversed(tree.order[1:]):
            b = psi[v]
            for ch in tree.children[v]:
                b = b * up[ch]
            up[v] = self._sum_message(b, v, tree.parent[v])
        down: dict[int, np.ndarray] = {}
        beliefs: list[np.ndarray] = [None] * len(tree.cliques)  # type: ignore[list-item]
        for v in tree.order:
            base = psi[v] * down[v] if v in down else psi[v]
            kids = tree.children[v]
            # Each child's message leaves its own upward message out: prefix and suffix products of the
            # children's messages give all of them in 3k products instead of k^2.
            prefix = [base]
            for ch in kids:
                prefix.append(prefix[-1] * up[ch])
            suffix = None
            for i in range(len(kids) - 1, -1, -1):
                b = prefix[i] if suffix is None else prefix[i] * suffix
                down[kids[i]] = self._sum_message(b, v, kids[i])
                suffix = up[kids[i]] if suffix is None else suffix * up[kids[i]]
            beliefs[v] = prefix[-1]
        out = []
        for b in beliefs:
            z = b.sum()
            if not (np.isfinite(z) and z > 0):
                return self._calibrate_log(log_psi)
            out.append(b * (self.total / z))
        return out

    def _sum_message(self, b: np.ndarray, src: int, dst: int) -> np.ndarray:
        cs, cd = self.tree.cliques[src], self.tree.cliques[dst]
        axes = tuple(i for i, a in enumerate(cs) if a not in cd)
        sep = tuple(a for a in cs if a in cd)
        m = b.sum(axis=axes) if axes else b
        top = m.max()
        m = m / top if top > 0 else m
        return m.reshape(_broadcast_shape(sep, cd, self.sizes))

    def _calibrate_log(self, log_psi: list[np.ndarray]) -> list[np.ndarray]:
        """The same sum-product in log space (slower; used when probability space underflows)."""
        tree = self.tree
        up: dict[int, np.ndarray] = {}
        for v in reversed(tree.order[1:]):
            b = log_psi[v]
            for ch in tree.children[v]:
                b = b + up[ch]
            up[v] = self._message(b, v, tree.parent[v])
        full: list[np.ndarray] = [None] * len(tree.cliques)  # type: ignore[list-item]
        down: dict[int, np.ndarray] = {}
        for v in tree.order:
            b = log_psi[v] + (down[v] if v in down else 0.0)
            for ch in tree.children[v]:
                b = b + up[ch]
            full[v] = b
            for ch in tree.children[v]:
                down[ch] = self._message(b - up[ch], v, ch)
        out = []
        for b in full:
            log_z = float(_lse(b, tuple(range(b.ndim))))
            out.append(np.exp(b - log_z) * self.total)
        return out

    def _message(self, b: np.ndarray, src: int, dst: int) -> np.ndarray:
        cs, cd = self.tree.cliques[src], self.tree.cliques[dst]
        axes = tuple(i for i, a in enumerate(cs) if a not in cd)
        sep = tuple(a for a in cs if a in cd)
        return _lse(b, axes).reshape(_broadcast_shape(sep, cd, self.sizes))

    def clique_marginal(self, clique: Clique) -> np.ndarray | None:
        """The model's marginal over ``clique`` if one maximal clique holds it, else None."""
        h = self.tree.host(clique)
        if h < 0:
            return None
        return _sum_to(self.beliefs[h], self.tree.cliques[h], clique)

    def marginal(self, clique: Clique) -> np.ndarray:
        """The model's marginal over any clique (ascending attributes), scaled to ``total``: inside one
        maximal clique by summation, otherwise by summing out the junction tree's conditionals over
        the smallest subtree that covers the clique."""
        clique = tuple(sorted(clique))
        direct = self.clique_marginal(clique)
        if direct is not None:
            return direct
        tree = self.tree
        nodes = self._steiner(clique)
        root = nodes[0]
        node_set = set(nodes)
        # Parent of each subtree node on its path to ``root``.
        parent = {root: -1}
        queue = deque([root])
        while queue:
            u = queue.popleft()
            for v in tree.adjacency[u]:
                if v in node_set and v not in parent:
                    parent[v] = u
                    queue.append(v)
        operands = [(self._conditional(v, parent[v]), tree.cliques[v]) for v in nodes]
        # Sum out attributes used by one operand only and not asked for (they integrate to the same
        # value whatever the rest is), then contract the rest with einsum.
        counts: dict[int, int] = {}
        for _, attrs in operands:
            for a in attrs:
                counts[a] = counts.get(a, 0) + 1
        reduced = []
        for table, attrs in operands:
            keep = tuple(a for a in attrs if a in clique or counts[a] > 1)
            reduced.append((_sum_to(table, attrs, keep), keep))
        # einsum names its axes with 52 letters: relabel the attributes involved 0, 1, ... first.
        label = {a: i for i, a in enumerate(sorted({a for _, attrs in reduced for a in attrs}))}
        args: list = []
        for table, attrs in reduced:
            args += [table, [label[a] for a in attrs]]
        # A contraction path pays off from three operands on; for two, numpy's path search is pure overhead.
        out = np.einsum(*args, [label[a] for a in clique], optimize="greedy" if len(reduced) > 2 else False)
        return out * self.total

    def _conditional(self, v: int, parent: int) -> np.ndarray:
        """P(clique v) if parent < 0, else P(clique v | separator with parent), cached per calibration."""
        if getattr(self, "_cache_of", None) is not self.beliefs:
            self._cache_of = self.beliefs
            self._cache: dict[tuple[int, int], np.ndarray] = {}
        key = (v, parent)
        if key not in self._cache:
            attrs = self.tree.cliques[v]
            belief = self.beliefs[v] / self.total
            if parent >= 0:
                sep = tuple(a for a in attrs if a in self.tree.cliques[parent])
                denom = _sum_to(belief, attrs, sep).reshape(_broadcast_shape(sep, attrs, self.sizes))
                belief = np.divide(belief, denom, out=np.zeros_like(belief), where=denom > 0)
            self._cache[key] = belief
        return self._cache[key]

    def _steiner(self, clique: Clique) -> list[int]:
        """Nodes of a small subtree of the junction tree whose cliques cover ``clique``."""
        tree = self.tree
        holders = {a: [i for i, c in enumerate(tree.cliques) if a in c] for a in clique}
        chosen = [holders[clique[0]][0]]
        for a in clique[1:]:
            if any(a in tree.cliques[i] for i in chosen):
                continue
            # BFS from the current subtree to the nearest clique holding a; add the path.
            prev = {i: -1 for i in chosen}
            queue = deque(chosen)
            found = -1
            while queue:
                u = queue.popleft()
                if a in tree.cliques[u]:
                    found = u
                    break
                for v in tree.adjacency[u]:
                    if v not in prev:
                        prev[v] = u
                        queue.append(v)
            while found >= 0 and found not in chosen:
                chosen.append(found)
                found = prev[found]
        return chosen

    # ---------------------------------------------------------------- estimation

    def fit(self, measurements: Sequence[NoisyMarginal], iterations: int, alpha: float | None = None,
            tolerance: float = 0.0) -> float:
        """Mirror descent on L(mu) = sum_m ||mu_m - y_m||^2 / (2 sigma_m^2) over the marginal polytope
        (McKenna et al. 2019, Alg. 1, Armijo line search), from the current potentials, for at most
        ``iterations`` steps; with ``tolerance`` > 0 it stops once the loss falls by less than that
        fraction over 25 steps. Returns the final step size (to warm start the next fit)."""
        hosts = {}
        for m in measurements:
            hosts[m.clique] = next(c for c in self.model_cliques if set(m.clique) <= set(c))
        if alpha is None:
            lip = {}
            for m in measurements:
                c = hosts[m.clique]
                lip[c] = lip.get(c, 0.0) + (math.prod(self.sizes[a] for a in c) / m.values.size) / m.sigma**2
            alpha = 2.0 / (max(lip.values()) * self.total)
        theta = self.potentials
        mu = self._model_marginals(self.beliefs)
        loss, grad = self._loss_and_grad(mu, measurements, hosts)
        checkpoint = loss
        for step in range(1, iterations + 1):
            theta2 = {c: theta[c] - alpha * grad[c] for c in theta}
            beliefs2 = self._calibrate(theta2)
            mu2 = self._model_marginals(beliefs2)
            loss2, grad2 = self._loss_and_grad(mu2, measurements, hosts)
            decrease = sum(float(np.vdot(grad[c], mu[c] - mu2[c])) for c in theta)
            if loss - loss2 >= 0.5 * alpha * decrease:
                theta, mu, loss, grad, self.beliefs = theta2, mu2, loss2, grad2, beliefs2
                alpha *= 1.01
            else:
                alpha *= 0.5
            if tolerance > 0 and step % 25 == 0:
                if checkpoint - loss <= tolerance * abs(loss):
                    break
                checkpoint = loss
        self.potentials = theta
        return alpha

    def _model_marginals(self, beliefs: list[np.ndarray]) -> dict[Clique, np.ndarray]:
        return {c: _sum_to(beliefs[self.hosts[c]], self.tree.cliques[self.hosts[c]], c) for c in self.model_cliques}

    def _loss_and_grad(self, mu: dict[Clique, np.ndarray], measurements: Sequence[NoisyMarginal],
                       hosts: dict[Clique, Clique]) -> tuple[float, dict[Clique, np.ndarray]]:
        grad = {c: np.zeros_like(v) for c, v in mu.items()}
        loss = 0.0
        for m in measurements:
            c = hosts[m.clique]
            variance = m.sigma**2 if m.variance_scale is None else m.sigma**2 * m.variance_scale
            diff = (_sum_to(mu[c], c, m.clique) - m.values) / variance
            loss += 0.5 * float(np.vdot(diff, diff * variance))
            grad[c] = grad[c] + diff.reshape(_broadcast_shape(m.clique, c, self.sizes))
        return loss, grad

    # ---------------------------------------------------------------- sampling

    def sample(self, rows: int, rng: np.random.Generator) -> np.ndarray:
        """``rows`` records (rows x d level codes) drawn through the junction tree, each clique's new
        attributes given its separator by systematic sampling within each separator cell (counts
        within one of their expectation, as mbi's "round" method), records shuffled first."""
        tree = self.tree
        d = len(self.sizes)
        codes = np.zeros((rows, d), dtype=np.int64)
        for v in tree.order:
            attrs = tree.cliques[v]
            sep = tree.separator[v]
            new = tuple(a for a in attrs if a not in sep)
            if not new:
                continue
            table = self.beliefs[v] / self.total
            # (separator cells) x (new-attribute cells), rows are conditionals.
            perm = [attrs.index(a) for a in sep] + [attrs.index(a) for a in new]
            n_sep = math.prod(self.sizes[a] for a in sep)
            n_new = math.prod(self.sizes[a] for a in new)
            cond = np.transpose(table, perm).reshape(n_sep, n_new)
            sums = cond.sum(axis=1, keepdims=True)
            cond = np.where(sums > 0, cond / np.where(sums > 0, sums, 1.0), 1.0 / n_new)
            cdf = np.cumsum(cond, axis=1)
            cdf[:, -1] = 1.0
            s_idx = (np.ravel_multi_index(tuple(codes[:, a] for a in sep), tuple(self.sizes[a] for a in sep))
                     if sep else np.zeros(rows, dtype=np.int64))
            order = rng.permutation(rows)
            order = order[np.argsort(s_idx[order], kind="stable")]
            s_sorted = s_idx[order]
            starts = np.r_[0, np.flatnonzero(np.diff(s_sorted)) + 1]
            group_size = np.diff(np.r_[starts, rows])
            rank = np.arange(rows) - np.repeat(starts, group_size)
            offset = rng.uniform(size=starts.size)
            position = (np.repeat(offset, group_size) + rank) / np.repeat(group_size, group_size)
            flat = (cdf + np.arange(n_sep)[:, None]).ravel()
            pick = np.searchsorted(flat, s_sorted + position, side="right") - s_sorted * n_new
            pick = np.clip(pick, 0, n_new - 1)
            unravelled = np.unravel_index(pick, tuple(self.sizes[a] for a in new))
            for a, col in zip(new, unravelled):
                codes[order, a] = col
        return codes
