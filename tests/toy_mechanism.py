"""A toy mechanism for the contract test: noisy 1-way marginals, independent columns.

One record changes each of the d one-way counts by one: L1 sensitivity d, so Laplace noise of scale
d / epsilon makes the release epsilon-DP (add or remove one record). Written only against
``privsynth.mechanisms.base``: what a new mechanism needs, and no more."""

from __future__ import annotations

import numpy as np

from privsynth.mechanisms.base import Measurement, MechanismConfig, Release
from privsynth.privacy.accounting import PrivacyCost

NAME = "toy"
ROWS_POINTS = 64  # independent draws published as the release's points


class Config(MechanismConfig):
    pass


def privacy_cost(config: Config) -> PrivacyCost:
    return PrivacyCost.pure(config.epsilon, f"toy: {config.epsilon:g}-DP (Laplace 1-way marginals)")


def releases_n_estimate(config: Config) -> bool:  # noqa: ARG001
    return True


def collect_statistics(histogram, domain, config):  # noqa: ARG001
    return [histogram.marginal(domain, (j,)) for j in range(domain.n_attributes)]


def run(statistics, domain, config, noise) -> Release:
    scale = domain.n_attributes / config.epsilon
    noisy = [noise.add_laplace(np.asarray(c, dtype=np.float64), scale, sensitivity=1.0) for c in statistics]
    points = np.zeros((ROWS_POINTS, domain.width))
    for j, y in enumerate(noisy):
        p = np.clip(y, 0, None) + 1e-9
        points[:, domain.offsets[j]:domain.offsets[j + 1]] = p / p.sum()
    n_hat = max(1.0, float(np.mean([y.sum() for y in noisy])))
    return Release(NAME, points, np.full(ROWS_POINTS, 1.0 / ROWS_POINTS), public_facts={"n_estimate": n_hat},
                   measurements=tuple(Measurement((j,), y, "laplace", scale) for j, y in enumerate(noisy)))
