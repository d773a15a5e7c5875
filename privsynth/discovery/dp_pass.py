"""The DP pass of a draft: charge once, then discovery's rounds of Gaussian measurements (``discover``)."""

from __future__ import annotations

import hashlib
import json
import uuid

import numpy as np

from privsynth.discovery.categories import THRESHOLD_DELTA_FRACTION
from privsynth.discovery.declared import DeclaredColumn
from privsynth.discovery.discover import check_budget_finds_values, measure
from privsynth.discovery.draft import ColumnDraft, DraftOptions, Need, draft_cost, needs


def value_counts(table, name: str) -> tuple[list, np.ndarray]:
    """Distinct non-null values and their counts (private: they stay inside the mechanism)."""
    from privsynth.engine.backends import backend_error

    present = table.filter(table[name].notnull())
    try:
        grouped = present.group_by(name).aggregate(privsynth_n=present.count()).to_pyarrow()
    except Exception as err:  # noqa: BLE001  (the backend's message may quote a value: a value-free one instead)
        raise backend_error(err, f"column {name!r}") from None
    return grouped.column(name).to_pylist(), np.asarray(grouped.column("privsynth_n").to_numpy(), dtype=np.float64)


def draft_nonce() -> str:
    """A fresh nonce (a random UUID's hex): each draft is its own release, never a replay of an earlier one."""
    return uuid.uuid4().hex


def release_key_for(ledger, columns: list[DeclaredColumn], config: dict) -> str:
    """A fresh release key (HMAC under the ledger's secret, a new nonce: each draft is its own release)."""
    from privsynth.privacy.keys import release_key

    declared = json.dumps([[c.name, c.declared] for c in columns], separators=(",", ":"))
    schema_hash = hashlib.sha256(declared.encode()).hexdigest()
    secret = ledger.release_secret()
    return release_key(secret, "schema-draft", schema_hash, "schema_draft", config, None, draft_nonce())


def check_draft_seed(ledger, dataset: str, options: DraftOptions) -> None:
    """A seeded draft on a dataset with a budget needs ``allow_seed_with_budget``, checked before the charge."""
    from privsynth.privacy.seeds import check_seed_with_budget, has_budget

    if options.seed is None:
        return
    check_seed_with_budget(dataset, budgeted=has_budget(ledger, dataset), seeded=True,
                           allowed=options.allow_seed_with_budget)


def to_read(drafts: list[ColumnDraft], options: DraftOptions) -> list[ColumnDraft]:
    """Columns the DP pass reads (never identifiers, booleans, or columns settled by public values)."""
    return [d for d in drafts if needs(d, options) is not None]


def run_dp_pass(table, drafts: list[ColumnDraft], options: DraftOptions):
    """Charge the draft's cost, then measure; returns (cost, dataset). Mutates the drafts' entries."""
    from privsynth.privacy.charged import charge_then_noise
    from privsynth.privacy.ledger import BudgetLedger

    read = to_read(drafts, options)
    dataset = options.dataset or options.name
    n_cat = sum(1 for d in read if needs(d, options) in (Need.FACTS, Need.CATEGORIES))  # may need a category threshold
    cost = draft_cost(float(options.epsilon), options.delta, n_cat)
    delta_tau = THRESHOLD_DELTA_FRACTION * options.delta / max(n_cat, 1)
    config = {"epsilon": options.epsilon, "delta": options.delta, "bins": options.bins,
              "bounds": {k: [str(x) for x in v] for k, v in sorted(options.bounds.items())},
              "categories": {k: list(v) for k, v in sorted(options.categories.items())},
              "columns": [d.column.name for d in read]}
    if n_cat:
        check_budget_finds_values(lambda epsilon: draft_cost(epsilon, options.delta, n_cat).rho,
                                  float(options.epsilon), len(read), n_cat, delta_tau, options.public_rows,
                                  "schema draft")
    ledger = BudgetLedger(options.ledger)
    try:
        check_draft_seed(ledger, dataset, options)
        key = release_key_for(ledger, [d.column for d in drafts], config)
        # Charge BEFORE any value is read; then claim the draw; only then may noise be drawn.
        noise, _ = charge_then_noise(ledger, dataset, key, cost,
                                     f"schema draft {options.name} (DP categories, bounds and bins)",
                                     require_budget=options.require_budget, seed=options.seed)
    finally:
        ledger.close()
    measure(table, read, options, cost.rho, delta_tau, noise)  # discovery.discover: one code path with the run
    return cost, dataset
