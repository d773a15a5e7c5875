"""Accuracy audit: how closely a synthetic table matches the real one, on the same discretisation.

The audit reads the real rows, so NOTHING it produces is differentially private: its figures,
tables and plots are internal diagnostics for the data owner and must never be published alongside
the release. Every output carries ``"visibility": "internal"`` and says so in plain words.

All comparisons are on level codes (n x attributes int arrays over one ``Domain``), as proportions,
so tables of different sizes compare directly.
"""

from __future__ import annotations

import numpy as np

from privsynth.encoding import Domain
from privsynth.workload import Marginal, all_marginals, marginal_counts, random_marginals

NOT_PRIVATE_NOTICE = (
    "INTERNAL: this audit reads the real data and is NOT differentially private. "
    "Do not publish it or any figure from it alongside the synthetic release."
)


def _check_codes(codes: np.ndarray, domain: Domain, what: str) -> np.ndarray:
    codes = np.asarray(codes)
    if codes.ndim != 2 or codes.shape[1] != domain.n_attributes:
        raise ValueError(f"{what}: expected a 2-d code array with {domain.n_attributes} columns, got shape {codes.shape}")
    if codes.shape[0] == 0:
        raise ValueError(f"{what}: needs at least one row to form marginal distributions")
    if codes.dtype.kind not in "iu":
        raise ValueError(f"{what}: codes must be integers, got dtype {codes.dtype}")
    sizes = np.asarray(domain.sizes)
    if (codes < 0).any() or (codes >= sizes).any():
        raise ValueError(f"{what}: codes fall outside the domain's levels")
    return codes


def audit_marginals(n_attributes: int, k: int, max_marginals: int | None, seed: int) -> list[Marginal]:
    """The k-way marginals the audit compares: all of them, or a seeded uniform subset (data-free)."""
    if max_marginals is None:
        return all_marginals(n_attributes, k)
    if max_marginals < 1:
        raise ValueError(f"max_marginals must be at least 1 or None, got {max_marginals}")
    # Offset the seed by k so each order draws an independent subset.
    return random_marginals(n_attributes, k, max_marginals, seed + k)


def marginal_error_summary(
    real_codes: np.ndarray,
    synthetic_codes: np.ndarray,
    domain: Domain,
    ks: tuple[int, ...] = (1, 2, 3),
    max_marginals: int | None = None,
    seed: int = 0,
) -> dict:
    """Per marginal order k: mean and max total-variation distance between real and synthetic marginal
    distributions, and the max absolute cell error (on proportions), over every k-way marginal or a
    seeded random subset of ``max_marginals``.

    Returns ``{str(k): {"mean_tv", "max_tv", "max_abs_cell_error", "n_marginals"}}``; orders larger
    than the number of attributes are skipped. Reads the real data: NOT differentially private.
    """
    real = _check_codes(real_codes, domain, "real_codes")
    synth = _check_codes(synthetic_codes, domain, "synthetic_codes")
    n_real, n_synth = real.shape[0], synth.shape[0]
    out: dict[str, dict] = {}
    for k in ks:
        k = int(k)
        if k < 1:
            raise ValueError(f"marginal orders must be positive, got {k}")
        if k > domain.n_attributes:
            continue
        marginals = audit_marginals(domain.n_attributes, k, max_marginals, seed)
        tvs = np.empty(len(marginals))
        max_cell = 0.0
        for i, m in enumerate(marginals):
            diff = marginal_counts(real, domain, m) / n_real - marginal_counts(synth, domain, m) / n_synth
            abs_diff = np.abs(diff)
            tvs[i] = 0.5 * abs_diff.sum()
            max_cell = max(max_cell, float(abs_diff.max()))
        out[str(k)] = {
            "mean_tv": float(tvs.mean()),
            "max_tv": float(tvs.max()),
            "max_abs_cell_error": max_cell,
            "n_marginals": len(marginals),
        }
    return out
