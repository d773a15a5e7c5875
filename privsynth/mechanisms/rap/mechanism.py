"""RAP: relaxed adaptive projection (Aydore et al., ICML 2021; spec docs/specs/rap.md).

Guarantee: this release is rho-zCDP with rho = ``rho_allowance(epsilon, delta)`` for add/remove-one
neighbours (tables that differ by adding or removing one record): the largest rho whose tight zCDP
conversion (Canonne, Kamath & Steinke 2020) gives (epsilon, delta)-DP, so the report states exactly
the requested epsilon. (RAP's paper, Alg. 2, inverts the classic conversion instead,
rho = (sqrt(ln(1/delta) + epsilon) - sqrt(ln(1/delta)))^2, which spends only 0.88 of epsilon 1 at
delta 1e-9.) Every measurement goes through ``noise.add_gaussian`` (with SecureNoise, OpenDP applies
the Gaussian mechanism to the statistic itself).

What is measured (all on *counts*, so every sensitivity is stated under add/remove-one):
* the total count n: one Gaussian measurement, sensitivity 1, budget ``n_hat_share * rho``. It only
  normalises counts to proportions (post-processing), so n stays private;
* T rounds x K picks of report-noisy-max with Gumbel noise, then one Gaussian measurement per pick,
  budget ``rho0 = (1 - n_hat_share) * rho / (2 T K)`` each: exactly half of the rest selects, half
  measures (RAP Alg. 2, App. B). Gumbel scale beta = 1/sqrt(2 rho0) on sensitivity-1 scores is
  rho0-zCDP (bounded range, Cesar & Rogers 2021); Gaussian sigma = 1/sqrt(2 rho0) on an L2
  sensitivity-1 vector is rho0-zCDP. Every call draws fresh noise.

Granularity (``selection``):
* ``"marginal"`` (default, measured better on Adult, see benchmarks/README.md): a pick is a whole
  marginal S among the candidates not yet measured, scored by ``||c_S - n_hat A_S(X)||_1 - penalty_S``
  where c_S are the true counts, A_S(X) the current relaxed answers (fixed by earlier releases) and
  penalty_S = sqrt(2/pi) * sigma * cells(S) the expected L1 size of the measurement noise (data-free,
  as in AIM, McKenna et al. 2022). One record moves one cell of c_S by one: sensitivity 1. The pick
  is measured as the whole count vector c_S + N(0, sigma^2 I): its L2 sensitivity is 1 (one cell).
* ``"cell"`` (the paper's Alg. 2 literally): a pick is one cell, scored by |c - n_hat A(X)|
  (sensitivity 1) and measured alone (sensitivity 1).
K picks per round use ``noise.noisy_top_k``: peeling K Gumbel noisy-max calls, each at rho0 (the
seeded source draws them as one-shot Gumbel top-K, identical in distribution: Durfee & Rogers 2019).
Measured on Adult (3-way workload, eps 1, one seed): marginal selection 0.436 x the independent
model's 3-way TV vs cell selection 0.844 (T x K = 10 x 50 cells), and with ``SecureNoise`` one OpenDP
noisy-max over the 478,297 cells takes ~2.5 s (K per round), vs 0.03 s for 4 picks among 575 marginals.

Candidates: the workload is all k-way marginals (k = 2 or 3) or ``workload_size`` of them drawn with
the public ``workload_seed``. With ``candidates="downward_closure"`` the lower-order marginals
contained in workload marginals may be picked too (their counts are sums of the workload counts):
they cost the same rho0 but carry less noise per unit of information, which matters at small epsilon.

Projection (post-processing): Adam on n' relaxed rows, each attribute block a probability vector via
a softmax parametrisation (default; 0.436 vs 0.501 for the paper's sparsemax lazy projection, reading
(B) of the spec, on Adult at eps 1) or sparsemax; squared L2 loss over every measured answer (RAP Alg. 1), warm started
across rounds, stopped when the loss falls by less than ``tolerance`` (relative) over 25 steps or after
``max_iterations`` (default 100: fewer Adam steps per round fit less of the measurement noise and
measured better at eps 0.3, 1 and 3 than 200, see benchmarks/README.md).

Optional one-shot measurements (off by default; measured no better on Adult): ``init_one_way_share``
/ ``init_two_way_share`` of rho buy one Gaussian measurement of the concatenated counts of all 1-way
(resp. 2-way) marginals, L2 sensitivity sqrt(d) (resp. sqrt(d(d-1)/2)) under add/remove one record,
sigma = sqrt(#marginals / (2 rho_part)). They initialise every relaxed row at the noisy 1-way
distributions (the independent model, jittered by ``init_perturbation``), enter every projection with
inverse-variance weights, and are removed from the adaptive candidates. The adaptive rounds keep
Alg. 2's structure on the remaining budget.

Tuning note: the defaults (T, K, n', iterations, learning rate, candidates, parametrisation) were
chosen by measured accuracy on the real Adult table. That tuning is NOT private (the paper did the
same, Table 2); treat the defaults as public constants and do not re-tune them on data you release.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from privsynth.mechanisms.base import MechanismConfig, Release
from privsynth.mechanisms.rap.backend import (
    AdamState,
    MarginalPlan,
    ProjectionSettings,
    cell_scores,
    marginal_l1_scores,
    project,
    to_relaxed,
)
from privsynth.privacy.accounting import PrivacyCost, gaussian_sigma, gumbel_scale
from privsynth.privacy.noise import NoiseSource
from privsynth.privacy.spending import rho_allowance
from privsynth.schema.encoding import Domain
from privsynth.schema.workload import Marginal, accumulate_marginals, all_marginals, random_marginals

NAME = "rap"


class Config(MechanismConfig):
    """RAP parameters. Defaults tuned (non-privately) on Adult; see the module docstring."""

    k: Literal[2, 3] = Field(3, description="marginal order of the workload")
    workload_size: int | None = Field(None, description="number of random k-way marginals; None = all")
    workload_seed: int = Field(0, description="public seed of the random workload")
    selection: Literal["marginal", "cell"] = "marginal"
    candidates: Literal["workload", "downward_closure"] = "downward_closure"
    size_penalty: bool = Field(True, description="subtract the expected noise L1 from marginal scores")
    rounds: int = Field(12, description="T, adaptive rounds")
    picks_per_round: int = Field(6, description="K, queries (cells or marginals) measured per round")
    n_hat_share: float = Field(0.01, description="share of rho spent on the noisy total count")
    init_one_way_share: float = Field(
        0.0, description="share of rho for one Gaussian measurement of all 1-way marginals (0 = off)")
    init_two_way_share: float = Field(
        0.0, description="share of rho for one Gaussian measurement of all 2-way marginals (0 = off)")
    init_perturbation: float = Field(
        0.5, description="std of the Gaussian jitter on the initial logits when initialising from measured marginals")
    synthetic_rows: int = Field(1000, description="n', relaxed rows")
    max_iterations: int = Field(
        100, description="Adam steps per round at most (few steps regularise: see benchmarks/README.md)")
    learning_rate: float = Field(0.05, description="Adam learning rate")
    parametrization: Literal["softmax", "sparsemax"] = "softmax"
    clip_targets: bool = Field(False,
                               description="clip noisy proportions to [0, 1] before projecting (post-processing)")
    tolerance: float = Field(1e-3, description="early stop when the loss falls by less than this fraction per 25 steps")

    @field_validator("workload_size")
    @classmethod
    def _workload_size(cls, v: int | None) -> int | None:
        if v is not None and v < 1:
            raise ValueError(f"workload_size must be >= 1 or None, got {v}")
        return v

    @field_validator("rounds", "picks_per_round", "synthetic_rows", "max_iterations")
    @classmethod
    def _positive_int(cls, v: int, info) -> int:
        if v < 1:
            raise ValueError(f"{info.field_name} must be >= 1, got {v}")
        return v

    @field_validator("n_hat_share")
    @classmethod
    def _share(cls, v: float) -> float:
        if not (0 < v < 0.5):
            raise ValueError(f"n_hat_share must be in (0, 0.5), got {v}")
        return v

    @field_validator("init_one_way_share", "init_two_way_share")
    @classmethod
    def _init_share(cls, v: float, info) -> float:
        if not (0 <= v < 0.5):
            raise ValueError(f"{info.field_name} must be in [0, 0.5), got {v}")
        return v

    @field_validator("init_perturbation")
    @classmethod
    def _perturbation(cls, v: float) -> float:
        if not (math.isfinite(v) and v >= 0):
            raise ValueError(f"init_perturbation must be a finite number >= 0, got {v}")
        return v

    @model_validator(mode="after")
    def _shares_leave_room(self) -> Config:
        spent = self.n_hat_share + self.init_one_way_share + self.init_two_way_share
        if spent >= 0.9:
            raise ValueError(f"n_hat_share + init_one_way_share + init_two_way_share = {spent:.3g} must stay "
                             "below 0.9 to leave budget for the adaptive rounds")
        return self

    @field_validator("learning_rate", "tolerance")
    @classmethod
    def _positive_float(cls, v: float, info) -> float:
        if not (math.isfinite(v) and v > 0):
            raise ValueError(f"{info.field_name} must be a finite number > 0, got {v}")
        return v


# ---------------------------------------------------------------- budget (from the config alone)

@dataclass(frozen=True)
class Budget:
    rho: float
    rho_n: float
    rho_one_way: float   # one-shot measurement of every 1-way marginal (0 when off)
    rho_two_way: float   # one-shot measurement of every 2-way marginal (0 when off)
    rho0: float          # per selection call and per measurement call
    sigma_n: float       # Gaussian scale of the total count
    sigma: float         # Gaussian scale per measured count vector
    beta: float          # Gumbel scale per noisy-max call


def budget(config: Config) -> Budget:
    """rho = rho_allowance(epsilon, delta) (tight conversion); stated shares for n and the optional
    one-shot 1-/2-way measurements; the rest split in 2 T K equal calls (half select, half measure)."""
    rho = rho_allowance(config.epsilon, config.delta)
    rho_n = config.n_hat_share * rho
    rho_1 = config.init_one_way_share * rho
    rho_2 = config.init_two_way_share * rho
    rho0 = (rho - rho_n - rho_1 - rho_2) / (2 * config.rounds * config.picks_per_round)
    # sensitivity 1 (counts and scores, add/remove one record)
    return Budget(rho=rho, rho_n=rho_n, rho_one_way=rho_1, rho_two_way=rho_2, rho0=rho0,
                  sigma_n=gaussian_sigma(rho_n), sigma=gaussian_sigma(rho0), beta=gumbel_scale(rho0))


def releases_n_estimate(config: Config) -> bool:
    """The release carries n_estimate (the noisy total count), the default row count."""
    return True


def one_shot_sigma(rho_part: float, n_marginals: int) -> float:
    """Gaussian scale for the concatenated counts of ``n_marginals`` marginals over *distinct* attribute
    sets of one order (all 1-way or all 2-way). Adding or removing one record moves exactly one cell of
    each by 1, so the L2 sensitivity is sqrt(n_marginals) and sigma = sqrt(n_marginals / (2 rho_part))
    makes the measurement rho_part-zCDP."""
    return gaussian_sigma(rho_part, math.sqrt(n_marginals))


def init_marginals(config: Config, n_attributes: int) -> list[Marginal]:
    """The marginals measured once before the adaptive rounds (data-free)."""
    out: list[Marginal] = []
    if config.init_one_way_share > 0:
        out += all_marginals(n_attributes, 1)
    if config.init_two_way_share > 0 and n_attributes >= 2:
        out += all_marginals(n_attributes, 2)
    return out


def privacy_cost(config: Config) -> PrivacyCost:
    b = budget(config)
    t, k = config.rounds, config.picks_per_round
    init = ""
    if b.rho_one_way > 0:
        init += f"all 1-way marginals in one Gaussian measurement (L2 sensitivity sqrt(d)) at {b.rho_one_way:.6g}, "
    if b.rho_two_way > 0:
        init += ("all 2-way marginals in one Gaussian measurement (L2 sensitivity sqrt(d(d-1)/2)) at "
                 f"{b.rho_two_way:.6g}, ")
    return PrivacyCost.zcdp(
        b.rho,
        guarantee=f"RAP: {b.rho:.6g}-zCDP (add/remove one record): noisy total count at {b.rho_n:.6g}, {init}then "
        f"{t}x{k} report-noisy-max (Gumbel, scale {b.beta:.6g}) + Gaussian measurements (sigma {b.sigma:.6g}) "
        f"at {b.rho0:.6g} each",
        notes=(
            f"rho = rho_allowance(epsilon={config.epsilon}, delta={config.delta}): the largest rho whose tight "
            "zCDP conversion fits the requested (epsilon, delta)",
            f"selection granularity: {config.selection}; workload: "
            f"{'all' if config.workload_size is None else config.workload_size} {config.k}-way marginals (seed "
            f"{config.workload_seed}); candidates: {config.candidates}",
            "defaults were tuned on the real Adult data (non-private tuning, as in the paper)",
        ),
    )


def n_candidate_items(config: Config, domain: Domain) -> int:
    """How many items selection picks among (data-free): candidate marginals, or their cells."""
    cands = candidate_marginals(config, domain)
    if config.selection == "marginal":
        return len(cands)
    return sum(domain.size_of(m) for m in cands)


def check_config(config: Config, domain: Domain) -> None:
    """Every config problem visible before any data is read (the plan calls this before charging)."""
    if config.k > domain.n_attributes:
        raise ValueError(f"k={config.k} exceeds the number of attributes ({domain.n_attributes})")
    n_items = n_candidate_items(config, domain)
    if config.rounds * config.picks_per_round > n_items:
        raise ValueError(f"rounds * picks_per_round = {config.rounds * config.picks_per_round} exceeds the {n_items} "
                         f"candidate {config.selection}s of this domain; lower rounds or picks_per_round")


# ---------------------------------------------------------------- statistics (one streaming pass)

def workload(config: Config, domain: Domain) -> list[Marginal]:
    """The k-way workload marginals (data-free)."""
    if config.k > domain.n_attributes:
        raise ValueError(f"k={config.k} exceeds the number of attributes ({domain.n_attributes})")
    if config.workload_size is None:
        return all_marginals(domain.n_attributes, config.k)
    return random_marginals(domain.n_attributes, config.k, config.workload_size, config.workload_seed)


def candidate_marginals(config: Config, domain: Domain) -> list[Marginal]:
    """What selection may pick among: the workload, or it plus every marginal it contains, less the
    marginals already measured once up front (data-free)."""
    work = workload(config, domain)
    skip = set(init_marginals(config, domain.n_attributes))
    if config.candidates == "workload":
        return [m for m in work if m not in skip]
    closure = {sub for m in work for r in range(1, len(m) + 1) for sub in itertools.combinations(m, r)}
    return sorted(closure - skip, key=lambda m: (len(m), m))


def measured_universe(config: Config, domain: Domain) -> list[Marginal]:
    """Every marginal whose counts the mechanism may measure: the one-shot set, then the candidates."""
    return init_marginals(config, domain.n_attributes) + candidate_marginals(config, domain)


@dataclass(frozen=True)
class RapStatistics:
    """PRIVATE: true counts of every candidate marginal and the row count. Never publish."""

    counts: dict[Marginal, np.ndarray]
    n: int


def collect_statistics(batches: Iterable[np.ndarray], domain: Domain, config: Config) -> RapStatistics:
    """One pass over code batches: counts of every workload marginal (and of any one-shot marginal no
    workload marginal contains); every other marginal by summation."""
    work = workload(config, domain)
    extra = [m for m in init_marginals(config, domain.n_attributes) if not any(set(m) <= set(w) for w in work)]
    counts, n = accumulate_marginals(batches, domain, work + extra)
    for m in measured_universe(config, domain):
        if m in counts:
            continue
        parent = next(w for w in work if set(m) <= set(w))
        axes = tuple(i for i, a in enumerate(parent) if a not in m)
        shape = tuple(domain.sizes[a] for a in parent)
        counts[m] = counts[parent].reshape(shape).sum(axis=axes).ravel()
    return RapStatistics(counts=counts, n=int(n))


# ---------------------------------------------------------------- the mechanism

def _expected_noise_l1(sigma: float, cells: np.ndarray) -> np.ndarray:
    return math.sqrt(2.0 / math.pi) * sigma * cells.astype(np.float64)


def run(statistics: RapStatistics, domain: Domain, config: Config, noise: NoiseSource) -> Release:
    """The RAP release: n' relaxed rows (each block on the simplex), uniform weights. rho-zCDP as stated."""
    b = budget(config)
    first = init_marginals(config, domain.n_attributes)
    cands = candidate_marginals(config, domain)
    universe = first + cands
    plan = MarginalPlan(domain, universe)
    counts = plan.to_internal([statistics.counts[m] for m in universe])
    n_first = len(first)
    first_cells = int(plan.starts[n_first])          # the one-shot marginals come first in the plan
    t_rounds, k_picks = config.rounds, config.picks_per_round
    check_config(config, domain)
    n_items = len(cands) if config.selection == "marginal" else plan.total_cells - first_cells

    n_hat = max(1.0, float(noise.add_gaussian(np.array([float(statistics.n)]), b.sigma_n, sensitivity=1.0)[0]))

    noisy = np.zeros(plan.total_cells)           # noisy counts of measured cells, internal order
    cell_sigma = np.full(plan.total_cells, np.inf)  # noise scale of each measured cell (inf = unmeasured)
    init_sigmas: dict[str, float] = {}
    for order, rho_part in ((1, b.rho_one_way), (2, b.rho_two_way)):
        idx = [i for i, m in enumerate(first) if len(m) == order]
        if not idx:
            continue
        # One Gaussian draw over the concatenated count vector of all marginals of this order.
        sl = np.concatenate([np.arange(plan.starts[i], plan.starts[i + 1]) for i in idx])
        sigma_init = one_shot_sigma(rho_part, len(idx))
        noisy[sl] = noise.add_gaussian(counts[sl], sigma_init, sensitivity=math.sqrt(len(idx)))  # one_shot_sigma
        cell_sigma[sl] = sigma_init
        init_sigmas[f"sigma_init_{order}way"] = sigma_init

    rng = noise.post_rng
    shape = (config.synthetic_rows, domain.width)
    # The optimiser state is float32 (speed); the release is renormalised in float64 at the end.
    if first:
        theta = _initial_logits(plan, first, noisy, cell_sigma, domain, config, rng)
    else:
        theta = rng.uniform(-1.0, 1.0, size=shape)
    state = AdamState(theta=theta.astype(np.float32),
                      m=np.zeros(shape, dtype=np.float32), v=np.zeros(shape, dtype=np.float32))
    settings = ProjectionSettings(config.parametrization, config.learning_rate, config.max_iterations, config.tolerance)

    def fit() -> None:
        targets = np.clip(noisy / n_hat, 0.0, 1.0) if config.clip_targets else noisy / n_hat
        # Inverse-variance weights (generalised least squares); all equal to 1 without one-shot measurements.
        weight = np.where(np.isfinite(cell_sigma), (b.sigma / cell_sigma) ** 2, 0.0)
        sub, target, w = _measured_problem(plan, universe, domain, weight, targets)
        project(state, sub, target, w, domain, settings)

    if first:
        fit()
    penalty = _expected_noise_l1(b.sigma, plan.cells[n_first:]) if config.size_penalty else np.zeros(len(cands))
    measured = np.zeros(n_items, dtype=bool)
    for _ in range(t_rounds):
        relaxed = plan.answers(to_relaxed(state.theta, domain, config.parametrization))
        if config.selection == "marginal":
            scores = marginal_l1_scores(plan, counts, n_hat, relaxed)[n_first:] - penalty
        else:
            scores = cell_scores(counts, n_hat, relaxed)[first_cells:]
        open_items = np.flatnonzero(~measured)
        picks = open_items[noise.noisy_top_k(scores[open_items], b.beta, k_picks, sensitivity=1.0)]
        measured[picks] = True
        for i in picks:
            if config.selection == "marginal":
                lo, hi = plan.starts[n_first + i], plan.starts[n_first + i + 1]
            else:
                lo, hi = first_cells + i, first_cells + i + 1
            noisy[lo:hi] = noise.add_gaussian(counts[lo:hi], b.sigma, sensitivity=1.0)
            cell_sigma[lo:hi] = b.sigma
        fit()

    points = to_relaxed(state.theta.astype(np.float64), domain, config.parametrization)
    selected = [list(cands[i]) for i in np.flatnonzero(measured)] if config.selection == "marginal" else None
    return Release(
        mechanism=NAME,
        points=points,
        weights=np.full(config.synthetic_rows, 1.0 / config.synthetic_rows),
        exact=False,
        public_facts={
            # All of these are config-derived or DP outputs covered by the guarantee.
            "rho": b.rho, "sigma": b.sigma, "gumbel_beta": b.beta, "sigma_n": b.sigma_n,
            "rounds": t_rounds, "picks_per_round": k_picks, "selection": config.selection,
            "synthetic_rows": config.synthetic_rows, "n_estimate": n_hat, **init_sigmas,
            **({"measured_marginals": selected} if selected is not None else {}),
        },
    )


def _initial_logits(plan: MarginalPlan, first: list[Marginal], noisy: np.ndarray, cell_sigma: np.ndarray,
                    domain: Domain, config: Config, rng: np.random.Generator) -> np.ndarray:
    """Post-processing of the one-shot measurements: every row starts at the noisy 1-way distributions
    (so unmeasured marginals start at the independent model), jittered to break the rows' symmetry.
    A 1-way estimate comes from the 1-way measurement and the row sums of the 2-way ones, combined by
    inverse variance; negative counts are clipped and a floor keeps every level reachable."""
    est_sum = [np.zeros(t) for t in domain.sizes]
    prec_sum = np.zeros(domain.n_attributes)
    for i, m in enumerate(first):
        lo, hi = plan.starts[i], plan.starts[i + 1]
        sigma = float(cell_sigma[lo])
        canonical = np.empty(hi - lo)
        canonical[plan.canonical_index[i]] = noisy[lo:hi]   # internal -> canonical (row-major over m)
        table = canonical.reshape([domain.sizes[a] for a in m])
        for pos, a in enumerate(m):
            other = tuple(j for j in range(len(m)) if j != pos)
            summed = table.sum(axis=other) if other else table
            var = sigma**2 * (table.size // domain.sizes[a])   # cells summed per level
            est_sum[a] += summed / var
            prec_sum[a] += 1.0 / var
    shape = (config.synthetic_rows, domain.width)
    base = np.empty(domain.width)
    for a, (lo, hi) in enumerate(zip(domain.offsets[:-1], domain.offsets[1:])):
        t = hi - lo
        p = np.full(t, 1.0 / t) if prec_sum[a] == 0 else np.clip(est_sum[a] / prec_sum[a], 0.0, None)
        p = p / p.sum() if p.sum() > 0 else np.full(t, 1.0 / t)
        p = np.maximum(p, 1e-3 / t)
        base[lo:hi] = np.log(p / p.sum()) if config.parametrization == "softmax" else p / p.sum()
    jitter = rng.normal(0.0, config.init_perturbation, size=shape)
    if config.parametrization == "sparsemax":
        jitter *= 0.1   # sparsemax is linear on the simplex: logits-scale jitter would swamp p
    return base[None, :] + jitter


def _measured_problem(plan: MarginalPlan, universe: list[Marginal], domain: Domain, weight: np.ndarray,
                      targets: np.ndarray) -> tuple[MarginalPlan, np.ndarray, np.ndarray]:
    """The projection problem over the marginals holding at least one measured cell (weight > 0)."""
    keep = [i for i in range(len(universe)) if (weight[plan.starts[i]:plan.starts[i + 1]] > 0).any()]
    sub = MarginalPlan(domain, [universe[i] for i in keep])
    sl = [slice(plan.starts[i], plan.starts[i + 1]) for i in keep]
    target = np.concatenate([targets[s] for s in sl])
    w = np.concatenate([weight[s] for s in sl])
    return sub, target, w
