"""Array code for RAP (relaxed adaptive projection): numpy only, kept apart from the mechanism logic
so that a GPU backend (JAX, CuPy, PyTorch) can replace this module without touching the privacy code.

Nothing here touches privacy: every function is either a deterministic function of (private)
statistics handed to it by ``mechanism.py`` (score computation) or post-processing of noisy answers
(projection). The privacy noise is drawn in ``mechanism.py`` only.

Layout. A relaxed dataset is an (n' x width) matrix X in the one-hot layout of a ``Domain``: each
attribute block of each row is a probability vector. The relaxed answer of a k-way marginal S is
``A_S(X) = (1/n') sum_r outer(X_r[B_a1], ..., X_r[B_ak])`` (the product-query identity, RAP Lemma 3.3).

Speed. Marginals are grouped by their *left set* (all attributes but the one with most levels): for
a group, ``P`` = the row-wise outer product of the left blocks (n' x prod(left sizes)) is built once,
and the answers of every marginal in the group come from one GEMM ``P.T @ X[:, right columns]``.
The gradient re-uses the same two factors, so one loss+gradient evaluation costs about
3 * n' * (cells of all measured marginals) multiply-adds, all inside BLAS.

Cell order. Inside this module a marginal's cells are in *internal* order (left attributes first,
right attribute last, row-major). ``internal_order`` maps canonical (ascending attribute, row-major,
as in ``privsynth.schema.workload``) flat indices to internal ones; callers convert counts once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from privsynth.schema.encoding import Domain

Marginal = tuple[int, ...]


# ---------------------------------------------------------------- per-block maps onto the simplex

def sparsemax(z: np.ndarray) -> np.ndarray:
    """Euclidean projection of every row of z onto the probability simplex (Martins & Astudillo 2016)."""
    z = np.asarray(z, dtype=np.float64)
    t = z.shape[-1]
    srt = -np.sort(-z, axis=-1)
    cumsum = np.cumsum(srt, axis=-1)
    ks = np.arange(1, t + 1, dtype=np.float64)
    support = 1.0 + ks * srt > cumsum
    k = support.sum(axis=-1, keepdims=True)  # >= 1 always (the first term is always in the support)
    tau = (np.take_along_axis(cumsum, k.astype(np.int64) - 1, axis=-1) - 1.0) / k
    return np.maximum(z - tau, 0.0)


def softmax(z: np.ndarray) -> np.ndarray:
    """Row-wise softmax, shifted for numerical stability."""
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def blockwise(fn, theta: np.ndarray, domain: Domain) -> np.ndarray:
    """Apply a row-wise simplex map to every attribute block of theta."""
    out = np.empty_like(theta)
    off = domain.offsets
    for j in range(domain.n_attributes):
        out[:, off[j]:off[j + 1]] = fn(theta[:, off[j]:off[j + 1]])
    return out


def block_softmax(theta: np.ndarray, domain: Domain) -> np.ndarray:
    """Softmax of every attribute block at once (no Python loop over blocks: it dominated a step)."""
    starts = domain.offsets[:-1]
    shift = np.repeat(np.maximum.reduceat(theta, starts, axis=1), domain.sizes, axis=1)
    e = np.exp(theta - shift)
    return e / np.repeat(np.add.reduceat(e, starts, axis=1), domain.sizes, axis=1)


def softmax_backward(x: np.ndarray, grad_x: np.ndarray, domain: Domain) -> np.ndarray:
    """Gradient wrt the logits of X = blockwise softmax(theta), given dL/dX."""
    prod = x * grad_x
    sums = np.add.reduceat(prod, domain.offsets[:-1], axis=1)
    return prod - x * np.repeat(sums, domain.sizes, axis=1)


# ---------------------------------------------------------------- grouped marginal plans

def internal_order(domain: Domain, marginal: Marginal) -> tuple[tuple[int, ...], int, np.ndarray]:
    """(left attributes, right attribute, canonical flat index of each internal cell position).

    The right attribute is the one with most levels (ties: the last), so the row-wise outer product
    of the left blocks, the only intermediate of size n' x cells/right, stays as small as possible.
    """
    sizes = [domain.sizes[a] for a in marginal]
    pos = max(range(len(marginal)), key=lambda i: (sizes[i], i))
    order = [i for i in range(len(marginal)) if i != pos] + [pos]
    idx = np.arange(int(np.prod(sizes))).reshape(sizes).transpose(order).ravel()
    return tuple(marginal[i] for i in order[:-1]), marginal[pos], idx


@dataclass
class _Group:
    left: tuple[int, ...]
    members: list[int]          # positions in the plan's marginal list
    cols: np.ndarray            # one-hot columns of the right blocks, concatenated
    splits: np.ndarray          # start of each member's right block inside cols (len members + 1)
    left_size: int


class MarginalPlan:
    """Relaxed answers, and the gradient of a weighted squared loss, for a fixed list of marginals.

    ``answers(X)`` returns, per marginal, its cell masses in internal order (an (L, t_right) matrix,
    flattened row-major = internal order). All marginals must have k >= 1 attributes.
    """

    def __init__(self, domain: Domain, marginals: Sequence[Marginal]) -> None:
        self.domain = domain
        self.marginals = list(marginals)
        self.cells = np.array([domain.size_of(m) for m in self.marginals], dtype=np.int64)
        self.starts = np.concatenate([[0], np.cumsum(self.cells)]).astype(np.int64)
        self.canonical_index: list[np.ndarray] = []
        by_left: dict[tuple[int, ...], list[tuple[int, int]]] = {}
        for i, m in enumerate(self.marginals):
            left, right, idx = internal_order(domain, m)
            self.canonical_index.append(idx)
            by_left.setdefault(left, []).append((i, right))
        off = domain.offsets
        self.groups: list[_Group] = []
        for left, items in by_left.items():
            cols = np.concatenate([np.arange(off[r], off[r + 1]) for _, r in items])
            widths = [domain.sizes[r] for _, r in items]
            self.groups.append(_Group(left, [i for i, _ in items], cols,
                                      np.concatenate([[0], np.cumsum(widths)]).astype(np.int64),
                                      int(np.prod([domain.sizes[a] for a in left], dtype=np.int64))))

    @property
    def total_cells(self) -> int:
        return int(self.starts[-1])

    def to_internal(self, canonical: Sequence[np.ndarray]) -> np.ndarray:
        """Concatenate per-marginal canonical vectors into one flat vector in internal order."""
        return np.concatenate([np.asarray(v, dtype=np.float64)[idx] for v, idx in zip(canonical, self.canonical_index)])

    def _left_product(self, x: np.ndarray, left: tuple[int, ...]) -> np.ndarray:
        off = self.domain.offsets
        p = np.ones((x.shape[0], 1), dtype=x.dtype)
        for a in left:
            block = x[:, off[a]:off[a + 1]]
            p = (p[:, :, None] * block[:, None, :]).reshape(x.shape[0], -1)
        return p

    def _group_answers(self, x: np.ndarray, g: _Group, p: np.ndarray) -> np.ndarray:
        return (p.T @ x[:, g.cols]) / x.shape[0]

    def _scatter(self, flat: np.ndarray, g: _Group, mat: np.ndarray) -> None:
        for j, i in enumerate(g.members):
            flat[self.starts[i]:self.starts[i + 1]] = mat[:, g.splits[j]:g.splits[j + 1]].ravel()

    def _gather(self, flat: np.ndarray, g: _Group) -> np.ndarray:
        parts = [flat[self.starts[i]:self.starts[i + 1]].reshape(g.left_size, -1) for i in g.members]
        return np.concatenate(parts, axis=1)

    def answers(self, x: np.ndarray) -> np.ndarray:
        """All relaxed answers (proportions), flat, internal order."""
        out = np.empty(self.total_cells)
        for g in self.groups:
            self._scatter(out, g, self._group_answers(x, g, self._left_product(x, g.left)))
        return out

    def loss_and_grad(self, x: np.ndarray, target: np.ndarray, weight: np.ndarray) -> tuple[float, np.ndarray]:
        """L(X) = sum_cells weight * (A(X) - target)^2 and dL/dX (flat vectors in internal order)."""
        n_rows = x.shape[0]
        off = self.domain.offsets
        grad = np.zeros_like(x)
        loss = 0.0
        for g in self.groups:
            p = self._left_product(x, g.left)
            right = x[:, g.cols]
            ans = (p.T @ right) / n_rows
            diff = ans - self._gather(target, g)
            resid = self._gather(weight, g) * diff
            loss += float(np.sum(resid * diff))
            d_ans = resid * (2.0 / n_rows)
            grad[:, g.cols] += p @ d_ans
            if not g.left:
                continue
            d_p = right @ d_ans.T  # n' x left_size
            if len(g.left) == 1:
                a = g.left[0]
                grad[:, off[a]:off[a + 1]] += d_p
            else:
                # Peel the last left attribute off repeatedly: d_p is over (prefix..., last).
                self._left_backward(x, g.left, d_p, grad)
        return loss, grad

    def _left_backward(self, x: np.ndarray, left: tuple[int, ...], d_p: np.ndarray, grad: np.ndarray) -> None:
        off = self.domain.offsets
        n_rows = x.shape[0]
        last = left[-1]
        prefix = left[:-1]
        block = x[:, off[last]:off[last + 1]]
        t_last = block.shape[1]
        d3 = d_p.reshape(n_rows, -1, t_last)
        prefix_p = self._left_product(x, prefix)
        grad[:, off[last]:off[last + 1]] += np.einsum("rpl,rp->rl", d3, prefix_p)
        d_prefix = np.einsum("rpl,rl->rp", d3, block)
        if len(prefix) == 1:
            grad[:, off[prefix[0]]:off[prefix[0] + 1]] += d_prefix
        else:
            self._left_backward(x, prefix, d_prefix, grad)


# ---------------------------------------------------------------- selection scores

def marginal_l1_scores(plan: MarginalPlan, counts: np.ndarray, n_hat: float, relaxed: np.ndarray) -> np.ndarray:
    """Per marginal: || counts_S - n_hat * A_S(X) ||_1. With X and n_hat fixed by earlier releases, one
    record added or removed moves one cell of counts_S by 1, so each score has sensitivity 1."""
    diff = np.abs(counts - n_hat * relaxed)
    return np.add.reduceat(diff, plan.starts[:-1])


def cell_scores(counts: np.ndarray, n_hat: float, relaxed: np.ndarray) -> np.ndarray:
    """Per cell: |count - n_hat * A(X)|, sensitivity 1 under add/remove of one record."""
    return np.abs(counts - n_hat * relaxed)


# ---------------------------------------------------------------- the relaxed projection (Alg. 1)

@dataclass(frozen=True)
class ProjectionSettings:
    parametrization: str        # "softmax" or "sparsemax"
    learning_rate: float
    max_iterations: int
    tolerance: float            # stop when the loss fell by less than this fraction over one check window
    check_every: int = 25


@dataclass
class AdamState:
    theta: np.ndarray
    m: np.ndarray
    v: np.ndarray
    step: int = 0


def to_relaxed(theta: np.ndarray, domain: Domain, parametrization: str) -> np.ndarray:
    if parametrization == "softmax":
        return block_softmax(theta, domain)
    return blockwise(sparsemax, theta, domain)


def project(state: AdamState, plan: MarginalPlan, target: np.ndarray, weight: np.ndarray, domain: Domain,
            settings: ProjectionSettings, beta1: float = 0.9, beta2: float = 0.999,
            eps: float = 1e-8) -> tuple[int, float]:
    """Minimise sum weight * (A(X) - target)^2 over X on the block simplex with Adam, in place.

    softmax: X = softmax(theta) per block, exact gradient through the softmax.
    sparsemax: the spec's reading (B) of RAP (lazy projection): Adam moves the unprojected theta
    with the gradient taken at X = sparsemax(theta), no Jacobian through the projection.
    Returns (steps taken, final loss). The Adam moments persist across rounds (warm start).
    """
    lr = settings.learning_rate
    # float32 halves the memory traffic of every step; answers are proportions >= 1/n' resolution.
    target = target.astype(state.theta.dtype)
    weight = weight.astype(state.theta.dtype)
    previous = np.inf
    loss = np.inf
    steps = 0
    for it in range(settings.max_iterations):
        x = to_relaxed(state.theta, domain, settings.parametrization)
        loss, grad_x = plan.loss_and_grad(x, target, weight)
        grad = softmax_backward(x, grad_x, domain) if settings.parametrization == "softmax" else grad_x
        state.step += 1
        state.m = beta1 * state.m + (1 - beta1) * grad
        state.v = beta2 * state.v + (1 - beta2) * grad * grad
        m_hat = state.m / (1 - beta1 ** state.step)
        v_hat = state.v / (1 - beta2 ** state.step)
        state.theta -= lr * m_hat / (np.sqrt(v_hat) + eps)
        steps = it + 1
        if steps % settings.check_every == 0:
            if previous - loss < settings.tolerance * previous:
                break
            previous = loss
    return steps, float(loss)
