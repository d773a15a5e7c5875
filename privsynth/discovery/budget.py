"""The draft's budget, split by need and written in the file.

The draft's total rho is fixed and charged before any value is read. It is spent in two rounds of
Gaussian measurements (sequential composition in zCDP: rhos add, adaptivity allowed):

* round 1, one measurement per column that needs one: a categorical column's histogram of values
  (weight ``WEIGHTS['categories']``), a numeric or temporal column's log-scale / yearly histogram for
  its bounds (``WEIGHTS['bounds']``). Boolean columns, and columns whose domain is public, need none.
* round 2, the fine histogram of each numeric or temporal column still kept after round 1 and not
  already settled by public bounds of a small integer domain (``WEIGHTS['edges']``).

Round 1 gets its weights' share of the total, reserving ``WEIGHTS['edges']`` for each column that may
need round 2; round 2 splits whatever round 1 did not spend over the columns that do need it, in
proportion to their weights, so the total spent equals the charge whenever any column needs round 2.
"""

from __future__ import annotations

WEIGHTS = {"categories": 2.0, "bounds": 2.0, "edges": 1.0}


def allocate(rho: float, weights: dict[str, float]) -> dict[str, float]:
    """``rho`` split over the keys in proportion to their (positive) weights."""
    total = sum(weights.values())
    if total <= 0:
        return {k: 0.0 for k in weights}
    return {k: rho * w / total for k, w in weights.items()}


def round_one(rho: float, first: dict[str, str], may_need_edges: list[str]) -> dict[str, float]:
    """Round-1 rho per column: ``first`` maps a column to its first measurement (categories | bounds)."""
    w1 = {c: WEIGHTS[m] for c, m in first.items()}
    reserve = WEIGHTS["edges"] * len(may_need_edges)
    w_total = sum(w1.values()) + reserve
    if w_total <= 0:
        return {}
    return {c: rho * w / w_total for c, w in w1.items()}


def round_two(rho: float, spent: float, needers: list[str]) -> dict[str, float]:
    """Round-2 rho per column: what round 1 left, split evenly (equal weights) over the columns that need it."""
    left = max(0.0, rho - spent)
    return allocate(left, {c: WEIGHTS["edges"] for c in needers})


def split_lines(spent: dict[str, dict[str, float]], rho: float) -> list[str]:
    """The split as comment lines for the file's header."""
    lines = [(f"Budget split by need: rho {rho:.6g} in total; per column (categories | bounds: round 1, "
             "edges: round 2):")]
    for col, parts in spent.items():
        text = ", ".join(f"{k} {v:.4g}" for k, v in parts.items())
        lines.append(f"  {col}: {text}")
    used = sum(v for parts in spent.values() for v in parts.values())
    if used < rho * (1 - 1e-9):
        lines.append(f"  unspent (no column needed it): {rho - used:.6g}")
    return lines
