"""The noise journal (issue 38, docs/design.md 5.3): every draw kept as it is drawn, replayed on resume.

Unit level, in process: the framing (a torn append is detected and discarded), replay (a seeded resume is
bit-identical to an uninterrupted stream; an unseeded one replays its draws and its post-processing
choices), the refusals (another release, sampler, seed, code path; a second process), owner-only modes,
the charge protocol (one charge, a claimed release resumed from its journal, refused without one) and a
remote (fsspec) release store found by a fresh worker. The real kills are in test_journal_kills.py.
"""

from __future__ import annotations

import os
import stat

import numpy as np
import pytest

from privsynth.errors import NoiseAlreadyDrawnError, NoiseJournalError
from privsynth.privacy.accounting import PrivacyCost
from privsynth.privacy.charged import charge_then_noise
from privsynth.privacy.journal import JournalHeader, JournalPlace, NoiseJournal, frame, unframe
from privsynth.privacy.ledger import BudgetLedger
from privsynth.privacy.meter import pure_price
from privsynth.privacy.noise import make_noise_source
from privsynth.run.releases import ReleaseStore

KEY = "k" * 64
COST = PrivacyCost.zcdp(10.0, "test: covers every draw of _draws (the meter prices each)")


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def _draws(noise, start: int = 0, stop: int = 6) -> list[np.ndarray]:
    """A fixed sequence of every kind of call, from ``start`` to ``stop`` (a run that stops half-way)."""
    counts = np.arange(12, dtype=np.float64)
    def sampled():
        with noise.one_release(pure_price(0.5)):
            return noise.choice(np.full(4, 0.25), 7)

    calls = [lambda: noise.add_gaussian(counts, 2.0, sensitivity=1.0),
             lambda: np.int64(noise.noisy_max(counts, 1.5, sensitivity=1.0)),
             lambda: noise.noisy_top_k(counts, 1.5, 3, sensitivity=1.0),
             lambda: noise.add_laplace(counts[:5], 1.0, sensitivity=1.0), sampled,
             lambda: noise.gaussian(0.5, 3, sensitivity=1.0), lambda: noise.laplace(0.5, 3, sensitivity=1.0),
             lambda: noise.post_rng.integers(0, 1 << 30, 4)]
    return [np.asarray(call()) for call in calls[start:stop]]


def _header(seed=7, post_seed=None, purpose="aim release") -> JournalHeader:
    return JournalHeader(KEY, purpose, "seeded" if seed is not None else "secure", seed, post_seed)


def _source(seed, journal=None):
    noise = make_noise_source(seed, KEY, b"s" * 32 if seed is not None else None)
    if journal is not None:
        noise.attach_journal(journal)
    noise.authorize("charge-1")
    return noise


def test_framing_discards_a_torn_or_corrupt_last_record():
    records = [b"header", b"first draw", b"second draw"]
    data = b"".join(frame(r) for r in records)
    assert unframe(data) == (records, len(data))
    for cut in (1, 20, len(frame(records[-1])) - 1):  # killed inside the last append
        assert unframe(data[:-cut])[0] == records[:2]
    corrupt = bytearray(data)
    corrupt[-1] ^= 0xFF  # a record of the right length whose bytes are not the ones checksummed
    assert unframe(bytes(corrupt)) == (records[:2], len(data) - len(frame(records[-1])))


def test_a_seeded_resume_is_bit_identical_to_an_uninterrupted_stream(tmp_path):
    whole = _draws(_source(7), stop=8)
    place = JournalPlace(tmp_path / "store" / ".journals" / KEY)
    first = NoiseJournal.open(place, _header())
    _draws(_source(7, first), stop=4)
    first.close()  # killed after four draws
    with open(place.path, "ab") as handle:
        handle.write(frame(b"x" * 100)[:30])  # and half-way through a fifth append
    again = NoiseJournal.open(place, _header())
    assert again.resumed and len(again.records) == 4
    noise = _source(7, again)
    resumed = _draws(noise, stop=8)
    for a, b in zip(resumed, whole):
        np.testing.assert_array_equal(a, b)  # replayed draws, then the stream continued exactly
    assert again.replayed == 7 and len(again.records) == 7  # the post-processing integers are not draws
    again.close()


def test_replayed_draws_are_the_recorded_ones_not_new_ones(tmp_path):
    """Unseeded (OpenDP): nothing is reproducible, so equality can only come from the journal."""
    place = JournalPlace(tmp_path / ".journals" / KEY)
    header = _header(seed=None, post_seed=12345)
    first = NoiseJournal.open(place, header)
    before = _draws(_source(None, first), stop=8)
    first.close()
    again = NoiseJournal.open(place, _header(seed=None, post_seed=999))  # a re-run draws another post seed ...
    assert again.header.post_seed == 12345  # ... and keeps the journal's, so pools and picks replay alike
    after = _draws(_source(None, again), stop=8)
    for a, b in zip(after, before):
        np.testing.assert_array_equal(a, b)
    fresh = _draws(_source(None, again), stop=1)[0]  # journal replayed in full: drawn fresh and kept
    assert not np.array_equal(fresh, before[0]) and len(again.records) == 8
    again.close()


def test_a_journal_of_another_release_or_sampler_is_never_replayed(tmp_path):
    place = JournalPlace(tmp_path / ".journals" / KEY)
    journal = NoiseJournal.open(place, _header())
    _draws(_source(7, journal), stop=2)
    journal.close()
    size = place.path.stat().st_size
    for other, named in ((_header(seed=8), "seed"), (_header(purpose="rap release"), "purpose"),
                         (_header(seed=None, post_seed=1), "sampler"),
                         (JournalHeader("q" * 64, "aim release", "seeded", 7, None), "release_key")):
        with pytest.raises(NoiseJournalError, match=f"another .*{named}.*nothing was drawn"):
            NoiseJournal.open(place, other)
    assert place.path.stat().st_size == size  # untouched


def test_a_call_that_differs_from_its_record_is_refused_before_any_fresh_draw(tmp_path):
    place = JournalPlace(tmp_path / ".journals" / KEY)
    journal = NoiseJournal.open(place, _header())
    _draws(_source(7, journal), stop=2)
    journal.close()
    again = NoiseJournal.open(place, _header())
    noise = _source(7, again)
    noise.add_gaussian(np.arange(12, dtype=np.float64), 2.0)  # draw 1 matches
    with pytest.raises(NoiseJournalError, match="at draw 2 .*recorded noisy_max, asked add_gaussian"):
        noise.add_gaussian(np.arange(12, dtype=np.float64), 2.0)
    with pytest.raises(NoiseJournalError, match="at draw 2"):
        noise.noisy_max(np.arange(12, dtype=np.float64), 3.0)  # another scale: another question
    assert len(again.records) == 2
    again.close()
    assert len(NoiseJournal.open(place, _header()).records) == 2  # nothing was appended


def test_journal_is_owner_only_and_locked_against_a_second_process(tmp_path):
    old = os.umask(0o022)
    try:
        place = JournalPlace(tmp_path / "store" / ".journals" / KEY)
        journal = NoiseJournal.open(place, _header())
        assert _mode(place.path) == 0o600 and _mode(place.path.parent) == 0o700
        with pytest.raises(NoiseJournalError, match="another process is drawing this release"):
            NoiseJournal.open(place, _header())  # flock: a second open file description is refused
        journal.close()
        NoiseJournal.open(place, _header()).close()
    finally:
        os.umask(old)


def _charge(ledger, store, seed=7):
    return charge_then_noise(ledger, "toy", KEY, COST, "aim release", require_budget=False, seed=seed,
                             journal=store.journal_place(KEY))


def test_a_claimed_release_resumes_from_its_journal_charged_once(tmp_path):
    ledger = BudgetLedger(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    store = ReleaseStore(tmp_path / "releases")
    noise, receipt = _charge(ledger, store)
    assert not receipt.reused and not noise.journal.resumed
    first = _draws(noise, stop=3)
    noise.journal.close()  # killed mid-mechanism
    assert ledger.noise_drawn("toy", KEY)
    noise, receipt = _charge(ledger, store)
    assert receipt.reused and noise.journal.resumed and len(noise.journal.records) == 3
    for a, b in zip(_draws(noise, stop=3), first):
        np.testing.assert_array_equal(a, b)
    noise.journal.close()
    assert len(ledger.history("toy")) == 1
    store.journal_place(KEY).remove()  # the release store lost it: a claimed key is never drawn again
    with pytest.raises(NoiseAlreadyDrawnError, match="noise was already drawn for this release.*noise journal"):
        _charge(ledger, store)
    assert not store.journal_place(KEY).path.exists(), "the refused attempt leaves no journal behind"


def test_killed_between_the_journal_and_the_claim_resumes(tmp_path):
    """The journal's header is durable before the claim: a claim without a journal never comes from a kill."""
    ledger = BudgetLedger(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    store = ReleaseStore(tmp_path / "releases")
    ledger.charge("toy", KEY, COST, "aim release", require_budget=False)
    NoiseJournal.open(store.journal_place(KEY), _header()).close()  # killed right after the header
    noise, _ = _charge(ledger, store)
    assert ledger.noise_drawn("toy", KEY) and noise.journal.records == []
    noise.journal.close()


def test_a_remote_store_keeps_the_journal_for_the_next_worker(tmp_path):
    pytest.importorskip("fsspec")
    ledger = BudgetLedger(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    url = f"memory://privsynth-journal-{os.getpid()}/releases"
    worker = ReleaseStore(url)
    noise, _ = _charge(ledger, worker, seed=None)
    first = _draws(noise, stop=4)
    noise.journal.close()  # the worker dies: its local staging folder is gone with it
    next_worker = ReleaseStore(url)
    assert next_worker.root != worker.root and not next_worker.journal_place(KEY).path.exists()
    noise, receipt = _charge(ledger, next_worker, seed=None)
    assert receipt.reused and len(noise.journal.records) == 4
    for a, b in zip(_draws(noise, stop=4), first):
        np.testing.assert_array_equal(a, b)
    noise.journal.close()
    assert _mode(next_worker.journal_place(KEY).path) == 0o600
    next_worker.journal_place(KEY).remove()
    assert not next_worker.remote.exists(f".journals/{KEY}")
