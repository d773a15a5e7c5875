"""The discovery's budget, written in the file: what each column's measurements spent.

The total rho is fixed and charged before any value is read, then spent in discovery's rounds
(``discover``): per column read, an equal part; of it, ``FACTS_SHARE`` on the DP column facts, the rest
(with what dropped columns leave) on its categories, or on its bounds and then its edges or codes.
"""

from __future__ import annotations


def split_lines(spent: dict[str, dict[str, float]], rho: float) -> list[str]:
    """The split as comment lines for the file's header."""
    lines = [(f"Budget split by need: rho {rho:.6g} in total; per column (facts: round 0, categories | bounds: "
              "round 1, edges: round 2):")]
    for col, parts in spent.items():
        text = ", ".join(f"{k} {v:.4g}" for k, v in parts.items())
        lines.append(f"  {col}: {text}")
    used = sum(v for parts in spent.values() for v in parts.values())
    if used < rho * (1 - 1e-9):
        lines.append(f"  unspent (no column needed it): {rho - used:.6g}")
    return lines
