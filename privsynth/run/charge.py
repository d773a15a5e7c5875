"""The release under the rules of docs/design.md section 5: charged before any noise is drawn, the draw claimed
in the ledger, the release stored under its key before anyone reads it; and what privacy.json says.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from privsynth.mechanisms.base import EarlierCounts, Release
from privsynth.mechanisms.catalogue import Mechanism
from privsynth.privacy.accounting import PrivacyCost
from privsynth.run import phase
from privsynth.run.faults import draw_point, fault_point
from privsynth.run.plan import delta_row_note
from privsynth.schema.determined import structural_zeros
from privsynth.schema.encoding import Domain
from privsynth.schema.workload import Histogram


@dataclass(frozen=True)
class ReleaseRequest:
    """One release: the mechanism and its config, the (private) statistics it reads, the key it is stored and
    claimed under, and the dataset charged for it.

    ``fine`` (a ``FineDecoding``): the charge is the run's whole cost (``fine.total``), and after the mechanism the
    sub-bin counts ``fine_counts`` (private) are released with the same authorised noise source; ``schema`` names
    their columns. ``run_id`` names the run in a resumed release's line.
    """

    mechanism: Mechanism
    config: Any
    statistics: Histogram
    domain: Domain
    key: str
    dataset: str
    delta: float
    seed: int | None
    column_names: tuple[str, ...]
    require_budget: bool = True
    fine: Any = None
    schema: Any = None
    fine_counts: Mapping[str, np.ndarray] | None = None
    run_id: str = ""
    earlier: tuple[EarlierCounts, ...] = ()  # DP counts the run's discovery released (``run.earlier_counts``)

    @property
    def cost(self) -> PrivacyCost:
        """What the ledger is charged: the mechanism's cost, or the run's whole cost with fine decoding."""
        return self.fine.total if self.fine is not None else self.mechanism.privacy_cost(self.config)


@dataclass(frozen=True)
class ReleaseOutcome:
    release: Release
    privacy: dict
    reused: bool
    replayed: int = 0  # noisy draws replayed from the release's journal (a resumed release)


AFTER = {"charged": "after_charge", "noise_drawn": "after_noise_claimed"}  # the fault points of each step


def _phase_and_fault(step: str) -> None:
    phase.enter(step)
    fault_point(AFTER[step])


def _say_nothing(_: str) -> None:
    return None


def resume_line(noise, run_id: str, stage: str) -> str | None:
    """The console line of a resumed release (public: how many draws its journal replays), else None."""
    from privsynth.privacy.journal import replay_summary

    journal = noise.journal
    if journal is None or not journal.resumed:
        return None
    return (f"{stage}: resuming run {run_id}: {replay_summary(journal.records)} replayed from the release's noise "
            "journal; nothing is charged again and only what was never drawn is drawn")


def release_stage(request: ReleaseRequest, *, store, ledger,
                  say: Callable[[str], None] = _say_nothing) -> ReleaseOutcome:
    """Produce (or reuse) the DP release under the rules of docs/design.md section 5.

    1. A release already stored under ``key`` is reused: no noise is drawn and nothing is charged.
    2. Otherwise the ledger is charged *before* any noise is drawn (idempotent per key, never
       refunded), then the draw is claimed in the ledger (``claim_noise``), and only then does the
       noise source accept draws. Every draw is kept in the release's noise journal in ``store`` as
       it is drawn (docs/design.md 5.3): a release killed before it was stored is resumed from it
       (``say`` hears where it resumes), with no new charge and no draw made twice; a claimed key
       without a journal is refused (a lost release is never re-drawn for free).
    3. The release is stored atomically under ``key`` before anyone reads it; its journal is then spent.
    """
    from privsynth.privacy.charged import charge_then_noise

    found = store.get(request.key)
    if found is not None:
        release, privacy = found
        phase.enter("stored")
        return ReleaseOutcome(release, privacy, reused=True)
    cost = request.cost
    journal = store.journal_place(request.key)
    noise, receipt = charge_then_noise(ledger, request.dataset, request.key, cost, f"{request.mechanism.NAME} release",
                                       require_budget=request.require_budget, seed=request.seed,
                                       step=_phase_and_fault,
                                       journal=journal, after_draw=lambda n: fault_point(draw_point("mechanism", n)))
    opened = noise.journal
    if opened is None:  # charge_then_noise attaches the journal it is given
        raise RuntimeError("the release's noise source has no journal")
    replayed = len(opened.records)
    line = resume_line(noise, request.run_id, "mechanism")
    if line is not None:
        say(line)
    try:
        release, privacy = _draw_release(request, noise, charged_now=not receipt.reused)
    finally:
        opened.close()
    fault_point("mechanism_drawn")  # every draw kept, the release not stored yet
    store.put(request.key, release, list(request.column_names), privacy)
    journal.remove()  # the stored release is what a re-run reuses now
    phase.enter("stored")
    fault_point("after_release_stored")
    return ReleaseOutcome(release, privacy, reused=False, replayed=replayed)


def _draw_release(request: ReleaseRequest, noise, *, charged_now: bool) -> tuple[Release, dict]:
    """The mechanism's release and its privacy record, drawn with the authorised (journalled) source."""
    mechanism, config, domain = request.mechanism, request.config, request.domain
    data = mechanism.collect_statistics(request.statistics, domain, config)
    zeros = structural_zeros(request.schema) if request.schema is not None else ()
    release = mechanism.run(data, domain, config, noise, request.earlier, zeros)
    release.check_domain(domain)
    privacy = privacy_record(mechanism, config, request.cost, request.delta, noise, request.dataset,
                             charged_now=charged_now, column_names=domain.names, release=release)
    if request.fine is not None:
        from privsynth.run.fine_decoding import measure

        if request.fine_counts is None:
            raise ValueError("a release with fine decoding needs its sub-bin counts")
        privacy["fine_decoding"] = measure(request.fine, request.schema, dict(request.fine_counts), noise)
        privacy["mechanism_cost"] = mechanism.privacy_cost(config).report(request.delta)
    return release, privacy


def privacy_record(mechanism: Mechanism, config, cost: PrivacyCost, delta: float, noise, dataset: str, *,
                   charged_now: bool, release: Release, column_names: tuple[str, ...] | list[str] = ()) -> dict:
    """privacy.json: what was spent and under which guarantee. No key, hash or count of the data.

    Measured marginals are named by their columns (``column_names``), not by attribute index.
    """
    record = {
        "visibility": "public (DP)",
        "mechanism": mechanism.NAME,
        "config": config.model_dump(mode="json"),
        "cost": cost.report(delta),
        "epsilon_statement": epsilon_statement(cost, delta),
        "noise": noise.describe(),
        "ledger": {"dataset": dataset, "charged_now": charged_now},
        "release_facts": named_marginals(release.public_facts, column_names),
        "exact_release": release.exact,
        "neighbouring_datasets": mechanism.neighbours,
    }
    note = delta_row_note(delta, release.public_facts.get("n_estimate")) if delta is not None else None
    if note is not None:
        record["delta_warning"] = note  # from the DP estimate of n: informs, never gates
    if mechanism.check_feasible is not None:
        # Private sampling: what its guarantee allows for this p, d, declared n and epsilon (config-only facts).
        record["feasibility"] = mechanism.check_feasible(config).to_json()
    return record


def named_marginals(facts: dict, column_names) -> dict:
    """The release's public facts with ``measured_marginals`` as lists of column names."""
    if not column_names or "measured_marginals" not in facts:
        return facts
    return dict(facts, measured_marginals=[[column_names[i] for i in marginal]
                                            for marginal in facts["measured_marginals"]])


def epsilon_statement(cost: PrivacyCost, delta: float | None) -> str:
    """The one wording of a cost used everywhere (summary, privacy.json, budget show)."""
    if not cost.is_dp:
        return "NOT differentially private"
    parts = []
    if cost.pure_epsilon is not None:
        parts.append(f"pure epsilon {cost.pure_epsilon:.4g}")
    if delta is not None:
        parts.append(f"epsilon {cost.epsilon_at(delta):.4g} at delta {delta:g}")
    parts.append(f"rho {cost.rho:.4g} (zCDP)")
    return "; ".join(parts)
