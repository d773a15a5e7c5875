"""Do the DP report's 95% bounds cover the real marginals' errors? (issue 23's target)

For each seed: a full run on the bundled Adult table (AIM by default, epsilon 1, delta 1e-9) with the
internal audit, which compares every bounded column and pair of report.json with the real marginal at
the bound's granularity. Prints, per seed and pooled, how many 1- and 2-way marginals were bounded and
the share whose real TV lay within its bound (target: at least 95% for each order).

    python benchmarks/bench_report_coverage.py                     # seeds 0 1 2, epsilon 1
    python benchmarks/bench_report_coverage.py --seeds 0 --epsilon 3

The audit reads the real data: this is an internal benchmark, its numbers are not DP.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import privsynth


def run_seed(seed: int, epsilon: float, mechanism: str, workdir: Path) -> dict:
    started = time.perf_counter()
    release = privsynth.synthesize(epsilon=epsilon, seed=seed, mechanism=mechanism, unlimited=True, audit=True,
                                   output=workdir / f"seed-{seed}", ledger=f"sqlite:///{workdir / 'ledger.sqlite'}",
                                   release_store=workdir / "store")
    wall = time.perf_counter() - started
    run = Path(release.run_dir)
    report = json.loads((run / "report.json").read_text())
    coverage = json.loads((run / "internal-audit" / "audit.json").read_text())["quality"]["bound_coverage"]
    return {"seed": seed, "wall_s": wall, "coverage": coverage, "accuracy": report["accuracy"]}


def row(label: str, checks: list[dict], pairs_total: int | None, wall: str) -> str:
    cells = []
    for k in (1, 2):
        mine = [c for c in checks if c["k"] == k]
        covered = sum(c["covered"] for c in mine)
        frac = covered / len(mine) if mine else float("nan")
        median = float(np.median([c["tv_bound"] for c in mine])) if mine else float("nan")
        real = float(np.median([c["real_tv"] for c in mine])) if mine else float("nan")
        cells += [f"{covered}/{len(mine)}", f"{frac:.3f}", f"{median:.4f}", f"{real:.4f}"]
    return f"| {label} | " + " | ".join(cells) + f" | {pairs_total if pairs_total is not None else '-'} | {wall} |"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--mechanism", default="aim")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-report-coverage-") as tmp:
        for seed in args.seeds:
            results.append(run_seed(seed, args.epsilon, args.mechanism, Path(tmp)))
            print(f"seed {seed}: done in {results[-1]['wall_s']:.0f} s", file=sys.stderr, flush=True)
    print(f"Adult, {args.mechanism}, epsilon {args.epsilon:g}: public 95% TV bounds vs the real TV (internal audit)\n")
    print("| seed | 1-way covered | 1-way share | 1-way median bound | 1-way median real TV "
          "| 2-way covered | 2-way share | 2-way median bound | 2-way median real TV | pairs bounded / all | wall s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    pooled = []
    for r in results:
        pairs = r["accuracy"]["pairs"]
        pooled += r["coverage"]["checks"]
        bounded = f"{pairs['bounded']}/{pairs['total']}"
        print(row(str(r["seed"]), r["coverage"]["checks"], bounded, f"{r['wall_s']:.0f}"))
    print(row("all", pooled, None, "-"))
    shares = []
    for k in (1, 2):
        mine = [c for c in pooled if c["k"] == k]
        shares.append(sum(c["covered"] for c in mine) / len(mine) if mine else 0.0)
    ok = all(s >= 0.95 for s in shares)
    print(f"\ntarget (>= 95% of the bounded 1-way and 2-way marginals, pooled over seeds): "
          f"{'met' if ok else 'NOT met'} (1-way {shares[0]:.3f}, 2-way {shares[1]:.3f})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
