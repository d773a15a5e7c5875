"""How far each synthetic 1- and 2-way marginal may be from the real one: a public (DP) statement.

Inputs are DP outputs only: the release's noisy measurements (with their noise scales) and the
synthetic table (post-processing of the release). No real row is read, so the statements are free and
may be published beside the release.

The analysis is that of AIM (McKenna, Mullins, Sheldon & Miklau, "AIM: An Adaptive and Iterative
Mechanism for Differentially Private Synthetic Data", VLDB 2022), section 5 "Uncertainty
quantification", for *supported* marginals: a marginal r contained in at least one measured marginal.

* Every measurement s with r ⊆ s is projected onto r (its cells summed over the other attributes).
  With Gaussian noise of standard deviation sigma_s per cell, each projected cell carries noise of
  variance sigma_s^2 * c_s, c_s the number of cells summed into it; the projections are combined with
  inverse-variance weights into one estimate y_r whose cells carry independent N(0, sigma_bar^2)
  noise, 1 / sigma_bar^2 = sum_s 1 / (sigma_s^2 c_s).
* ||y_r - M_r(D)||_1 <= B with probability >= 1 - alpha, where, for m cells,
  B = sigma_bar * (m * sqrt(2/pi) + sqrt(2 m log(1/alpha))): E||z||_1 = m sigma sqrt(2/pi) and the L1
  norm is sqrt(m)-Lipschitz in L2, so Gaussian concentration (Tsirelson-Ibragimov-Sudakov) bounds
  the excess.
* On that event, for the synthetic proportions q and s_hat = sum(y_r) (|s_hat - n| <= B):
  TV(M_r(D) / n, q) <= (2 B + ||y_r - s_hat q||_1) / (2 (s_hat - B)). The second term is the model's
  fit to the measurements (public), the first the noise.

Each bound holds with probability >= 95% for its own marginal: per-marginal coverage, not
simultaneous (all K bounds at once would need each at 1 - 0.05 / K, Bonferroni). Like the
paper, the combination treats each measurement's noise as independent N(0, sigma_s^2) given which
marginals were measured; the adaptive choice of later measurements, which can depend on earlier
noise, is not accounted for (the coverage benchmark checks it on Adult).

Where the analysis does not apply, the report says so:

* Laplace measurements (pure DP): not in the paper. The L1 norm of c i.i.d. Laplace(b) draws is
  exactly Gamma(c, b), and projecting never increases the L1 norm, so B is that Gamma quantile of the
  single measurement with the smallest B (our derivation, labelled as such).
* Unsupported marginals (contained in no measurement): the paper's bound for them needs each round's
  model estimate of every candidate and the selection's budget, which the release does not publish:
  "not measured: no accuracy statement".
* Measurements on merged levels (AIM's domain compression): the bound is for the marginal on those
  merged levels only; how the records split inside a merged level is not covered.
* Releases without measurements (private sampling, microaggregation, reduced space, RAP): no statement.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from privsynth.mechanisms.base import Measurement
from privsynth.schema.encoding import Domain
from privsynth.schema.workload import marginal_counts, merge_levels

CONFIDENCE = 0.95
NOT_MEASURED = "not measured: no accuracy statement"
ASSUMPTION = ("as in the paper, each measurement's noise is treated as independent N(0, sigma^2) given which "
              "marginals were measured; the mechanism's adaptive choice of later measurements is not accounted for")
SOURCE = ("AIM (McKenna, Mullins, Sheldon & Miklau, VLDB 2022), section 5 'Uncertainty quantification': "
          "the confidence bound for supported marginals")

Groups = tuple[tuple[int, ...] | None, ...]


def gaussian_l1_quantile(sigma: float, cells: int, confidence: float = CONFIDENCE) -> float:
    """B with P(||z||_1 > B) <= 1 - confidence for z ~ N(0, sigma^2 I_cells) (Gaussian concentration)."""
    alpha = 1.0 - confidence
    return float(sigma * (cells * math.sqrt(2.0 / math.pi) + math.sqrt(2.0 * cells * math.log(1.0 / alpha))))


def laplace_l1_quantile(scale: float, cells: int, confidence: float = CONFIDENCE) -> float:
    """B with P(||z||_1 > B) = 1 - confidence for z of ``cells`` i.i.d. Laplace(scale).

    Exact: ||z||_1 ~ Gamma(cells, scale)."""
    from scipy.stats import gamma

    return float(gamma.ppf(confidence, a=cells, scale=scale))


def tv_bound(noise_l1: float, fit_l1: float, total: float) -> float:
    """TV(real proportions, synthetic proportions) on the event ||noise||_1 <= noise_l1 (see the module docstring)."""
    if total <= noise_l1:
        return 1.0
    return float(min(1.0, (2.0 * noise_l1 + fit_l1) / (2.0 * (total - noise_l1))))


@dataclass(frozen=True)
class Estimate:
    """A noisy estimate of one marginal at one granularity (public: combined DP measurements).

    ``values``: counts per cell (C order over ``attributes`` at the merged sizes); ``groups``: per
    attribute, the merged level of each original level, or None (original levels); ``cell_sd``: the
    noise's standard deviation per cell (Gaussian) or None; ``noise_l1``: the 95% bound on the L1 norm of
    the noise; ``sources``: how many measurements it combines.
    """

    attributes: tuple[int, ...]
    groups: Groups
    values: np.ndarray
    noise: str
    cell_sd: float | None
    noise_l1: float
    sources: int

    @property
    def merged(self) -> bool:
        return any(g is not None for g in self.groups)

    def level_cell(self, level: int) -> int | None:
        """Of a 1-way estimate, the cell holding ``level`` alone (None: merged with other levels)."""
        groups = self.groups[0]
        if groups is None:
            return level
        cell = int(groups[level])
        return cell if sum(1 for g in groups if int(g) == cell) == 1 else None


def _merged_sizes(m: Measurement, domain: Domain) -> list[int]:
    groups = m.level_groups or (None,) * len(m.attributes)
    return [domain.sizes[a] if g is None else int(max(g)) + 1 for a, g in zip(m.attributes, groups)]


def project(m: Measurement, r: tuple[int, ...], domain: Domain) -> tuple[np.ndarray, int, Groups]:
    """The measurement's cells summed onto r: (values over r, cells summed per value, r's groups)."""
    sizes = _merged_sizes(m, domain)
    table = np.asarray(m.noisy_counts, dtype=np.float64).reshape(sizes)
    drop = tuple(i for i, a in enumerate(m.attributes) if a not in r)
    collapsed = int(np.prod([sizes[i] for i in drop])) if drop else 1
    groups = m.level_groups or (None,) * len(m.attributes)
    kept = tuple(groups[i] for i, a in enumerate(m.attributes) if a in r)
    return table.sum(axis=drop).ravel(), collapsed, tuple(None if g is None else tuple(g) for g in kept)


def _finest(keys) -> Groups:
    """Original levels where available, else the granularity with the most cells (a public choice)."""
    def cells(key: Groups) -> float:
        return float(np.prod([1e9 if g is None else max(g) + 1 for g in key]))
    return max(keys, key=lambda k: (all(g is None for g in k), cells(k)))


def estimate(measurements, r: tuple[int, ...], domain: Domain, confidence: float = CONFIDENCE) -> Estimate | None:
    """The combined estimate of marginal r from every measurement containing it, or None (unsupported)."""
    found: dict[Groups, list[tuple[Measurement, np.ndarray, int]]] = {}
    for m in measurements:
        if set(r) <= set(m.attributes):
            values, collapsed, key = project(m, r, domain)
            found.setdefault(key, []).append((m, values, collapsed))
    if not found:
        return None
    key = _finest(found)
    candidates = []
    gaussian = [(m, v, c) for m, v, c in found[key] if m.noise == "gaussian"]
    if gaussian:
        precision = np.array([1.0 / (m.scale ** 2 * c) for m, _, c in gaussian])
        values = sum(w * v for w, (_, v, _) in zip(precision, gaussian)) / precision.sum()
        sd = math.sqrt(1.0 / precision.sum())
        candidates.append(Estimate(r, key, values, "gaussian", sd,
                                   gaussian_l1_quantile(sd, values.size, confidence), len(gaussian)))
    for m, v, _ in found[key]:
        if m.noise == "laplace":
            candidates.append(Estimate(r, key, v, "laplace", None,
                                       laplace_l1_quantile(m.scale, np.asarray(m.noisy_counts).size, confidence), 1))
    # The choice uses noise scales and cell counts only, never the noisy values.
    return min(candidates, key=lambda e: e.noise_l1) if candidates else None


def synthetic_at(synthetic: np.ndarray, domain: Domain, est: Estimate) -> np.ndarray:
    """The synthetic table's counts of the estimate's marginal, at the estimate's granularity."""
    counts = marginal_counts(synthetic, domain, est.attributes).reshape([domain.sizes[a] for a in est.attributes])
    return merge_levels(counts, est.groups).ravel() if est.merged else counts.ravel()


def statement(est: Estimate | None, synthetic: np.ndarray, domain: Domain, confidence: float = CONFIDENCE) -> dict:
    """One marginal's entry in report.json: a TV bound at ``confidence``, or 'not measured'."""
    if est is None:
        return {"status": "not measured", "statement": NOT_MEASURED}
    total = float(est.values.sum())
    synth = synthetic_at(synthetic, domain, est)
    q = synth / synth.sum() if synth.sum() > 0 else np.full(synth.size, 1.0 / synth.size)
    fit_l1 = float(np.abs(est.values - total * q).sum())
    bound = tv_bound(est.noise_l1, fit_l1, total)
    return {
        "status": "bound", "tv_bound": bound, "confidence": confidence,
        "vacuous": bool(total <= est.noise_l1 or bound >= 1.0),
        "levels": "merged" if est.merged else "original",
        "merged_columns": [domain.names[a] for a, g in zip(est.attributes, est.groups) if g is not None],
        "level_groups": [None if g is None else list(g) for g in est.groups] if est.merged else None,
        "fit_tv": float(min(1.0, fit_l1 / (2.0 * max(total, 1e-12)))),
        "noise_l1_bound": est.noise_l1, "noise": est.noise, "cell_sd": est.cell_sd,
        "measurements": est.sources, "cells": int(est.values.size),
        "analysis": SOURCE if est.noise == "gaussian" else
        "Laplace noise (pure DP): not in the AIM paper; ||noise||_1 ~ Gamma(cells, b), projection does not increase it",
    }


def marginal_statements(measurements, synthetic: np.ndarray, domain: Domain,
                        confidence: float = CONFIDENCE) -> tuple[list[dict], list[dict], dict[tuple, Estimate]]:
    """Entries for every column and every pair of columns (bound or 'not measured'), and the estimates."""
    estimates: dict[tuple, Estimate] = {}
    columns, pairs = [], []
    for a in range(domain.n_attributes):
        est = estimate(measurements, (a,), domain, confidence)
        if est is not None:
            estimates[(a,)] = est
        columns.append({"column": domain.names[a], **statement(est, synthetic, domain, confidence)})
    for r in itertools.combinations(range(domain.n_attributes), 2):
        est = estimate(measurements, r, domain, confidence)
        if est is not None:
            estimates[r] = est
        pairs.append({"columns": [domain.names[a] for a in r], **statement(est, synthetic, domain, confidence)})
    return columns, pairs, estimates

