"""The charged-noise protocol, written once (docs/design.md 5.1-5.3): a release's budget is charged
before any noise is drawn, the draw is then claimed in the ledger (refused if noise was ever drawn for
this release key, so a lost release is never re-drawn for free), and only then does the noise source
accept draws. The run's mechanism, its discover stage and ``schema draft`` all call ``charge_then_noise``.
"""

from __future__ import annotations

from collections.abc import Callable

from privsynth.privacy.accounting import PrivacyCost
from privsynth.privacy.ledger_records import ChargeReceipt
from privsynth.privacy.noise import NoiseSource, make_noise_source


def _no_step(_: str) -> None:
    return None


def charge_then_noise(ledger, dataset: str, key: str, cost: PrivacyCost, description: str, *,
                      require_budget: bool, seed: int | None,
                      step: Callable[[str], None] = _no_step) -> tuple[NoiseSource, ChargeReceipt]:
    """Charge ``cost`` to ``dataset`` under ``key``, claim the draw, and return the authorised noise
    source (seeded streams are keyed with the ledger's secret) and the charge's receipt. ``step`` hears
    "charged" and "noise_drawn" as each is recorded (the run's phases and fault points)."""
    receipt = ledger.charge(dataset, key, cost, description, require_budget=require_budget)
    step("charged")
    ledger.claim_noise(dataset, key)
    step("noise_drawn")
    noise = make_noise_source(seed, key, ledger.release_secret() if seed is not None else None)
    noise.authorize(receipt.reference)
    return noise, receipt
