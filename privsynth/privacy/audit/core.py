"""Running an audit: fresh noise per run, a target's scores on D and D', and the bound they give.

A target (``AuditTarget``) is a claim, a pair of neighbouring tables and a sampler that runs the
release ``runs`` times on one table with fresh noise and returns one score per run (larger: "looks
like D'"). ``run_audit`` draws the runs on both tables, chooses the test and delta' on the first half
of the runs and bounds epsilon on the second half (``bounds``).

Noise. ``seeded_noise(seed)`` gives every run its own ``SeededNoise`` stream (numpy PCG64: the same
Laplace, Gaussian and Gumbel laws as production, not hardened against floating-point attacks, which
an audit of the stated scales does not need); the stream is derived from the seed and a per-run key,
so no two runs, and no run on D and one on D', share noise. ``secure_noise()`` uses OpenDP's samplers
(``make_noise_source(None, key)``), about 160 us per Gaussian and 65 us per Laplace draw here.

Broken variants are injected from outside, never in a mechanism's code: ``ScaledNoise`` multiplies
every privacy noise scale (Laplace, Gaussian, Gumbel) by a factor before the draw; the neighbours'
``copies`` adds the canary several times while the claim stays that of one record.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from privsynth.privacy.accounting import PrivacyCost
from privsynth.privacy.audit.bounds import Bound, ChosenTest, bound_of, choose_test, split_halves
from privsynth.privacy.audit.canaries import Neighbours
from privsynth.privacy.noise import NoiseSource, SeededNoise, make_noise_source
from privsynth.schema.workload import Histogram

NoiseFactory = Callable[[str], NoiseSource]


@dataclass(frozen=True)
class DescribedNoise:
    """A noise factory with the words an audit result gives for its sampler (``AuditResult.sampler``)."""

    make: NoiseFactory
    description: str

    def __call__(self, key: str) -> NoiseSource:
        return self.make(key)
# The delta' grid: where a few thousand runs have power (1e-2 .. 5e-2) down to where they have none.
AUDIT_DELTAS = (1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 5e-2)
AUTHORIZATION = "privacy audit: synthetic neighbouring tables, no ledger"


def seeded_noise(seed: int = 0) -> DescribedNoise:
    """Per-run seeded numpy streams (distinct keys give independent streams), authorized."""
    def make(key: str) -> NoiseSource:
        # The audit's tables are synthetic and public: its streams need no secret key.
        noise = SeededNoise(seed, f"privsynth-audit/{key}")
        noise.authorize(AUTHORIZATION)
        return noise
    return DescribedNoise(make, f"SeededNoise (numpy PCG64), seed {seed}, one stream per run")


def secure_noise() -> DescribedNoise:
    """OpenDP's samplers (production noise), one source per run, authorized."""
    def make(key: str) -> NoiseSource:
        noise = make_noise_source(None, f"privsynth-audit/{key}")
        noise.authorize(AUTHORIZATION)
        return noise
    return DescribedNoise(make, "SecureNoise (OpenDP samplers), fresh per run")


class ScaledNoise(NoiseSource):
    """A BROKEN noise source for the audit's power check: every privacy noise scale times ``factor``.

    Post-processing randomness and categorical draws are passed through unchanged."""

    def __init__(self, inner: NoiseSource, factor: float) -> None:
        super().__init__(post_processing_seed=None)
        self.inner, self.factor, self.secure = inner, float(factor), inner.secure
        self.post_rng = inner.post_rng

    def authorize(self, charge_reference: str, allowance: PrivacyCost | None = None) -> None:
        self.inner.authorize(charge_reference, allowance)

    def one_release(self, price):
        return self.inner.one_release(price)

    def laplace(self, scale: float, size: int, *, sensitivity: float | None = None) -> np.ndarray:
        return self.inner.laplace(scale * self.factor, size, sensitivity=sensitivity)

    def gaussian(self, scale: float, size: int, *, sensitivity: float | None = None) -> np.ndarray:
        return self.inner.gaussian(scale * self.factor, size, sensitivity=sensitivity)

    def add_laplace(self, values: np.ndarray, scale: float, *, sensitivity: float | None = None) -> np.ndarray:
        return self.inner.add_laplace(values, scale * self.factor, sensitivity=sensitivity)

    def add_gaussian(self, values: np.ndarray, scale: float, *, sensitivity: float | None = None) -> np.ndarray:
        return self.inner.add_gaussian(values, scale * self.factor, sensitivity=sensitivity)

    def noisy_max(self, scores: np.ndarray, scale: float, *, sensitivity: float | None = None) -> int:
        return self.inner.noisy_max(scores, scale * self.factor, sensitivity=sensitivity)

    def noisy_top_k(self, scores: np.ndarray, scale: float, k: int, *, sensitivity: float | None = None) -> np.ndarray:
        return self.inner.noisy_top_k(scores, scale * self.factor, k, sensitivity=sensitivity)

    def choice(self, probabilities: np.ndarray, size: int) -> np.ndarray:
        return self.inner.choice(probabilities, size)

    def describe(self) -> dict:
        return {**self.inner.describe(), "broken": f"every noise scale x {self.factor:g}"}

    # Every draw goes through the public methods above, to the inner source.
    def _laplace(self, scale: float, size: int) -> np.ndarray:
        raise NotImplementedError

    def _gaussian(self, scale: float, size: int) -> np.ndarray:
        raise NotImplementedError

    def _noisy_max(self, scores: np.ndarray, scale: float) -> int:
        raise NotImplementedError

    def _noisy_top_k(self, scores: np.ndarray, scale: float, k: int) -> np.ndarray:
        raise NotImplementedError

    def _choice(self, p: np.ndarray, size: int) -> np.ndarray:
        raise NotImplementedError


def scaled(factory: NoiseFactory, factor: float) -> DescribedNoise:
    """The factory's sources with every privacy noise scale times ``factor`` (a broken variant)."""
    def make(key: str) -> NoiseSource:
        return ScaledNoise(factory(key), factor)
    return DescribedNoise(make, f"{getattr(factory, 'description', 'noise')}; BROKEN: noise scale x {factor:g}")


# (table, runs, noise factory, tag for the keys) -> one score per run
Sampler = Callable[[Histogram, int, NoiseFactory, str], np.ndarray]


@dataclass(frozen=True)
class AuditTarget:
    """What is audited: the claim, the neighbours and how one table's runs are scored.

    scope: "end-to-end" (the whole release, as the pipeline calls it) or "step" (one noise step of a
    mechanism in isolation, through the mechanism's own statistics and scale functions).
    claim_at: the claimed epsilon at a delta (default ``claim.epsilon_at``).
    """

    name: str
    scope: str
    claim: PrivacyCost
    release_delta: float
    neighbours: Neighbours
    sample: Sampler
    statistic: str
    claim_at: Callable[[float], float] | None = None

    def epsilon_claimed(self, delta: float) -> float:
        return self.claim_at(delta) if self.claim_at is not None else self.claim.epsilon_at(delta)


def loop_runs(runs: int, noise: NoiseFactory, tag: str, one_run: Callable[[NoiseSource], float]) -> np.ndarray:
    """Scores of ``runs`` independent runs, each with its own noise source (key ``tag/i``)."""
    return np.array([one_run(noise(f"{tag}/{i}")) for i in range(runs)], dtype=np.float64)


@dataclass(frozen=True)
class AuditResult:
    """The audit of one target: the comparison most likely to expose a false claim (``best``, at the
    delta' chosen on the selection half) and the bound at the release's own delta (``at_release``)."""

    target: str
    scope: str
    variant: str
    statistic: str
    runs: int                 # per table
    seconds: float
    sampler: str
    release_delta: float
    claim_at_release: float
    best: Bound
    claim_at_best: float
    at_release: Bound
    choice: ChosenTest

    @property
    def within_claim(self) -> bool:
        """Neither bound exceeds the claim at its delta (the check for a correct mechanism)."""
        return self.best.lower <= self.claim_at_best and self.at_release.lower <= self.claim_at_release

    @property
    def exceeds_claim(self) -> bool:
        """A bound is above the claim at its delta (what a broken variant must show)."""
        return not self.within_claim

    @property
    def tightness(self) -> float:
        """The 95% lower bound over the claim at the chosen delta'."""
        return self.best.lower / self.claim_at_best


def run_audit(target: AuditTarget, runs: int, noise: NoiseFactory | None = None,
              deltas: Sequence[float] = AUDIT_DELTAS, variant: str = "as released") -> AuditResult:
    """Score ``runs`` runs on D and on D', choose the test on the first half of each, bound on the second.
    ``variant`` only labels the result (e.g. "BROKEN: noise x 0.5")."""
    if runs < 4:
        raise ValueError(f"an audit needs at least 4 runs per table, got {runs}")
    noise = noise or seeded_noise()
    started = time.perf_counter()
    d, dprime = target.neighbours.tables()
    scores_d = np.asarray(target.sample(d, runs, noise, "D"), dtype=np.float64)
    scores_p = np.asarray(target.sample(dprime, runs, noise, "D'"), dtype=np.float64)
    if scores_d.shape != (runs,) or scores_p.shape != (runs,) or not (np.all(np.isfinite(scores_d))
                                                                      and np.all(np.isfinite(scores_p))):
        raise ValueError(f"{target.name}: the sampler must return {runs} finite scores per table")
    select_d, eval_d = split_halves(scores_d)
    select_p, eval_p = split_halves(scores_p)
    grid = sorted({target.release_delta, *deltas})
    choice = choose_test(select_d, select_p, grid, target.epsilon_claimed)
    best = bound_of(choice, eval_d, eval_p)
    at_release_choice = choose_test(select_d, select_p, [target.release_delta], target.epsilon_claimed)
    at_release = bound_of(at_release_choice, eval_d, eval_p)
    return AuditResult(
        target=target.name, scope=target.scope, variant=variant, statistic=target.statistic, runs=runs,
        seconds=time.perf_counter() - started,
        sampler=getattr(noise, "description", "custom"), release_delta=target.release_delta,
        claim_at_release=target.epsilon_claimed(target.release_delta),
        best=best, claim_at_best=target.epsilon_claimed(choice.delta),
        at_release=at_release, choice=choice)


def format_results(results: Sequence[AuditResult]) -> str:
    """A plain-text table: claim, the delta' compared, the 95% lower bound with its interval, runs, time."""
    header = ("target", "scope", "variant", "claim@release", "delta'", "claim@delta'", "lower bound (est, upper)",
              "lb@release", "lb/claim", "runs/table", "s")
    rows = [header]
    for r in results:
        rows.append((r.target, r.scope, r.variant, f"{r.claim_at_release:.3f} @ {r.release_delta:g}",
                     f"{r.best.delta:g}", f"{r.claim_at_best:.3f}",
                     f"{r.best.lower:.3f} ({r.best.estimate:.3f}, {r.best.upper:.3f})",
                     f"{r.at_release.lower:.3f}", f"{r.tightness:.2f}", str(r.runs), f"{r.seconds:.1f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
