"""Fitting the density on the reduced space to the noisy statistics (post-processing): the LP of the
paper (l1 / linf objectives, HiGHS through cvxpy) and a projected-gradient least squares on the simplex.
"""

from __future__ import annotations

import math
from typing import Literal

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from privsynth.errors import LPFailedError  # noqa: F401  (re-exported: raised here)
from privsynth.mechanisms.reduced_space.config import Config, ObjectiveName


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


def fit_weights(A: sp.spmatrix, y: np.ndarray, config: Config) -> np.ndarray:
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
