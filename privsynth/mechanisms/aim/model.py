"""The graphical model AIM fits to its noisy measurements (post-processing only).

A discrete Markov random field whose potentials live on the measured cliques (as in private-pgm /
mbi, McKenna et al. 2019): the structure (junction tree, its maximal cliques, and the model size in
MB that AIM caps) is mbi's triangulation (``junction.py``); estimation and sampling are numpy code in
this module, inference on many marginals at once in ``inference.py``. Why not mbi's own estimator
(``mbi.estimation.MirrorDescent``): its jitted step is compiled per set of measured cliques (on Adult, 1-way plus eight
3-way measurements: 11.5 s for the first 100-iteration fit, 0.07 s for a second fit with the same cliques) and AIM
changes that set every round; and its out-of-model marginals (``MarkovRandomField.project``, variable elimination)
took about 1.3 s per 3-way query, while AIM scores several hundred candidates per round. The numpy code below
does the same mirror descent (Armijo line search, McKenna et al. 2019 Alg. 1), warm started across
rounds, and answers every candidate from one calibration per round.

Everything here reads only noisy measurements (DP outputs) and public structure: no private data.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from privsynth.mechanisms.aim.inference import Marginals
from privsynth.mechanisms.aim.junction import (  # noqa: F401  (model_size_mb: re-exported)
    JunctionTree,
    junction_tree,
    model_size_mb,
)
from privsynth.mechanisms.aim.tables import broadcast_shape, combine, sum_axes, sum_to

Clique = tuple[int, ...]


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

    def cell_scales(self) -> np.ndarray:
        """Each cell's variance in units of sigma^2 (all 1 where no ``variance_scale`` is given)."""
        if self.variance_scale is None:
            return np.ones(self.values.shape)
        return np.asarray(self.variance_scale, dtype=np.float64)

    def total_variance(self) -> float:
        scale = self.values.size if self.variance_scale is None else float(self.variance_scale.sum())
        return self.sigma**2 * scale


def _lse(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    if not axes:
        return x
    mx = np.max(x, axis=axes, keepdims=True)
    mx = np.where(np.isfinite(mx), mx, 0.0)
    return np.squeeze(np.log(np.sum(np.exp(x - mx), axis=axes, keepdims=True)) + mx, axis=axes)


def _scaled(message: np.ndarray) -> np.ndarray:
    """A message divided by its maximum (messages are only defined up to a factor)."""
    top = message.max()
    return message / top if top > 0 else message


class GraphicalModel:
    """Potentials on the model cliques (maximal measured cliques), calibrated on a junction tree.

    ``beliefs[i]`` is the marginal over maximal clique i scaled to ``total``.
    """

    def __init__(self, sizes: Sequence[int], model_cliques: Sequence[Clique], total: float,
                 potentials: dict[Clique, np.ndarray] | None = None) -> None:
        self.sizes = tuple(int(s) for s in sizes)
        self.model_cliques = maximal_subsets(model_cliques)
        self.total = float(total)
        self.tree = junction_tree(self.sizes, self.model_cliques)
        self.hosts = {c: self.tree.smallest_host(c) for c in self.model_cliques}
        self._hosted: list[list[Clique]] = [[] for _ in self.tree.cliques]
        for c, h in self.hosts.items():
            self._hosted[h].append(c)
        self._marginals: Marginals | None = None
        self._marginals_of: list[np.ndarray] | None = None
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
            self.potentials[target] = self.potentials[target] + theta.reshape(broadcast_shape(c_old, target,
                                                                                              self.sizes))

    # ---------------------------------------------------------------- inference

    def _log_potentials(self, potentials: dict[Clique, np.ndarray]) -> list[np.ndarray]:
        """Per maximal clique of the tree, the sum of the potentials of the model cliques it hosts."""
        out = []
        for h, hosted in enumerate(self._hosted):
            lp = np.zeros(self.tree.shape(h))
            for c in hosted:
                np.add(lp, potentials[c].reshape(broadcast_shape(c, self.tree.cliques[h], self.sizes)), out=lp)
            out.append(lp)
        return out

    def _clique_tables(self, potentials: dict[Clique, np.ndarray]) -> list[np.ndarray]:
        """Per maximal clique, exp of the potentials it hosts, each shifted by its own maximum, as a
        product of small exponentials (``combine``) rather than one exponential of the whole table:
        numpy's float64 exp costs about 10 ns a cell here, a broadcast product about 2."""
        out = []
        for h, hosted in enumerate(self._hosted):
            full = self.tree.cliques[h]
            parts = []
            for c in hosted:
                theta = potentials[c]
                parts.append((np.exp(theta - theta.max()), c))
            if not parts:
                out.append(np.ones(self.tree.shape(h)))
                continue
            table, attrs = combine(parts, self.sizes)
            if attrs != full or len(parts) == 1:
                grown = np.empty(self.tree.shape(h))
                grown[...] = table.reshape(broadcast_shape(attrs, full, self.sizes))
                table = grown
            out.append(table)
        return out

    def _calibrate(self, potentials: dict[Clique, np.ndarray]) -> list[np.ndarray]:
        """Beliefs of every maximal clique, scaled to ``total`` (Hugin sum-product on the junction tree,
        in probability space: each clique's table is the product of its potentials' exponentials, each
        shifted by its maximum). Upwards, each clique multiplies in its children's messages (rescaled to
        a maximum of 1) and sends its separator sums up; downwards, a child's belief is its table times
        (parent belief on the separator) / (the sums it sent), which touches each clique table twice
        instead of once per child and scales it as its parent. Falls back to log space on underflow."""
        tree = self.tree
        table = self._clique_tables(potentials)
        up: dict[int, np.ndarray] = {}
        sent: dict[int, np.ndarray] = {}
        for v in reversed(tree.order):
            for ch in tree.children[v]:
                np.multiply(table[v], up[ch], out=table[v])
            if tree.parent[v] >= 0:
                keep, shape = tree.messages[v]
                sent[v] = sum_axes(table[v], keep)
                up[v] = _scaled(sent[v]).reshape(shape)
        root = tree.order[0]
        z = float(table[root].sum())
        if not (math.isfinite(z) and z > 0):
            return self._calibrate_log(self._log_potentials(potentials))
        table[root] *= self.total / z
        # Parents before children: a child's belief is its table times (parent belief on the separator) /
        # (the separator sums it sent, unscaled), which also scales it to ``total``; a separator cell
        # that underflowed to 0 on the child's side while the parent holds mass there would lose that
        # mass, so the sum is checked on the separator and the log-space pass takes over if it is off.
        for v in tree.order[1:]:
            keep, shape = tree.down_messages[v]
            parent_side = sum_axes(table[tree.parent[v]], keep)
            ratio = np.divide(parent_side, sent[v], out=np.zeros_like(parent_side), where=sent[v] > 0)
            if abs(float(np.vdot(ratio, sent[v])) - self.total) > 1e-9 * self.total:
                return self._calibrate_log(self._log_potentials(potentials))
            np.multiply(table[v], ratio.reshape(shape), out=table[v])
        return table

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
        return _lse(b, axes).reshape(broadcast_shape(sep, cd, self.sizes))

    def marginals(self) -> Marginals:
        """Answers to marginal queries on the current calibration (cached reductions, see ``inference.py``)."""
        if self._marginals is None or self._marginals_of is not self.beliefs:
            self._marginals = Marginals(self.tree, self.beliefs, self.total)
            self._marginals_of = self.beliefs
        return self._marginals

    def marginal(self, clique: Clique) -> np.ndarray:
        """The model's marginal over any clique (ascending attributes), scaled to ``total``."""
        return self.marginals().marginal(tuple(sorted(clique)))

    # ---------------------------------------------------------------- estimation

    def fit(self, measurements: Sequence[NoisyMarginal], iterations: int, alpha: float | None = None,
            tolerance: float = 0.0) -> float:
        """Mirror descent on L(mu) = sum_m ||mu_m - y_m||^2 / (2 sigma_m^2) over the marginal polytope
        (McKenna et al. 2019, Alg. 1, Armijo line search), from the current potentials, for at most
        ``iterations`` steps; with ``tolerance`` > 0 it stops once the loss falls by less than that
        fraction over 25 steps. Returns the final step size (to warm start the next fit).

        A warm start never starts below the step the measurements' curvature allows (2 / (L n)): a fit that
        ran to its floating-point floor halved its step on every rejected try (to 1e-17 in 1,000 steps),
        and a next fit started there could not move (measured: aim with 1,000 iterations per round kept
        re-selecting one marginal its model never learnt, 3-way error that of independent columns)."""
        hosts = {}
        for m in measurements:
            hosts[m.clique] = next(c for c in self.model_cliques if set(m.clique) <= set(c))
        objective = self._objective(measurements, hosts)
        lip: dict[Clique, float] = {}
        for m in measurements:
            c = hosts[m.clique]
            lip[c] = lip.get(c, 0.0) + (math.prod(self.sizes[a] for a in c) / m.values.size) / m.sigma**2
        curvature_step = 2.0 / (max(lip.values()) * self.total)
        alpha = curvature_step if alpha is None else max(alpha, curvature_step)
        theta = self.potentials
        mu = self._model_marginals(self.beliefs)
        loss, grad = self._loss_and_grad(mu, objective)
        checkpoint = loss
        for step in range(1, iterations + 1):
            theta2 = {c: theta[c] - alpha * grad[c] for c in theta}
            beliefs2 = self._calibrate(theta2)
            mu2 = self._model_marginals(beliefs2)
            loss2, grad2 = self._loss_and_grad(mu2, objective)
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
        # One BLAS pass per model clique straight to its (small) marginal: cheaper than sharing
        # intermediate tables, whose extra passes cost more than they save here.
        return {c: sum_to(beliefs[self.hosts[c]], self.tree.cliques[self.hosts[c]], c) for c in self.model_cliques}

    def _objective(self, measurements: Sequence[NoisyMarginal], hosts: dict[Clique, Clique]) -> tuple[list, float]:
        """The loss as one weighted square per measured clique: measurements of the same clique merge
        into their precision-weighted mean (sum_i w_i (x - y_i)^2 = W (x - Y)^2 + constant, W = sum w_i,
        Y = sum w_i y_i / W), with the constant kept so the loss is the same number. Each term: its
        model clique, the axes of it to keep, its broadcast shape there, W and Y."""
        merged: dict[Clique, list] = {}
        constant = 0.0
        for m in measurements:
            w = 1.0 / (m.sigma**2 if m.variance_scale is None else m.sigma**2 * m.variance_scale)
            w = np.broadcast_to(w, m.values.shape)
            acc = merged.setdefault(m.clique, [np.zeros(m.values.shape), np.zeros(m.values.shape)])
            acc[0] = acc[0] + w
            acc[1] = acc[1] + w * m.values
            constant += 0.5 * float(np.vdot(w * m.values, m.values))
        terms = []
        for r, (w, wy) in merged.items():
            c = hosts[r]
            y = wy / w
            constant -= 0.5 * float(np.vdot(w * y, y))
            terms.append((c, tuple(a in set(r) for a in c), broadcast_shape(r, c, self.sizes), w, y, len(r) == len(c)))
        terms.sort(key=lambda t: not t[5])          # a term over the whole model clique first: no broadcast copy
        return terms, constant

    def _loss_and_grad(self, mu: dict[Clique, np.ndarray],
                       objective: tuple[list, float]) -> tuple[float, dict[Clique, np.ndarray]]:
        terms, loss = objective
        grad: dict[Clique, np.ndarray] = {}
        for c, keep, shape, w, y, whole in terms:
            diff = (mu[c] if whole else sum_axes(mu[c], keep)) - y
            weighted = w * diff
            loss += 0.5 * float(np.vdot(weighted, diff))
            if c not in grad:
                grad[c] = weighted if whole else np.broadcast_to(weighted.reshape(shape), mu[c].shape).copy()
            else:
                grad[c] += weighted.reshape(shape)
        for c in mu:                                  # a model clique no measurement lies in (tests build such)
            if c not in grad:
                grad[c] = np.zeros_like(mu[c])
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
