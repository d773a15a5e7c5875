"""Progress of an AIM run, for a caller's progress bar or log (public facts only).

A ``RoundProgress`` carries what the release publishes anyway (the marginal measured, as column
names; the round's sigma; rounds done; the share of rho spent) and wall-clock times: never a count,
a score or a model answer. The hook is called after every round and at the last phases.

How a caller listens (the mechanism's contract ``run(statistics, domain, config, noise)`` is kept):

    from privsynth.mechanisms.progress import reporting_progress
    with reporting_progress(lambda p: print(p.describe())):
        release = aim.run(statistics, domain, config, noise)

or pass ``progress=`` to ``aim.run`` directly. The hook is a context variable, so it follows the
caller's context (threads started inside it do not inherit it unless they copy the context: call
``run`` where the hook was set). An exception raised by the hook is logged and ignored: the budget is
already charged when rounds run, and a failing progress bar must not waste it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from privsynth.mechanisms.progress import ProgressHook, progress_hook, report, reporting_progress
from privsynth.privacy.accounting import exponential_rho, gaussian_rho
from privsynth.schema.encoding import Domain
from privsynth.schema.workload import Marginal


@dataclass(frozen=True)
class RoundProgress:
    """phase: "round" (after each round), "final_fit", "sampling" or "done". rounds_expected: the
    most rounds left by the budget schedule at the current round cost and by the round cap, plus
    those done (annealing can only make it fewer). eta_seconds: rounds left times the mean round so
    far, plus the final fit; None before the first round."""

    phase: str
    rounds_done: int
    rounds_expected: int
    rho_spent: float
    marginal: tuple[str, ...]
    sigma: float | None
    elapsed_seconds: float
    eta_seconds: float | None

    def describe(self) -> str:
        eta = "" if self.eta_seconds is None else f", about {self.eta_seconds:.0f} s left"
        what = f": measured {' x '.join(self.marginal)}" if self.marginal else ""
        # No "done/expected": the expected count shrinks as annealing raises the round cost, and "1/46 ... 14/22"
        # read as a moving target. Rounds left is an upper bound that only goes down.
        if self.phase == "round":
            left = max(self.rounds_expected - self.rounds_done, 0)
            step = f"aim round {self.rounds_done}{what} (at most {left} more)"
        else:
            step = f"aim {self.phase.replace('_', ' ')} after {self.rounds_done} rounds"
        return f"{step}; {100 * self.rho_spent:.0f}% of rho spent; {self.elapsed_seconds:.0f} s{eta}"


# The hook is the mechanisms' own (``privsynth.mechanisms.progress``): any mechanism reports the same way.
__all__ = ["RoundLog", "RoundProgress", "ProgressHook", "progress_hook", "report", "reporting_progress",
           "round_progress"]


@dataclass
class RoundLog:
    """Public record of one round: what it selected and spent (DP outputs and config only)."""

    marginal: Marginal
    sigma: float
    epsilon: float
    rho: float
    last: bool = False


def round_progress(phase: str, log: list[RoundLog], spent: float, rho: float, cap: int, sigma: float, eps: float,
                   domain: Domain, started: float, final_fit_seconds: float | None) -> RoundProgress:
    """Public facts of the run so far. Rounds left: at most what the cap allows and what is left at
    the current round cost (annealing only raises that cost)."""
    done = len(log)
    elapsed = time.perf_counter() - started
    if log and not log[-1].last:
        per_round = exponential_rho(eps) + gaussian_rho(sigma)
        left = max(1, min(cap - done, math.floor((1.0 - spent) * rho / per_round)))
    else:
        left = 0
    eta = None if final_fit_seconds is None else elapsed / max(1, done) * left + final_fit_seconds
    marginal = tuple(domain.names[a] for a in log[-1].marginal) if log and phase == "round" else ()
    return RoundProgress(phase, done, done + left, spent, marginal, log[-1].sigma if log else None, elapsed, eta)
