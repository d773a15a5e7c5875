"""AIM's selection step: the candidates a round scores, their scores, and the exponential mechanism.

Guarantee of a round's selection (``mechanism.py`` states the accounting): one pick of the exponential
mechanism over the *eligible* candidates of the round's pool, by Gumbel report-noisy-max on
q_r = w_r * (||M_r(D) - M_r(p_hat)||_1 - sqrt(2/pi) * sigma * cells(r)), whose sensitivity under
add/remove-one is w_r <= Delta = max_r w_r (one record moves one cell of M_r(D) by one; p_hat is a
function of earlier DP outputs only), at Gumbel scale 2 Delta / eps: eps-DP, eps^2 / 8-zCDP.

Which candidates are scored never changes that law:
* the pool is drawn independently of the data (``round_pool``);
* eligibility (``Eligibility``) reads public structure only, and ``select_eligible`` draws from the
  exponential mechanism's law restricted to the eligible candidates of the pool, whatever the scores
  of the ineligible ones are. So an ineligible candidate may be left out of the pool before scoring
  (``scored_pool`` leaves out those whose estimate would be costly to compute and that the size
  check refuses) without changing the law of the pick.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from privsynth.mechanisms.aim.inference import Marginals
from privsynth.mechanisms.aim.model import GraphicalModel, model_size_mb
from privsynth.privacy.meter import noisy_max_price
from privsynth.privacy.noise import NoiseSource

Marginal = tuple[int, ...]

# Out-of-clique candidates whose exact estimate builds tables of more cells than this (or than the
# round's model size cap, if larger) are size-checked before they are scored; the check is about 1 ms,
# such an estimate can take longer, and a candidate that large is usually refused by the check anyway.
CHECK_BEFORE_SCORING_CELLS = 1 << 20


def selection_scores(candidates: dict[Marginal, float], counts: dict[Marginal, np.ndarray],
                     estimates: dict[Marginal, np.ndarray], sigma: float) -> np.ndarray:
    """q_r = w_r * (||M_r(D) - M_r(p_hat)||_1 - sqrt(2/pi) sigma cells(r)), in the order of ``candidates``."""
    out = np.empty(len(candidates))
    for i, (r, w) in enumerate(candidates.items()):
        bias = math.sqrt(2.0 / math.pi) * sigma * counts[r].size
        out[i] = w * (float(np.abs(counts[r] - estimates[r]).sum()) - bias)
    return out


def round_pool(candidates: dict[Marginal, float], cap: int, rng: np.random.Generator) -> dict[Marginal, float]:
    """The candidates a round scores: all of them, or (beyond ``cap``) every 1-way candidate (always
    free, so a round always has one it may pick) and a uniform random subset of the rest, ``cap`` in
    all, drawn independently of the data, so the exponential mechanism's guarantee for a fixed
    candidate set holds as it is."""
    if len(candidates) <= cap:
        return candidates
    keys = list(candidates)
    ones = [i for i, r in enumerate(keys) if len(r) == 1]
    rest = [i for i, r in enumerate(keys) if len(r) > 1]
    picked = sorted(ones + rng.choice(rest, size=max(0, cap - len(ones)), replace=False).tolist())
    return {keys[i]: candidates[keys[i]] for i in picked}


class Eligibility:
    """Whether a candidate may be measured this round: inside a clique of the model's junction tree
    (free: the model does not grow), or its addition keeps the junction tree within ``size_limit`` MB
    (as mbi's AIM filters). Public structure only; answers are cached for the round."""

    def __init__(self, model: GraphicalModel, size_limit: float) -> None:
        self.model = model
        self.size_limit = size_limit
        self.tree_cliques = [tuple(c) for c in model.tree.cliques]
        self.cache: dict[Marginal, bool] = {}

    def __call__(self, r: Marginal) -> bool:
        if r not in self.cache:
            self.cache[r] = self.model.tree.host(r) >= 0 or \
                model_size_mb(self.model.sizes, self.tree_cliques + [r]) <= self.size_limit
        return self.cache[r]


def scored_pool(pool: dict[Marginal, float], marginals: Marginals, eligible: Eligibility) -> dict[Marginal, float]:
    """The pool less the candidates whose estimate is costly (``CHECK_BEFORE_SCORING_CELLS``, or the
    round's size cap in cells if larger) and that the size check refuses: by the module docstring,
    the law of the round's pick is unchanged."""
    limit = max(CHECK_BEFORE_SCORING_CELLS, eligible.size_limit * 2**20 / 8)
    return {r: w for r, w in pool.items() if marginals.plan(r).work <= limit or eligible(r)}


REJECTION_TRIES = 25


def select_eligible(scores: np.ndarray, eligible: Callable[[int], bool], noise: NoiseSource, scale: float,
                    sensitivity: float) -> int:
    """Report-noisy-max (Gumbel, ``scale``) over the candidates i with ``eligible(i)``, by rejection:
    draw over all candidates and keep the pick if it is eligible; after ``REJECTION_TRIES`` refusals,
    peel: draw the noisy maximum of the candidates not drawn yet, again and again (``noisy_top_k``, in
    batches), and keep the first eligible one. Both give exactly the exponential mechanism's law over
    the eligible set E: a try ends in i with p_i (the law over all candidates) and tries repeat while
    outside E, so P(i) = p_i / P(E); peeling orders the candidates by noisy score (Gumbel-max), and
    its first member of E is the noisy maximum over E. Only the pick leaves the round; ``eligible``
    reads public structure, never the data; so the round costs one selection, and only the few
    candidates drawn need the model-size check (on a 54-column table checking all of them was most
    of a round's time)."""
    with noise.one_release(noisy_max_price(scale, sensitivity)):  # the tries and the peeling release one pick
        for _ in range(REJECTION_TRIES):
            i = noise.noisy_max(scores, scale, sensitivity=sensitivity)
            if eligible(i):
                return i
        remaining = np.arange(scores.size)
        while remaining.size:
            order = noise.noisy_top_k(scores[remaining], scale, min(PEEL_BATCH, remaining.size),
                                      sensitivity=sensitivity)
            for j in order:
                if eligible(int(remaining[j])):
                    return int(remaining[j])
            remaining = np.delete(remaining, order)
    raise ValueError("no eligible candidate")


PEEL_BATCH = 32
