"""The statistics of an empirical privacy audit: Clopper-Pearson intervals, the lower bound on epsilon
that a distinguishing test implies, and the honest choice of the test (Jagielski, Ullman & Oprea 2020;
Nasr et al. 2021).

The bound. If a release M is (eps, delta)-DP for neighbours D and D', every test T that guesses "D'"
on some set of outputs satisfies P[T | D'] <= e^eps P[T | D] + delta, and the same for the complement
with D and D' swapped. With the test's false-positive rate a = P[T | D] and false-negative rate
b = P[not T | D']:

    eps >= log((1 - delta - b) / a)    and    eps >= log((1 - delta - a) / b).

Only estimates of a and b are known. ``epsilon_lower_bound`` is evaluated at the upper ends of their
two-sided 95% Clopper-Pearson intervals (each a one-sided 97.5% bound), so by the union bound the
lower bound on epsilon holds with probability at least 95% over the audit's runs.

The choice. The test (a threshold on a scalar score and its direction) and the delta' at which it is
compared are chosen on the first half of the runs of each table (the *selection* half) and the bound
is computed on the second half only (the *evaluation* half), so the choice costs no correction and
the 95% holds as stated. The selection maximises the ratio of the selection half's own 95% bound to
the claim at that delta', i.e. it looks for the comparison most likely to expose a false claim.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import beta

CONFIDENCE = 0.95
MAX_THRESHOLDS = 256


def clopper_pearson(successes: int, trials: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The two-sided Clopper-Pearson interval of a binomial proportion (exact; each tail (1-c)/2)."""
    if trials < 1 or not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials and trials >= 1, got {successes}/{trials}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    tail = (1.0 - confidence) / 2.0
    lower = 0.0 if successes == 0 else float(beta.ppf(tail, successes, trials - successes + 1))
    upper = 1.0 if successes == trials else float(beta.ppf(1.0 - tail, successes + 1, trials - successes))
    return lower, upper


def epsilon_lower_bound(fpr: float, fnr: float, delta: float) -> float:
    """The largest eps that a test with these error rates rules out at ``delta`` (0 when none)."""
    if not (0 <= fpr <= 1 and 0 <= fnr <= 1 and 0 <= delta < 1):
        raise ValueError(f"rates must lie in [0, 1] and delta in [0, 1), got {fpr}, {fnr}, {delta}")
    best = 0.0
    for numerator, denominator in ((1.0 - delta - fnr, fpr), (1.0 - delta - fpr, fnr)):
        if numerator <= 0:
            continue
        if denominator == 0:
            return math.inf
        best = max(best, math.log(numerator / denominator))
    return best


def clopper_pearson_upper(successes: np.ndarray, trials: int, confidence: float = CONFIDENCE) -> np.ndarray:
    """The upper ends of ``clopper_pearson`` for an array of success counts (vectorised)."""
    k = np.asarray(successes, dtype=np.float64)
    tail = (1.0 - confidence) / 2.0
    with np.errstate(invalid="ignore"):
        upper = beta.ppf(1.0 - tail, k + 1, trials - k)
    return np.where(k >= trials, 1.0, upper)


def epsilon_lower_bounds(fpr: np.ndarray, fnr: np.ndarray, delta: float) -> np.ndarray:
    """``epsilon_lower_bound`` for arrays of rates (vectorised; 0 where no bound, inf for a zero rate)."""
    out = np.zeros(np.broadcast(fpr, fnr).shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        for numerator, denominator in ((1.0 - delta - fnr, fpr), (1.0 - delta - fpr, fnr)):
            value = np.where(numerator > 0, np.log(np.maximum(numerator, 1e-300) / denominator), 0.0)
            out = np.maximum(out, value)
    return out


@dataclass(frozen=True)
class ChosenTest:
    """A test on the score: guess D' when ``sign * score >= sign * threshold``; compared at ``delta``."""

    threshold: float
    sign: int
    delta: float

    def guesses(self, scores: np.ndarray) -> np.ndarray:
        return self.sign * scores >= self.sign * self.threshold


@dataclass(frozen=True)
class Bound:
    """What one test shows on a set of runs: its error counts, and the bound with its interval.

    ``lower`` uses the upper ends of the error rates' 95% intervals (holds with probability >= 95%);
    ``estimate`` the observed rates; ``upper`` the lower ends (the most the same runs could show).
    """

    false_positives: int
    negatives: int       # runs on D
    false_negatives: int
    positives: int       # runs on D'
    delta: float
    lower: float
    estimate: float
    upper: float


def bound_of(choice: ChosenTest, scores_d: np.ndarray, scores_dprime: np.ndarray,
             confidence: float = CONFIDENCE) -> Bound:
    """The epsilon bound of a fixed test on the given runs, with Clopper-Pearson intervals."""
    fp = int(np.count_nonzero(choice.guesses(scores_d)))
    fn = int(np.count_nonzero(~choice.guesses(scores_dprime)))
    n0, n1 = scores_d.size, scores_dprime.size
    fpr_lo, fpr_hi = clopper_pearson(fp, n0, confidence)
    fnr_lo, fnr_hi = clopper_pearson(fn, n1, confidence)
    return Bound(fp, n0, fn, n1, choice.delta,
                 lower=epsilon_lower_bound(fpr_hi, fnr_hi, choice.delta),
                 estimate=epsilon_lower_bound(fp / n0, fn / n1, choice.delta),
                 upper=epsilon_lower_bound(fpr_lo, fnr_lo, choice.delta))


def candidate_thresholds(scores: np.ndarray, limit: int = MAX_THRESHOLDS) -> np.ndarray:
    """Distinct score values, thinned to at most ``limit`` quantiles (both tails kept)."""
    distinct = np.unique(scores[np.isfinite(scores)])
    if distinct.size <= limit:
        return distinct
    return np.unique(np.quantile(distinct, np.linspace(0.0, 1.0, limit), method="nearest"))


def choose_test(scores_d: np.ndarray, scores_dprime: np.ndarray, deltas: Sequence[float],
                claim_at: Callable[[float], float], confidence: float = CONFIDENCE) -> ChosenTest:
    """The test and delta' whose 95% lower bound on these (selection) runs is largest relative to the
    claim at delta' (``claim_at``); ties go to the smallest delta' and the first threshold."""
    thresholds = candidate_thresholds(np.concatenate([scores_d, scores_dprime]))
    sorted_d, sorted_p = np.sort(scores_d), np.sort(scores_dprime)
    n0, n1 = sorted_d.size, sorted_p.size
    best, best_ratio = ChosenTest(float(thresholds[0]) if thresholds.size else 0.0, 1, min(deltas)), -1.0
    for sign in (1, -1):
        # Counts of guesses "D'" at every threshold, by binary search on the sorted scores.
        if sign == 1:
            fp = n0 - np.searchsorted(sorted_d, thresholds, side="left")
            tp = n1 - np.searchsorted(sorted_p, thresholds, side="left")
        else:
            fp = np.searchsorted(sorted_d, thresholds, side="right")
            tp = np.searchsorted(sorted_p, thresholds, side="right")
        fpr_hi = clopper_pearson_upper(fp, n0, confidence)
        fnr_hi = clopper_pearson_upper(n1 - tp, n1, confidence)
        for delta in sorted(deltas):
            claim = claim_at(delta)
            if not claim > 0:
                continue
            ratios = epsilon_lower_bounds(fpr_hi, fnr_hi, delta) / claim
            i = int(np.argmax(ratios))
            if ratios[i] > best_ratio:
                best, best_ratio = ChosenTest(float(thresholds[i]), sign, float(delta)), float(ratios[i])
    return best


def split_halves(scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(selection, evaluation): the first and second half of the runs (runs are i.i.d.)."""
    half = scores.size // 2
    return scores[:half], scores[half:]
