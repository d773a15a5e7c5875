"""A generated wide table with structure between its columns, released with no schema (issue 37's target).

    python benchmarks/bench_generated_wide.py                               # 200 columns, 100,000 rows, eps 1, seed 0
    python benchmarks/bench_generated_wide.py --columns 20 --rows 3000      # a smoke test (seconds)
    python benchmarks/bench_generated_wide.py --seeds 0,1,2 --out wide.json --keep /tmp/gen-wide
    python benchmarks/bench_generated_wide.py --references --seeds ""       # the yardsticks only (seconds)

The target: "A generated 200-column table of 100,000 rows with structure between its columns
(benchmarks/, generated, no real rows): below independent columns' 2-way error, in under 5 minutes,
under 2 GB."

The table. Level codes come from ``generate.py`` (``wide_domain(columns, data_seed)`` level counts 2..16,
``generate_codes``: a random Bayesian chain network, each column drawn given its two predecessors, so
the columns depend on each other), and are turned into a typed table a warehouse would hold, all from
the data seed: about 40% of the columns categorical text (level k -> a word, e.g. ``amber``), 30%
integers (level k -> a whole number uniform in a per-column bin [e_k, e_k+1) of increasing integer
edges), 20% floats (uniform in per-column bins, in whole cents: 2 decimals), and booleans: the columns with
2 levels, up to 10% of the columns (``wide_domain`` draws 2 levels for about 1 column in 15; the rest
of that 10% is categorical); a fifth of the columns have about 5% missing values (at
random). The table is written to Parquet in a temporary folder; nothing here reads real data.

The run. One worker process per seed runs privsynth's no-schema path, as a user would:
``privsynth.synthesize(parquet, None, epsilon=E, seed=S, unlimited=True, ledger="sqlite:///<tmp>/...",
output=<tmp>/run-S, release_store=<tmp>/store)``: the run discovers the domain under DP inside its own
epsilon E (nothing is spent beyond E), with a temporary $PRIVSYNTH_HOME. Per run: ``run s``, the wall
seconds of the ``synthesize`` call (discovery, statistics, mechanism, rounding, report); ``process s``,
the worker's whole wall time (interpreter start and imports too); ``peak RSS MB``, the worker's
ru_maxrss (its own, or a child's if larger: interpreter, libraries and data included).

Scores (INTERNAL: they read the real rows, not DP). Both the real table and the run's synthetic.parquet
are encoded with an EVALUATION schema built from the generator's own binning (categorical: its words,
an unlisted value is the out-of-domain level; integer/float: bounds [first edge, last edge], bins the
edges, values outside clipped, unreadable ones missing; boolean; every column nullable); a column the
discovery dropped counts as all missing. ``1-way TV``: mean total variation over every 1-way marginal;
``2-way TV``: over a seeded sample of at most ``--max-2way`` 2-way marginals (19,900 at 200 columns);
``indep 2-way TV``: the exact product of the real 1-way marginals on the same 2-way marginals (a release
that does not beat it has learnt no dependence); ``2-way / indep`` below 1 meets the target's first
clause. ``--references`` prints two yardsticks first: ``bootstrap`` (n records drawn with replacement from
the real ones: the sampling error any n-record release carries, no privacy) and ``DP independent`` (each
1-way marginal measured with Gaussian noise at the run's whole rho, the binning given, records drawn column
by column: a DP release that learns no dependence). ``wrong %``: the share of non-missing synthetic cells
outside the generator's domain (an unlisted word, a fraction in an integer column, a number beyond the
bounds), mean over columns.
``1-way by kind``: the mean 1-way TV over the columns of each type (where the no-schema run's 1-way error sits).
``kept / dropped``: columns the run's discovered schema.yaml keeps and marks ``drop: true``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

from bench_peers import (  # this script runs from benchmarks/, beside bench_peers.py and bench_real.py
    print_rows,
    run_worker,
    work_folder,
)
from bench_real import strict

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

WORDS = (
    "amber", "birch", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper", "kestrel",
    "lagoon", "maple", "nectar", "onyx", "prairie", "quartz", "raven", "sierra", "tundra", "umber", "violet",
    "willow", "xenon", "yarrow", "zephyr", "alpine", "basalt", "canyon", "dune", "estuary", "falcon",
)
SHARES = (("categorical", 0.4), ("integer", 0.3), ("float", 0.2), ("boolean", 0.1))
MISSING_COLUMNS = 0.2  # share of the columns with missing values
MISSING_RATE = 0.05  # share of missing values in those columns


# ---------------------------------------------------------------- the generated table (public facts only)

def table_plan(columns: int, data_seed: int) -> tuple[object, list[dict]]:
    """The generator's domain and, per column, its type and public binning (categories or edges), and
    whether it has missing values: a function of (columns, data_seed) alone."""
    import numpy as np
    from generate import wide_domain

    domain = wide_domain(columns, data_seed)
    rng = np.random.default_rng([data_seed, columns, 37])
    # booleans: the 2-level columns first (their share at most; the rest of it categorical), then the other
    # kinds by their shares over the remaining columns in a seeded order
    two_level = [j for j, size in enumerate(domain.sizes) if size == 2]
    booleans = set(rng.permutation(two_level)[:int(round(SHARES[-1][1] * columns))].tolist())
    kinds: list[str] = []
    for kind, share in SHARES[:-1]:
        kinds += [kind] * int(round(share * columns))
    kinds = (kinds + ["categorical"] * columns)[:columns - len(booleans)]
    order = iter(kinds[i] for i in rng.permutation(len(kinds)))
    kinds = ["boolean" if j in booleans else next(order) for j in range(columns)]
    with_missing = set(rng.choice(columns, size=int(round(MISSING_COLUMNS * columns)), replace=False).tolist())
    plan = []
    for j, (name, size) in enumerate(zip(domain.names, domain.sizes)):
        kind = kinds[j]
        col: dict = {"name": name, "type": kind, "levels": int(size), "missing": j in with_missing}
        if kind == "categorical":
            col["categories"] = [str(w) for w in rng.choice(WORDS, size=size, replace=False)]
        elif kind == "integer":
            start = int(rng.integers(-100, 1000))
            col["edges"] = (start + np.concatenate([[0], np.cumsum(rng.integers(1, 40, size))])).tolist()
        elif kind == "float":  # edges in whole cents
            start = int(rng.integers(-50_000, 500_000))
            col["cents"] = (start + np.concatenate([[0], np.cumsum(rng.integers(50, 20_000, size))])).tolist()
            col["edges"] = [c / 100 for c in col["cents"]]
        plan.append(col)
    return domain, plan


def generated_table(plan: list[dict], codes, data_seed: int):
    """The typed table (pyarrow) of the level codes: words, whole numbers and cents inside each level's bin,
    booleans; missing values at random in the planned columns."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng([data_seed, 2])
    n = codes.shape[0]
    arrays = {}
    for j, col in enumerate(plan):
        level = codes[:, j]
        mask = (rng.random(n) < MISSING_RATE) if col["missing"] else None
        if col["type"] == "categorical":
            arrays[col["name"]] = pa.array(np.asarray(col["categories"], dtype=object)[level], pa.string(), mask=mask)
        elif col["type"] == "boolean":
            arrays[col["name"]] = pa.array(level == 1, pa.bool_(), mask=mask)
        elif col["type"] == "integer":
            edges = np.asarray(col["edges"], dtype=np.int64)
            arrays[col["name"]] = pa.array(rng.integers(edges[level], edges[level + 1]), pa.int64(), mask=mask)
        else:
            cents = np.asarray(col["cents"], dtype=np.int64)
            arrays[col["name"]] = pa.array(rng.integers(cents[level], cents[level + 1]) / 100, pa.float64(), mask=mask)
    return pa.table(arrays)


def evaluation_schema(plan: list[dict]):
    """The generator's binning as a schema that any release encodes in: every column nullable, unlisted
    words one level, numbers clipped to the bounds, unreadable numbers missing."""
    from privsynth.schema import parse_schema

    columns = []
    for col in plan:
        entry: dict = {"name": col["name"], "type": col["type"], "nullable": True}
        if col["type"] == "categorical":
            entry.update(categories=col["categories"], on_out_of_domain="category")
        elif col["type"] == "boolean":
            entry.update(on_out_of_domain="category")
        else:
            entry.update(bounds=[col["edges"][0], col["edges"][-1]], bins=col["edges"], on_out_of_domain="clip",
                         on_unreadable="missing")
        columns.append(entry)
    return parse_schema({"name": "generated_wide", "columns": columns}, origin="evaluation:generated_wide")


# ---------------------------------------------------------------- worker (one run per process)

def worker(epsilon: float, seed: int, data: Path, tmp: Path, out: Path) -> None:
    import privsynth

    t0 = time.perf_counter()
    release = privsynth.synthesize(str(data), None, epsilon=epsilon, seed=seed, unlimited=True,
                                   ledger=f"sqlite:///{tmp / 'ledger.sqlite'}", output=str(tmp / f"run-{seed}"),
                                   release_store=str(tmp / "store"), progress=lambda line: print(line, flush=True))
    run_seconds = time.perf_counter() - t0
    peak = max(resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    run_dir = Path(release.run_dir)
    out.write_text(json.dumps({
        "run_seconds": run_seconds, "peak_rss_mb": peak / 1024,
        "synthetic": str(run_dir / "synthetic.parquet"), "schema": str(run_dir / "schema.yaml")}))


# ---------------------------------------------------------------- driver

def run_one(epsilon: float, seed: int, data: Path, tmp: Path, cap: float) -> dict:
    out = tmp / f"result-{epsilon}-{seed}.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["PRIVSYNTH_HOME"] = str(tmp / "home")
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--epsilon", str(epsilon), "--seed", str(seed),
           "--data", str(data), "--tmp", str(tmp), "--result", str(out)]
    status = run_worker(cmd, env, cap, out, log=out.with_suffix(".log"))
    if status["status"] != "ok":
        return status
    return {"status": "ok", "process_seconds": status["seconds"], **json.loads(out.read_text())}


def score(synthetic, real_codes, schema, domain, max2: int) -> dict:
    """1-way TV over every marginal, 2-way over a seeded sample of ``max2``, with the independent yardstick."""
    from privsynth.schema.encoding import encode_codes

    for col in schema.kept_columns:
        if col.name not in synthetic.columns:
            synthetic[col.name] = None  # dropped by discovery: all missing
    _, wrong, _ = strict(synthetic, schema)  # the share outside the generator's domain (not the scored frame)
    codes = encode_codes(synthetic, schema)
    return {**score_codes(codes, real_codes, domain, max2), "wrong_share": wrong,
            "tv1_by_kind": one_way_by_kind(codes, real_codes, schema, domain)}


def one_way_by_kind(codes, real_codes, schema, domain) -> dict[str, float]:
    """Mean 1-way TV over the columns of each kind (categorical, boolean, integer, float): where a no-schema
    run's 1-way error sits (a number's place inside the generator's bins, a word's count)."""
    import numpy as np

    from privsynth.report.internal_audit import marginal_counts

    by_kind: dict[str, list[float]] = {}
    for a, col in enumerate(schema.kept_columns):
        real = marginal_counts(real_codes, domain, (a,))
        synthetic = marginal_counts(codes, domain, (a,))
        tv = 0.5 * float(np.abs(real / real.sum() - synthetic / max(synthetic.sum(), 1)).sum())
        by_kind.setdefault(col.type, []).append(tv)
    return {kind: float(np.mean(v)) for kind, v in sorted(by_kind.items())}


def reference_rows(real_codes, domain, epsilon: float, max2: int, seed: int = 0) -> list[dict]:
    """What the scores mean, from the real codes on the generator's binning (INTERNAL): ``bootstrap``, n
    records drawn with replacement from the real ones (no privacy: the sampling error any n-record release
    carries); ``DP independent``, every column's 1-way marginal measured with Gaussian noise at the whole
    run's rho (delta 1e-9, no discovery: the binning is given) and n records drawn column by column (a DP
    release that learns no dependence, with the least 1-way noise a documented run could have)."""
    import numpy as np

    from privsynth.privacy.accounting import gaussian_sigma
    from privsynth.privacy.spending import rho_allowance
    from privsynth.report.internal_audit import marginal_counts

    rng = np.random.default_rng([seed, 7])
    n, d = real_codes.shape
    boot = real_codes[rng.integers(0, n, n)]
    sigma = gaussian_sigma(rho_allowance(epsilon, 1e-9), d ** 0.5)  # d histograms, one record in each
    independent = np.empty_like(real_codes)
    for a in range(d):
        noisy = np.clip(marginal_counts(real_codes, domain, (a,)) + rng.normal(0.0, sigma, domain.sizes[a]), 0, None)
        independent[:, a] = rng.choice(domain.sizes[a], n, p=noisy / noisy.sum())
    rows = []
    for label, codes in (("bootstrap (no privacy)", boot), (f"DP independent, sigma {sigma:.0f}", independent)):
        errors = score_codes(codes, real_codes, domain, max2)
        rows.append({"label": label, **errors})
    return rows


def score_codes(codes, real_codes, domain, max2: int) -> dict:
    from math import comb

    from privsynth.report.internal_audit import marginal_error_summary

    one = marginal_error_summary(real_codes, codes, domain, ks=(1,))["1"]
    sample = None if max2 >= comb(domain.n_attributes, 2) else max2
    two = marginal_error_summary(real_codes, codes, domain, ks=(2,), max_marginals=sample, seed=0)["2"]
    return {"tv1": one["mean_tv"], "tv2": two["mean_tv"], "indep2": two["independent_mean_tv"],
            "n_2way": two["n_marginals"], "max_tv2": two["max_tv"], "worst_2way": two["worst_marginal"]}


def format_references(rows: list[dict]) -> str:
    lines = ["| reference | 1-way TV | 2-way TV | indep 2-way TV | 2-way / indep |", "|---|---|---|---|---|"]
    lines += [f"| {r['label']} | {r['tv1']:.4f} | {r['tv2']:.4f} | {r['indep2']:.4f} | {r['tv2'] / r['indep2']:.2f} |"
              for r in rows]
    return "\n".join(lines)


def format_rows(rows: list[dict]) -> str:
    head = ("| columns | rows | eps | seed | 1-way TV | 2-way TV | indep 2-way TV | 2-way / indep | run s | process s "
            "| peak RSS MB | kept / dropped | wrong % | 1-way by kind | note |")
    lines = [head, "|" + "---|" * 15]
    for r in rows:
        lead = f"| {r['columns']} | {r['rows']} | {r['epsilon']:g} | {r['seed']} |"
        if r["status"] != "ok":
            lines.append(f"{lead} - | - | - | - | - | {r.get('seconds', 0):.0f} | - | - | - | - | {r['status']}: "
                         f"{r.get('reason', '')} |")
            continue
        e = r["errors"]
        kinds = ", ".join(f"{kind} {tv:.4f}" for kind, tv in e.get("tv1_by_kind", {}).items())
        lines.append(f"{lead} {e['tv1']:.4f} | {e['tv2']:.4f} | {e['indep2']:.4f} | {e['tv2'] / e['indep2']:.2f} "
                     f"| {r['run_seconds']:.1f} | {r['process_seconds']:.1f} | {r['peak_rss_mb']:.0f} "
                     f"| {r['kept']} / {len(r['dropped'])} | {100 * e['wrong_share']:.1f} "
                     f"| {kinds} | {r.get('note', '')} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--columns", type=int, default=200)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--seeds", default="0", help="run seeds, comma-separated (one worker process each)")
    parser.add_argument("--data-seed", type=int, default=0, help="the generated table's seed (network, types, bins)")
    parser.add_argument("--max-2way", type=int, default=3000, help="2-way marginals scored (a seeded sample)")
    parser.add_argument("--cap", type=float, default=3600.0, help="seconds per run before it is stopped")
    parser.add_argument("--keep", default=None, help="keep the table, run folders and logs under this directory")
    parser.add_argument("--out", default=None, help="write the rows as JSON")
    parser.add_argument("--references", action="store_true",
                        help="also print the sampling floor (bootstrap) and DP independent columns (seconds)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--data", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--tmp", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--result", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.epsilon, args.seed, Path(args.data), Path(args.tmp), Path(args.result))
        return 0

    sys.path.insert(0, str(ROOT))
    import pandas as pd
    import pyarrow.parquet as pq
    import yaml
    from generate import generate_codes

    from privsynth.schema.encoding import domain_of, encode_codes

    rows: list[dict] = []
    with work_folder(args.keep, "bench-generated-wide-") as tmp:
        t0 = time.perf_counter()
        gen_domain, plan = table_plan(args.columns, args.data_seed)
        table = generated_table(plan, generate_codes(gen_domain, args.rows, args.data_seed), args.data_seed)
        data = tmp / "generated_wide.parquet"
        pq.write_table(table, data)
        schema = evaluation_schema(plan)
        domain = domain_of(schema)
        real = encode_codes(table.to_pandas(), schema)
        del table
        kinds = {k: sum(c["type"] == k for c in plan) for k, _ in SHARES}
        print(f"generated {args.rows} x {args.columns} ({', '.join(f'{v} {k}' for k, v in kinds.items())}; "
              f"{sum(c['missing'] for c in plan)} with missing values) in {time.perf_counter() - t0:.1f} s: {data}",
              flush=True)
        if args.references:
            print(format_references(reference_rows(real, domain, args.epsilon, args.max_2way)), flush=True)
        for seed in [int(s) for s in args.seeds.split(",") if s.strip()]:
            result = run_one(args.epsilon, seed, data, tmp, args.cap)
            row = {"columns": args.columns, "rows": args.rows, "epsilon": args.epsilon, "seed": seed,
                   "data_seed": args.data_seed, **result}
            if result["status"] == "ok":
                discovered = yaml.safe_load(Path(result["schema"]).read_text())["columns"]
                row["dropped"] = [c["name"] for c in discovered if c.get("drop")]
                row["kept"] = len(discovered) - len(row["dropped"])
                row["errors"] = score(pd.read_parquet(result["synthetic"]), real, schema, domain, args.max_2way)
                shown = ", ".join(row["dropped"][:5]) + (", ..." if len(row["dropped"]) > 5 else "")
                row["note"] = f"dropped {shown}" if row["dropped"] else ""
            rows.append(row)
            print(format_rows([row]).splitlines()[-1], flush=True)
    print_rows(rows, format_rows, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
