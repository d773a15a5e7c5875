"""Benchmark of private sampling's two optimisation steps and of what the guarantee allows.

1. Solver time against m (the reduced-space size) for the cvxpy reference (HiGHS LP, Clarabel QP)
   and the fast solvers (interior-point LP, semismooth-Newton QP), with their agreement, lambda* and
   the density's marginal error (max |P(h*) - P(data)| over every 1- and 2-bit marginal cell) on a
   generated table with p = 12 bits, d = 2, n = 1e6: two Markov chains of biased bits, a mild one and
   a concentrated one (private sampling's accuracy theory needs f <= Delta / 2^p, which real tables
   violate; lambda* shows by how much the release is pulled toward uniform).
2. The rows the guarantee allows on Adult (schemas/adult.yaml, n = 48,842) at epsilon 1 and 3.

lambda* is printed here because the table is generated, not private; the mechanism never publishes it.

Run: /tmp/venv/bin/python benchmarks/bench_private_sampling.py [--cvxpy-max-m 10000] [--threads 1]
BLAS threads default to 1: on a shared 2-core machine oversubscribed OpenBLAS threads make the
m x N products an order of magnitude slower.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path


def parse() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--m-values", default="1000,3000,10000,30000,100000")
    ap.add_argument("--cvxpy-max-m", type=int, default=10_000, help="skip the cvxpy reference above this m (too slow)")
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--p", type=int, default=12)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", default="1", help="OPENBLAS_NUM_THREADS (set before numpy is imported)")
    return ap.parse_args()


def main() -> None:
    args = parse()
    os.environ["OPENBLAS_NUM_THREADS"] = args.threads
    os.environ["OMP_NUM_THREADS"] = args.threads
    import numpy as np

    from privsynth.mechanisms.private_sampling import mechanism as ps
    from privsynth.mechanisms.private_sampling.feasibility import feasibility_for_schema
    from privsynth.mechanisms.private_sampling.solvers import (
        projection_qp_cvxpy,
        projection_qp_newton,
        shrinkage_lp_cvxpy,
        shrinkage_lp_ipm,
    )
    from privsynth.mechanisms.private_sampling.walsh import all_marginals_from_moments, n_walsh
    from privsynth.schema import load_schema
    from privsynth.schema.encoding import Domain

    p, d, n = args.p, 2, args.n
    delta, Delta = 0.25, 2.0
    N = n_walsh(p, d)
    domain = Domain(tuple(f"x{j}" for j in range(p)), (2,) * p)
    config = ps.Config(epsilon=1.0)
    # Two generated tables, Markov chains of bits: bit j copies bit j-1 w.p. `copy`, else is 1 w.p. `bias`.
    tables = [("mild", 0.1, 0.45, True), ("concentrated", 0.5, 0.3, False)]
    for name, copy_prob, bias, with_reference in tables:
        rng = np.random.default_rng(args.seed)
        bits = np.empty((n, p), dtype=np.int32)
        bits[:, 0] = rng.random(n) < bias
        for j in range(1, p):
            bits[:, j] = np.where(rng.random(n) < copy_prob, bits[:, j - 1], rng.random(n) < bias)
        cells, counts = np.unique(bits @ (1 << np.arange(p)), return_counts=True)
        t0 = time.perf_counter()
        stats = ps.collect_statistics((bits[i:i + 100_000] for i in range(0, n, 100_000)), domain, config)
        t_stats = time.perf_counter() - t0
        b = stats.moments()
        P_data = all_marginals_from_moments(b, p, d)
        print(f"\n# table '{name}': n = {n:,}, p = {p} bits (copy {copy_prob}, bias {bias}), d = {d}, N = {N}; "
              f"2^p max cell mass = {2 ** p * counts.max() / n:.1f} x uniform (the theory needs <= Delta = {Delta}); "
              f"box [{delta}, {Delta}]; statistics pass {t_stats:.2f} s; BLAS threads = {args.threads}")
        print(f"# marg.err = max |P(h*) - P(data)| over all {P_data.size} 1- and 2-bit marginal cells "
              f"(density before sampling; = lambda* x |P(u_m) - P(data)| cell by cell)")
        header = (f"{'m':>7} {'m/N':>6} {'lambda*':>8} {'marg.err':>9} {'LP ipm s':>9} {'LP cvxpy s':>10} "
                  f"{'QP newton s':>11} {'QP cvxpy s':>10} {'|dlambda|':>10} {'max|dq|':>9}")
        print(header)
        print("-" * len(header))
        for m in [int(float(x)) for x in args.m_values.split(",")]:
            space = ps.draw_reduced_space(np.random.default_rng(args.seed + m), m, p, d, max_redraws=20)
            M = space.M
            t0 = time.perf_counter()
            lam = shrinkage_lp_ipm(M, b, delta, Delta)
            t_lp = time.perf_counter() - t0
            target = (1 - lam) * b + lam * M.mean(axis=0)
            t0 = time.perf_counter()
            q = projection_qp_newton(M, target, delta, Delta, gram=space.gram).q
            t_qp = time.perf_counter() - t0
            err = float(np.max(np.abs(all_marginals_from_moments(M.T @ (q / m), p, d) - P_data)))
            if with_reference and m <= args.cvxpy_max_m:
                t0 = time.perf_counter()
                lam_ref = shrinkage_lp_cvxpy(M, b, delta, Delta)
                t_lp_ref = time.perf_counter() - t0
                t0 = time.perf_counter()
                q_ref = projection_qp_cvxpy(M, target, delta, Delta, tol=1e-12)
                t_qp_ref = time.perf_counter() - t0
                ref = (f"{t_lp_ref:>10.2f} {t_qp:>11.2f} {t_qp_ref:>10.2f} {abs(lam - lam_ref):>10.1e} "
                       f"{np.max(np.abs(q - q_ref)):>9.1e}")
            else:
                ref = f"{'skipped':>10} {t_qp:>11.2f} {'skipped':>10} {'-':>10} {'-':>9}"
            print(f"{m:>7} {m / N:>6.1f} {lam:>8.4f} {err:>9.4f} {t_lp:>9.2f} {ref}", flush=True)
    print(f"# cvxpy run on the first table only, and skipped above m = {args.cvxpy_max_m:,} "
          f"(its QP takes tens of seconds at m = 1e4 and grows faster than linearly)")

    print("\n# rows the guarantee allows on Adult (compact binary encoding of schemas/adult.yaml, default box, "
          "m = 8N, conservative Lemma 10.1 constant)")
    schema = load_schema(Path(__file__).resolve().parents[1] / "schemas" / "adult.yaml")
    for eps in (1.0, 3.0, 10.0):
        r = feasibility_for_schema(schema, 48_842, eps)
        r100 = feasibility_for_schema(schema, 48_842, eps, k=100)
        print(f"epsilon = {eps:>4}: p = {r['inputs']['p']}, N = {r['walsh_features_N']}, rows allowed = "
              f"{r['k_allowed']} (binding: {r['binding_bound']}, {r['epsilon_per_row']:.4f} per row; Theorem 12.2 "
              f"alone: {r['theorem_12_2']['k_allowed']}, bound {r['theorem_12_2']['k_bound']:.2e}); "
              f"n needed for 100 rows: {r100['n_needed']['combined']:.2e}; verdict {r['verdict']}")


if __name__ == "__main__":
    sys.exit(main())
