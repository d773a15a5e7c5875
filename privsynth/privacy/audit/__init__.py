"""Empirical privacy audit: a lower bound on the epsilon a release actually delivers, to check the claim.

A claim rests on reading the code; an audit measures it. For each target, neighbouring tables D and
D' = D plus one canary record (``canaries``), many runs on each with fresh noise (``core``), a score
on what the release publishes, a threshold test chosen on half of the runs, and on the other half an
empirical lower bound on epsilon with Clopper-Pearson 95% intervals (``bounds``). The bound must stay
under the claim; the same audit on a deliberately broken variant (noise scale halved, or the canary
counted twice while the claim is for one record) must exceed it, which shows the audit has power.

What is compared. Every zCDP claim (rho) implies (epsilon_from_rho(rho, delta'), delta')-DP for every
delta' (pure claims: epsilon at every delta'). At the release's delta (1e-9) no few-thousand-run sample
can show an event of probability 1e-9, so the audit also compares at delta' in ``core.AUDIT_DELTAS``
(1e-6 .. 5e-2), choosing the delta' and the test on the selection half of the runs and bounding on the
evaluation half (no correction needed: the choice is independent of the evaluation runs). Both the
bound at the chosen delta' and at the release's delta are reported, each at 95%.

What it cannot show. A lower bound only: passing says the sample found no violation at the audited
neighbours, configs and tests, not that the claim holds; small tables and configs stand for the
mechanism; floating-point attacks on the samplers (Mironov 2012) are out of reach of these tests.

Repeated runs, not one-run auditing (Steinke, Nasr & Jagielski 2023): on these tiny tables every target
fits thousands of runs per table in minutes, and at epsilon 1 a one-run audit would need thousands of
canaries, more than a small domain has distinct cells, to show comparable bounds.
"""

from privsynth.privacy.audit.bounds import Bound, clopper_pearson, epsilon_lower_bound
from privsynth.privacy.audit.canaries import Neighbours, neighbours
from privsynth.privacy.audit.core import (
    AUDIT_DELTAS,
    AuditResult,
    AuditTarget,
    ScaledNoise,
    format_results,
    run_audit,
    scaled,
    secure_noise,
    seeded_noise,
)
from privsynth.privacy.audit.targets import (
    GAUSSIAN_STEPS,
    LAPLACE_STEPS,
    STEP_TARGETS,
    TARGETS,
    broken_threshold,
    function_target,
)

__all__ = ["AUDIT_DELTAS", "AuditResult", "AuditTarget", "Bound", "GAUSSIAN_STEPS", "LAPLACE_STEPS", "Neighbours",
           "STEP_TARGETS", "ScaledNoise", "TARGETS",
           "broken_threshold", "clopper_pearson", "epsilon_lower_bound", "format_results",
           "function_target", "neighbours", "run_audit", "scaled", "secure_noise", "seeded_noise"]
