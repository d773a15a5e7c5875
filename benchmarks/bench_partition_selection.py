"""Which values of an unknown categorical column a budget can find: partition selection, compared (issue 37.3).

    python benchmarks/bench_partition_selection.py

Public arithmetic only (no table is read): for a run without a schema at epsilon 1, delta 1e-9, the rho one
categorical column gets for its values (the discover stage's split: ``discovery_share``, ``FACTS_SHARE``, one
look or both), and what each selection rule makes of that rho. Each record holds one value of the column (one
partition per record), and every rule below is charged in the run's currency, zCDP, with its delta inside
the stated delta:

* ``gaussian (today)``: the Gaussian histogram of the values seen, thresholded at tau = 1 + sigma z(delta_tau)
  (``categories.threshold``), delta_tau = THRESHOLD_DELTA_FRACTION delta / columns; the noisy counts are the
  counts the rest of discovery reads.
* ``gaussian, F = ...``: the same rule with a larger share F of delta for the thresholds: the run's rho is
  then the largest that fits (epsilon, delta (1 - F)) (``plan_discovery``), a little less for everyone.
* ``laplace threshold``: Laplace counts at eps = sqrt(2 rho) (eps-DP is eps^2/2-zCDP),
  tau = 1 + ln(1/(2 delta_tau)) / eps.
* ``optimal (eps, delta)``: Desfontaines, Voss, Gipson & Mandayam (PoPETs 2022): the most likely release
  of a value held by k records that any (eps, delta)-DP selection allows, at the same eps = sqrt(2 rho) and
  delta_tau, for one partition per record (the weighted and policy Gaussian rules reduce to the Gaussian
  threshold there); it releases no count, so its values would still need a Gaussian count after it.

Each row: the rows a value needs to be released with probability 1/2 and 0.95, and, for n = 3,000 / 10,000 /
30,000, the share of n that is (a category below it is lost to <out-of-domain>).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

from scipy.stats import norm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from privsynth.discovery.categories import FIRST_LOOK_SHARE, THRESHOLD_DELTA_FRACTION, threshold  # noqa: E402
from privsynth.discovery.discover import FACTS_SHARE  # noqa: E402
from privsynth.privacy.accounting import gaussian_sigma  # noqa: E402
from privsynth.privacy.spending import rho_allowance  # noqa: E402
from privsynth.run.discover import discovery_share  # noqa: E402

EPSILON, DELTA = 1.0, 1e-9
COLUMNS = (8, 28, 74)
ROWS = (3_000, 10_000, 30_000)


def column_rho(epsilon: float, delta: float, columns: int, fraction: float, both_looks: bool) -> float:
    """The rho one categorical column's values get (the discover stage's split, public arithmetic)."""
    run_rho = rho_allowance(epsilon, delta * (1.0 - fraction))
    part = discovery_share(None, columns) * run_rho / columns
    return part * (1.0 - FACTS_SHARE) * (1.0 if both_looks else FIRST_LOOK_SHARE)


def gaussian_rows(rho: float, delta_tau: float, probability: float) -> float:
    """Rows a value needs to pass the Gaussian threshold with ``probability``."""
    sigma = gaussian_sigma(rho)
    return threshold(sigma, delta_tau) + sigma * float(norm.ppf(probability))


def laplace_rows(rho: float, delta_tau: float, probability: float) -> float:
    scale = 1.0 / math.sqrt(2.0 * rho)  # eps = sqrt(2 rho): the pure-DP Laplace count costs eps^2 / 2 in zCDP
    tau = 1.0 + scale * math.log(1.0 / (2.0 * delta_tau))
    # P[k + Lap(b) > tau] = probability -> k = tau + b ln(2 probability) (probability >= 1/2)
    return tau + scale * math.log(2.0 * probability) if probability >= 0.5 else tau - scale * math.log(
        1.0 / (2.0 * probability))


def optimal_rows(rho: float, delta_tau: float, probability: float, limit: int = 10_000_000) -> float:
    """The least k whose release probability under the optimal (eps, delta) partition selection reaches
    ``probability`` (pi(k) = min(e^eps pi(k-1) + delta, 1 - e^-eps (1 - pi(k-1) - delta), 1))."""
    eps = math.sqrt(2.0 * rho)
    pi, k = 0.0, 0
    while pi < probability and k < limit:
        k += 1
        pi = min(math.exp(eps) * pi + delta_tau, 1.0 - math.exp(-eps) * (1.0 - pi - delta_tau), 1.0)
    return float(k)


def rows_line(name: str, at_half: float, at_95: float) -> str:
    shares = " | ".join(f"{100 * at_half / n:.1f}%" for n in ROWS)
    return f"| {name} | {at_half:,.0f} | {at_95:,.0f} | {shares} |"


def main() -> None:
    print(f"epsilon {EPSILON:g}, delta {DELTA:g}; one categorical column's values, rho from the discover stage's "
          "split (both looks: the column's whole part; one look: its first look only)\n")
    for columns in COLUMNS:
        for both in (False, True):
            print(f"### {columns} columns read, {'both looks' if both else 'first look'}\n")
            print("| rule | rows for release w.p. 1/2 | w.p. 0.95 | " + " | ".join(f"share of n = {n:,}" for n in ROWS)
                  + " |")
            print("|---|---|---|" + "---|" * len(ROWS))
            rho = column_rho(EPSILON, DELTA, columns, THRESHOLD_DELTA_FRACTION, both)
            delta_tau = THRESHOLD_DELTA_FRACTION * DELTA / columns / 2.0  # each look holds half
            print(rows_line(f"gaussian (today, F = {THRESHOLD_DELTA_FRACTION:g}), rho {rho:.3g}",
                            gaussian_rows(rho, delta_tau, 0.5), gaussian_rows(rho, delta_tau, 0.95)))
            for fraction in (0.01, 0.1, 0.3):
                rho_f = column_rho(EPSILON, DELTA, columns, fraction, both)
                tau_f = fraction * DELTA / columns / 2.0
                print(rows_line(f"gaussian, F = {fraction:g} (run rho x {rho_f / rho:.4f})",
                                gaussian_rows(rho_f, tau_f, 0.5), gaussian_rows(rho_f, tau_f, 0.95)))
            print(rows_line("laplace threshold", laplace_rows(rho, delta_tau, 0.5), laplace_rows(rho, delta_tau, 0.95)))
            print(rows_line("optimal (eps, delta) selection", optimal_rows(rho, delta_tau, 0.5),
                            optimal_rows(rho, delta_tau, 0.95)))
            print()


if __name__ == "__main__":
    main()
