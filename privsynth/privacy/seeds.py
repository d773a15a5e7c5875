"""The seed policy: seeded noise is a testing feature, refused on a dataset with a budget unless the owner
allows it explicitly (docs/design.md 5.6). One check for runs and drafts, made before any charge."""

from __future__ import annotations

from privsynth.errors import BudgetNotSetError, UnknownDatasetError


def has_budget(ledger, dataset: str) -> bool:
    """Whether ``dataset`` has a privacy budget in ``ledger`` (an owner's setting: public to the run)."""
    try:
        return ledger.status(dataset)[0].epsilon is not None
    except UnknownDatasetError:
        return False


def check_seed_with_budget(dataset: str, *, budgeted: bool, seeded: bool, allowed: bool) -> None:
    """Refuse a seed on a dataset with a budget unless explicitly allowed (docs/design.md 5.6), before any charge.

    Seeded noise is a testing feature (reproducible numpy streams, not hardened against floating-point
    attacks): on a guarded dataset it must be an explicit choice. One check for runs and drafts.
    """
    if budgeted and seeded and not allowed:
        raise BudgetNotSetError(
            f"dataset {dataset!r} has a privacy budget and --seed was given: seeded noise is a testing feature "
            "(reproducible, not hardened against floating-point attacks); omit --seed, or pass "
            "--allow-seed-with-budget to accept it (nothing was read or charged)")
