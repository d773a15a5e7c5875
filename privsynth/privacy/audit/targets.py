"""The registry of audit targets: name -> builder(epsilon, copies) -> ``AuditTarget``.

End-to-end targets call a mechanism exactly as the pipeline does (``Config``, ``collect_statistics``,
``run``; the claim from ``privacy_cost(config)``) on a tiny table with small configs, so that thousands
of runs fit in minutes, and score what the release publishes:

* aim: the likelihood ratio of the published noisy measurements (``Release.measurements``) at the
  canary's cell, sum_m (y_m - c_m) / sigma_m^2 with c_m D's count of that (possibly merged) cell;
* rap, reduced_space, microaggregation: the expected count of the canary record in the synthetic table
  (n_estimate x the release's mass on the canary's levels);
* private_sampling: how many released rows are the canary;
* schema_draft: whether the canary's category passes the threshold (``dp_categories``), the canary's value
  held by about tau records in both neighbours: what the Gaussian counts can show;
* schema_draft: singleton: the same score when the canary's value is held by the canary alone (absent from
  D, count 1 in D'): the threshold's own case, its delta_tau. Only this target sees a broken threshold
  (``broken_threshold``); with the value at tau both neighbours release it alike.

Step targets (``steps``) audit one Gaussian or Laplace step in isolation with many more runs.

Adding a target is a few lines: a builder ``(epsilon=1.0, copies=1) -> AuditTarget`` that calls
``function_target(name, claim, release_delta, neighbours, run_once, statistic)`` with
``run_once(table: Histogram, noise: NoiseSource) -> float`` (run the release once, score it), registered
as ``TARGETS["name"] = builder``. The schema draft's DP pass is used through its pure function
``dp_categories(values, counts, rho, delta_tau, noise)``; its quantile pass (``dp_quantile``) could be
added the same way. private_sampling is audited at epsilon 1.2: at epsilon 1 its box bound allows no
row (each costs more than ln 3).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import numpy as np

from privsynth import discovery as schema_draft
from privsynth.mechanisms import get_mechanism
from privsynth.mechanisms.aim import mechanism as aim
from privsynth.mechanisms.base import Release
from privsynth.mechanisms.microaggregation import cells as mm
from privsynth.privacy.accounting import DEFAULT_DELTA, PrivacyCost, epsilon_from_rho, gaussian_sigma, laplace_scale
from privsynth.privacy.audit.canaries import TINY_DOMAIN, Neighbours, neighbours
from privsynth.privacy.audit.core import AuditTarget, NoiseFactory, loop_runs
from privsynth.privacy.audit.steps import NoisyStatistic, step_target
from privsynth.privacy.noise import NoiseSource
from privsynth.schema.encoding import Domain
from privsynth.schema.workload import Histogram, merge_levels

Builder = Callable[..., AuditTarget]

# Small configs: few rounds and iterations (post-processing only: no effect on the claim). Each is the keyword
# options of its mechanism's Config (values of mixed types: the pydantic model checks them).
# aim without domain compression: at 60 records its 3-sigma threshold (~37) would merge every level of
# every attribute into one, leaving later rounds nothing to measure (the merge is post-processing).
AIM_CONFIG: dict[str, Any] = dict(k=2, max_rounds=4, iterations_per_round=5, final_iterations=10, sample_rows=100,
                                  compress_threshold=0.0)
RAP_CONFIG = dict(k=2, rounds=2, picks_per_round=1, synthetic_rows=50, max_iterations=30)
REDUCED_SPACE_CONFIG: dict = {}
# t = 0 (one cell, no PCA): with t > 0 on 60 records most lattice cells fall under the count threshold
# and the synthetic table keeps almost nothing of the canary; the PCA step is audited on its own.
MICROAGGREGATION_CONFIG = dict(t=0)
# ln(1.52 / 0.49) = 1.132 per row: the narrowest box allowed, so one row fits below epsilon 1.2. At
# epsilon 1 the box bound allows no row at all (each row costs more than ln 3).
PRIVATE_SAMPLING_CONFIG = dict(box_lower=0.49, box_upper=1.52, k=1, reduced_space_seed=0)
PRIVATE_SAMPLING_EPSILON = 1.2
CATEGORY_DOMAIN = Domain(("color",), (2,))
CATEGORY_COMMON = 200  # records of the first value; the canary's value sits at the threshold


def canary_mass(release: Release, nb: Neighbours) -> float:
    """Expected count of the canary record in the synthetic table: rows x sum_i w_i prod_a p_i(a = canary_a)
    (rows: n_estimate, or the k published rows of an exact release)."""
    offsets = nb.domain.offsets
    columns = [int(offsets[a] + level) for a, level in enumerate(nb.canary)]
    mass = float(release.weights @ np.prod(release.points[:, columns], axis=1))
    rows = release.points.shape[0] if release.exact else float(release.public_facts.get("n_estimate", 1.0))
    return rows * mass


def measurement_ratio(release: Release, nb: Neighbours) -> float:
    """sum over published Gaussian measurements of (y - c) / sigma^2 at the canary's cell, c from D."""
    total = 0.0
    for m in release.measurements:
        table = nb.table.marginal(nb.domain, m.attributes).reshape([nb.domain.sizes[a] for a in m.attributes])
        if m.level_groups:
            table = merge_levels(table, m.level_groups)
        cell = nb.canary_cell(m.attributes, table.shape, m.level_groups)
        total += (float(m.noisy_counts[cell]) - float(table.ravel()[cell])) / m.scale ** 2
    return total


def function_target(name: str, claim: PrivacyCost, release_delta: float, nb: Neighbours,
                    run_once: Callable[[Histogram, NoiseSource], float], statistic: str,
                    claim_at: Callable[[float], float] | None = None) -> AuditTarget:
    """Any release as a function (table, noise source) -> score: all a new end-to-end target needs."""
    def sample(table: Histogram, runs: int, noise: NoiseFactory, tag: str) -> np.ndarray:
        return loop_runs(runs, noise, f"{name}/{tag}", lambda source: run_once(table, source))
    return AuditTarget(name=name, scope="end-to-end", claim=claim, release_delta=release_delta, neighbours=nb,
                       sample=sample, statistic=statistic, claim_at=claim_at)


def mechanism_target(name: str, config, nb: Neighbours, score: Callable[[Release, Neighbours], float],
                     statistic: str) -> AuditTarget:
    """A whole mechanism, run as the pipeline runs it (statistics once per table), scored on its release."""
    module = get_mechanism(name)
    statistics = {id(table): module.collect_statistics(table, nb.domain, config) for table in nb.tables()}

    def run_once(table: Histogram, noise: NoiseSource) -> float:
        return score(module.run(statistics[id(table)], nb.domain, config, noise), nb)
    return function_target(name, module.privacy_cost(config), config.delta, nb, run_once, statistic)


def _aim(epsilon: float = 1.0, copies: int = 1) -> AuditTarget:
    config = aim.Config(epsilon=epsilon, **AIM_CONFIG)
    return mechanism_target("aim", config, neighbours(copies=copies), measurement_ratio,
                            "likelihood ratio of the published measurements at the canary's cells")


def _rap(epsilon: float = 1.0, copies: int = 1) -> AuditTarget:
    config = get_mechanism("rap").Config(epsilon=epsilon, **RAP_CONFIG)
    return mechanism_target("rap", config, neighbours(copies=copies), canary_mass,
                            "canary count in the synthetic table")


def _reduced_space(epsilon: float = 1.0, copies: int = 1) -> AuditTarget:
    config = get_mechanism("reduced_space").Config(epsilon=epsilon, **REDUCED_SPACE_CONFIG)
    return mechanism_target("reduced_space", config, neighbours(copies=copies), canary_mass,
                            "canary count in the synthetic table")


def _microaggregation(epsilon: float = 1.0, copies: int = 1) -> AuditTarget:
    config = get_mechanism("microaggregation").Config(epsilon=epsilon, **MICROAGGREGATION_CONFIG)
    return mechanism_target("microaggregation", config, neighbours(copies=copies), canary_mass,
                            "canary count in the synthetic table")


def _private_sampling(epsilon: float = PRIVATE_SAMPLING_EPSILON, copies: int = 1) -> AuditTarget:
    module = get_mechanism("private_sampling")
    config = module.configure_for(module.Config(epsilon=epsilon, **PRIVATE_SAMPLING_CONFIG), TINY_DOMAIN)
    return mechanism_target("private_sampling", config, neighbours(copies=copies), canary_mass,
                            "released rows equal to the canary")


def category_neighbours(epsilon: float, delta: float, copies: int = 1) -> tuple[Neighbours, float, float]:
    """One categorical column: a common value and the canary's value with as many records as the
    threshold tau (rounded), so that one more record moves its release probability the most."""
    rho = schema_draft.draft_cost(epsilon, delta, 1).rho
    delta_tau = schema_draft.THRESHOLD_DELTA_FRACTION * delta
    tau = schema_draft.threshold(gaussian_sigma(rho), delta_tau)
    codes = np.concatenate([np.zeros(CATEGORY_COMMON), np.ones(int(round(tau)))]).astype(np.int32)[:, None]
    return neighbours(codes, CATEGORY_DOMAIN, copies), rho, delta_tau


def _category_counts(table: Histogram) -> np.ndarray:
    return table.marginal(CATEGORY_DOMAIN, (0,))


def _schema_draft(epsilon: float = 1.0, copies: int = 1, delta: float = DEFAULT_DELTA) -> AuditTarget:
    nb, rho, delta_tau = category_neighbours(epsilon, delta, copies)
    counts = {id(table): _category_counts(table) for table in nb.tables()}

    def run_once(table: Histogram, noise: NoiseSource) -> float:
        release = schema_draft.dp_categories(["common", "canary"], counts[id(table)], rho, delta_tau, noise)
        return float("canary" in release.categories)
    # Per column: (epsilon(rho, delta'), delta' + delta_tau)-DP for every delta' (schema_draft's docstring).
    return function_target("schema_draft", schema_draft.draft_cost(epsilon, delta, 1), delta, nb, run_once,
                           "the canary's category released (one column, dp_categories)",
                           claim_at=lambda d: epsilon_from_rho(rho, d - delta_tau) if d > delta_tau else math.inf)


CATEGORY_VALUES = ("common", "canary")  # the canary record holds the last level, "canary"


def _schema_draft_singleton(epsilon: float = 1.0, copies: int = 1, delta: float = DEFAULT_DELTA) -> AuditTarget:
    """The threshold's case: D holds the common value only; D' adds the canary, whose value no one else holds.

    The set of observed values is data-dependent (``dp_categories`` sees only values present), so on D the
    canary's value is never released and on D' it is released with probability at most delta_tau: the
    claim is (epsilon(rho, delta' - delta_tau), delta')-DP, as for ``schema_draft``.
    """
    rho = schema_draft.draft_cost(epsilon, delta, 1).rho
    delta_tau = schema_draft.THRESHOLD_DELTA_FRACTION * delta
    nb = neighbours(np.zeros((CATEGORY_COMMON, 1), dtype=np.int32), CATEGORY_DOMAIN, copies)
    counts = {id(table): _category_counts(table) for table in nb.tables()}

    def run_once(table: Histogram, noise: NoiseSource) -> float:
        present = np.flatnonzero(counts[id(table)] > 0)  # the observed values: what the draft's GROUP BY sees
        release = schema_draft.dp_categories([CATEGORY_VALUES[i] for i in present], counts[id(table)][present],
                                             rho, delta_tau, noise)
        return float("canary" in release.categories)
    return function_target("schema_draft: singleton", schema_draft.draft_cost(epsilon, delta, 1), delta, nb, run_once,
                           "a value held by one record (the canary) released (one column, dp_categories)",
                           claim_at=lambda d: epsilon_from_rho(rho, d - delta_tau) if d > delta_tau else math.inf)


def broken_threshold_function(sigma: float, delta_tau: float) -> float:
    """A BROKEN category threshold for the audit's power check: Phi^-1 forgotten (tau = 1 + sigma * delta_tau),
    so a value held by one record is released about half of the time instead of with probability delta_tau."""
    return 1.0 + sigma * delta_tau


@contextmanager
def broken_threshold(function: Callable[[float, float], float] = broken_threshold_function) -> Iterator[None]:
    """Within the block, ``dp_categories`` thresholds with ``function``: injected from outside, as ScaledNoise."""
    with mock.patch("privsynth.discovery.categories.threshold", function):
        yield


# ---------------------------------------------------------------- isolated steps

def _aim_one_way(epsilon: float = 1.0, copies: int = 1) -> AuditTarget:
    config = aim.Config(epsilon=epsilon, **AIM_CONFIG)
    nb = neighbours(copies=copies)
    d = nb.domain.n_attributes
    # The accounting side: the start spends MEASURE_SHARE * rho / T per 1-way marginal on average (start_sigmas).
    rho = aim.MEASURE_SHARE * aim.rho_of_config(config) * d / aim.rounds_parameter(config, d)
    sigmas = aim.start_sigmas(config, nb.domain.sizes)

    def statistics_of(table: Histogram) -> list[NoisyStatistic]:
        tables = aim.collect_statistics(table, nb.domain, config).tables([(a,) for a in range(d)])
        return [NoisyStatistic("gaussian", sigmas[a], tables[(a,)].ravel()) for a in range(d)]
    claim = PrivacyCost.zcdp(rho, f"AIM start: {d} one-way marginals, {rho:.6g}-zCDP")
    return step_target("aim: 1-way Gaussian", claim, config.delta, nb, statistics_of,
                       "likelihood ratio of the 1-way measurements")


def _rap_measure(epsilon: float = 1.0, copies: int = 1) -> AuditTarget:
    rap = get_mechanism("rap")
    config = rap.Config(epsilon=epsilon, **RAP_CONFIG)
    nb = neighbours(copies=copies)
    budget = rap.budget(config)
    marginal = (0, nb.domain.n_attributes - 1)

    def statistics_of(table: Histogram) -> list[NoisyStatistic]:
        counts = rap.collect_statistics(table, nb.domain, config).counts[marginal]
        return [NoisyStatistic("gaussian", budget.sigma, counts)]
    claim = PrivacyCost.zcdp(budget.rho0, f"RAP: one marginal measured at rho0 = {budget.rho0:.6g}")
    return step_target("rap: marginal Gaussian", claim, config.delta, nb, statistics_of,
                       "likelihood ratio of one measured marginal")


def _schema_draft_counts(epsilon: float = 1.0, copies: int = 1, delta: float = DEFAULT_DELTA) -> AuditTarget:
    nb, rho, _ = category_neighbours(epsilon, delta, copies)
    sigma = gaussian_sigma(rho)  # the draft noises the values' counts only (L2 sensitivity 1)

    def statistics_of(table: Histogram) -> list[NoisyStatistic]:
        return [NoisyStatistic("gaussian", sigma, _category_counts(table))]
    claim = PrivacyCost.zcdp(rho, f"schema draft: one categorical column at {rho:.6g}-zCDP")
    return step_target("schema_draft: counts Gaussian", claim, delta, nb, statistics_of,
                       "likelihood ratio of the noisy value counts")


def _reduced_space_laplace(epsilon: float = 1.0, copies: int = 1) -> AuditTarget:
    rs = get_mechanism("reduced_space")
    config = rs.Config(epsilon=epsilon, **REDUCED_SPACE_CONFIG)
    nb = neighbours(copies=copies)
    scale = rs.laplace_scale(config.epsilon, rs.workload_marginals(nb.domain, config.workload))

    def statistics_of(table: Histogram) -> list[NoisyStatistic]:
        return [NoisyStatistic("laplace", scale, rs.collect_statistics(table, nb.domain, config).counts)]
    return step_target("reduced_space: Laplace", rs.privacy_cost(config), config.delta, nb, statistics_of,
                       "likelihood ratio of the noisy workload counts")


def _microaggregation_laplace(epsilon: float = 1.0, copies: int = 1) -> AuditTarget:
    micro = get_mechanism("microaggregation")
    config = micro.Config(epsilon=epsilon, t=0)
    nb = neighbours(copies=copies)
    _, eps_weights, eps_centroids = micro.budget_shares(config)
    q = nb.domain.n_attributes

    def statistics_of(table: Histogram) -> list[NoisyStatistic]:
        stats = micro.collect_statistics(table, nb.domain, config)
        # t = 0: one cell holding every record; its sum of one-hot rows is the diagonal of C.
        return [NoisyStatistic("laplace", laplace_scale(eps_weights), np.array([float(stats.n)])),
                NoisyStatistic("laplace", laplace_scale(eps_centroids, mm.sum_l1_sensitivity(q)),
                               np.diag(stats.cooccurrence))]
    return step_target("microaggregation: Laplace (t=0)", micro.privacy_cost(config), config.delta, nb,
                       statistics_of, "likelihood ratio of the noisy cell count and cell sums")


def _microaggregation_pca(epsilon: float = 1.0, copies: int = 1) -> AuditTarget:
    micro = get_mechanism("microaggregation")
    config = micro.Config(epsilon=epsilon)
    nb = neighbours(copies=copies)
    eps_pca, _, _ = micro.budget_shares(config)
    scale = laplace_scale(eps_pca, mm.cooccurrence_l1_sensitivity(nb.domain.n_attributes))
    mask = mm.second_moment_mask(nb.domain)

    def statistics_of(table: Histogram) -> list[NoisyStatistic]:
        return [NoisyStatistic("laplace", scale, micro.collect_statistics(table, nb.domain, config).cooccurrence[mask])]
    claim = PrivacyCost.pure(eps_pca, f"microaggregation PCA share: pure {eps_pca:g}-DP")
    return step_target("microaggregation: PCA Laplace", claim, config.delta, nb, statistics_of,
                       "likelihood ratio of the noisy co-occurrence counts (upper triangle)")


TARGETS: dict[str, Builder] = {
    "aim": _aim,
    "rap": _rap,
    "reduced_space": _reduced_space,
    "microaggregation": _microaggregation,
    "private_sampling": _private_sampling,
    "schema_draft": _schema_draft,
    "schema_draft: singleton": _schema_draft_singleton,
}
STEP_TARGETS: dict[str, Builder] = {
    "aim: 1-way Gaussian": _aim_one_way,
    "rap: marginal Gaussian": _rap_measure,
    "schema_draft: counts Gaussian": _schema_draft_counts,
    "reduced_space: Laplace": _reduced_space_laplace,
    "microaggregation: Laplace (t=0)": _microaggregation_laplace,
    "microaggregation: PCA Laplace": _microaggregation_pca,
}
GAUSSIAN_STEPS = ("aim: 1-way Gaussian", "rap: marginal Gaussian", "schema_draft: counts Gaussian")
LAPLACE_STEPS = ("reduced_space: Laplace", "microaggregation: Laplace (t=0)", "microaggregation: PCA Laplace")
