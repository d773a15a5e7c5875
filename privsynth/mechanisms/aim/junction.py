"""The junction tree of AIM's graphical model, and the model size AIM caps (public structure only).

The triangulation is mbi's (``mbi.junction_tree``): greedy elimination, each step removing the
attribute whose neighbourhood has the fewest cells (ties to the lowest index), the maximal cliques of
the filled graph, joined by a maximum-weight spanning tree on the sizes of their intersections (any
such tree of the cliques of a chordal graph has the running-intersection property). It is written
here on adjacency bit masks, O(d^2) per call, instead of through networkx: AIM size-checks candidates
every round, and importing mbi (and jax with it) took seconds of every run and 380 MB of every
install. mbi itself is only the tests' reference (the ``test`` extra), never a runtime dependency.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from functools import lru_cache

from privsynth.mechanisms.aim.tables import broadcast_shape

Clique = tuple[int, ...]


def mask_of(clique: Sequence[int]) -> int:
    return sum(1 << a for a in set(clique))


def _attributes(mask: int) -> Clique:
    out, a = [], 0
    while mask:
        if mask & 1:
            out.append(a)
        mask >>= 1
        a += 1
    return tuple(out)


@lru_cache(maxsize=1 << 18)
def _cells(sizes: tuple[int, ...], mask: int) -> int:
    return math.prod(sizes[a] for a in _attributes(mask))


def triangulation_cliques(sizes: Sequence[int], cliques: Sequence[Clique]) -> list[Clique]:
    """The maximal cliques (ascending attributes, sorted) of the filled graph of mbi's greedy
    elimination order over all ``len(sizes)`` attributes, given the cliques that must be covered."""
    d = len(sizes)
    sizes = tuple(int(s) for s in sizes)

    def size_of(mask: int) -> int:
        return _cells(sizes, mask)

    adjacent = [0] * d
    for c in cliques:
        mask = mask_of(c)
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
    return sorted(_attributes(later[i] | (1 << order[i])) for i in range(d) if maximal[i])


def model_size_mb(sizes: Sequence[int], cliques: Sequence[Clique]) -> float:
    """The size in MB (8 bytes per cell) of the junction tree over ``cliques``: mbi's
    ``hypothetical_model_size``, fast enough to test every AIM candidate every round on wide tables.
    Answers are remembered (AIM asks about the same tree plus one candidate round after round)."""
    return _model_size_mb(tuple(int(s) for s in sizes), tuple(sorted(tuple(sorted(c)) for c in cliques)))


@lru_cache(maxsize=1 << 16)
def _model_size_mb(sizes: tuple[int, ...], cliques: tuple[Clique, ...]) -> float:
    return sum(math.prod(sizes[a] for a in c) for c in triangulation_cliques(sizes, cliques)) * 8 / 2**20


def _spanning_tree(cliques: list[Clique]) -> list[list[int]]:
    """Adjacency of a maximum-weight spanning tree of the cliques, weights = intersection sizes (Prim;
    cliques that share nothing are joined by empty separators, so the result is always one tree)."""
    k = len(cliques)
    masks = [mask_of(c) for c in cliques]
    adjacency: list[list[int]] = [[] for _ in range(k)]
    best = [(masks[0] & masks[j]).bit_count() for j in range(k)]
    link = [0] * k
    inside = [False] * k
    inside[0] = True
    for _ in range(k - 1):
        j = max((i for i in range(k) if not inside[i]), key=lambda i: (best[i], -i))
        inside[j] = True
        adjacency[j].append(link[j])
        adjacency[link[j]].append(j)
        for i in range(k):
            if not inside[i]:
                w = (masks[j] & masks[i]).bit_count()
                if w > best[i]:
                    best[i], link[i] = w, j
    return adjacency


_TREES: dict[tuple, JunctionTree] = {}
_TREES_KEPT = 8


def junction_tree(sizes: Sequence[int], model_cliques: Sequence[Clique]) -> JunctionTree:
    """The junction tree over ``model_cliques``, shared with earlier calls that gave the same maximal
    cliques (the tree is a function of those), so that what was planned on it (``plans``) is reused
    across AIM rounds that did not change the structure."""
    sizes = tuple(int(s) for s in sizes)
    nodes = tuple(triangulation_cliques(sizes, list(model_cliques)))
    key = (sizes, nodes)
    tree = _TREES.pop(key, None) or JunctionTree(sizes, nodes)
    _TREES[key] = tree
    while len(_TREES) > _TREES_KEPT:
        del _TREES[next(iter(_TREES))]
    return tree


class JunctionTree:
    """Maximal cliques of the triangulation over the model cliques, joined into one tree, rooted at
    clique 0 (BFS ``order``: parents before children), with each clique's separator from its parent.
    ``plans`` caches, per query, how ``inference.Marginals`` reads it (structure only)."""

    def __init__(self, sizes: Sequence[int], model_cliques: Sequence[Clique]) -> None:
        self.sizes = tuple(int(s) for s in sizes)
        nodes = triangulation_cliques(self.sizes, list(model_cliques))
        self.plans: dict = {}
        adjacency = _spanning_tree(nodes)
        self.cliques: list[Clique] = nodes
        self.adjacency = adjacency
        self.parent: list[int] = [-1] * len(nodes)
        self.order: list[int] = []
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
            () if self.parent[v] < 0 else tuple(a for a in nodes[v] if a in nodes[self.parent[v]])
                                        for v in range(len(nodes))]
        self.depth = [0] * len(nodes)
        for v in self.order[1:]:
            self.depth[v] = self.depth[self.parent[v]] + 1
        # Each attribute's cliques form a connected subtree; its topmost one (least depth).
        self.top_holder: dict[int, int] = {}
        for v in self.order:
            for a in nodes[v]:
                self.top_holder.setdefault(a, v)
        self.masks = [mask_of(c) for c in nodes]
        self.cells = [math.prod(self.sizes[a] for a in c) for c in nodes]
        # Per edge (v, parent): the axes of the sender that the message keeps, and the shape that lines
        # it up with the receiver's axes, upwards (``messages[v]``) and downwards (``down_messages[v]``).
        self.messages = [self._message_plan(v, self.parent[v]) for v in range(len(nodes))]
        self.down_messages = [self._message_plan(self.parent[v], v) for v in range(len(nodes))]

    def _message_plan(self, src: int, dst: int) -> tuple[tuple[bool, ...], tuple[int, ...]] | None:
        if src < 0 or dst < 0:
            return None
        shared = set(self.cliques[src]) & set(self.cliques[dst])
        sep = tuple(a for a in self.cliques[src] if a in shared)
        return tuple(a in shared for a in self.cliques[src]), broadcast_shape(sep, self.cliques[dst], self.sizes)

    def common_ancestor(self, u: int, v: int) -> int:
        while self.depth[u] > self.depth[v]:
            u = self.parent[u]
        while self.depth[v] > self.depth[u]:
            v = self.parent[v]
        while u != v:
            u, v = self.parent[u], self.parent[v]
        return u

    def host(self, clique: Clique) -> int:
        """A maximal clique containing ``clique``, or -1."""
        mask = mask_of(clique)
        for i, m in enumerate(self.masks):
            if mask & m == mask:
                return i
        return -1

    def smallest_host(self, clique: Clique) -> int:
        """The maximal clique with fewest cells among those containing ``clique``, or -1."""
        mask = mask_of(clique)
        best = -1
        for i, m in enumerate(self.masks):
            if mask & m == mask and (best < 0 or self.cells[i] < self.cells[best]):
                best = i
        return best

    def shape(self, i: int) -> tuple[int, ...]:
        return tuple(self.sizes[a] for a in self.cliques[i])
