"""The two optimisation steps of private sampling ([PS] Algorithm 2, steps 4 and 5;
spec docs/specs/private_sampling.md section 1.2).

Everything is solved in the scaled variable q = m h (entries ~ 1) with the m x N Walsh matrix M of
the reduced space S and the data's Walsh moments b (b_{} = 1), c_S = M^T 1 / m:

* **Shrinkage LP** (step 4): the minimal lambda in [0, 1] such that some q in [2 delta, Delta - delta]^m
  has (1/m) M^T q = (1 - lambda) b + lambda c_S. With t = 1 - lambda this is one LP:
  max t  s.t.  M^T q - t m (b - c_S) = m c_S,  2 delta <= q <= Delta - delta,  0 <= t <= 1.
  Solvers: HiGHS through scipy (fast path) and HiGHS through cvxpy (reference).
* **Proximal QP** (step 5): q* = argmin ||q - 1||^2 s.t. M^T q = m target, delta <= q <= Delta (the wider
  box). Strictly convex, so q* is unique. Solvers: Clarabel through cvxpy (reference) and a
  semismooth Newton method on the N-dimensional dual (fast path, ``projection_qp_newton``).

**Semismooth Newton on the dual.** The Lagrangian dual of the projection is, for y in R^N,
    psi(y) = y^T (M^T q(y) - r) - ||q(y) - 1||^2 / 2,    q(y) = clip(1 + M y, delta, Delta),  r = m target,
a convex, piecewise-quadratic function with gradient M^T q(y) - r (Danskin). A generalised Hessian is
M_F^T M_F over the free set F = {i : delta < 1 + (M y)_i < Delta}. Newton steps with an Armijo line
search on psi converge globally and, the gradient being strongly semismooth, quadratically near the
solution (Qi & Sun 1993; Li, Sun & Toh 2018). The primal point q(y) is always in the box and satisfies
the stationarity and complementarity conditions exactly, so the only KKT residual is the equality
residual ||M^T q - r||_inf, which is the stopping test. Cost per iteration: O(N^2 |changed rows|) to
update the N x N Hessian from the full Gram matrix, plus two m x N products; memory O(m N).

None of the values computed here (lambda, q, the moments) may be logged or published.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Literal

import numpy as np
import scipy.linalg as la
from scipy.optimize import linprog

from privsynth.errors import SolverError  # noqa: F401  (re-exported: raised here)

LPSolver = Literal["ipm", "highs", "cvxpy"]
QPSolver = Literal["newton", "cvxpy"]


def _check_inputs(M: np.ndarray, vector: np.ndarray, name: str) -> None:
    if M.ndim != 2 or vector.shape != (M.shape[1],):
        raise ValueError(f"M must be m x N and {name} a vector of length N; got {M.shape} and {vector.shape}")


# ------------------------------------------------------------------------------------- step 4

def shrinkage_lp_highs(M: np.ndarray, b: np.ndarray, delta: float, Delta: float, time_limit_s: float = 600.0) -> float:
    """Minimal shrinkage lambda* (step 4) with HiGHS's dual simplex through scipy."""
    _check_inputs(M, b, "b")
    m, N = M.shape
    c_S = M.mean(axis=0)
    A_eq = np.empty((N, m + 1))
    A_eq[:, 0] = -m * (b - c_S)
    A_eq[:, 1:] = M.T
    cost = np.zeros(m + 1)
    cost[0] = -1.0
    bounds = [(0.0, 1.0)] + [(2 * delta, Delta - delta)] * m
    res = linprog(cost, A_eq=A_eq, b_eq=m * c_S, bounds=bounds, method="highs",
                  options={"time_limit": time_limit_s, "primal_feasibility_tolerance": 1e-9,
                           "dual_feasibility_tolerance": 1e-9})
    if res.status != 0:
        raise SolverError(f"shrinkage LP failed: {res.message}")
    return float(min(1.0, max(0.0, 1.0 - res.x[0])))


def shrinkage_lp_ipm(M: np.ndarray, b: np.ndarray, delta: float, Delta: float, tol: float = 1e-9,
                     max_iter: int = 100) -> float:
    """Minimal shrinkage lambda* (step 4) by a Mehrotra predictor-corrector interior-point method.

    The LP has N equality rows and m + 1 box-bounded columns; each iteration solves one N x N system
    A D A^T dy = rhs (O(m N^2) BLAS work, dense Cholesky), which is far cheaper than simplex pivoting
    on the dense +-1 matrix when m >> N. Variables s = x - lower in [0, w], duals z (for s >= 0) and
    zeta (for s <= w). Stops when the relative primal residual, the dual residual and the total
    duality gap are all below ``tol``, so lambda* is accurate to about ``tol`` (the step-5 box is wider
    by delta/m on each side, which absorbs that error).
    """
    _check_inputs(M, b, "b")
    m, N = M.shape
    c_S = M.mean(axis=0)
    g = b - c_S
    # Equality rows divided by m: (1/m) M^T q - t g = c_S; columns x = (t, q).
    lower = np.concatenate([[0.0], np.full(m, 2 * delta)])
    w = np.concatenate([[1.0], np.full(m, Delta - 3 * delta)])
    if np.any(w <= 0):
        raise ValueError("the step-4 box [2 delta, Delta - delta] is empty")
    cost = np.zeros(m + 1)
    cost[0] = -1.0

    def A_mul(x: np.ndarray) -> np.ndarray:
        return (M.T @ x[1:]) / m - x[0] * g

    def AT_mul(y: np.ndarray) -> np.ndarray:
        return np.concatenate([[-(g @ y)], (M @ y) / m])

    rhs = c_S - A_mul(lower)
    # v = w - s is carried as its own variable: recomputing it from s cancels catastrophically near the upper bound.
    s = w / 2.0
    v = w / 2.0
    z = np.ones(m + 1)
    zeta = np.ones(m + 1)
    y = np.zeros(N)
    rhs_norm = 1.0 + float(np.max(np.abs(rhs)))
    best = (math.inf, 1.0)
    for _iteration in range(max_iter):
        r_p = rhs - A_mul(s)
        r_u = w - s - v
        r_d = cost - AT_mul(y) - z + zeta
        gap = float(s @ z + v @ zeta)
        mu = gap / (2 * (m + 1))
        # the error of the objective t (hence of lambda*) is at most the gap plus residual terms
        error = max(max(np.max(np.abs(r_p)), np.max(np.abs(r_u))) / rhs_norm, float(np.max(np.abs(r_d))), gap)
        lam = float(min(1.0, max(0.0, 1.0 - (lower[0] + s[0]))))
        if error <= tol:
            return lam
        if error < best[0]:
            best = (error, lam)
        elif error > 1e3 * best[0]:
            break  # round-off has taken over (the normal matrix degenerates as mu -> 0)
        D = 1.0 / (z / s + zeta / v)
        normal = (M.T * D[1:]) @ M / (m * m) + D[0] * np.outer(g, g)
        normal[np.diag_indices(N)] += 1e-14 * (1.0 + np.trace(normal) / N)
        factor = la.cho_factor(normal)

        # solve reads this iteration's iterates and factor (B023): it is called in this iteration only.
        def solve(r_sz: np.ndarray, r_vz: np.ndarray) -> tuple[np.ndarray, ...]:
            r_vz = r_vz - zeta * r_u  # noqa: B023  (called in this iteration only)
            r_hat = r_d - r_sz / s + r_vz / v  # noqa: B023  (called in this iteration only)
            dy = la.cho_solve(factor, r_p + A_mul(D * r_hat))  # noqa: B023  (called in this iteration only)
            ds = D * (AT_mul(dy) - r_hat)  # noqa: B023  (called in this iteration only)
            return (ds, r_u - ds, dy,  # noqa: B023  (called in this iteration only)
                    (r_sz - z * ds) / s, (r_vz + zeta * ds) / v)  # noqa: B023  (called in this iteration only)

        def max_step(x: np.ndarray, dx: np.ndarray) -> float:
            neg = dx < 0
            return min(1.0, float(np.min(-x[neg] / dx[neg]))) if neg.any() else 1.0

        ds_a, dv_a, _, dz_a, dzeta_a = solve(-s * z, -v * zeta)
        ap = min(max_step(s, ds_a), max_step(v, dv_a))
        ad = min(max_step(z, dz_a), max_step(zeta, dzeta_a))
        mu_aff = float(((s + ap * ds_a) @ (z + ad * dz_a) + (v + ap * dv_a) @ (zeta + ad * dzeta_a)) / (2 * (m + 1)))
        sigma = min(1.0, (mu_aff / mu) ** 3)
        ds, dv, dy, dz, dzeta = solve(sigma * mu - s * z - ds_a * dz_a, sigma * mu - v * zeta - dv_a * dzeta_a)
        ap = 0.995 * min(max_step(s, ds), max_step(v, dv))
        ad = 0.995 * min(max_step(z, dz), max_step(zeta, dzeta))
        s = s + ap * ds
        v = v + ap * dv
        y = y + ad * dy
        z = z + ad * dz
        zeta = zeta + ad * dzeta
    if best[0] <= 100 * tol:
        return best[1]
    raise SolverError(f"shrinkage LP (interior point) did not converge (best error {best[0]:.1e}, tolerance {tol:g})")


def shrinkage_lp_cvxpy(M: np.ndarray, b: np.ndarray, delta: float, Delta: float) -> float:
    """Reference: the same LP through cvxpy with HiGHS (spec section 1.2 sketch)."""
    import cvxpy as cp  # imported here: the fast paths and the feasibility report do not need it

    _check_inputs(M, b, "b")
    m, _ = M.shape
    c_S = M.mean(axis=0)
    q = cp.Variable(m)
    t = cp.Variable()
    problem = cp.Problem(cp.Maximize(t), [M.T @ q / m == t * b + (1 - t) * c_S,
                                          q >= 2 * delta, q <= Delta - delta, t >= 0, t <= 1])
    problem.solve(solver=cp.HIGHS)
    if problem.status != cp.OPTIMAL:
        raise SolverError(f"shrinkage LP (cvxpy/HiGHS) ended with status {problem.status}")
    return float(min(1.0, max(0.0, 1.0 - t.value)))


def shrinkage_feasible(M: np.ndarray, b: np.ndarray, lam: float, lower: float, upper: float) -> bool:
    """Whether some q in [lower, upper]^m has (1/m) M^T q = (1 - lam) b + lam c_S (a feasibility LP)."""
    _check_inputs(M, b, "b")
    m, _ = M.shape
    target = (1 - lam) * b + lam * M.mean(axis=0)
    res = linprog(np.zeros(m), A_eq=M.T, b_eq=m * target, bounds=[(lower, upper)] * m, method="highs",
                  options={"primal_feasibility_tolerance": 1e-10})
    if res.status not in (0, 2):
        raise SolverError(f"feasibility LP failed: {res.message}")
    return res.status == 0


# ------------------------------------------------------------------------------------- step 5

def projection_qp_cvxpy(M: np.ndarray, target: np.ndarray, lower: float, upper: float,
                        tol: float = 1e-10) -> np.ndarray:
    """Reference: argmin ||q - 1||^2 s.t. (1/m) M^T q = target, lower <= q <= upper, with Clarabel."""
    import cvxpy as cp

    _check_inputs(M, target, "target")
    m, _ = M.shape
    q = cp.Variable(m)
    problem = cp.Problem(cp.Minimize(cp.sum_squares(q - 1)), [M.T @ q / m == target, q >= lower, q <= upper])
    problem.solve(solver=cp.CLARABEL, tol_gap_abs=tol, tol_gap_rel=tol, tol_feas=tol)
    if problem.status != cp.OPTIMAL:
        raise SolverError(f"proximal QP (cvxpy/Clarabel) ended with status {problem.status}")
    return np.asarray(q.value, dtype=np.float64)


@dataclass(frozen=True, repr=False)
class NewtonResult:
    q: np.ndarray
    y: np.ndarray
    iterations: int
    residual: float

    def __repr__(self) -> str:  # values are data-dependent: keep them out of logs and tracebacks
        return f"NewtonResult(iterations={self.iterations}, m={self.q.size})"


def projection_qp_newton(M: np.ndarray, target: np.ndarray, lower: float, upper: float, tol: float = 1e-12,
                         max_iter: int = 200, gram: np.ndarray | None = None) -> NewtonResult:
    """argmin ||q - 1||^2 s.t. (1/m) M^T q = target, lower <= q <= upper, by semismooth Newton on the dual.

    Stops when ||M^T q - m target||_inf <= tol * m (q is always in the box). ``gram`` = M^T M may be
    passed when already computed (the well-conditioning test computes it).
    """
    _check_inputs(M, target, "target")
    if not lower < 1.0 < upper:
        raise ValueError(f"the box [{lower}, {upper}] must contain 1 (the uniform density) in its interior")
    m, N = M.shape
    r = m * np.asarray(target, dtype=np.float64)
    G = M.T @ M if gram is None else gram
    scale = float(m)
    reg = 1e-12 * scale

    def primal(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        z = 1.0 + M @ y
        return z, np.clip(z, lower, upper)

    def psi(y: np.ndarray, q: np.ndarray, grad: np.ndarray) -> float:
        return float(y @ grad - 0.5 * np.sum((q - 1.0) ** 2))

    # Warm start: the projection without the box, exact when no bound is active.
    y = la.solve(G + reg * np.eye(N), r - M.sum(axis=0), assume_a="pos")
    z, q = primal(y)
    grad = M.T @ q - r
    value = psi(y, q, grad)
    for iteration in range(1, max_iter + 1):
        residual = float(np.max(np.abs(grad)))
        if residual <= tol * scale:
            return NewtonResult(q=q, y=y, iterations=iteration - 1, residual=residual / scale)
        bound = (z <= lower) | (z >= upper)
        n_bound = int(bound.sum())
        if n_bound == 0:
            H = G
        elif n_bound < m - n_bound:
            Mb = M[bound]
            H = G - Mb.T @ Mb
        else:
            Mf = M[~bound]
            H = Mf.T @ Mf
        try:
            factor = la.cho_factor(H + reg * np.eye(N))
            step = -la.cho_solve(factor, grad)
        except la.LinAlgError:
            step = -np.linalg.lstsq(H + reg * np.eye(N), grad, rcond=None)[0]
        slope = float(grad @ step)
        if slope >= 0:  # not a descent direction (numerically singular H): fall back to the gradient
            step, slope = -grad, -float(grad @ grad)
        alpha = 1.0
        while True:
            y_new = y + alpha * step
            z_new, q_new = primal(y_new)
            grad_new = M.T @ q_new - r
            value_new = psi(y_new, q_new, grad_new)
            # Armijo, with a round-off allowance so steps at the noise floor are not rejected
            if value_new <= value + 1e-4 * alpha * slope + 1e-13 * (abs(value) + scale):
                break
            alpha *= 0.5
            if alpha < 1e-12:
                raise SolverError("semismooth Newton line search failed "
                                  "(is the equality system infeasible on the box?)")
        y, z, q, grad, value = y_new, z_new, q_new, grad_new, value_new
    raise SolverError(f"semismooth Newton did not reach residual {tol:g} in {max_iter} iterations")


# ------------------------------------------------------------------------------------- both steps

@dataclass(frozen=True, repr=False)
class DensityFit:
    """lambda* and q* = m h* (private: never logged or published)."""

    lam: float
    q: np.ndarray
    lp_seconds: float
    qp_seconds: float

    def __repr__(self) -> str:
        return f"DensityFit(m={self.q.size}, values withheld)"

    @property
    def h(self) -> np.ndarray:
        return self.q / self.q.size


def fit_density(M: np.ndarray, b: np.ndarray, delta: float, Delta: float, lp_solver: LPSolver = "ipm",
                qp_solver: QPSolver = "newton", gram: np.ndarray | None = None) -> DensityFit:
    """Steps 4 and 5 of [PS] Algorithm 2: lambda* by the LP, then the proximal point on the wider box."""
    _check_inputs(M, b, "b")
    t0 = time.perf_counter()
    if lp_solver == "ipm":
        lam = shrinkage_lp_ipm(M, b, delta, Delta)
    elif lp_solver == "highs":
        lam = shrinkage_lp_highs(M, b, delta, Delta)
    elif lp_solver == "cvxpy":
        lam = shrinkage_lp_cvxpy(M, b, delta, Delta)
    else:
        raise ValueError(f"unknown LP solver {lp_solver!r}")
    t1 = time.perf_counter()
    target = (1.0 - lam) * b + lam * M.mean(axis=0)
    if qp_solver == "newton":
        q = projection_qp_newton(M, target, delta, Delta, gram=gram).q
    elif qp_solver == "cvxpy":
        q = projection_qp_cvxpy(M, target, delta, Delta)
    else:
        raise ValueError(f"unknown QP solver {qp_solver!r}")
    t2 = time.perf_counter()
    if not np.all(np.isfinite(q)):
        raise SolverError("the proximal QP returned non-finite values")
    return DensityFit(lam=lam, q=q, lp_seconds=t1 - t0, qp_seconds=t2 - t1)


def released_density(q: np.ndarray, delta: float, Delta: float, sum_tolerance: float = 1e-9) -> np.ndarray:
    """h* as released to the sampler: q clipped to [delta, Delta], divided by its sum.

    Clipping removes solver noise outside the box; the division then moves every entry by a relative
    factor within ``sum_tolerance`` (checked), so every ratio between two datasets' densities is at
    most (Delta/delta) (1 + tol)/(1 - tol), which the accountant charges (``bounds.numerical_slack``).
    """
    q = np.clip(np.asarray(q, dtype=np.float64), delta, Delta)
    total = float(q.sum())
    m = q.size
    if not math.isfinite(total) or abs(total / m - 1.0) > sum_tolerance:
        raise SolverError(f"the fitted density sums to 1 only within {abs(total / m - 1.0):.2e} "
                          f"(tolerance {sum_tolerance:g}); refusing to sample from it")
    return q / total
