"""Marginals of a calibrated junction-tree model, many at a time (post-processing: no data is read).

AIM scores every candidate of a round against the model's estimate of that marginal. All of them are
answered from one calibration (the clique beliefs), sharing work:

* a candidate inside a maximal clique is a marginal of that clique's belief; every reduction of a
  clique is cached for the round, and each new one is summed from the smallest cached table that
  holds it (candidates are asked for largest first, so a 2-way marginal is summed from a 3-way one
  already there, not from the whole clique);
* any other candidate is read off the smallest connected set of cliques that covers it, with the
  tree rooted once: P(r) = sum over the rest of P(C_top) prod_v P(C_v | S_v), where S_v is the
  separator of v with its parent. Each factor is first reduced to the attributes that factor shares
  with the others or with r (a cached reduction of the clique's belief over that set, divided by its
  separator marginal), and the factors are then multiplied and summed leaves first, so only tables
  of separator and candidate size are multiplied.

The answers are exact (up to rounding): the same numbers as a contraction of the whole joint.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from privsynth.mechanisms.aim.tables import Attrs, broadcast_shape, cells, contract, smallest_superset, sum_to


@dataclass(frozen=True)
class Plan:
    """How to read one marginal: from one clique (``host`` >= 0), or from ``nodes`` (leaves first, the
    top last) with the attributes ``keep`` each factor is reduced to; ``work`` bounds the cells of the
    largest table the contraction builds."""

    host: int
    nodes: tuple[int, ...] = ()
    keep: tuple[Attrs, ...] = ()
    work: int = 0


class Marginals:
    """Marginals of one calibration: ``tree`` (a ``model.JunctionTree``), ``beliefs`` (per maximal
    clique, scaled to ``total``)."""

    def __init__(self, tree, beliefs: list[np.ndarray], total: float) -> None:
        self.tree = tree
        self.sizes = tree.sizes
        self.total = float(total)
        self._reduced: list[dict[Attrs, np.ndarray]] = [{c: b} for c, b in zip(tree.cliques, beliefs)]
        self._depth = {v: i for i, v in enumerate(tree.order)}
        self._plans: dict[Attrs, Plan] = tree.plans
        self._conditionals: dict[tuple[int, Attrs], np.ndarray] = {}

    # ---------------------------------------------------------------- planning (structure only)

    def plan(self, r: Attrs) -> Plan:
        r = tuple(sorted(r))
        if r not in self._plans:
            host = self.tree.smallest_host(r)
            self._plans[r] = Plan(host) if host >= 0 else self._tree_plan(r)
        return self._plans[r]

    def _tree_plan(self, r: Attrs) -> Plan:
        tree = self.tree
        nodes = self._steiner(r)
        top = min(nodes, key=self._depth.__getitem__)
        inside = set(nodes)
        kids = {v: [w for w in tree.children[v] if w in inside] for v in nodes}
        order = sorted(nodes, key=self._depth.__getitem__, reverse=True)    # leaves first, top last
        wanted = set(r)
        keep, below, work = [], {}, 0
        for v in order:
            clique = set(tree.cliques[v])
            k = (clique & wanted) | (set(tree.separator[v]) if v != top else set())
            for w in kids[v]:
                k |= set(tree.separator[w])
            k_attrs = tuple(sorted(k))
            keep.append(k_attrs)
            carried = set().union(*(below[w] for w in kids[v])) if kids[v] else set()
            work = max(work, cells(tuple(k | carried), self.sizes))
            below[v] = (carried | (clique & wanted))
        return Plan(-1, tuple(order), tuple(keep), work)

    def _steiner(self, clique: Attrs) -> list[int]:
        """Nodes of a small connected subtree whose cliques cover ``clique``: the paths from each
        attribute's topmost holder up to their lowest common ancestor, then leaves pruned while a
        neighbour in the subtree holds every attribute of ``clique`` that the leaf holds."""
        tree = self.tree
        tops = [tree.top_holder[a] for a in clique]
        lca = tops[0]
        for t in tops[1:]:
            lca = tree.common_ancestor(lca, t)
        nodes = {lca}
        for t in tops:
            while t not in nodes:
                nodes.add(t)
                t = tree.parent[t]
        wanted = set(clique)
        pruned = True
        while pruned and len(nodes) > 1:
            pruned = False
            for v in list(nodes):
                near = [w for w in tree.adjacency[v] if w in nodes]
                if len(near) == 1 and (wanted & set(tree.cliques[v])) <= set(tree.cliques[near[0]]):
                    nodes.discard(v)
                    pruned = True
        return list(nodes)

    # ---------------------------------------------------------------- answers

    def reduced(self, v: int, keep: Attrs) -> np.ndarray:
        """The belief of clique ``v`` summed to ``keep`` (cached; summed from the smallest cached superset)."""
        cache = self._reduced[v]
        table = cache.get(keep)
        if table is None:
            source = smallest_superset(cache, keep)
            table = cache[keep] = sum_to(cache[source], source, keep)
        return table

    def conditional(self, v: int, keep: Attrs) -> np.ndarray:
        """P(keep | separator of v with its parent), times nothing: the reduced belief divided by its
        separator marginal (0 where that is 0); cached."""
        key = (v, keep)
        table = self._conditionals.get(key)
        if table is None:
            sep = self.tree.separator[v]
            table = self.reduced(v, keep)
            denominator = self.reduced(v, sep).reshape(broadcast_shape(sep, keep, self.sizes))
            table = self._conditionals[key] = np.divide(table, denominator, out=np.zeros_like(table),
                                                        where=denominator > 0)
        return table

    def marginal(self, r: Attrs) -> np.ndarray:
        """The model's marginal over ``r`` (ascending attributes), scaled to ``total``."""
        r = tuple(sorted(r))
        plan = self.plan(r)
        if plan.host >= 0:
            return self.reduced(plan.host, r)
        tree = self.tree
        messages: dict[int, tuple[np.ndarray, Attrs]] = {}
        wanted = set(r)
        top = plan.nodes[-1]
        for v, keep in zip(plan.nodes, plan.keep):
            factor = (self.reduced(v, keep) if v == top else self.conditional(v, keep), keep)
            out = wanted | (set(tree.separator[v]) if v != top else set())
            pending = [messages.pop(w) for w in tree.children[v] if w in messages]
            for i, message in enumerate(pending):
                later = set().union(*(set(m[1]) for m in pending[i + 1:])) if i + 1 < len(pending) else set()
                factor = contract(factor, message, out | later)
            table, attrs = factor
            target = tuple(a for a in attrs if a in out)
            messages[v] = (sum_to(table, attrs, target), target)
        table, attrs = messages[top]
        return sum_to(table, attrs, r)

    def many(self, queries: list[Attrs]) -> dict[Attrs, np.ndarray]:
        """Every query's marginal. The clique reductions they need are made first, largest first, so
        that each is summed from the smallest table already made."""
        wanted: dict[int, set[Attrs]] = {}
        for r in queries:
            plan = self.plan(r)
            if plan.host >= 0:
                wanted.setdefault(plan.host, set()).add(tuple(sorted(r)))
                continue
            top = plan.nodes[-1]
            for v, keep in zip(plan.nodes, plan.keep):
                wanted.setdefault(v, set()).add(keep)
                if v != top:
                    wanted[v].add(self.tree.separator[v])
        for v, keeps in wanted.items():
            for keep in sorted(keeps, key=lambda k: -cells(k, self.sizes)):
                self.reduced(v, keep)
        return {r: self.marginal(r) for r in queries}
