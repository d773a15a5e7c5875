"""The charged-noise protocol, written once (docs/design.md 5.1-5.3): a release's budget is charged
before any noise is drawn, the draw is then claimed in the ledger, and only then does the noise source
accept draws. The run's mechanism, its discover stage and ``schema draft`` all call ``charge_then_noise``.

With a journal (``journal=``, the run's stages: docs/design.md 5.3) every draw is kept as it is drawn, so
the same release killed at any point is resumed: the charge is found (never a second one), the claim is
already there, and the journal replays what was drawn. The journal is created (its header durable)
BEFORE the claim, so a claimed release always has one unless someone deleted it. Without a journal
(``schema draft``), or when it is gone, a second claim for the key is refused: a release whose noise
was drawn is never drawn again for free.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

from privsynth.errors import NoiseAlreadyDrawnError
from privsynth.privacy.accounting import PrivacyCost
from privsynth.privacy.journal import JournalHeader, JournalPlace, NoiseJournal
from privsynth.privacy.ledger_records import ChargeReceipt
from privsynth.privacy.noise import NoiseSource, make_noise_source


def _no_step(_: str) -> None:
    return None


def _no_draw(_: int) -> None:
    return None


def charge_then_noise(ledger, dataset: str, key: str, cost: PrivacyCost, description: str, *,
                      require_budget: bool, seed: int | None,
                      step: Callable[[str], None] = _no_step, journal: JournalPlace | None = None,
                      after_draw: Callable[[int], None] = _no_draw) -> tuple[NoiseSource, ChargeReceipt]:
    """Charge ``cost`` to ``dataset`` under ``key``, claim the draw, and return the authorised noise
    source (seeded streams are keyed with the ledger's secret) and the charge's receipt. ``step`` hears
    "charged" and "noise_drawn" as each is recorded (the run's phases and fault points).

    ``journal``: where this release's noise journal lives. The source then keeps every draw there and,
    for a release already claimed, replays it (``noise.journal.resumed``); a claimed release whose journal
    is gone, or a journal of another release, sampler or seed, is refused here, before any draw.
    ``after_draw`` hears the number of draws kept after each append (the run's fault points)."""
    receipt = ledger.charge(dataset, key, cost, description, require_budget=require_budget)
    step("charged")
    noise = make_noise_source(seed, key, ledger.release_secret() if seed is not None else None)
    opened = None
    if journal is not None:
        header = JournalHeader(release_key=key, purpose=description, sampler="seeded" if seed is not None else "secure",
                               seed=seed, post_seed=None if seed is not None else secrets.randbits(63))
        opened = NoiseJournal.open(journal, header, after_draw)
    try:
        try:
            _claim(ledger, dataset, key, resumable=opened is not None and opened.resumed)
        except NoiseAlreadyDrawnError:
            if journal is not None and opened is not None and not opened.resumed:
                journal.remove()  # made just now for a release that was drawn without one: never replayed
            raise
        step("noise_drawn")
    except BaseException:
        if opened is not None:
            opened.close()  # its lock goes with it
        raise
    if opened is not None:
        noise.attach_journal(opened)
    noise.authorize(receipt.reference, cost)  # every draw is priced against this charge (privacy.meter)
    return noise, receipt


def _claim(ledger, dataset: str, key: str, *, resumable: bool) -> None:
    """Claim the draw; a second claim is a resume when the release's journal survived, else refused."""
    try:
        ledger.claim_noise(dataset, key)
    except NoiseAlreadyDrawnError:
        if resumable:
            return
        raise NoiseAlreadyDrawnError(
            f"dataset {dataset!r}: noise was already drawn for this release, but neither its stored copy nor its "
            "noise journal is left (the release store was emptied or changed); drawing again would be a second "
            "release for one charge. Start a new run (a new release, charged again; a seeded run needs another "
            "--seed, since its key has no per-run part); nothing was drawn") from None
