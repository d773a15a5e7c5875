"""Isolated noise steps: one Gaussian or Laplace step of a mechanism, audited with many cheap runs.

Each step takes its statistics from the mechanism's own ``collect_statistics`` on D and on D' (so the
sensitivity the canary actually produces is what is audited) and its noise scale from the mechanism's
own scale function, and it states its claim from the mechanism's accounting side (the share of the
budget the mechanism says the step spends), never from the scale it audits. The noise is drawn
through a ``NoiseSource`` (``add_gaussian`` / ``add_laplace``), all runs of one table in one call:
each entry gets independent noise, so every row is a fresh run.

Only the coordinates where D and D' differ are simulated: the others have the same law under both
tables and are independent of the rest, so no test gains from them (the likelihood ratio does not
depend on them). The score is that likelihood ratio, the most powerful test (Neyman-Pearson):
Gaussian sum_i (y_i - v_i)(v'_i - v_i) / sigma_i^2, Laplace sum_i (|y_i - v_i| - |y_i - v'_i|) / b_i,
with v and v' the statistics on D and D'.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from privsynth.privacy.accounting import PrivacyCost
from privsynth.privacy.audit.canaries import Neighbours
from privsynth.privacy.audit.core import AuditTarget, NoiseFactory
from privsynth.schema.workload import Histogram

BATCH_ENTRIES = 2_000_000  # noise entries drawn per call (bounds memory at tens of MB)


@dataclass(frozen=True)
class NoisyStatistic:
    """A statistic vector of one table and the noise a step adds to it."""

    noise: str      # "gaussian" (scale = sigma) or "laplace" (scale = b)
    scale: float
    values: np.ndarray


StatisticsOf = Callable[[Histogram], list[NoisyStatistic]]


def _differing(reference: list[NoisyStatistic],
               alternative: list[NoisyStatistic]) -> list[tuple[str, float, np.ndarray, np.ndarray]]:
    """(noise, scale, v on D, v on D') restricted to the coordinates where the tables differ."""
    if [(s.noise, s.scale, s.values.shape) for s in reference] != [(s.noise, s.scale, s.values.shape)
                                                                   for s in alternative]:
        raise ValueError("the step noises different statistics on D and D' (shape, kind or scale)")
    out = []
    for a, b in zip(reference, alternative):
        diff = np.asarray(a.values, np.float64) != np.asarray(b.values, np.float64)
        if diff.any():
            out.append((a.noise, a.scale, np.asarray(a.values, np.float64)[diff],
                        np.asarray(b.values, np.float64)[diff]))
    if not out:
        raise ValueError("D and D' give the same statistics: the canary is invisible to this step")
    return out


def _log_likelihood_ratio(noise: str, scale: float, y: np.ndarray, v: np.ndarray, v_prime: np.ndarray) -> np.ndarray:
    if noise == "gaussian":
        return ((y - v) * (v_prime - v)).sum(axis=1) / scale ** 2
    if noise == "laplace":
        return (np.abs(y - v) - np.abs(y - v_prime)).sum(axis=1) / scale
    raise ValueError(f"unknown noise {noise!r}")


def step_sampler(statistics_of: StatisticsOf, neighbours: Neighbours):
    """A sampler that noises the differing coordinates of D's or D''s statistics ``runs`` times."""
    parts = _differing(statistics_of(neighbours.table), statistics_of(neighbours.neighbour))

    def sample(table: Histogram, runs: int, noise: NoiseFactory, tag: str) -> np.ndarray:
        if table is neighbours.table:
            which = 2
        elif table is neighbours.neighbour:
            which = 3
        else:
            raise ValueError("a step sampler runs on its own neighbours' tables only")
        source = noise(f"step/{tag}")
        scores = np.zeros(runs)
        for part in parts:
            kind, scale, v, v_prime = part
            rows = max(1, BATCH_ENTRIES // v.size)
            for start in range(0, runs, rows):
                stop = min(runs, start + rows)
                tiled = np.broadcast_to(part[which], (stop - start, v.size))
                y = source.add_gaussian(tiled, scale) if kind == "gaussian" else source.add_laplace(tiled, scale)
                scores[start:stop] += _log_likelihood_ratio(kind, scale, y, v, v_prime)
        return scores
    return sample


def step_target(name: str, claim: PrivacyCost, release_delta: float, neighbours: Neighbours,
                statistics_of: StatisticsOf, statistic: str) -> AuditTarget:
    """One noise step in isolation: the claim (from the mechanism's accounting) and its statistics."""
    return AuditTarget(name=name, scope="step", claim=claim, release_delta=release_delta, neighbours=neighbours,
                       sample=step_sampler(statistics_of, neighbours), statistic=statistic)
