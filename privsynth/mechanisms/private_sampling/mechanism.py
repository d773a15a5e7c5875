"""Private sampling: a noiseless pure-DP mechanism (Boedihardjo, Strohmer & Vershynin, [PS] Algorithm 2;
spec docs/specs/private_sampling.md section 1), with the feasibility limits of Pierquin et al. (paper 002).

The algorithm, as implemented here:

1. **Encoding.** Records become compact binary codes (``encoding.to_binary``, ceil(log2 size) bits per
   attribute), mapped to {-1,1}^p with sign = 2 bit - 1 (``walsh`` in this package).
2. **Statistics**: the sums of the N = binom(p, <= d) Walsh features, from a ``Histogram`` (each distinct
   record weighted by its count) or from per-record batches in one streaming pass (the same sums). The
   moments are b = (sums + (D - n) c_S) / D with D = max(n, n_public, 1) (b_{} = 1): the data's moments,
   padded up to the declared public row count with those of the uniform density on S (see Privacy).
3. **Reduced space.** S = m points i.i.d. uniform on the cube, drawn from a public seed (the config's
   ``reduced_space_seed``, else one drawn from ``noise.post_rng``), never from the data. S is kept
   only if s_min(M) >= sqrt(m) / (2 e^d) ([PS] (9.1)); otherwise it is redrawn, at most
   ``max_redraws`` times, then the run fails with ``ReducedSpaceError``. Redrawing is free: S and the
   test do not depend on X.
4. **Shrinkage LP** for the minimal lambda, then the **proximal QP** on the wider box [delta/m, Delta/m]
   (``solvers``). lambda, h* and b are never logged or published.
5. **Release**: exactly k indices drawn i.i.d. from h* with ``noise.choice`` (the draw IS the privacy
   mechanism), decoded to records (``encoding.from_binary``; an invalid binary code maps to
   ``code mod size``, a fixed data-independent map, so decoding is post-processing), published as
   one-hot rows with weights 1/k and ``exact=True``. Never more than k rows.

Privacy. **This release is pure eps_used-DP with eps_used = k * (ln(min(Delta/delta, 1 + eta m / delta))
+ slack) <= epsilon, for add/remove-one neighbours (and replace-one) among datasets of ANY size**
(``privsynth.mechanisms.private_sampling.bounds``). eps_used and k are functions of the config alone:
* the box term ln(Delta/delta) holds for any two datasets whatever their sizes and whatever the solver
  did: every released density lies in [delta/m, Delta/m]^S up to the checked normalisation error, whose
  ratio effect (1 + 1e-9)/(1 - 1e-9) is the ``slack``;
* the Theorem 12.2 term (used only when the user declared ``n_public`` and it is smaller) is Lemma 12.1's
  bound for n = n_public, with the conservative Lemma 10.1 constant 18 (instead of the paper's 4); it
  assumes the LP/QP are solved exactly (they are solved to ~1e-9 here). The paper proves it for
  datasets of at least n rows. Here it holds for every dataset because the moments are normalised by
  D = max(n, n_public) and the missing D - n rows are filled by the uniform density on S (public):
      b = (sum_i w(x_i) + (D - n) c_S) / D,     c_S = mean of w over S.
  This is the moment vector of the density (sum_i 1_{x_i} + (D - n) u_S) / D on the cube. Adding one
  record changes it by (1_x - u_S) / n_public below n_public (low-degree L2 norm <= (2/n_public) N^{1/2}
  2^-p, since u_S is an average of point masses) and by at most (2/n) N^{1/2} 2^-p, n >= n_public,
  above: in every case the bound (9.6) that Lemma 12.1 uses with n = n_public, so the rest of the chain
  (Lemmas 9.5, 11.3, 10.4) gives ||h*_1 - h*_2||_inf <= eta(n_public) for every pair of neighbours.
  A dataset smaller than n_public only loses accuracy (its release is pulled toward the uniform density
  on S); nothing about its size shows in the charge, the number of rows or an error.
  Why not refuse a dataset with fewer than n_public rows (the paper's premise)? The refusal would be a
  deterministic function of n: for neighbours of n_public - 1 and n_public rows one gets an error, the
  other a release, an unbounded privacy loss; the statement would only cover the family of datasets of
  size >= n_public, and a wrong declaration would leak through the refusal. Falling back to the box
  bound is no better: the same k costs more than was charged, and a smaller k would show in the number
  of rows. Padding keeps one statement, exact for every dataset, with k and the charge fixed in advance.
* n is never taken from the data: ``n_public`` is declared by the user (public knowledge) before the
  data is read, and ``configure_for`` fills only data-free facts (the number of bits).
For any realistic n the box term binds, so one row costs ln(Delta/delta) (2.08 at the defaults) and at
epsilon < ln 3 no row can be released at all (ln(Delta/delta) > ln 3 for every admissible box).
``delta`` (the config's DP delta) is not used: the guarantee is pure.

Noise and floating point. Private sampling adds no noise, so OpenDP's floating-point claim covers
nothing here: the privacy randomness is ``noise.choice`` (the OS CSPRNG, or numpy when seeded), drawing
from h* through a float64 cumulative sum; the density-ratio bound holds for the float h* that is
sampled (it is clipped to the box and its normalisation is checked), not for the exact rounding of
every CDF step.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from privsynth.errors import InfeasibleRequestError  # noqa: F401  (re-exported: raised here)
from privsynth.mechanisms.base import MechanismConfig, Release, check_memory
from privsynth.mechanisms.private_sampling import bounds
from privsynth.mechanisms.private_sampling.solvers import fit_density, released_density
from privsynth.mechanisms.private_sampling.space import (
    decode_points,
    draw_reduced_space,
)
from privsynth.mechanisms.private_sampling.walsh import (
    bits_to_signs,
    n_walsh,
    walsh_moment_sums,
)
from privsynth.privacy.accounting import PrivacyCost
from privsynth.privacy.meter import price_of
from privsynth.privacy.noise import NoiseSource
from privsynth.schema.encoding import Domain, check_codes, one_hot, to_binary
from privsynth.schema.workload import Histogram, StatisticsInput

NAME = "private_sampling"


# --rows sets k: the guarantee is stated for exactly k released rows.
ROWS_OPTION = "k"


# --public-rows (the user's declaration that n is public knowledge) sets n_public; never read from the data.
PUBLIC_ROWS_OPTION = "n_public"


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
    n_public: a number of rows the user declares as public knowledge before the data is read (never
        taken from the data). It lets the Theorem 12.2 term apply: the moments are normalised by
        max(n, n_public), a smaller dataset being padded with the uniform density on S, so the
        guarantee holds for every dataset (see the module docstring). None = only the box bound.
    bits: p, the number of compact-binary bits of the schema's domain (public); filled by
        ``configure_for``. Needed for Theorem 12.2 and for the default m.
    max_memory_gb: refuse (in ``check_config``, before the budget is charged) a config whose reduced
        space and solver need more memory than this (estimate: ``memory_estimate_bytes``).
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
    bits: int | None = Field(default=None, ge=1)
    reduced_space_seed: int | None = Field(default=None, ge=0)
    max_redraws: int = Field(default=20, ge=1, le=1000)
    lp_solver: Literal["ipm", "highs", "cvxpy"] = "ipm"
    qp_solver: Literal["newton", "cvxpy"] = "newton"
    conservative_constant: bool = True
    max_memory_gb: float = Field(default=4.0, gt=0, allow_inf_nan=False)

    @field_validator("epsilon", "delta", "box_lower", "box_upper", "m_factor", "m", "k", "n_public", "bits",
                     "degree", "max_memory_gb", mode="before")
    @classmethod
    def _no_bool(cls, value: object, info) -> object:
        if isinstance(value, bool):
            raise ValueError(f"{info.field_name} must be a number, not a boolean")
        return value

    @model_validator(mode="after")
    def _check(self) -> Config:
        if not self.box_upper + self.box_lower > 2.0:
            raise ValueError(f"box_upper + box_lower must exceed 2 (so the uniform density is strictly inside the "
                             f"shrinkage box [2 delta, Delta - delta]); got box_lower={self.box_lower}, "
                             f"box_upper={self.box_upper}")
        if self.bits is not None:
            N = n_walsh(self.bits, self.degree)
            if self.m is not None and self.m < N:
                raise ValueError(f"m={self.m} is below the number of Walsh features N={N} (bits={self.bits}, "
                                 f"degree={self.degree}); S can never be well conditioned. Use m >= {2 * N}.")
        return self


def configure_for(config: Config, domain: Domain) -> Config:
    """The config completed with data-free facts: ``bits``, the domain's compact-binary width.

    Takes no data and no row count: n is private, and ``n_public`` is only ever what the user declared.
    Raises ValueError when ``bits`` was set to another width, or when the domain has no bit at all.
    """
    p = domain.binary_width
    if p == 0:
        raise ValueError("private_sampling needs a domain with at least one binary bit (every attribute has one level)")
    if config.bits is not None and config.bits != p:
        raise ValueError(f"bits={config.bits} does not match the domain's {p} compact-binary bits; leave bits unset")
    return Config.model_validate({**config.model_dump(), "bits": p})


def resolved_m(config: Config, bits: int | None = None) -> int | None:
    """m from the config, or ceil(m_factor * N) once p is known; None while it is not."""
    if config.m is not None:
        return config.m
    p = bits if bits is not None else config.bits
    return None if p is None else math.ceil(config.m_factor * n_walsh(p, config.degree))


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
    if config.n_public is not None:
        notes.append("n_public is the user's declaration (public, never read from the data); a dataset with fewer "
                     "rows is padded with the uniform density on the reduced space, so the guarantee holds for any n")
    if binding == "box":
        notes.append("binding bound: the box [delta/m, Delta/m] (one row costs ln(Delta/delta)); a larger n does not "
                     "help")
    else:
        notes.append("binding bound: Theorem 12.2 (Lemma 10.1 constant 18, conservative)"
                     if config.conservative_constant
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
        bits=config.bits, degree=config.degree,
        m=resolved_m(config), box_lower=config.box_lower, box_upper=config.box_upper, notes=tuple(notes))


def privacy_cost(config: Config) -> PrivacyCost:
    """Pure eps_used-DP (eps_used <= epsilon), from the config alone; raises InfeasibleRequestError."""
    report = check_feasible(config)
    guarantee = (f"pure {report.epsilon_used:.6g}-DP (add/remove one record, also replace-one; datasets of any "
                 f"size): {report.k} i.i.d. draw(s) from a density in [delta/m, Delta/m]^S (private sampling "
                 f"lemma), {report.epsilon_per_row:.6g} per row from the {report.binding_bound} bound")
    return PrivacyCost.pure(report.epsilon_used, guarantee=guarantee, notes=report.notes + (
        "private sampling adds no noise; the draws themselves are the mechanism",
        "delta is not used (pure DP)"))


def memory_estimate_bytes(config: Config, domain: Domain, rows: int) -> int:
    """A rough upper estimate of the peak memory of one release of ``rows`` records (public: config and
    domain only).

    The m x N Walsh matrix M of S, three m x N temporaries of the interior-point LP and the Newton QP
    (float64), and four N x N matrices (Gram, normal matrix, its factor, the QP Hessian); the "highs"
    and "cvxpy" solvers copy M into their own formats (three more m x N arrays). On Adult (p = 50,
    N = 1276, m = 10 208) this gives 448 MiB against a measured growth of 422 MiB. The released rows are
    one-hot float64 (width each) plus their codes and bits: a huge declared n_public can allow more
    rows than fit in memory, and that must be refused before the charge, not after.
    """
    p = domain.binary_width
    N = n_walsh(p, config.degree)
    m = resolved_m(config, p)
    copies = 4 if config.lp_solver == "ipm" and config.qp_solver == "newton" else 7
    return 8 * (copies * m * N + 4 * N * N) + m * p + rows * (8 * domain.width + 8 * domain.n_attributes + p)


def check_config(config: Config, domain: Domain) -> None:
    """Every problem visible from the config and the public domain, as a ValueError naming the option,
    so a run is refused before the budget is charged: a width mismatch (``bits``), a request the
    guarantee cannot cover (``InfeasibleRequestError``: k, epsilon, box), m below the number of Walsh
    features, and a release whose solvers and rows would need more than ``max_memory_gb``."""
    configured = configure_for(config, domain)
    report = check_feasible(configured)
    need = memory_estimate_bytes(configured, domain, report.k)
    if need > config.max_memory_gb * 2 ** 30:
        check_memory("private_sampling", need, config.max_memory_gb,
                     f"m={report.m} points x N={n_walsh(domain.binary_width, config.degree)} Walsh features of degree "
                     f"{config.degree} on {domain.binary_width} bits, and k={report.k} released rows",
                     "lower k, degree, m or m_factor")


def forecast(config: Config, domain: Domain, n_public: int | None = None) -> dict:
    """What a release would give, in plain words, before anything is charged (config and domain only).

    ``n_public`` (a declared public row count) overrides the config's for this forecast only.
    """
    if n_public is not None:
        config = Config.model_validate({**config.model_dump(), "n_public": int(n_public)})
    configured = configure_for(config, domain)
    try:
        report = check_feasible(configured)
    except InfeasibleRequestError as error:
        return {"mechanism": NAME, "feasible": False, "summary": str(error)}
    memory = memory_estimate_bytes(configured, domain, report.k)
    return {
        "mechanism": NAME, "feasible": True, "rows": report.k, "epsilon_used": report.epsilon_used,
        "epsilon_per_row": report.epsilon_per_row, "binding_bound": report.binding_bound, "noise": "none",
        "memory_bytes": memory,
        "summary": (f"{report.k} exact record(s) drawn from a density on m={report.m} random points of the "
                    f"{domain.binary_width}-bit cube that matches the {config.degree}-bit marginals; no noise is "
                    f"added, each row costs {report.epsilon_per_row:.4f} ({report.binding_bound} bound), "
                    f"{report.epsilon_used:.4f} in all; about {memory / 2 ** 20:.0f} MiB of memory. The row count "
                    f"is capped by the guarantee: use reduced_space or rap for a full-size table."),
    }


@dataclass(frozen=True, repr=False)
class PrivateSamplingStatistics:
    """Sums of the Walsh features of the encoded rows and the row count (private: never logged)."""

    moment_sums: np.ndarray
    n_rows: int
    bits: int
    degree: int

    def __repr__(self) -> str:
        return f"PrivateSamplingStatistics(bits={self.bits}, degree={self.degree}, values withheld)"

    def moments(self, n_public: int | None = None, filler: np.ndarray | None = None) -> np.ndarray:
        """b = (sums + (D - n) filler) / D with D = max(n, n_public, 1): the data's Walsh moments, padded
        up to the public row count with the moments ``filler`` of a public density (c_S in ``run``)."""
        floor = max(1, n_public or 0)
        if self.n_rows >= floor:
            return self.moment_sums / self.n_rows
        if filler is None:
            raise ValueError("padding the moments to the public row count needs the filler density's moments")
        filler = np.asarray(filler, dtype=np.float64)
        if filler.shape != self.moment_sums.shape:
            raise ValueError("the filler moments do not match the Walsh features")
        return (self.moment_sums + (floor - self.n_rows) * filler) / floor


def collect_statistics(data: StatisticsInput, domain: Domain, config: Config) -> PrivateSamplingStatistics:
    """The Walsh moment sums of degree <= d of the binary-encoded rows, from a ``Histogram`` (each distinct
    record weighted by its count) or from per-record code batches (one streaming pass); equal sums."""
    p = domain.binary_width
    if p == 0:
        raise ValueError("the domain has no binary bits (every attribute has one level)")
    if config.bits is not None and config.bits != p:
        raise ValueError(f"config.bits={config.bits} does not match the domain's {p} binary bits")
    sums = np.zeros(n_walsh(p, config.degree), dtype=np.float64)
    if isinstance(data, Histogram):
        codes = check_codes(data.codes, domain)
        counts = np.asarray(data.counts, dtype=np.float64)
        for start in range(0, codes.shape[0], _HISTOGRAM_BATCH):
            stop = start + _HISTOGRAM_BATCH
            sums += walsh_moment_sums(bits_to_signs(to_binary(codes[start:stop], domain)), config.degree,
                                      weights=counts[start:stop])
        return PrivateSamplingStatistics(moment_sums=sums, n_rows=data.n, bits=p, degree=config.degree)
    n = 0
    for batch in data:
        codes = check_codes(batch, domain)
        sums += walsh_moment_sums(bits_to_signs(to_binary(codes, domain)), config.degree)
        n += codes.shape[0]
    return PrivateSamplingStatistics(moment_sums=sums, n_rows=n, bits=p, degree=config.degree)


_HISTOGRAM_BATCH = 65_536


def run(statistics: PrivateSamplingStatistics, domain: Domain, config: Config, noise: NoiseSource) -> Release:
    """The DP release: exactly k records drawn from h* (pure eps_used-DP for datasets of any size, see the
    module docstring). k and eps_used come from the config alone; the data's size never changes them."""
    p = domain.binary_width
    if config.bits is not None and config.bits != p:
        raise ValueError(f"config.bits={config.bits} does not match the domain's {p} binary bits")
    # The same config the ledger was charged with: completing it here (e.g. with bits) could raise k.
    report = check_feasible(config)  # before any work: an infeasible request fails on public facts
    if statistics.bits != p or statistics.degree != config.degree:
        raise ValueError("the statistics were collected for another domain or degree")
    m = resolved_m(config, p)
    seed = config.reduced_space_seed
    if seed is None:
        seed = int(noise.post_rng.integers(0, 2**63 - 1))
    space = draw_reduced_space(np.random.default_rng(seed), m, p, config.degree, config.max_redraws)
    # Normalised by max(n, n_public) and padded with the uniform density on S (public): the Theorem 12.2
    # term then holds for datasets of every size, and no branch depends on n (module docstring).
    c_S = space.M.mean(axis=0)
    fit = fit_density(space.M, statistics.moments(config.n_public, c_S), config.box_lower, config.box_upper,
                      lp_solver=config.lp_solver, qp_solver=config.qp_solver, gram=space.gram)
    h = released_density(fit.q, config.box_lower, config.box_upper, bounds.SUM_TOLERANCE)
    del fit
    with noise.one_release(price_of(privacy_cost(config))):  # the draw is the mechanism (module docstring)
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
        "decoding": "compact binary, sign = 2 bit - 1; invalid codes -> code mod size",
        "released_invalid_fields": int(invalid.sum()),
    }
    return Release(mechanism=NAME, points=points, weights=np.full(report.k, 1.0 / report.k), exact=True,
                   public_facts=facts)
