"""Private sampling: a noiseless pure-DP mechanism (Boedihardjo, Strohmer & Vershynin, [PS] Algorithm 2;
spec private_sampling.md section 1), with the feasibility limits of Pierquin et al. (paper 002).

The algorithm, as implemented here:

1. **Encoding.** Records become compact binary codes (``encoding.to_binary``, ceil(log2 size) bits per
   attribute), mapped to {-1,1}^p with sign = 2 bit - 1 (``privsynth.walsh``).
2. **Statistics** (one streaming pass): the sums of the N = binom(p, <= d) Walsh features; the data
   moments are b = sums / n (b_{} = 1).
3. **Reduced space.** S = m points i.i.d. uniform on the cube, drawn from a public seed (the config's
   ``reduced_space_seed``, else one drawn from ``noise.post_rng``), never from the data. S is kept
   only if s_min(M) >= sqrt(m) / (2 e^d) ([PS] (9.1)); otherwise it is redrawn, at most
   ``max_redraws`` times, then the run fails with ``ReducedSpaceError``. Redrawing is free: S and the
   test do not depend on X.
4. **Shrinkage LP** for the minimal lambda, then the **proximal QP** on the wider box [delta/m, Delta/m]
   (``private_sampling_solvers``). lambda, h* and b are never logged or published.
5. **Release**: exactly k indices drawn i.i.d. from h* with ``noise.choice`` (the draw IS the privacy
   mechanism), decoded to records (``encoding.from_binary``; an invalid binary code maps to
   ``code mod size``, a fixed data-independent map, so decoding is post-processing), published as
   one-hot rows with weights 1/k and ``exact=True``. Never more than k rows.

Privacy. **This release is pure eps_used-DP with eps_used = k * (ln(min(Delta/delta, 1 + eta m / delta))
+ slack) <= epsilon** (``privsynth.privacy.private_sampling_bounds``):
* the box term ln(Delta/delta) holds for any neighbouring datasets (add/remove or replace one), any n
  and any solver accuracy: every released density lies in [delta/m, Delta/m]^S up to the checked
  normalisation error, whose ratio effect (1 + 1e-9)/(1 - 1e-9) is the ``slack``;
* the Theorem 12.2 term (used only when ``n_public`` and ``bits`` are known and it is smaller) holds
  for datasets of at least n_public rows, with the conservative Lemma 10.1 constant 18 (instead of the
  paper's 4), and assumes the LP/QP are solved exactly (they are solved to ~1e-9 here).
For any realistic n the box term binds, so one row costs ln(Delta/delta) (2.08 at the defaults) and at
epsilon < ln 3 no row can be released at all (ln(Delta/delta) > ln 3 for every admissible box).
``delta`` (the config's DP delta) is not used: the guarantee is pure.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from privsynth.encoding import Domain, from_binary, one_hot, to_binary
from privsynth.mechanisms.base import MechanismConfig, Release
from privsynth.mechanisms.private_sampling_solvers import fit_density, released_density
from privsynth.privacy import private_sampling_bounds as bounds
from privsynth.privacy.accounting import PrivacyCost
from privsynth.privacy.noise import NoiseSource
from privsynth.walsh import bits_to_signs, n_walsh, signs_to_bits, walsh_features, walsh_moment_sums

NAME = "private_sampling"
# --rows sets k: the guarantee is stated for exactly k released rows.
ROWS_OPTION = "k"


class InfeasibleRequestError(ValueError):
    """The requested rows exceed what the privacy guarantee allows at this epsilon (or it allows none)."""


class ReducedSpaceError(RuntimeError):
    """No well-conditioned reduced space was found within the allowed number of draws."""


class Config(MechanismConfig):
    """Public configuration of private sampling.

    epsilon: pure-DP budget; the release spends eps_used <= epsilon (reported).
    delta: accepted for the shared interface; unused (the release is pure epsilon-DP).
    degree: d, the largest Walsh degree (marginal dimension, in bits) that is matched.
    box_lower, box_upper: the paper's delta and Delta; h* lies in [delta/m, Delta/m]. One row costs
        ln(Delta/delta). Need 0 < delta < 1/2 and Delta + delta > 2 (Lemma 12.1; they also make u_m
        strictly feasible for the shrinkage LP).
    m: size of the reduced space S; None = ceil(m_factor * N) with N = binom(p, <= d).
    k: rows to release; None = the largest k the guarantee allows.
    n_public: a public lower bound on the number of rows (Theorem 12.2 needs it); None = unknown, then
        only the always-valid box bound is used. ``n_public_is_row_count`` says the pipeline filled it
        with the input's row count, i.e. the row count is treated as public.
    bits: p, the number of compact-binary bits of the schema's domain (public); filled by
        ``configure_for``. Needed for Theorem 12.2 and for the default m.
    reduced_space_seed: public seed for S; None = drawn from noise.post_rng (data-independent either way).
    max_redraws: how many reduced spaces to try before failing.
    lp_solver, qp_solver: "ipm"/"newton" (fast, default) or "cvxpy" (reference: HiGHS / Clarabel);
        "highs" = HiGHS through scipy.
    conservative_constant: use 18 instead of 4 in Lemma 10.1 (spec section 1.3 flag).
    """

    degree: int = Field(default=2, ge=1, le=4)
    box_lower: float = Field(default=0.25, gt=0, lt=0.5, allow_inf_nan=False)
    box_upper: float = Field(default=2.0, gt=0, allow_inf_nan=False)
    m: int | None = Field(default=None, ge=2)
    m_factor: float = Field(default=8.0, ge=1.0, allow_inf_nan=False)
    k: int | None = Field(default=None, ge=1)
    n_public: int | None = Field(default=None, ge=1)
    n_public_is_row_count: bool = False
    bits: int | None = Field(default=None, ge=1)
    reduced_space_seed: int | None = Field(default=None, ge=0)
    max_redraws: int = Field(default=20, ge=1, le=1000)
    lp_solver: Literal["ipm", "highs", "cvxpy"] = "ipm"
    qp_solver: Literal["newton", "cvxpy"] = "newton"
    conservative_constant: bool = True

    @field_validator("epsilon", "delta", "box_lower", "box_upper", "m_factor", "m", "k", "n_public", "bits",
                     "degree", mode="before")
    @classmethod
    def _no_bool(cls, value: object, info) -> object:
        if isinstance(value, bool):
            raise ValueError(f"{info.field_name} must be a number, not a boolean")
        return value

    @model_validator(mode="after")
    def _check(self) -> "Config":
        if not self.box_upper + self.box_lower > 2.0:
            raise ValueError(f"box_upper + box_lower must exceed 2 (so the uniform density is strictly inside the "
                             f"shrinkage box [2 delta, Delta - delta]); got box_lower={self.box_lower}, "
                             f"box_upper={self.box_upper}")
        if self.n_public_is_row_count and self.n_public is None:
            raise ValueError("n_public_is_row_count is set but n_public is not")
        if self.bits is not None:
            N = n_walsh(self.bits, self.degree)
            if self.m is not None and self.m < N:
                raise ValueError(f"m={self.m} is below the number of Walsh features N={N} (bits={self.bits}, "
                                 f"degree={self.degree}); S can never be well conditioned. Use m >= {2 * N}.")
        return self


def configure_for(config: Config, domain: Domain, input_rows: int | None = None) -> Config:
    """The config completed with public facts: ``bits`` from the domain and, when ``n_public`` is unset
    and the pipeline passes the input's row count, ``n_public`` = that count (treated as public)."""
    update: dict = {"bits": domain.binary_width}
    if config.n_public is None and input_rows is not None:
        update.update(n_public=int(input_rows), n_public_is_row_count=True)
    return Config.model_validate({**config.model_dump(), **update})


def resolved_m(config: Config, bits: int | None = None) -> int | None:
    """m from the config, or ceil(m_factor * N) once p is known; None while it is not."""
    if config.m is not None:
        return config.m
    p = bits if bits is not None else config.bits
    return None if p is None else math.ceil(config.m_factor * n_walsh(p, config.degree))


# ------------------------------------------------------------------------------------ privacy

@dataclass(frozen=True)
class FeasibilityReport:
    """What the guarantee allows for a config (public: computed from the config alone)."""

    epsilon_requested: float
    k_requested: int | None
    k_allowed: int
    k: int
    epsilon_used: float
    epsilon_per_row: float
    binding_bound: str
    n_public: int | None
    n_treated_as_public: bool
    bits: int | None
    degree: int
    m: int | None
    box_lower: float
    box_upper: float
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_json(self) -> dict:
        out = asdict(self)
        out["notes"] = list(self.notes)
        return out


def _allowance(config: Config) -> tuple[int, float, str]:
    m = resolved_m(config)
    per, binding = bounds.per_sample_epsilon(
        config.box_lower, config.box_upper, n=config.n_public, m=m, p=config.bits, d=config.degree,
        conservative=config.conservative_constant, slack=bounds.numerical_slack())
    k_allowed = bounds.k_max_combined(
        config.epsilon, config.box_lower, config.box_upper, n=config.n_public, m=m, p=config.bits,
        d=config.degree, conservative=config.conservative_constant, slack=bounds.numerical_slack())
    return k_allowed, per, binding


def check_feasible(config: Config) -> FeasibilityReport:
    """The rows the guarantee allows and what they cost; raises InfeasibleRequestError when the request
    exceeds it or it allows none. Reads no data: call it before the data is read."""
    k_allowed, per, binding = _allowance(config)
    notes = []
    if config.n_public is None or config.bits is None:
        notes.append("n_public or bits unknown: only the always-valid box bound k * ln(Delta/delta) is used")
    if config.n_public_is_row_count:
        notes.append("n_public is the input's row count, which is treated as public")
    if binding == "box":
        notes.append("binding bound: the box [delta/m, Delta/m] (one row costs ln(Delta/delta)); a larger n does not help")
    else:
        notes.append("binding bound: Theorem 12.2 (Lemma 10.1 constant 18, conservative)" if config.conservative_constant
                     else "binding bound: Theorem 12.2 with the paper's Lemma 10.1 constant 4")
    requested = config.k
    if k_allowed == 0 or (requested is not None and requested > k_allowed):
        want = requested if requested is not None else 1
        raise InfeasibleRequestError(
            f"private_sampling cannot release {want} row(s) at epsilon={config.epsilon:g}: each row costs "
            f"{per:.4f} (binding bound: {binding}), so the guarantee allows at most {k_allowed} row(s). "
            f"Options: request at most {k_allowed} row(s)" + (" (none is possible)" if k_allowed == 0 else "")
            + f"; raise epsilon to at least {want * per:.4f}; narrow the box (box_upper/box_lower, now "
            f"{config.box_upper:g}/{config.box_lower:g}); or use another mechanism (reduced_space or rap), "
            f"whose number of synthetic rows is free post-processing.")
    k = requested if requested is not None else k_allowed
    return FeasibilityReport(
        epsilon_requested=config.epsilon, k_requested=requested, k_allowed=k_allowed, k=k, epsilon_used=k * per,
        epsilon_per_row=per, binding_bound=binding, n_public=config.n_public,
        n_treated_as_public=config.n_public_is_row_count, bits=config.bits, degree=config.degree,
        m=resolved_m(config), box_lower=config.box_lower, box_upper=config.box_upper, notes=tuple(notes))


def privacy_cost(config: Config) -> PrivacyCost:
    """Pure eps_used-DP (eps_used <= epsilon), from the config alone; raises InfeasibleRequestError."""
    report = check_feasible(config)
    guarantee = (f"pure {report.epsilon_used:.6g}-DP (add/remove or replace one record): {report.k} i.i.d. draw(s) "
                 f"from a density in [delta/m, Delta/m]^S (private sampling lemma), "
                 f"{report.epsilon_per_row:.6g} per row from the {report.binding_bound} bound")
    return PrivacyCost.pure(report.epsilon_used, guarantee=guarantee, notes=report.notes + (
        "private sampling adds no noise; the draws themselves are the mechanism",
        "delta is not used (pure DP)"))


# ------------------------------------------------------------------------------------ statistics

@dataclass(frozen=True, repr=False)
class PrivateSamplingStatistics:
    """Sums of the Walsh features of the encoded rows and the row count (private: never logged)."""

    moment_sums: np.ndarray
    n_rows: int
    bits: int
    degree: int

    def __repr__(self) -> str:
        return f"PrivateSamplingStatistics(bits={self.bits}, degree={self.degree}, values withheld)"

    def moments(self) -> np.ndarray:
        if self.n_rows < 1:
            raise ValueError("the input has no rows")
        return self.moment_sums / self.n_rows


def collect_statistics(batches: Iterable[np.ndarray], domain: Domain, config: Config) -> PrivateSamplingStatistics:
    """One streaming pass: the Walsh moment sums of degree <= d of the binary-encoded rows."""
    p = domain.binary_width
    if p == 0:
        raise ValueError("the domain has no binary bits (every attribute has one level)")
    if config.bits is not None and config.bits != p:
        raise ValueError(f"config.bits={config.bits} does not match the domain's {p} binary bits")
    sums = np.zeros(n_walsh(p, config.degree), dtype=np.float64)
    n = 0
    for codes in batches:
        codes = np.asarray(codes)
        if codes.ndim != 2 or codes.shape[1] != domain.n_attributes:
            raise ValueError(f"every batch must have {domain.n_attributes} code columns, got shape {codes.shape}")
        if codes.size and (codes.min() < 0 or np.any(codes.max(axis=0) >= np.asarray(domain.sizes))):
            raise ValueError("codes outside the domain's levels")
        sums += walsh_moment_sums(bits_to_signs(to_binary(codes, domain)), config.degree)
        n += codes.shape[0]
    return PrivateSamplingStatistics(moment_sums=sums, n_rows=n, bits=p, degree=config.degree)


# ------------------------------------------------------------------------------------ reduced space

@dataclass(frozen=True, repr=False)
class ReducedSpace:
    """S (m x p signs), its Walsh matrix M, M^T M, s_min(M) and how many draws it took (all data-independent)."""

    signs: np.ndarray
    M: np.ndarray
    gram: np.ndarray
    s_min: float
    threshold: float
    attempts: int

    def __repr__(self) -> str:
        return f"ReducedSpace(m={self.signs.shape[0]}, p={self.signs.shape[1]}, s_min={self.s_min:.4g}, attempts={self.attempts})"


def smallest_singular_value(gram: np.ndarray) -> float:
    """s_min(M) = sqrt(lambda_min(M^T M)) (O(N^3) on the N x N Gram matrix instead of an m x N SVD)."""
    return float(math.sqrt(max(float(np.linalg.eigvalsh(gram)[0]), 0.0)))


def draw_reduced_space(rng: np.random.Generator, m: int, p: int, d: int, max_redraws: int) -> ReducedSpace:
    """S uniform i.i.d. on {-1,1}^p, redrawn until s_min(M) >= sqrt(m)/(2e^d) ([PS] (9.1), section 3.3).

    Takes no data: S is independent of X by construction."""
    N = n_walsh(p, d)
    if m < N:
        raise ReducedSpaceError(f"m={m} < N={N} Walsh features: s_min(M) = 0 for every S; use m >= {2 * N}")
    threshold = bounds.well_conditioning_threshold(m, d)
    best = 0.0
    for attempt in range(1, max_redraws + 1):
        signs = (2 * rng.integers(0, 2, size=(m, p), dtype=np.int8) - 1).astype(np.int8)
        M = walsh_features(signs, d)
        gram = M.T @ M
        s_min = smallest_singular_value(gram)
        if s_min >= threshold:
            return ReducedSpace(signs=signs, M=M, gram=gram, s_min=s_min, threshold=threshold, attempts=attempt)
        best = max(best, s_min)
    raise ReducedSpaceError(
        f"no well-conditioned reduced space in {max_redraws} draws (m={m}, N={N}, best s_min={best:.4g} < "
        f"threshold sqrt(m)/(2e^d)={threshold:.4g}); increase m (m >= 2N usually passes at once) or max_redraws")


def decode_points(signs: np.ndarray, domain: Domain) -> tuple[np.ndarray, np.ndarray]:
    """Codes of cube points (invalid binary codes -> code mod size) and the mask of invalid fields."""
    return from_binary(signs_to_bits(signs), domain)


# ------------------------------------------------------------------------------------ run

def run(statistics: PrivateSamplingStatistics, domain: Domain, config: Config, noise: NoiseSource) -> Release:
    """The DP release: exactly k records drawn from h* (pure eps_used-DP, see the module docstring)."""
    p = domain.binary_width
    if config.bits is not None and config.bits != p:
        raise ValueError(f"config.bits={config.bits} does not match the domain's {p} binary bits")
    # The same config the ledger was charged with: completing it here (e.g. with bits) could raise k.
    report = check_feasible(config)  # before any work: an infeasible request fails on public facts
    if statistics.bits != p or statistics.degree != config.degree:
        raise ValueError("the statistics were collected for another domain or degree")
    if report.binding_bound == "theorem_12_2" and statistics.n_rows < (config.n_public or 0):
        # Theorem 12.2 covers only datasets of at least n_public rows; the box bound would not need this.
        raise ValueError("the input has fewer rows than n_public, the public lower bound the guarantee relies on")
    m = resolved_m(config, p)
    seed = config.reduced_space_seed
    if seed is None:
        seed = int(noise.post_rng.integers(0, 2**63 - 1))
    space = draw_reduced_space(np.random.default_rng(seed), m, p, config.degree, config.max_redraws)
    fit = fit_density(space.M, statistics.moments(), config.box_lower, config.box_upper,
                      lp_solver=config.lp_solver, qp_solver=config.qp_solver, gram=space.gram)
    h = released_density(fit.q, config.box_lower, config.box_upper, bounds.SUM_TOLERANCE)
    del fit
    indices = noise.choice(h, report.k)
    codes, invalid = decode_points(space.signs[indices], domain)
    points = one_hot(codes, domain, dtype=np.float64)
    facts = {
        "mechanism": NAME,
        "rows": int(report.k),
        "rows_allowed": int(report.k_allowed),
        "epsilon_used": report.epsilon_used,
        "epsilon_per_row": report.epsilon_per_row,
        "binding_bound": report.binding_bound,
        "bits": p,
        "degree": config.degree,
        "walsh_features": n_walsh(p, config.degree),
        "m": m,
        "box": [config.box_lower, config.box_upper],
        "reduced_space_seed": seed,
        "reduced_space_attempts": space.attempts,
        "s_min": space.s_min,
        "s_min_threshold": space.threshold,
        "n_public": config.n_public,
        "n_treated_as_public": config.n_public_is_row_count,
        "decoding": "compact binary, sign = 2 bit - 1; invalid codes -> code mod size",
        "released_invalid_fields": int(invalid.sum()),
    }
    return Release(mechanism=NAME, points=points, weights=np.full(report.k, 1.0 / report.k), exact=True,
                   public_facts=facts)
