"""AIM's budget schedule: how rho is split between the 1-way start and the rounds (config and DP outputs only).

Every function here reads the config, the number of attributes, and facts the release publishes anyway
(rounds done, rho spent, annealing steps): none reads data. ``mechanism.py`` states the guarantee.

* the start: the 1-way marginals at the rho of d measurements at sigma_0 = sqrt(T / (2 * 0.9 * rho)),
  T = ``rounds_parameter``, split by their number of levels (``start_sigmas``);
* a round spends eps^2 / 8 (selection) + 1 / (2 sigma^2) (measurement), 0.1 / 0.9 of its budget,
  starting at rho / T; annealing halves sigma and doubles eps (x4);
* at most ``rounds_cap`` rounds: from the second half of the allowed rounds on, when what is left
  spread over the rounds still allowed is more than the current round budget, the round budget is
  raised to that (same 0.1 / 0.9 split), so the last allowed round is reached with the budget spent
  (a run that anneals to its end within half the cap, as most do, is not touched);
* the last round: once what is left is below twice the round budget, or one round is left, one round
  spends exactly what is left (0.9 measures, 0.1 selects).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from privsynth.privacy.accounting import exponential_epsilon, exponential_rho, gaussian_rho, gaussian_sigma
from privsynth.privacy.spending import rho_allowance

MEASURE_SHARE = 0.9   # of each round's rho (paper: 0.9 measures, 0.1 selects)
# T splits rho into round budgets; the 1-way start takes 0.9 d / T of it. The paper's T = 16 d spends
# 5.6% on the start and leaves the 1-way marginals noisy. Measured (benchmarks/README.md, "Closing the gap
# to AIM"): on Adult (d = 15) T = 4 d gives lower 1-, 2- and 3-way error than 16 d at epsilon 0.3, 1 and 3
# (1-way mean TV 0.008 / 0.0033 / 0.0015 against 0.012 / 0.0047 / 0.0022) and runs faster; 2 d and 3 d
# win on 1-way and lose on 3-way. On a 54-column table (Lending Club loans) T = 81 (1.5 d) was best
# (2-way mean TV 0.047; 256: 0.052; 864 = 16 d: 0.056-0.060). Fewer, better measurements win, down to a
# point. A config default: no privacy effect.
ROUNDS_PER_ATTRIBUTE = 4
WIDE_ATTRIBUTES = 16


def rho_of_config(config) -> float:
    """The total zCDP budget: the largest rho whose tight conversion fits (epsilon, delta)."""
    return rho_allowance(config.epsilon, config.delta)


def rounds_parameter(config, n_attributes: int) -> int:
    """T: 4 d up to ``WIDE_ATTRIBUTES`` columns; beyond, max(1.5 d, 4 * 16^2 / d), which meets 4 d at
    d = 16 and falls to 1.5 d (the 1-way start then takes 60% of rho)."""
    if config.max_rounds is not None:
        return config.max_rounds
    d = n_attributes
    if d <= WIDE_ATTRIBUTES:
        return ROUNDS_PER_ATTRIBUTE * d
    return max(math.ceil(1.5 * d), round(ROUNDS_PER_ATTRIBUTE * WIDE_ATTRIBUTES**2 / d))


def rounds_cap(config, n_attributes: int) -> int:
    """The most rounds a run may take (``config.rounds_cap``, or ``DEFAULT_ROUNDS_PER_ATTRIBUTE`` x d,
    at least ``DEFAULT_MIN_ROUNDS``): a work cap from public facts, so the run's cost is bounded
    before the budget is charged."""
    if config.rounds_cap is not None:
        return config.rounds_cap
    return max(DEFAULT_MIN_ROUNDS, DEFAULT_ROUNDS_PER_ATTRIBUTE * n_attributes)


DEFAULT_ROUNDS_PER_ATTRIBUTE = 4
DEFAULT_MIN_ROUNDS = 48


def initial_sigma(config, n_attributes: int) -> float:
    """sigma_0 = sqrt(T / (2 * 0.9 * rho)): the Gaussian sigma at 0.9 rho / T (one round's measurement)."""
    return gaussian_sigma(MEASURE_SHARE * rho_of_config(config) / rounds_parameter(config, n_attributes))


# sigma_a of the 1-way start falls as K_a^(-1/3) (K_a: levels of attribute a). A K-level noisy histogram
# misses by about sqrt(2/pi) K sigma in L1 (counts above the noise), so the mean 1-way TV of the start
# is proportional to sum_a K_a sigma_a; at a fixed sum_a 1 / (2 sigma_a^2) the Lagrange condition
# K_a = lambda / sigma_a^3 gives sigma_a ~ K_a^(-1/3). With equal sigmas, on gss_vocab at epsilon 0.3 a
# 20-level year and a 22-level education had 2.4 and 1.9 times the mean 1-way error (0.028, 0.022), a
# binary column a sixth of it (0.0018).
START_LEVELS_POWER = 1.0 / 3.0


def start_sigmas(config, sizes: Sequence[int]) -> tuple[float, ...]:
    """The 1-way start's Gaussian sigma per attribute, from the config and the domain's public level
    counts K_a: sigma_a = sigma_0 * sqrt(mean_b K_b^(2/3)) / K_a^(1/3). Their rho adds up to that of d
    measurements at sigma_0: sum_a 1 / (2 sigma_a^2) = d / (2 sigma_0^2) = 0.9 d rho / T, so the start
    costs what it did with one sigma, and the rounds' budgets are unchanged."""
    d = len(sizes)
    sigma_0 = initial_sigma(config, d)
    weights = [float(k) ** START_LEVELS_POWER for k in sizes]
    scale = math.sqrt(math.fsum(w * w for w in weights) / d)
    return tuple(sigma_0 * scale / w for w in weights)


def initial_epsilon(config, n_attributes: int) -> float:
    """eps_0 = sqrt(8 * 0.1 * rho / T): the exponential mechanism's eps at 0.1 rho / T (one round's selection)."""
    return exponential_epsilon((1.0 - MEASURE_SHARE) * rho_of_config(config) / rounds_parameter(config, n_attributes))


def split(budget: float) -> tuple[float, float]:
    """(sigma, eps) of a round spending ``budget``: 0.9 of it measures, 0.1 selects."""
    return gaussian_sigma(MEASURE_SHARE * budget), exponential_epsilon((1.0 - MEASURE_SHARE) * budget)


@dataclass(frozen=True)
class RoundBudget:
    """One round's noise and cost: sigma of the measurement, eps of the selection, their rho, and
    whether it is the last round."""

    sigma: float
    epsilon: float
    rho: float
    last: bool


def next_round(rho: float, rho_used: float, sigma: float, epsilon: float, rounds_done: int, cap: int) -> RoundBudget:
    """The next round's budget, from the current (annealed) sigma and eps, what is spent, and the cap."""
    remaining = rho - rho_used
    budget = exponential_rho(epsilon) + gaussian_rho(sigma)
    left = cap - rounds_done
    if left <= 1 or remaining < 2.0 * budget:
        sigma, epsilon = split(remaining)
        return RoundBudget(sigma, epsilon, remaining, True)
    if rounds_done >= cap // 2 and remaining / left > budget:
        budget = remaining / left
        sigma, epsilon = split(budget)
    return RoundBudget(sigma, epsilon, budget, False)


def largest_schedule(config, n_attributes: int) -> list[float]:
    """rho spent after each round when no round anneals: the most rounds the budget and the cap allow
    (annealing only makes rounds dearer, so fewer). Public: config and d only."""
    rho = rho_of_config(config)
    sigma, eps = initial_sigma(config, n_attributes), initial_epsilon(config, n_attributes)
    used = n_attributes * gaussian_rho(sigma)
    cap = rounds_cap(config, n_attributes)
    out: list[float] = []
    while True:
        step = next_round(rho, used, sigma, eps, len(out), cap)
        used += step.rho
        out.append(min(used, rho))
        sigma, eps = step.sigma, step.epsilon
        if step.last:
            return out
