"""Pure math of the covariance-loss microaggregation (Boedihardjo, Strohmer & Vershynin, paper 003;
spec docs/specs/covariance_loss.md).

Records live in the one-hot layout of the domain; for the partition they are scaled to the unit
sphere, x_hat = one_hot(x) / sqrt(q) with q attributes, so ||x_hat||_2 = 1 exactly (the paper's
Boolean path scales by 1/sqrt(p); 1/sqrt(q) is tighter and equally public). Centroids are computed in
the original one-hot units, where every attribute block of a mean is on the probability simplex.

Everything here is a small pure function; the privacy randomness enters only through the
``NoiseSource`` passed to ``sample_bingham`` / ``private_pca`` (spec numbering in brackets). Records may
come weighted (a distinct record and its count, from a ``privsynth.schema.workload.Histogram``): a record of
weight c counts as c identical records in every statistic (``weights`` arguments).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg import null_space
from scipy.optimize import brentq

from privsynth.privacy.accounting import laplace_scale
from privsynth.privacy.meter import pure_price
from privsynth.privacy.noise import NoiseSource
from privsynth.schema.encoding import Domain

# ---------------------------------------------------------------- embedding and second moments

def scaled_one_hot(codes: np.ndarray, domain: Domain) -> np.ndarray:
    """x_hat = one_hot / sqrt(q): rows on the unit sphere of R^width."""
    n = codes.shape[0]
    out = np.zeros((n, domain.width), dtype=np.float64)
    rows = np.arange(n)
    for j in range(domain.n_attributes):
        out[rows, domain.offsets[j] + codes[:, j]] = 1.0
    return out / math.sqrt(domain.n_attributes)


def second_moment_sum(codes: np.ndarray, domain: Domain, weights: np.ndarray | None = None) -> np.ndarray:
    """G = sum_i c_i x_hat_i x_hat_i^T (unnormalised, so adding a record adds a PSD term of norm 1) = C / q."""
    return cooccurrence_counts(codes, domain, weights) / domain.n_attributes


def cooccurrence_counts(codes: np.ndarray, domain: Domain, weights: np.ndarray | None = None,
                        chunk: int = 65_536) -> np.ndarray:
    """C = sum_i c_i one_hot_i one_hot_i^T (width x width): how many records hold each pair of levels.

    Exact integers in float64 (below 2^53), so a Laplace mechanism on C adds noise to an exact statistic
    of exact integer sensitivity; G = C / q is the scaled second-moment matrix of the partition.
    """
    c = np.zeros((domain.width, domain.width), dtype=np.float64)
    for start in range(0, codes.shape[0], chunk):
        x = scaled_one_hot(codes[start: start + chunk], domain) * math.sqrt(domain.n_attributes)
        x = np.rint(x)  # exact 0/1 entries
        if weights is None:
            c += x.T @ x
        else:  # a C-ordered copy of X^T: numpy's matmul of the transposed view by another matrix was 10x slower
            c += np.ascontiguousarray(x.T) @ (x * np.asarray(weights[start: start + chunk], dtype=np.float64)[:, None])
    return c


def project_codes(codes: np.ndarray, domain: Domain, basis: np.ndarray) -> np.ndarray:
    """Coordinates z_i = basis^T x_hat_i (n x t) without forming the one-hot matrix."""
    z = np.zeros((codes.shape[0], basis.shape[1]), dtype=np.float64)
    for j in range(domain.n_attributes):
        z += basis[domain.offsets[j] + codes[:, j]]
    return z / math.sqrt(domain.n_attributes)


def top_eigenvectors(g: np.ndarray, t: int) -> np.ndarray:
    """Orthonormal top-t eigenvectors of a symmetric matrix (width x t); exact, non-private PCA [Lemma 3.3]."""
    if t == 0:
        return np.zeros((g.shape[0], 0))
    _, vecs = np.linalg.eigh(g)
    return vecs[:, ::-1][:, :t].copy()


# ---------------------------------------------------------------- private PCA (PVEC / PROJ, A7-A8)

def bingham_envelope(a: np.ndarray) -> tuple[float, np.ndarray, float]:
    """Kent-Ganeiber-Mardia ACG envelope for the Bingham density exp(-x^T A x), A = diag(a), min(a) = 0.

    Returns (b, omega, log_m): Omega = I + 2A/b with b solving sum 1/(b + 2 a_i) = 1 (b in [1, q]),
    and log_m = (q - b)/2 + (q/2) log(q/b), the log of the bound
        exp(-z) (1 + 2z/b)^{q/2} <= exp((q - b)/2) (q/b)^{q/2}   for every z >= 0
    (the left side peaks at z = (q - b)/2), so the rejection test below is exact.
    """
    q = a.size
    f = lambda b: float(np.sum(1.0 / (b + 2.0 * a)) - 1.0)  # noqa: E731
    if f(1.0) <= 0.0:
        b = 1.0
    elif f(float(q)) >= 0.0:
        b = float(q)
    else:
        b = brentq(f, 1.0, float(q), xtol=1e-12)
    omega = 1.0 + 2.0 * a / b
    log_m = 0.5 * (q - b) + 0.5 * q * math.log(q / b)
    return b, omega, log_m


def sample_bingham(b_matrix: np.ndarray, noise: NoiseSource, batch: int = 32,
                   max_proposals: int = 1_000_000) -> np.ndarray:
    """One unit vector u with density proportional to exp(u^T B u) on the sphere (exact rejection sampler).

    Proposals are angular central Gaussian draws y / ||y||, y ~ N(0, Omega^{-1}) (``noise.gaussian``);
    each is accepted with probability exp(log f(u) - log_m) <= 1, tested as E >= log_m - log f(u) with
    E = |Laplace(1)| ~ Exp(1) (``noise.laplace``). Rejection sampling returns the target law exactly
    (up to floating point), which the pure-DP argument needs; MCMC would not. The proposal draws are
    not added to any statistic, so they stay plain draws (not ``add_laplace``): OpenDP's floating-point
    claim does not cover this sampler.
    """
    q = b_matrix.shape[0]
    if q == 1:
        return np.ones(1)
    lam, basis = np.linalg.eigh((b_matrix + b_matrix.T) / 2.0)
    a = lam[-1] - lam  # exp(u^T B u) = exp(lam_max) exp(-u^T A u) on the sphere, A >= 0, min(a) = 0
    _, omega, log_m = bingham_envelope(a)
    scale = 1.0 / np.sqrt(omega)
    for _ in range(max(1, max_proposals // batch)):
        y = noise.gaussian(1.0, batch * q).reshape(batch, q) * scale
        x = y / np.linalg.norm(y, axis=1, keepdims=True)
        x2 = x * x
        log_f = -(x2 @ a) + 0.5 * q * np.log(x2 @ omega)
        e = np.abs(noise.laplace(1.0, batch))
        accepted = np.flatnonzero(e >= log_m - log_f)
        if accepted.size:
            return basis @ x[accepted[0]]
    raise RuntimeError("Bingham rejection sampler exceeded its proposal limit")


def private_pca_exponential(g: np.ndarray, t: int, epsilon: float, noise: NoiseSource) -> np.ndarray:
    """PROJ(beta G, t) with beta = epsilon / t: an orthonormal basis (width x t) of a private rank-t subspace.

    Round k samples v_k on the unit sphere of span{v_1..v_{k-1}}^perp with density proportional to
    exp(beta <G v, v>). Guarantee: epsilon-DP under add/remove-one-record neighbours when every record has
    ||x_hat|| <= 1. Adding x_hat changes the score by beta (x_hat . v)^2, which lies in [0, beta]: the
    score is monotone, so numerator and normaliser move in the same direction and the density ratio is
    within e^{+-beta} (the textbook exponential-mechanism bound for monotone scores). The t rounds
    compose adaptively to t * beta = epsilon. Under replacement neighbours the same release is
    2 epsilon-DP: this is the "safe" (factor-2) reading of the paper's Lemma 5.1(3), which claims e^beta.
    """
    if t == 0:
        return np.zeros((g.shape[0], 0))
    beta = epsilon / t
    vectors: list[np.ndarray] = []
    for _ in range(t):
        basis = np.eye(g.shape[0]) if not vectors else null_space(np.column_stack(vectors).T)
        with noise.one_release(pure_price(beta)):  # the sampler's draws are its exact law, beta-DP (above)
            u = sample_bingham(beta * (basis.T @ g @ basis), noise)
        v = basis @ u
        vectors.append(v / np.linalg.norm(v))
    return np.column_stack(vectors)


def second_moment_mask(domain: Domain) -> np.ndarray:
    """Upper-triangle entries of G that can be non-zero: the diagonal and pairs of bits of *different* attributes.

    Two levels of one attribute never co-occur, so those entries are public structural zeros.
    """
    attr = np.repeat(np.arange(domain.n_attributes), domain.sizes)
    upper = np.triu(np.ones((domain.width, domain.width), dtype=bool))
    return upper & ((attr[:, None] != attr[None, :]) | np.eye(domain.width, dtype=bool))


def second_moment_l1_sensitivity(n_attributes: int) -> float:
    """L1 change of the upper triangle of G when one record is added or removed: (q + 1)/2.

    x_hat x_hat^T has q^2 entries 1/q on the record's bits; its upper triangle holds q(q+1)/2 of them.
    """
    return (n_attributes + 1) / 2.0


def cooccurrence_l1_sensitivity(n_attributes: int) -> float:
    """L1 change of the upper triangle of C = q G when one record is added or removed: q(q+1)/2 entries move by 1."""
    return n_attributes * (n_attributes + 1) / 2.0


def private_pca_laplace(cooccurrence: np.ndarray, domain: Domain, t: int, epsilon: float,
                        noise: NoiseSource) -> np.ndarray:
    """Top-t eigenvectors of C + E, E symmetric with Lap(q(q+1)/(2 epsilon)) on every free upper-triangle entry.

    Guarantee: epsilon-DP under add/remove-one-record neighbours (Laplace mechanism on the upper triangle
    of the integer co-occurrence counts C, L1 sensitivity q(q+1)/2; ``noise.add_laplace``, so with OpenDP
    the floating-point claim covers the whole noisy statistic). The eigenvectors are post-processing. This
    is the same law as Lap((q+1)/(2 epsilon)) on G = C/q: C and G have the same eigenvectors.
    """
    if t == 0:
        return np.zeros((cooccurrence.shape[0], 0))
    mask = second_moment_mask(domain)
    sensitivity = cooccurrence_l1_sensitivity(domain.n_attributes)
    upper = np.zeros_like(cooccurrence, dtype=np.float64)
    upper[mask] = noise.add_laplace(cooccurrence[mask], laplace_scale(epsilon, sensitivity), sensitivity=sensitivity)
    noisy = upper + np.triu(upper, 1).T
    return top_eigenvectors(noisy, t)


# ---------------------------------------------------------------- covering lattice and cells (A1)

def lattice_upper_bound(t: int, alpha: float) -> float:
    """Upper bound on |B_2^t cap (alpha/sqrt t) Z^t|: unit cubes around the points fit in radius R + sqrt(t)/2."""
    if t == 0:
        return 1.0
    radius = math.sqrt(t) / alpha + math.sqrt(t) / 2.0
    return math.pi ** (t / 2.0) / math.gamma(t / 2.0 + 1.0) * radius ** t


def lattice_points(t: int, alpha: float, limit: int | None = None) -> np.ndarray:
    """Integer vectors g with ||g||_2 <= sqrt(t)/alpha in lexicographic order (s x t); point = g * alpha/sqrt(t).

    This is the paper's alpha-covering of the unit ball of the t-dim subspace (Prop 3.7). Raises
    ValueError when more than ``limit`` points would be produced.
    """
    if t == 0:
        return np.zeros((1, 0), dtype=np.int64)
    r2 = t / (alpha * alpha)
    prefixes = np.zeros((1, 0), dtype=np.int64)
    used = np.zeros(1, dtype=np.float64)
    for _ in range(t):
        reach = np.floor(np.sqrt(np.maximum(r2 - used, 0.0)) + 1e-9).astype(np.int64)
        counts = 2 * reach + 1
        total = int(counts.sum())
        if limit is not None and total > limit:
            raise ValueError(f"the covering lattice has more than {limit} points")
        rep = np.repeat(np.arange(prefixes.shape[0]), counts)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        nxt = np.arange(total) - np.repeat(starts, counts) - np.repeat(reach, counts)
        keep = used[rep] + nxt * nxt <= r2 + 1e-9
        prefixes = np.column_stack([prefixes[rep], nxt])[keep]
        used = (used[rep] + nxt * nxt)[keep]
    return prefixes


def _lattice_keys(g: np.ndarray, radius: int) -> np.ndarray:
    base = 2 * radius + 1
    return ((g + radius) * (base ** np.arange(g.shape[1] - 1, -1, -1, dtype=np.int64))).sum(axis=1)


def assign_cells(z: np.ndarray, lattice: np.ndarray, alpha: float) -> np.ndarray:
    """Cell index of every projected point z_i (||z_i|| <= 1): a function of z_i alone.

    The nearest lattice point is round(z / h), h = alpha/sqrt(t), when that lies in the ball (distance
    <= alpha/2); otherwise truncation toward zero, which stays in the ball at distance < alpha. Every
    point is thus within alpha of its cell's centre, which is all Lemma 3.6 uses (spec FLAG 6). Rounding
    ties go to even: deterministic and data-independent.
    """
    t = lattice.shape[1]
    if t == 0:
        return np.zeros(z.shape[0], dtype=np.int64)
    h = alpha / math.sqrt(t)
    r2 = t / (alpha * alpha)
    g = np.rint(z / h).astype(np.int64)
    outside = (g * g).sum(axis=1) > r2 + 1e-9
    g[outside] = np.trunc(z[outside] / h).astype(np.int64)
    radius = int(math.floor(math.sqrt(r2) + 1e-9))
    keys = _lattice_keys(lattice, radius)
    order = np.argsort(keys)
    found = np.searchsorted(keys[order], _lattice_keys(g, radius))
    if np.any(found >= keys.size) or np.any(keys[order][np.minimum(found, keys.size - 1)] != _lattice_keys(g, radius)):
        raise ValueError("a projected point fell outside the covering (its norm exceeds 1)")
    return order[found]


def cell_counts(cells: np.ndarray, s: int, weights: np.ndarray | None = None) -> np.ndarray:
    """Records per cell (each record counted with its weight)."""
    w = None if weights is None else np.asarray(weights, dtype=np.float64)
    return np.bincount(cells, weights=w, minlength=s).astype(np.float64)


def cell_sums(codes: np.ndarray, domain: Domain, cells: np.ndarray, s: int,
              weights: np.ndarray | None = None) -> np.ndarray:
    """Per-cell sums of the one-hot rows (s x width), straight from the codes (each row times its weight)."""
    w = None if weights is None else np.asarray(weights, dtype=np.float64)
    flat = np.zeros(s * domain.width, dtype=np.float64)
    for j in range(domain.n_attributes):
        flat += np.bincount(cells * domain.width + domain.offsets[j] + codes[:, j], weights=w,
                            minlength=s * domain.width)
    return flat.reshape(s, domain.width)


# ---------------------------------------------------------------- damping, sensitivity, projections (A9)

def damped_centroids(sums: np.ndarray, counts: np.ndarray, damping: int) -> np.ndarray:
    """y~_j = sum_{i in F_j} x_i / max(|F_j|, b) (5.4); an empty cell gives 0."""
    return sums / np.maximum(counts, float(damping))[:, None]


def centroid_l1_sensitivity(n_attributes: int, damping: int) -> float:
    """L1 change of the whole damped-centroid matrix when one one-hot record is added or removed.

    Only the record's own cell moves. With m records before the addition: if m >= b the mean moves by
    (x - y)/(m + 1), and ||x - y||_1 <= 2 per attribute block, so <= 2q/(b + 1); if m <= b - 1 the damped
    sum moves by x/b, ||x||_1 = q, and q/b <= 2q/(b + 1) for integer b >= 1.
    """
    return 2.0 * n_attributes / (damping + 1.0)


def sum_l1_sensitivity(n_attributes: int) -> float:
    """L1 change of the matrix of cell sums when one one-hot record (L1 norm q) is added or removed."""
    return float(n_attributes)


def threshold_counts(noisy_counts: np.ndarray, threshold: float) -> np.ndarray:
    """Noisy counts with every entry <= threshold set to 0 (post-processing before pi_{Delta,1})."""
    return np.where(noisy_counts > threshold, noisy_counts, 0.0)


def simplex_l1_projection(v: np.ndarray) -> np.ndarray:
    """pi_{Delta,1}: clip negatives and renormalise (an L1-nearest point of the simplex);
    uniform if nothing is positive."""
    clipped = np.clip(v, 0.0, None)
    total = clipped.sum()
    if not total > 0.0:
        return np.full(v.size, 1.0 / v.size)
    return clipped / total


def project_rows_to_simplex(v: np.ndarray) -> np.ndarray:
    """Euclidean projection of every row onto the probability simplex (Held-Wolfe-Crowder / Duchi et al.)."""
    k = v.shape[1]
    srt = -np.sort(-v, axis=1)
    css = np.cumsum(srt, axis=1) - 1.0
    ind = np.arange(1, k + 1)
    cond = srt - css / ind > 0
    rho = k - 1 - np.argmax(cond[:, ::-1], axis=1)
    theta = css[np.arange(v.shape[0]), rho] / (rho + 1.0)
    return np.clip(v - theta[:, None], 0.0, None)


def project_blocks(points: np.ndarray, domain: Domain) -> np.ndarray:
    """pi_K for K = product of probability simplices: each attribute block projected on its simplex."""
    out = np.empty_like(points)
    for j in range(domain.n_attributes):
        lo, hi = domain.offsets[j], domain.offsets[j + 1]
        out[:, lo:hi] = project_rows_to_simplex(points[:, lo:hi])
    return out


# ---------------------------------------------------------------- k-anonymous equipartition (A2-A3)

def equipartition(cells: np.ndarray, k: int) -> np.ndarray:
    """Block label (0..k-1) of every record by divide-and-merge (section 3.6).

    With r = floor(n/k): each cell (in cell order, records by index) is cut into chunks of r records;
    the residues (< r per cell) are merged into one set R placed last, and the sequence is cut into k
    blocks: k - 1 blocks of exactly r and a last block of r + (n mod k). When k | n every block has
    exactly n/k records and is either a chunk of one cell or a chunk of R, as in the paper; otherwise
    the last block absorbs the remainder (spec FLAG 10), so the output is floor(n/k)-anonymous.
    """
    n = cells.size
    if not 1 <= k <= n:
        raise ValueError(f"k must be in [1, n={n}], got {k}")
    r = n // k
    order = np.argsort(cells, kind="stable")
    sorted_cells = cells[order]
    starts = np.flatnonzero(np.r_[True, sorted_cells[1:] != sorted_cells[:-1]])
    sizes = np.diff(np.r_[starts, n])
    pos = np.arange(n) - np.repeat(starts, sizes)
    full = pos < np.repeat((sizes // r) * r, sizes)
    sequence = np.concatenate([order[full], order[~full]])
    labels = np.empty(n, dtype=np.int64)
    labels[sequence] = np.minimum(np.arange(n) // r, k - 1)
    return labels


# ---------------------------------------------------------------- diagnostics (tests, measurements)

def partition_moments(x: np.ndarray, labels: np.ndarray, s: int) -> tuple[np.ndarray, np.ndarray]:
    """(w_j, y_j) of the conditional expectation E[X | partition] (4.1); empty cells get y_j = 0."""
    counts = np.bincount(labels, minlength=s).astype(np.float64)
    sums = np.zeros((s, x.shape[1]))
    np.add.at(sums, labels, x)
    return counts / x.shape[0], sums / np.maximum(counts, 1.0)[:, None]


def covariance_loss(x: np.ndarray, labels: np.ndarray, s: int) -> float:
    """||Sigma_X - Sigma_Y||_F = ||E XX^T - sum_j w_j y_j y_j^T||_F (Lemma 3.1)."""
    w, y = partition_moments(x, labels, s)
    m = x.T @ x / x.shape[0] - (y * w[:, None]).T @ y
    return float(np.linalg.norm(m))
