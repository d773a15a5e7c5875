"""What a run spent, stated once: one figure (the whole run's epsilon at its delta) with its parts beside it.

A run's privacy cost may be charged in more than one charge (a run without a schema: its discover stage,
then the mechanism with fine decoding inside its charge). Every place that states the cost (the console,
report.md's headline, privacy.json's first fields, the Prefect artifacts, the manifest) reads it from
``RunSpend``, and its figure is composed by the ledger's own rule (``privsynth.privacy.spending.epsilon_spent``),
so it is the epsilon `privsynth budget show` counts for the run. The parts are stated in rho (zCDP), which
adds, never as epsilons, which do not.

It also words refusals truthfully (issue 36.4): "nothing was charged" only when nothing was; a refusal
after the discover stage's charge names that charge and says it stays spent.

Guarantee: everything here is computed from the configuration and the charges (public), never from the rows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from privsynth.errors import PrivsynthError
from privsynth.privacy.accounting import PrivacyCost


def _pure(epsilon: float | None) -> float:
    """The pure epsilon of a part or charge where every one is pure (checked by the caller)."""
    if epsilon is None:
        raise ValueError("a pure sum over a part or charge that is not pure epsilon-DP")
    return epsilon


@dataclass(frozen=True)
class SpentPart:
    """One part of a run's cost: its name and its zCDP rho (pure epsilon too, where the part is pure)."""

    name: str
    rho: float
    pure_epsilon: float | None = None


@dataclass(frozen=True)
class RunSpend:
    """The whole run's cost: ``epsilon`` at ``delta`` (composed by the ledger's rule), its rho, its parts."""

    epsilon: float
    delta: float
    rho: float
    statement: str
    parts: tuple[SpentPart, ...]
    pure_epsilon: float | None = None  # the pure sum, when every charge is pure

    @property
    def pure_parts(self) -> bool:
        """Every part is pure epsilon-DP: the parts add in epsilon (their rho, epsilon^2/2, does not add)."""
        return all(p.pure_epsilon is not None for p in self.parts)

    def share(self, part: SpentPart) -> float:
        """A part's share of what adds: the pure epsilon when every part is pure, else the rho."""
        if self.pure_parts:
            total = math.fsum(_pure(p.pure_epsilon) for p in self.parts)
            return _pure(part.pure_epsilon) / total if total > 0 else 0.0
        return part.rho / self.rho if self.rho > 0 else 0.0

    def parts_text(self) -> str:
        """The parts as shares of what adds, e.g. 'discovery 18%, aim 78%, fine decoding 4%' ('': one part)."""
        if len(self.parts) <= 1:
            return ""
        return ", ".join(f"{p.name} {100 * self.share(p):.0f}%" for p in self.parts)

    def line(self) -> str:
        """The one line every surface prints: the figure, then its parts."""
        parts = self.parts_text()
        what = "pure epsilon" if self.pure_parts else "rho"
        return self.statement + (f" (parts of the {what}: {parts})" if parts else "")

    def to_json(self) -> dict:
        return {"epsilon": float(f"{self.epsilon:.10g}"), "delta": self.delta, "rho_zcdp": self.rho,
                "pure_epsilon": self.pure_epsilon,
                "statement": self.statement, "line": self.line(),
                "parts": [{"part": p.name, "rho_zcdp": p.rho, "pure_epsilon": p.pure_epsilon,
                           "share": self.share(p)} for p in self.parts],
                "composition": ("the parts are pure epsilon-DP and their epsilons add" if self.pure_parts else
                                "the parts compose in zCDP (their rho adds)") + "; the epsilon is the whole run's, by "
                               "the ledger's rule, at this delta: it is what `privsynth budget show` counts for this "
                               "run"}


def cost_from_report(report: Mapping) -> PrivacyCost:
    """A PrivacyCost back from its ``PrivacyCost.report`` (privacy.json's ``cost``)."""
    if not report.get("differentially_private", True):
        return PrivacyCost.not_private(str(report.get("guarantee", "")))
    pure = report.get("pure_epsilon")
    return PrivacyCost(rho=float(report["rho_zcdp"]), pure_epsilon=None if pure is None else float(pure),
                       extra_delta=float(report.get("extra_delta") or 0.0))


def run_spend(charges: Sequence[tuple[str, PrivacyCost]], delta: float,
              split: Mapping[str, Sequence[SpentPart]] | None = None) -> RunSpend:
    """The run's one figure from its charges (name, cost), composed by the ledger's rule at ``delta``.

    ``split``: how one charge divides into named parts (the mechanism's charge holds fine decoding): name ->
    its parts, replacing the charge of that name. The figure never depends on the split.
    """
    from privsynth.privacy.spending import epsilon_spent, total_rho

    costs = [cost for _, cost in charges]
    epsilon = epsilon_spent(costs, delta)
    rho = total_rho(costs)
    if len(costs) == 1:
        from privsynth.run.charge import epsilon_statement

        statement = epsilon_statement(costs[0], delta)
    elif (all(c.pure_epsilon is not None for c in costs)
          and math.isclose(epsilon, sum(_pure(c.pure_epsilon) for c in costs))):
        statement = f"pure epsilon {epsilon:.4g}; rho {rho:.4g} (zCDP)"
    else:
        statement = f"epsilon {epsilon:.4g} at delta {delta:g}; rho {rho:.4g} (zCDP)"
    parts: list[SpentPart] = []
    for name, cost in charges:
        inner = (split or {}).get(name)
        if inner:
            parts += list(inner)
        else:
            parts.append(SpentPart(name, float(cost.rho), cost.pure_epsilon))
    pure = math.fsum(_pure(c.pure_epsilon) for c in costs) if all(c.pure_epsilon is not None for c in costs) else None
    return RunSpend(epsilon, delta, rho, statement, tuple(parts), pure)


# ---------------------------------------------------------------- refusals that say what is true

NOTHING_CHARGED = ("nothing was charged", "Nothing was charged", "nothing was read or charged")


def charged_before(discovery, dataset: str) -> str | None:
    """What a run had charged before a refusal: its discover stage's charge (None: nothing was charged)."""
    if discovery is None or not getattr(discovery, "rho", 0.0):
        return None
    when = "an earlier attempt of this run's discover stage" if getattr(discovery, "reused", False) else \
        "this run's discover stage"
    return (f"{when} had already charged rho {discovery.rho:.4g} ({100 * discovery.share:.0f}% of the run's budget) "
            f"to dataset {dataset!r}: it stays spent, never refunded (`privsynth budget show {dataset}`)")


def truthful_message(message: str, discovery, dataset: str) -> str:
    """A refusal's message with its charge stated truly: "nothing was charged" becomes "nothing more was
    charged" and the earlier charge is named, when the discover stage had charged; else unchanged."""
    earlier = charged_before(discovery, dataset)
    if earlier is None:
        return message
    for phrase in NOTHING_CHARGED:
        message = message.replace(phrase, phrase.replace("nothing was", "nothing more was")
                                  .replace("Nothing was", "Nothing more was"))
    return f"{message.rstrip('. ')}; {earlier}"


@dataclass(frozen=True)
class EarlierCharge:
    """A charge a refused run had made (the discover stage's), as ``charged_before`` names it."""

    rho: float
    share: float
    reused: bool = False


def ledger_charges(ledger, dataset: str) -> int:
    """How many charges the ledger holds for ``dataset`` (0: none yet)."""
    from privsynth.errors import UnknownDatasetError

    try:
        return len(ledger.history(dataset))
    except UnknownDatasetError:
        return 0


def discovery_charged_since(ledger, dataset: str, before: int, run_rho: float) -> EarlierCharge | None:
    """The discover-stage charge recorded for ``dataset`` after its first ``before`` charges (None: none), for
    a refusal raised inside the discover stage after it charged."""
    if ledger_charges(ledger, dataset) <= before:
        return None
    found = [c for c in ledger.history(dataset)[before:] if c.description.startswith("discovery")]
    if not found:
        return None
    rho = sum(c.rho for c in found)
    return EarlierCharge(rho, rho / run_rho if run_rho > 0 else 0.0)


def truthful_refusal(err: PrivsynthError, discovery, dataset: str) -> PrivsynthError:
    """The same refusal (its class) with ``truthful_message``; the error itself when nothing was charged."""
    message = truthful_message(str(err), discovery, dataset)
    if message == str(err):
        return err
    try:
        return type(err)(message)
    except TypeError:  # an error class with another constructor: keep it
        return err


# ---------------------------------------------------------------- privacy.json's first fields

def with_run_spend(ctx, privacy: dict) -> dict:
    """privacy.json with the run's one figure first (``spent``: the whole run's epsilon and its parts), and
    ``epsilon_statement`` stating the run's cost; the mechanism's own charge stays in ``cost``."""
    from privsynth.discovery.categories import THRESHOLD_DELTA_FRACTION
    from privsynth.run.validate import REFUSE_INVALID_RECORDS_CAVEAT

    mechanism = privacy["mechanism"]
    charges = []
    if ctx.discovery is not None and ctx.discovery.rho > 0:
        charges.append(("discovery", PrivacyCost.zcdp(ctx.discovery.rho, "discovery",
                                                      extra_delta=THRESHOLD_DELTA_FRACTION * ctx.plan.delta)))
    charges.append((mechanism, cost_from_report(privacy["cost"])))
    fine = privacy.get("fine_decoding")
    split = None
    if fine is not None and privacy.get("mechanism_cost"):
        own = privacy["mechanism_cost"]
        split = {mechanism: [SpentPart(mechanism, float(own["rho_zcdp"]), own.get("pure_epsilon")),
                             SpentPart("fine decoding", float(fine["rho"]), fine.get("pure_epsilon"))]}
    spend = run_spend(charges, ctx.plan.delta, split)
    head = {"spent": spend.to_json(), "epsilon_statement": spend.statement}
    if ctx.plan.parameters.refuse_invalid_records:
        head["caveat"] = REFUSE_INVALID_RECORDS_CAVEAT
    extra = {}
    if ctx.discovery is not None:
        extra = {"discovery": ctx.discovery.to_json(), "run_total": run_total(ctx, ctx.discovery),
                 "cost_is": "the mechanism's charge, one part of `spent` (the discover stage charged the other)",
                 "mechanism_statement": privacy.get("epsilon_statement")}
    rest = {k: v for k, v in privacy.items() if k not in head}
    return {**head, **rest, **extra}


def run_total(ctx, discovery) -> dict:
    """The whole run's statement when it discovered its schema: discovery's rho plus the mechanism's."""
    from privsynth.run.charge import epsilon_statement

    total = ctx.plan.discovery.total
    spent = PrivacyCost.zcdp(discovery.rho + ctx.plan.cost.rho, "this run: discovery, then the mechanism", total.notes,
                             extra_delta=total.extra_delta)  # the thresholds' delta, inside the stated delta
    return {"epsilon": ctx.plan.parameters.epsilon, "delta": ctx.plan.delta, "cost": spent.report(ctx.plan.delta),
            "statement": epsilon_statement(spent, ctx.plan.delta),
            "parts": {"discovery_rho": discovery.rho, "mechanism_rho": ctx.plan.cost.rho}}
