"""Where the run in this process stands, so that a stopped run (SIGTERM) says what a re-run will do.

A stop at any point is safe (every artifact is written atomically; the ledger's charge and its noise
claim are transactions), but what a re-run gets depends on when the stop came:

* before the charge: nothing was charged;
* charged, no noise drawn yet: a re-run of the same run folder resumes under the same charge;
* noise drawn, release not yet stored: every draw so far is in the release's noise journal
  (docs/design.md 5.3); a re-run of the same run folder replays them and draws only the rest, with no
  new charge (refused only if the journal was removed: no release key is drawn twice for one charge);
* release stored: a re-run of the same run folder reuses it, with no new charge.
"""

from __future__ import annotations

PHASES = ("starting", "before_charge", "charged", "noise_drawn", "stored", "finished")
_state: dict[str, str | None] = {"phase": "starting", "run_dir": None}


def enter(phase: str, run_dir: str | None = None) -> None:
    if phase not in PHASES:
        raise ValueError(f"unknown run phase {phase!r}")
    _state["phase"] = phase
    if run_dir is not None:
        _state["run_dir"] = run_dir


def current() -> str:
    return str(_state["phase"])


def stop_message() -> str:
    """The one line a stopped run prints: what happened to the budget and what a re-run will do."""
    phase, run_dir = _state["phase"], _state["run_dir"]
    resume = f"re-run with --output {run_dir} to resume" if run_dir else "re-run with the same --output to resume"
    if phase in ("starting", "before_charge"):
        detail = "nothing was charged; re-run to start again"
    elif phase == "charged":
        detail = f"the release was charged but no noise was drawn: {resume} without a second charge"
    elif phase == "noise_drawn":
        detail = (f"its noise draws so far are kept in the release's noise journal: {resume} without a second "
                  "charge (what was drawn is replayed, only the rest is drawn)")
    elif phase == "stored":
        detail = f"the release is stored: {resume} with no new charge"
    else:
        detail = "the run had finished"
    return f"privsynth: stopped by SIGTERM; nothing half-written remains; {detail}"
