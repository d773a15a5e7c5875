"""AIM: an adaptive and iterative mechanism (McKenna, Mullins, Sheldon, Miklau, VLDB 2022).

Guarantee: this release is rho-zCDP with rho = ``rho_allowance(epsilon, delta)`` for add/remove-one
neighbours (tables that differ by adding or removing one record), the largest rho whose tight
conversion (Canonne, Kamath & Steinke 2020) gives (epsilon, delta)-DP, so the report states exactly
the requested epsilon.

What is measured, and what each step costs (every count marginal has L2 sensitivity 1 and every
selection score has sensitivity equal to its weight under add/remove-one):
* start: every 1-way marginal a, Gaussian sigma_a = sigma_0 * sqrt(mean_b K_b^(2/3)) / K_a^(1/3) (K_a its
  number of levels, public; rho = 1/(2 sigma_a^2) per marginal), so the start spends d / (2 sigma_0^2) with
  sigma_0 = sqrt(T / (2 * 0.9 * rho)) and T = ``max_rounds`` (default: 4 d up to 16 attributes, then
  max(1.5 d, 1024 / d); the paper: 16 d, and one sigma_0 for every attribute: ``schedule.start_sigmas`` says why);
* domain compression (post-processing of the 1-way measurements, ``compression.py``): per attribute,
  the levels whose noisy count is below ``compress_threshold * sigma_0`` (what the rounds can resolve) are
  merged into one level (a number column's bins only with their rare neighbours; a ``<missing>`` or
  ``<out-of-domain>`` level below its own sigma_a is read as empty and joins the fullest level), and every later
  round works on the merged levels. The merge map is a function of DP outputs and the schema only, and a marginal
  on merged levels is still a count table where one record moves one cell by one;
* each round t: one candidate marginal r of the workload's downward closure is selected by the
  exponential mechanism (Gumbel report-noisy-max, ``noise.noisy_max``) on
      q_r = w_r * (||M_r(D) - M_r(p_hat)||_1 - sqrt(2/pi) * sigma_t * cells(r)),
  where w_r = sum_{s in W} c_s |r ∩ s| (c_s the workload weights) and p_hat the current model,
  a function of earlier DP outputs only. One record moves one cell of M_r(D) by one, so q_r moves
  by at most w_r: the sensitivity is Delta = max_r w_r and the Gumbel scale 2 Delta / eps_t makes
  the selection eps_t-DP, i.e. eps_t^2 / 8-zCDP (bounded range, Cesar & Rogers 2021). The selected
  marginal is measured with Gaussian noise sigma_t: 1 / (2 sigma_t^2)-zCDP. Round budget:
  eps_t = sqrt(8 * 0.1 * rho / T) and sigma_t as sigma_0 initially, i.e. 0.1 / 0.9 of the round's
  rho selects / measures;
* annealing (paper, Alg. 2): when a measurement changes the model's estimate of that marginal by less
  than sqrt(2/pi) * sigma_t * cells(r) in L1, sigma halves and eps doubles (the round cost x4);
* a round cap (``rounds_cap``, a work cap from the config and d): when what is left, spread over the
  rounds still allowed, exceeds the round cost, the round cost is raised to that share (same 0.1 / 0.9
  split), so the cap is reached with the budget spent (``schedule.next_round``);
* the last round: once what is left is below twice the round cost, or one round is left under the
  cap, one round spends exactly what is left (0.9 measures, 0.1 selects) and the mechanism stops.
The number of rounds and each round's budget depend on earlier DP outputs; the running total never
exceeds rho, and composing zCDP steps whose budgets are chosen adaptively, stopping before a fixed
total is passed, is rho-zCDP by the Renyi / zCDP privacy filter (Feldman & Zrnic 2021; Whitehouse,
Ramdas, Rogers & Wu 2023), the argument of the AIM paper's privacy theorem.

Candidates of a round are those whose addition keeps the model (mbi's junction tree size) under
``max_model_size_mb * rho_used / rho``, plus every marginal inside a clique of the model's junction
tree (as mbi's AIM); ``selection.py`` states why scoring only part of the pool keeps the law. When the workload's
closure holds more than ``max_candidates`` marginals (wide tables: 26,289 for a 54-column 3-way workload), each round
scores a uniform random subset of that many, drawn independently of the data: the exponential mechanism's guarantee
holds for any candidate set fixed before the scores are computed, and the sensitivity stays max_r w_r over the whole
closure.

Post-processing (no privacy cost): the graphical model (``model.py``) fitted to all noisy measurements by
mirror descent, warm started across rounds; for the final fit and the expansion of merged levels, an earlier
step's DP counts of some 1-way levels (``earlier``: a no-schema run's category counts, charged by its discover
stage) joined with the start's 1-way measurements by inverse variance (``joined_one_way``); the estimate
of n is the inverse-variance weighted mean of the noisy totals of all measurements; a schema's structural zeros
(``zeros.py``: public) held at zero in the model from its first fit; the release is
``sample_rows`` records drawn from the model with ``noise.post_rng`` (default: that estimate, at most what
fits ``max_release_mb`` as one-hot rows; a merged level expanded to one of its original levels in proportion
to their clipped noisy 1-way counts), published as distinct one-hot rows weighted by their frequency, and every noisy
marginal with its sigma (``Release.measurements``).

Cost: ``check_config`` refuses, before any charge, a run whose forecast (``cost.forecast_cost``, from
the config and the domain only) passes ``max_seconds`` or ``max_memory_gb``; ``progress.py`` reports
each round to a caller's hook.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence

import numpy as np
from pydantic import Field, field_validator

from privsynth.mechanisms.aim.compression import (
    compress_levels,
    compressed_one_way,
    expand_codes,
    joined_one_way,
)
from privsynth.mechanisms.aim.cost import CostForecast, forecast_cost, release_row_cap
from privsynth.mechanisms.aim.model import GraphicalModel, NoisyMarginal, downward_closure
from privsynth.mechanisms.aim.progress import ProgressHook, RoundLog, progress_hook, report, round_progress
from privsynth.mechanisms.aim.schedule import (  # noqa: F401  (re-exported: the module's budget API)
    MEASURE_SHARE,
    WIDE_ATTRIBUTES,
    initial_epsilon,
    initial_sigma,
    next_round,
    rho_of_config,
    rounds_cap,
    rounds_parameter,
    start_sigmas,
)
from privsynth.mechanisms.aim.selection import (  # noqa: F401  (re-exported: the module's selection API)
    REJECTION_TRIES,
    Eligibility,
    round_pool,
    scored_pool,
    select_eligible,
    selection_scores,
)
from privsynth.mechanisms.aim.statistics import AimStatistics, CountCache
from privsynth.mechanisms.aim.zeros import keep_levels, zero_potentials, zeros_facts
from privsynth.mechanisms.base import EarlierCounts, Measurement, MechanismConfig, Release, check_memory
from privsynth.privacy.accounting import PrivacyCost, gaussian_rho, noisy_max_scale
from privsynth.privacy.noise import NoiseSource
from privsynth.schema.determined import StructuralZeros
from privsynth.schema.encoding import Domain, one_hot
from privsynth.schema.workload import Histogram, Marginal, StatisticsInput, all_marginals

NAME = "aim"
logger = logging.getLogger("privsynth.mechanisms.aim")

PUBLIC_ROWS_OPTION = "public_rows"   # the run's --public-rows (a declared public row count) fills it


class Config(MechanismConfig):
    """AIM parameters; the paper's defaults unless stated."""

    k: int = Field(3, description="order of the workload marginals (all k-way marginals of the binning)")
    marginal_weights: tuple[tuple[tuple[int, ...], float], ...] = Field(
        (), description="per-marginal workload weights ((attribute indices), weight); unlisted marginals weigh 1")
    max_rounds: int | None = Field(None, description="T of the initial round budget; None = 4 x number of "
                                                     "attributes up to 16 attributes, then max(1.5 d, 1024 / d)")
    max_model_size_mb: float = Field(
        8.0, description="cap on the junction tree size in MB (paper: 80; smaller is faster, see benchmarks/README.md)")
    iterations_per_round: int = Field(100,
                                      description="mirror-descent iterations after each measurement (warm started)")
    final_iterations: int = Field(500, description="mirror-descent iterations of the final fit")
    tolerance: float = Field(1e-4, description="a fit after a round stops early when the loss falls by less than "
                                               "this fraction over 25 iterations (0 = never)")
    sample_rows: int | None = Field(None, description="records drawn from the model; None = the DP estimate of n")
    max_candidates: int = Field(
        1000, description="candidates scored per round; beyond this many, a uniform random subset (drawn "
                          "independently of the data) is scored, so wide tables stay fast")
    compress_threshold: float = Field(
        3.0, description="levels whose noisy 1-way count is below this many sigma_0 (the rounds' first sigma) "
                         "are merged into one rare level for the later rounds (MST's domain compression; a number "
                         "column's bins only with rare neighbours); 0 = never")
    rounds_cap: int | None = Field(None, description="most adaptive rounds (a work cap; the budget is spread so "
                                                     "the cap is reached with it spent); None = max(48, 4 d)")
    max_seconds: float = Field(1800.0, description="refuse, before the budget is charged, a run whose forecast "
                                                   "(cost.forecast_cost) passes this many seconds")
    max_memory_gb: float = Field(4.0, description="refuse, before the budget is charged, a run whose forecast "
                                                  "peak memory passes this")
    max_release_mb: float = Field(1024.0, description="with sample_rows None: draw at most as many records as fit "
                                                      "this many MB (cost.release_row_bytes: one-hot rows, a byte a "
                                                      "level, and their codes); the rounding stage resamples")
    public_rows: int | None = Field(None, description="the table's row count if it is public (declared): used "
                                                      "only to forecast the cost, never by the release")

    @field_validator("k")
    @classmethod
    def _k(cls, v: int) -> int:
        if v < 1:
            raise ValueError(f"k must be >= 1, got {v}")
        return v

    @field_validator("max_rounds", "sample_rows", "max_candidates", "rounds_cap", "public_rows")
    @classmethod
    def _positive_or_none(cls, v: int | None, info) -> int | None:
        if v is not None and v < 1:
            raise ValueError(f"{info.field_name} must be >= 1 or None, got {v}")
        return v

    @field_validator("iterations_per_round", "final_iterations")
    @classmethod
    def _iterations(cls, v: int, info) -> int:
        if v < 1:
            raise ValueError(f"{info.field_name} must be >= 1, got {v}")
        return v

    @field_validator("tolerance", "compress_threshold")
    @classmethod
    def _non_negative(cls, v: float, info) -> float:
        if not (math.isfinite(v) and v >= 0):
            raise ValueError(f"{info.field_name} must be a finite number >= 0, got {v}")
        return v

    @field_validator("max_model_size_mb", "max_seconds", "max_memory_gb", "max_release_mb")
    @classmethod
    def _size(cls, v: float, info) -> float:
        if not (math.isfinite(v) and v > 0):
            raise ValueError(f"{info.field_name} must be a finite number > 0, got {v}")
        return v

    @field_validator("marginal_weights")
    @classmethod
    def _weights(cls, v: tuple) -> tuple:
        seen = set()
        for marginal, weight in v:
            key = tuple(sorted(marginal))
            if len(set(key)) != len(key) or any(a < 0 for a in key):
                raise ValueError(f"marginal_weights: {marginal} must list distinct attribute indices >= 0")
            if key in seen:
                raise ValueError(f"marginal_weights: {marginal} is listed twice")
            seen.add(key)
            if not (math.isfinite(weight) and weight >= 0):
                raise ValueError(f"marginal_weights: the weight of {marginal} must be a finite number >= 0, got "
                                 f"{weight}")
        return v


# ---------------------------------------------------------------- config-only checks and cost

def configure_for(config: Config, domain: Domain) -> Config:
    """The config for this domain (public facts only): a table of fewer columns than the default k gets
    k = its number of columns (all of them jointly); a k the user set is kept (and checked)."""
    if "k" not in config.model_fields_set and config.k > domain.n_attributes:
        return config.model_copy(update={"k": domain.n_attributes})
    return config


def check_config(config: Config, domain: Domain) -> None:
    """Every config problem visible before any data is read (the plan calls this before charging),
    including a run whose forecast cost (``cost.forecast_cost``: config and domain only) passes
    ``max_seconds`` or ``max_memory_gb``; the message names settings that would fit."""
    d = domain.n_attributes
    if config.k > d:
        raise ValueError(f"k={config.k} exceeds the number of attributes ({d})")
    for marginal, _ in config.marginal_weights:
        if len(marginal) != config.k or any(a >= d for a in marginal):
            raise ValueError(f"marginal_weights: {marginal} is not a {config.k}-way marginal of the {d} attributes")
    if max(workload(config, domain).values()) <= 0:
        raise ValueError("marginal_weights: at least one workload marginal needs a weight > 0")
    initial = initial_sigma(config, d)
    if rho_of_config(config) <= d * gaussian_rho(initial):
        raise ValueError("max_rounds: the initial 1-way measurements would spend the whole budget; raise max_rounds")
    forecast = forecast_cost(config, domain)
    if forecast.seconds > config.max_seconds:
        raise ValueError(f"aim would take about {forecast.seconds:.0f} s ({forecast.basis}), above "
                         f"max_seconds={config.max_seconds:g}; settings that fit: {fitting_options(config, domain)}, "
                         "or raise max_seconds")
    check_memory(NAME, forecast.memory_mb * 2**20, config.max_memory_gb,
                 f"a junction tree up to {forecast.tree_mb:.0f} MB, count tables, {forecast.release_rows:,} records "
                 "drawn",
                 "lower max_model_size_mb, max_release_mb or sample_rows")


def fitting_options(config: Config, domain: Domain) -> str:
    """Single changes to the config whose forecast fits ``max_seconds`` (public facts only)."""
    d = domain.n_attributes
    options = []
    for field, values in (("rounds_cap", [c for c in (240, 160, 120, 96, 64, 48, 32, 24, 16, 8)
                                          if c < rounds_cap(config, d)]),
                          ("max_model_size_mb", [m for m in (64.0, 32.0, 16.0, 8.0, 4.0, 2.0, 1.0, 0.5)
                                                 if m < config.max_model_size_mb]),
                          ("iterations_per_round",
                           [i for i in (75, 50, 30, 20, 10) if i < config.iterations_per_round]),
                          ("max_candidates", [c for c in (500, 250, 100) if c < config.max_candidates])):
        for value in values:
            if forecast_cost(config.model_copy(update={field: value}), domain).seconds <= config.max_seconds:
                options.append(f"{field}={value:g}")
                break
    return ", ".join(options) or "none of rounds_cap, max_model_size_mb, iterations_per_round, max_candidates alone"


def forecast(config: Config, domain: Domain) -> CostForecast:
    """``cost.forecast_cost``: seconds, peak memory and rounds of a run, from public facts only."""
    return forecast_cost(config, domain)


def privacy_cost(config: Config) -> PrivacyCost:
    rho = rho_of_config(config)
    return PrivacyCost.zcdp(
        rho,
        guarantee=f"AIM: {rho:.6g}-zCDP (add/remove one record): noisy 1-way marginals, then rounds of one "
        "exponential-mechanism selection (Gumbel report-noisy-max on weighted, bias-corrected L1 errors) and one "
        "Gaussian measurement each, annealed, the last round spending exactly what is left",
        notes=(
            f"rho = rho_allowance(epsilon={config.epsilon}, delta={config.delta}): the largest rho whose tight "
            "zCDP conversion fits the requested (epsilon, delta)",
            f"workload: all {config.k}-way marginals ({len(config.marginal_weights)} reweighted); candidates: their "
            f"downward closure; model size cap {config.max_model_size_mb} MB",
            "adaptive per-round budgets under a fixed total rho (zCDP privacy filter)",
        ),
    )


def releases_n_estimate(config: Config) -> bool:
    """The release carries n_estimate (post-processing of the noisy measurements)."""
    return True


# ---------------------------------------------------------------- workload and statistics

def workload(config: Config, domain: Domain) -> dict[Marginal, float]:
    """Every k-way marginal with its weight (1 unless listed in ``marginal_weights``)."""
    weights = {tuple(sorted(m)): float(w) for m, w in config.marginal_weights}
    return {m: weights.get(m, 1.0) for m in all_marginals(domain.n_attributes, config.k)}


def candidate_weights(work: dict[Marginal, float]) -> dict[Marginal, float]:
    """AIM's candidate weights on the downward closure: w_r = sum_{s in W} c_s |r ∩ s| (data-free).
    Since |r ∩ s| counts the attributes of r that s holds, w_r = sum_{a in r} W_a with W_a the total
    weight of the workload marginals holding a: linear in the workload, not quadratic (a 54-column
    table's 3-way workload has 24,804 marginals). Candidates of weight 0 are dropped (they could never
    matter to the workload)."""
    positive = [m for m, c in work.items() if c > 0]
    per_attribute: dict[int, float] = {}
    for s, c in work.items():
        for a in s:
            per_attribute[a] = per_attribute.get(a, 0.0) + c
    out = {}
    for r in sorted(downward_closure(positive), key=lambda m: (len(m), m)):
        w = math.fsum(per_attribute.get(a, 0.0) for a in r)
        if w > 0:
            out[r] = w
    return out


def collect_statistics(data: StatisticsInput, domain: Domain, config: Config) -> AimStatistics:
    """The histogram of the records (a Histogram as given, or per-record code batches merged into one)."""
    check_config(config, domain)
    if isinstance(data, Histogram):
        return AimStatistics(data, domain)
    parts = [Histogram.of_codes(np.asarray(batch).reshape(-1, domain.n_attributes)) for batch in data]
    histogram = Histogram.merge(parts) if parts else Histogram.of_codes(np.zeros((0, domain.n_attributes), np.int32))
    return AimStatistics(histogram, domain)


# ---------------------------------------------------------------- the mechanism

def n_estimate(measurements: list[NoisyMarginal]) -> float:
    """Inverse-variance weighted mean of the noisy totals (post-processing), at least 1."""
    totals = np.array([m.values.sum() for m in measurements])
    variances = np.array([m.total_variance() for m in measurements])
    weights = 1.0 / variances
    return max(1.0, float(np.sum(weights * totals) / np.sum(weights)))


TAKES_EARLIER_COUNTS = True
TAKES_STRUCTURAL_ZEROS = True


def run(statistics: AimStatistics, domain: Domain, config: Config, noise: NoiseSource,
        progress: ProgressHook | None = None, earlier: Sequence[EarlierCounts] = (),
        zeros: Sequence[StructuralZeros] = ()) -> Release:
    """The AIM release (rho-zCDP as stated in the module docstring). ``progress`` (or, if None, the
    hook set by ``progress.reporting_progress``) hears about every round: public facts only. ``earlier``: DP
    counts of some 1-way levels an earlier step of the run released and paid for (discovery's categories),
    joined for the final fit (``joined_one_way``): post-processing, no cost here. ``zeros``: the schema's
    structural zeros (public), held at zero in the model from the start (``zeros.py``)."""
    check_config(config, domain)
    hook = progress if progress is not None else progress_hook.get()
    started = time.perf_counter()
    d = domain.n_attributes
    rho = rho_of_config(config)
    cap = rounds_cap(config, d)
    cands = candidate_weights(workload(config, domain))
    delta_q = max(cands.values())
    sigma = initial_sigma(config, d)
    eps = initial_epsilon(config, d)

    one_way: list[NoisyMarginal] = []
    rho_used = 0.0
    one_way_counts = statistics.tables([(a,) for a in range(d)])
    for a, sigma_a in enumerate(start_sigmas(config, domain.sizes)):
        y = noise.add_gaussian(one_way_counts[(a,)], sigma_a, sensitivity=1.0)
        one_way.append(NoisyMarginal((a,), y, sigma_a))
        rho_used += gaussian_rho(sigma_a)
    initial_rho = rho_used
    thresholds = [config.compress_threshold * sigma if config.compress_threshold > 0 else -math.inf] * d
    compression = keep_levels(compress_levels([m.values for m in one_way], thresholds, domain.ordered,
                                              domain.structural if config.compress_threshold > 0 else (),
                                              [m.sigma for m in one_way]), zeros)
    sizes = compression.sizes
    counts = CountCache(statistics.on_levels(compression))     # PRIVATE: count tables on merged levels
    measured = [compressed_one_way(m, compression) for m in one_way]
    model = GraphicalModel(sizes, [m.clique for m in measured] + [z.attributes for z in zeros], n_estimate(measured),
                           zero_potentials(zeros, compression))
    alpha = model.fit(measured, config.iterations_per_round, tolerance=config.tolerance)
    log: list[RoundLog] = []
    fit_seconds = 0.0
    while not log or not log[-1].last:
        step = next_round(rho, rho_used, sigma, eps, len(log), cap)
        sigma, eps = step.sigma, step.epsilon
        rho_used = rho if step.last else rho_used + step.rho
        size_limit = config.max_model_size_mb * min(1.0, rho_used / rho)
        eligible = Eligibility(model, size_limit)
        pool = scored_pool(round_pool(cands, config.max_candidates, noise.post_rng), model.marginals(), eligible)
        names = list(pool)
        estimates = model.marginals().many(names)
        scores = selection_scores(pool, counts.get(names), estimates, sigma)
        # the lambda is called inside select_eligible, in this round: it sees this round's eligible and names
        pick = names[select_eligible(scores, lambda i: eligible(names[i]), noise, noisy_max_scale(eps, delta_q),  # noqa: B023
                                     delta_q)]
        y = noise.add_gaussian(counts.get([pick])[pick], sigma, sensitivity=1.0)
        measured.append(NoisyMarginal(pick, y, sigma))
        log.append(RoundLog(pick, sigma, eps, step.rho, step.last))
        # Progress (a DP output only: the selected marginal and the budget schedule are published anyway).
        # With a progress hook the caller shows the round (with the time left); the log line then is debug.
        logger.log(logging.DEBUG if hook is not None else logging.INFO,
                   "aim round %d: measured %s (sigma %.3g); %.0f%% of rho spent", len(log),
                    " x ".join(domain.names[a] for a in pick), sigma, 100.0 * rho_used / rho)
        before = estimates[pick]
        fit_started = time.perf_counter()
        model = GraphicalModel(sizes, model.model_cliques + [pick], n_estimate(measured), model.potentials)
        alpha = model.fit(measured, config.iterations_per_round, alpha, config.tolerance)
        fit_seconds = time.perf_counter() - fit_started
        after = model.marginal(pick)
        if not step.last and np.abs(after - before).sum() <= math.sqrt(2.0 / math.pi) * sigma * y.size:
            sigma /= 2.0
            eps *= 2.0
        report(hook, round_progress("round", log, rho_used / rho, rho, cap, sigma, eps, domain, started,
                                    fit_seconds * config.final_iterations / config.iterations_per_round))
    report(hook, round_progress("final_fit", log, 1.0, rho, cap, sigma, eps, domain, started, None))
    estimated_one_way = joined_one_way(one_way, earlier)
    measured[:d] = [compressed_one_way(m, compression) for m in estimated_one_way]
    model.fit(measured, config.final_iterations, alpha)
    report(hook, round_progress("sampling", log, 1.0, rho, cap, sigma, eps, domain, started, None))

    n_hat = n_estimate(measured)
    rows = config.sample_rows or min(max(1, int(round(n_hat))), release_row_cap(config, domain))
    codes = expand_codes(model.sample(rows, noise.post_rng), compression, [m.values for m in estimated_one_way],
                         noise.post_rng)
    unique, freq = np.unique(codes, axis=0, return_counts=True)
    points = one_hot(unique, domain)  # 0/1 as uint8, a byte a level: what cost.release_row_bytes counts
    report(hook, round_progress("done", log, 1.0, rho, cap, sigma, eps, domain, started, None))
    return Release(
        mechanism=NAME,
        points=points,
        weights=freq / freq.sum(),
        exact=False,
        public_facts={
            # Config-derived values and DP outputs only.
            "rho": rho, "rho_initial_one_way": initial_rho, "rounds": len(log),
            "rho_per_round": [r.rho for r in log],
            "measured_marginals": [list(r.marginal) for r in log],
            "sigmas": [r.sigma for r in log], "selection_epsilons": [r.epsilon for r in log],
            "model_cliques": [list(c) for c in model.model_cliques],
            "n_estimate": n_hat, "sample_rows": rows,
            "compressed_levels": {domain.names[a]: int(compression.sizes[a]) for a in range(d)
                                  if not compression.is_identity(a)},
            # earlier DP counts joined with the start's 1-way measurements: per column, the levels they held
            "earlier_counts_joined": {domain.names[e.attribute]: len(e.levels) for e in earlier},
            "structural_zeros": zeros_facts(zeros),  # public: the schema's determined_by
        },
        # The 1-way marginals as measured (original levels), then each round's, on merged levels.
        measurements=tuple(
            Measurement(attributes=m.clique, noisy_counts=m.values.ravel().copy(), noise="gaussian", scale=m.sigma)
            for m in one_way) + tuple(
            Measurement(attributes=m.clique, noisy_counts=m.values.ravel().copy(), noise="gaussian", scale=m.sigma,
                        level_groups=compression.published_groups(m.clique))
            for m in measured[d:]),
    )
