"""The tests' known draws (conftest.known_draws) replace only what a test must repeat, and production still
draws fresh: a ledger's secret, a draft's nonce and a run id come from the OS CSPRNG outside the tests."""

from __future__ import annotations

import re

from conftest import PRODUCTION_DRAWS, known_hex

from privsynth.privacy.ledger import BudgetLedger


def test_production_secrets_nonces_and_run_ids_are_fresh_random_values():
    secrets_ = {PRODUCTION_DRAWS["secret"]() for _ in range(20)}
    nonces = {PRODUCTION_DRAWS["nonce"]() for _ in range(20)}
    run_ids = {PRODUCTION_DRAWS["run_id"]() for _ in range(20)}
    assert len(secrets_) == len(nonces) == len(run_ids) == 20
    assert all(re.fullmatch(r"[0-9a-f]{64}", s) for s in secrets_)  # 32 bytes
    assert all(re.fullmatch(r"[0-9a-f]{32}", s) for s in nonces)
    assert all(re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{6}", r) for r in run_ids)


def test_a_ledger_takes_its_secret_from_the_one_place_a_test_replaces(tmp_path):
    with BudgetLedger(f"sqlite:///{tmp_path / 'a.db'}") as book:
        first = book.release_secret()
        assert book.release_secret() == first  # created once, then read
    with BudgetLedger(f"sqlite:///{tmp_path / 'b.db'}") as book:
        assert book.release_secret() != first  # the known sequence moves on: two ledgers, two secrets
    assert len(first) == 32


def test_the_known_sequence_differs_call_to_call():
    assert len({known_hex(16) for _ in range(50)}) == 50
