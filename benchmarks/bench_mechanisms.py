"""Accuracy, time and memory of every registered mechanism on one table, at several epsilons.

    python benchmarks/bench_mechanisms.py                              # Adult, eps 0.3 1 3, delta 1e-9
    python benchmarks/bench_mechanisms.py --data generated --rows 1000000 --mechanisms rap --epsilons 1
    python benchmarks/bench_mechanisms.py --mechanisms aim --seeds 0,1,2 [--option compress_threshold=0]

Each mechanism runs through its module contract directly (Config -> collect_statistics over code
batches -> run with a seeded noise source -> privsynth.mechanisms.rounding.round_release), no Prefect. Weighted
releases are rounded to as many rows as the input (the paper's oversampling is available through
--synthetic-rows); exact releases (private sampling) publish only the rows their guarantee covers.

Metrics (INTERNAL: they read the real rows, nothing here is differentially private): for k = 1, 2, 3
the mean and max total-variation distance over all k-way marginals, and the max absolute cell error
on proportions, from privsynth.report.internal_audit.marginal_error_summary. Two reference rows on the same
binning: ``independent`` (the exact product of the true 1-way marginals, no sampling) and
``bootstrap`` (n rows resampled from the real rows: the sampling floor of any n-row table).

Time is wall-clock for statistics + run + rounding; memory is the peak of Python/numpy allocations
during those three steps, from tracemalloc (numpy reports its buffers to tracemalloc), which excludes
the interpreter, the imported libraries and the input table; the process peak RSS
(resource.getrusage ru_maxrss) is printed once at the end.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from generate import generate_codes  # noqa: E402

from privsynth.mechanisms import MECHANISM_MODULES, get_mechanism  # noqa: E402
from privsynth.mechanisms.rounding import round_release  # noqa: E402
from privsynth.privacy.noise import SeededNoise  # noqa: E402
from privsynth.report.internal_audit import marginal_error_summary  # noqa: E402
from privsynth.schema import load_schema  # noqa: E402
from privsynth.schema.encoding import Domain, domain_of, encode_codes  # noqa: E402
from privsynth.schema.workload import all_marginals, marginal_counts  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
KS = (1, 2, 3)


def load_adult() -> tuple[np.ndarray, Domain]:
    import pandas as pd

    schema = load_schema(ROOT / "schemas" / "adult.yaml")
    frame = pd.read_csv(ROOT / "privsynth" / "data" / "adult.csv.gz")
    return encode_codes(frame, schema), domain_of(schema)


def batches(codes: np.ndarray, size: int = 50_000):
    for start in range(0, codes.shape[0], size):
        yield codes[start:start + size]


def independent_summary(codes: np.ndarray, domain: Domain) -> dict:
    """Errors of the exact independent model (product of the true 1-way marginals), same metrics as the audit."""
    n = codes.shape[0]
    ones = [np.bincount(codes[:, j], minlength=s) / n for j, s in enumerate(domain.sizes)]
    out = {}
    for k in KS:
        tvs, max_cell = [], 0.0
        for m in all_marginals(domain.n_attributes, k):
            model = ones[m[0]]
            for a in m[1:]:
                model = np.outer(model, ones[a]).ravel()
            diff = np.abs(marginal_counts(codes, domain, m) / n - model)
            tvs.append(0.5 * diff.sum())
            max_cell = max(max_cell, float(diff.max()))
        out[str(k)] = {"mean_tv": float(np.mean(tvs)), "max_tv": float(np.max(tvs)),
                       "max_abs_cell_error": max_cell, "n_marginals": len(tvs)}
    return out


def run_one(name: str, epsilon: float, delta: float, codes: np.ndarray, domain: Domain, seed: int,
            synthetic_rows: int | None, options: dict | None = None) -> dict:
    """One mechanism at one epsilon: metrics, time, memory; or the reason it was skipped."""
    try:
        module = get_mechanism(name)
    except Exception as exc:  # a teammate's module that does not import yet
        return {"status": "skipped", "reason": f"import failed: {type(exc).__name__}: {exc}"}
    try:
        config = module.Config(epsilon=epsilon, delta=delta, **(options or {}))
        cost = module.privacy_cost(config)
        noise = SeededNoise(seed, f"bench-{name}-{epsilon}-{seed}")
        noise.authorize(f"bench-{name}-{epsilon}-{seed}")
        tracemalloc.start()
        t0 = time.perf_counter()
        stats = module.collect_statistics(batches(codes), domain, config)
        t1 = time.perf_counter()
        release = module.run(stats, domain, config, noise)
        t2 = time.perf_counter()
        rows = None if release.exact else (synthetic_rows or codes.shape[0])
        synthetic = round_release(release, domain, rows, noise.post_rng)
        t3 = time.perf_counter()
        peak = tracemalloc.get_traced_memory()[1]
    except NotImplementedError as exc:
        return {"status": "skipped", "reason": f"not implemented: {exc}"}
    except Exception as exc:
        # A mechanism that refuses a request its guarantee cannot cover (private sampling at small
        # epsilon) is a result, not a crash.
        status = "infeasible" if "Infeasible" in type(exc).__name__ else "failed"
        return {"status": status, "reason": f"{type(exc).__name__}: {exc}"}
    finally:
        if tracemalloc.is_tracing():
            tracemalloc.stop()
    return {
        "status": "ok",
        "errors": marginal_error_summary(codes, synthetic, domain, ks=KS),
        "synthetic_rows": int(synthetic.shape[0]),
        "epsilon_reported": cost.epsilon_at(delta),
        "rho": cost.rho,
        "seconds": {"statistics": t1 - t0, "run": t2 - t1, "rounding": t3 - t2, "total": t3 - t0},
        "peak_traced_mb": peak / 2**20,
    }


def mean_errors(results: list[dict]) -> dict:
    """The per-seed error summaries averaged (mean TV and max cell error; max TV as the worst seed's)."""
    out = {}
    for k in KS:
        parts = [r["errors"][str(k)] for r in results]
        out[str(k)] = {"mean_tv": float(np.mean([p["mean_tv"] for p in parts])),
                       "max_tv": float(np.max([p["max_tv"] for p in parts])),
                       "max_abs_cell_error": float(np.mean([p["max_abs_cell_error"] for p in parts]))}
    return out


def format_table(rows: list[dict], independent_3way: float) -> str:
    head = ("| mechanism | eps | rows out | 1-way mean/max TV | 2-way mean/max TV | 3-way mean/max TV | "
            "3-way / indep | max cell err | time s | peak MB |")
    lines = [head, "|" + "---|" * 10]
    for r in rows:
        if r["status"] != "ok":
            lines.append(f"| {r['mechanism']} | {r['epsilon']} | {r['status']}: {r['reason'][:90]} |")
            continue
        e = r["errors"]
        tv = " | ".join(f"{e[str(k)]['mean_tv']:.4f} / {e[str(k)]['max_tv']:.4f}" for k in KS)
        cell = max(e[str(k)]["max_abs_cell_error"] for k in KS)
        t = r.get("seconds", {}).get("total")
        mem = r.get("peak_traced_mb")
        lines.append(
            f"| {r['mechanism']} | {r['epsilon']} | {r.get('synthetic_rows', '-')} | {tv} | "
            f"{e['3']['mean_tv'] / independent_3way:.3f} | {cell:.4f} | "
            f"{'-' if t is None else f'{t:.1f}'} | {'-' if mem is None else f'{mem:.0f}'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", choices=["adult", "generated"], default="adult")
    parser.add_argument("--rows", type=int, default=100_000, help="rows of the generated table")
    parser.add_argument("--mechanisms", default=",".join(MECHANISM_MODULES), help="comma-separated names")
    parser.add_argument("--epsilons", default="0.3,1,3", help="comma-separated epsilons")
    parser.add_argument("--delta", type=float, default=1e-9)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", default=None, help="comma-separated noise seeds: one row per seed and their mean")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="a config field of every mechanism run (JSON value), e.g. compress_threshold=0")
    parser.add_argument("--synthetic-rows", type=int, default=None,
                        help="rows to round weighted releases to (default: n)")
    parser.add_argument("--no-references", action="store_true", help="skip the independent and bootstrap rows")
    parser.add_argument("--out", default=None, help="write all results as JSON here")
    args = parser.parse_args(argv)

    if args.data == "adult":
        codes, domain = load_adult()
    else:
        _, domain = load_adult()  # the Adult domain (public schema); the rows are generated
        codes = generate_codes(domain, args.rows, args.seed)
    names = [m.strip() for m in args.mechanisms.split(",") if m.strip()]
    seeds = [int(x) for x in args.seeds.split(",")] if args.seeds else [args.seed]
    options = {key.strip(): json.loads(value) for key, _, value in (o.partition("=") for o in args.option)}
    epsilons = [float(e) for e in args.epsilons.split(",")]
    print(f"data={args.data} n={codes.shape[0]} attributes={domain.n_attributes} one-hot width={domain.width} "
          f"delta={args.delta} seed={args.seed}", flush=True)

    rows: list[dict] = []
    independent = independent_summary(codes, domain)
    if not args.no_references:
        rows.append({"mechanism": "independent (exact, not private)", "epsilon": "-", "status": "ok",
                     "errors": independent})
        boot = codes[np.random.default_rng(args.seed).integers(0, codes.shape[0], codes.shape[0])]
        rows.append({"mechanism": "bootstrap of real rows (not private)", "epsilon": "-", "status": "ok",
                     "synthetic_rows": codes.shape[0], "errors": marginal_error_summary(codes, boot, domain, ks=KS)})
    for name in names:
        if name not in MECHANISM_MODULES:
            rows.append({"mechanism": name, "epsilon": "-", "status": "skipped", "reason": "not registered"})
            continue
        for eps in epsilons:
            per_seed = []
            for seed in seeds:
                result = run_one(name, eps, args.delta, codes, domain, seed, args.synthetic_rows, options)
                label = name if len(seeds) == 1 else f"{name} seed {seed}"
                rows.append({"mechanism": label, "epsilon": eps, **result})
                r = rows[-1]
                if r["status"] == "ok":
                    tvs = " / ".join(f"{r['errors'][str(k)]['mean_tv']:.4f}" for k in KS)
                    status = f"1/2/3-way mean TV {tvs}, {r['seconds']['total']:.1f}s"
                else:
                    status = f"{r['status']}: {r['reason'][:200]}"
                print(f"  {label} eps={eps}: {status}", flush=True)
                if r["status"] == "ok":
                    per_seed.append(r)
            if len(seeds) > 1 and per_seed:
                rows.append({"mechanism": f"{name} mean of {len(per_seed)} seeds", "epsilon": eps, "status": "ok",
                             "synthetic_rows": per_seed[0]["synthetic_rows"], "errors": mean_errors(per_seed),
                             "seconds": {"total": float(np.mean([r["seconds"]["total"] for r in per_seed]))},
                             "peak_traced_mb": float(np.max([r["peak_traced_mb"] for r in per_seed]))})

    print()
    print(format_table(rows, independent["3"]["mean_tv"]))
    peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\nprocess peak RSS (ru_maxrss, whole benchmark): {peak_rss_mb:.0f} MB")
    if args.out:
        payload = {"data": args.data, "n": int(codes.shape[0]), "delta": args.delta, "seed": args.seed,
                   "process_peak_rss_mb": peak_rss_mb, "results": rows}
        Path(args.out).write_text(json.dumps(
            payload, indent=2, default=lambda o: None if isinstance(o, float) and math.isnan(o) else str(o)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
