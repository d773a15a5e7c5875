"""How much of each number column a no-schema run's discovered bounds leave outside (and so clip onto an edge).

    python benchmarks/bench_bounds.py                      # every bench_unseen and bench_real table, seeds 0,1
    python benchmarks/bench_bounds.py --tables ames,who --seeds 0-3 --show 0.02

Per table and seed, the schema a no-schema run at epsilon 1 would discover (``bench_paired.discovered_schema``: the
discover stage on seeded noise, in-process), and per integer or float column the share of the real present values
outside its bounds. A value outside is clipped into the column's edge bin by the run: a clipped share is a share of
the column written in the wrong place. Prints the columns whose share exceeds ``--show``, then one summary line per
table (number columns, mean clipped share, columns over 1% and over 10%) and one over all. Scores are INTERNAL: they
read the real rows.
"""

from __future__ import annotations

import argparse
import sys

import bench_unseen as U  # this script runs from benchmarks/, beside bench_unseen.py
from bench_peers import seeds_of, work_folder

REAL_TABLES = ("credit_default", "star", "nmes", "mpls_stops", "gss_vocab", "ames", "movies")


def clipped_shares(frame, schema) -> dict[str, float]:
    """Per number column of ``schema``: the share of the real present values outside its bounds."""
    import numpy as np
    import pandas as pd

    out = {}
    for c in schema.kept_columns:
        if c.type not in ("integer", "float") or not c.bounds or c.name not in frame:
            continue
        x = pd.to_numeric(frame[c.name], errors="coerce").to_numpy(dtype=float)
        x = x[np.isfinite(x)]
        if len(x):
            out[c.name] = float(((x < c.bounds[0]) | (x > c.bounds[1])).mean())
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", default="all", help="comma-separated, or all (bench_unseen's and bench_real's)")
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--show", type=float, default=0.10, help="print columns clipping more than this share")
    args = parser.parse_args(argv)

    import numpy as np
    from bench_paired import discovered_schema
    from bench_real import load_table as load_real

    tables = [*U.TABLES, *REAL_TABLES] if args.tables == "all" else args.tables.split(",")  # TABLES holds both sweeps
    every: list[float] = []
    print("| table | seed | column | clipped % |")
    print("|---|---|---|---|")
    summary = []
    with work_folder(None, "bench-bounds-") as work:
        for table in tables:
            frame = U.load_table(table) if table in U.TABLES else load_real(table)
            path = work / f"{table}.parquet"
            frame.to_parquet(path, index=False)
            shares: list[float] = []
            for seed in seeds_of(args.seeds):
                schema, _, _ = discovered_schema(path, table, seed, None)
                for name, share in clipped_shares(frame, schema).items():
                    shares.append(share)
                    if share > args.show:
                        print(f"| {table} | {seed} | {name} | {100 * share:.1f} |", flush=True)
            every.extend(shares)
            summary.append((table, len(shares), float(np.mean(shares)) if shares else 0.0,
                            sum(s > 0.01 for s in shares), sum(s > 0.10 for s in shares)))
    print("\n| table | number columns x seeds | mean clipped % | over 1% | over 10% |")
    print("|---|---|---|---|---|")
    for table, k, mean, over1, over10 in summary:
        print(f"| {table} | {k} | {100 * mean:.2f} | {over1} | {over10} |")
    print(f"| all | {len(every)} | {100 * float(np.mean(every)):.2f} | {sum(s > 0.01 for s in every)} "
          f"| {sum(s > 0.10 for s in every)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
