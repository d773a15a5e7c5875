"""Warehouse dirt without a schema: does every run end, and does every column come back in its real form?

    python benchmarks/bench_warehouse_forms.py                 # seeds 0, 1 and 2
    python benchmarks/bench_warehouse_forms.py --seeds 0 --rows 3000
    python benchmarks/bench_warehouse_forms.py --unit us          # timestamps stored in microseconds instead
    python benchmarks/bench_warehouse_forms.py --leave-out constant,batch   # the table without these columns

A generated table (no real rows) with the forms a warehouse export holds and bench_unseen's public tables lack: counts
written as text with "N/A" for missing, dates stored as nanosecond timestamps (pandas' own unit), a retired column
with no value, "nan" in every row of a text column, moments written as SQL writes them ("2021-05-07 03:05:20") and
with a zone offset, the "valid to" dates of a history table (70% 9999-12-31), uint64 batch codes beyond int64, a
constant 1e300, and storage types a warehouse declares (DECIMAL(12, 2), UINT8, SMALLINT, REAL, TIMESTAMP WITH TIME
ZONE: ``stored as`` says whether the release keeps the source's type). Each seed is one worker process running
``privsynth.synthesize(parquet, None, epsilon=1, seed=S, unlimited=True)`` with its own ledger and $PRIVSYNTH_HOME.

Per column: ``wrong %``, the share of present synthetic values outside the real column's form, scored as
``bench_unseen.py`` scores (a text column of moments also in the written pattern of its real values: each digit a
9, so "2021-05-07 03:05:20" and "2021-05-07T03:05:20" differ; a zone offset's sign either way), and in a column
whose real values are all missing, any present value; ``missing %`` synthetic against real; ``top %``: the share
of the real column's commonest value (9999-12-31 in ``valid_to``: a sentinel written exactly, or smeared) in the
synthetic column, against real. A run that fails prints its error in place of the rows.
Scores are INTERNAL (they read the generated rows).
"""

from __future__ import annotations

import argparse
import datetime
import decimal
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))


def warehouse_table(rows: int, seed: int = 0, unit: str = "ns"):
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    visits = rng.integers(0, 40, rows).astype(str).astype(object)
    visits[rng.random(rows) < 0.1] = "N/A"
    opened = pd.Timestamp("2021-01-01") + pd.to_timedelta(rng.integers(0, 700, rows), unit="D")
    moments = pd.Timestamp("2021-03-01", tz="UTC") + pd.to_timedelta(rng.integers(0, 10**7, rows), unit="s")
    huge = np.array([2**64 - 2**11 * k for k in range(1, 40)], dtype=np.uint64)
    return pd.DataFrame({
        "visits": visits,
        "opened": opened.astype(f"datetime64[{unit}]"),
        "retired": pd.array([None] * rows, dtype="Int64"),
        "legacy": ["nan"] * rows,
        "tier": rng.choice(["gold", "silver", "bronze"], rows, p=[0.2, 0.3, 0.5]),
        "logged": moments.strftime("%Y-%m-%d %H:%M:%S"),
        "seen": moments.tz_convert("US/Eastern").astype(str),
        "valid_to": [datetime.date(9999, 12, 31) if open_row else day.date() + datetime.timedelta(days=30)
                     for open_row, day in zip(rng.random(rows) < 0.7, opened)],
        "batch": rng.choice(huge, rows),
        "constant": np.full(rows, 1e300),
        "amount": np.round(rng.lognormal(5, 1, rows), 2),
        # storage types a warehouse declares (kept by the release: ``stored_as``)
        "price": [decimal.Decimal(f"{x:.2f}") for x in rng.gamma(2.0, 40.0, rows)],   # DECIMAL(12, 2)
        "grade": rng.integers(0, 6, rows).astype(np.uint8),
        "delta": rng.integers(-300, 300, rows).astype(np.int16),
        "ratio": rng.normal(1.0, 0.2, rows).astype(np.float32),
        "paid_at": moments + pd.to_timedelta(rng.integers(0, 86400, rows), unit="s"),  # TIMESTAMP WITH TIME ZONE
    })


def write_table(frame, path: Path) -> None:
    """The frame as Parquet, the money column as DECIMAL(12, 2) (pandas holds it as Python decimals)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(frame, preserve_index=False)
    if "price" in frame.columns:
        i = table.schema.get_field_index("price")
        table = table.set_column(i, pa.field("price", pa.decimal128(12, 2)), table.column(i).cast(pa.decimal128(12, 2)))
    pq.write_table(table, path)


def worker(data: Path, seed: int, out: Path) -> None:
    import privsynth

    work = out.with_suffix("")
    try:
        release = privsynth.synthesize(str(data), None, epsilon=1.0, seed=seed, unlimited=True,
                                       output=str(work / "run"), ledger=f"sqlite:///{work / 'ledger.sqlite'}",
                                       release_store=str(work / "store"))
        out.write_text(json.dumps({"synthetic": str(Path(release.run_dir) / "synthetic.parquet")}))
    except Exception as err:  # noqa: BLE001  (a benchmark reports how the run ended)
        out.write_text(json.dumps({"error": f"{type(err).__name__}: {str(err)[:200]}"}))


def pattern(text: str) -> str:
    """Each digit a 9, and a zone offset's sign as +- (a moment written in UTC, +00:00, is in the form of one
    written -04:00)."""
    return re.sub(r"[+-](?=99:99$)", "+-", re.sub(r"\d", "9", text))


def wrong_share(real, synthetic) -> float:
    import numpy as np
    from bench_unseen import _text_moments, in_real_form

    present = synthetic.dropna()
    if not len(present):
        return 0.0
    if real.notna().sum() == 0:
        return 1.0
    ok = np.asarray(in_real_form(real, synthetic), dtype=bool)
    if _text_moments(real.dropna()) is not None:
        ok &= present.astype(str).map(pattern).isin(set(real.dropna().astype(str).map(pattern))).to_numpy()
    return float(1.0 - ok.mean())


def as_numbers(column):
    """A column of Python decimals (pandas' reading of DECIMAL) as doubles, so it is scored as a number column, not
    as text; any other column as it is."""
    import pandas as pd

    present = column.dropna()
    if len(present) and isinstance(present.iloc[0], decimal.Decimal):
        return pd.to_numeric(column.astype(object).where(column.notna(), None), errors="coerce").astype("float64")
    return column


def top_shares(real, synthetic) -> tuple[float, float]:
    """(the synthetic column's share of the real column's commonest value, the real column's), both read as text."""
    present = real.dropna().astype(str)
    if not len(present):
        return 0.0, 0.0
    value = present.mode().iloc[0]
    return float((synthetic.astype(str) == value).mean()), float((real.astype(str) == value).mean())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--rows", type=int, default=4000)
    parser.add_argument("--unit", default="ns", choices=("ns", "us"), help="the timestamps' unit in the Parquet file")
    parser.add_argument("--leave-out", default="", help="columns of the table left out (a comma-separated list)")
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(Path(args.worker[0]), int(args.worker[1]), Path(args.worker[2]))
        return 0
    import os

    import pandas as pd
    import pyarrow.parquet as pq

    seeds = [int(s) for s in args.seeds.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench-warehouse-") as tmp:
        folder = Path(tmp)
        frame = warehouse_table(args.rows, unit=args.unit)
        frame = frame.drop(columns=[c for c in args.leave_out.split(",") if c])
        data = folder / "accounts.parquet"
        write_table(frame, data)
        results = {}
        for seed in seeds:
            out = folder / f"seed{seed}.json"
            env = dict(os.environ, PRIVSYNTH_HOME=str(folder / f"home{seed}"))
            subprocess.run([sys.executable, __file__, "--worker", str(data), str(seed), str(out)], env=env, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            results[seed] = json.loads(out.read_text())
        print(f"| column | real form | stored as (source -> release) | "
              f"{' | '.join(f'seed {s}: wrong / missing / top %' for s in seeds)} |")
        print(f"|---|---|---|{'---|' * len(seeds)}")
        source_types = pq.read_schema(data)
        synthetic = {s: pd.read_parquet(r["synthetic"]) for s, r in results.items() if "synthetic" in r}
        for name in frame.columns:
            real = as_numbers(frame[name])
            cells = []
            for s in seeds:
                if s not in synthetic:
                    cells.append("run failed")
                elif name not in synthetic[s].columns:
                    cells.append("not released")
                else:
                    col = as_numbers(synthetic[s][name])
                    top, real_top = top_shares(real, col)
                    cells.append(f"{100 * wrong_share(real, col):.1f} / {100 * col.isna().mean():.1f} "
                                 f"(real {100 * real.isna().mean():.0f}) / {100 * top:.0f} (real {100 * real_top:.0f})")
            form = str(real.dtype) if real.notna().any() else "no value"
            released = {str(pq.read_schema(r["synthetic"]).field(name).type) for r in results.values()
                        if "synthetic" in r and name in pq.read_schema(r["synthetic"]).names}
            stored = str(source_types.field(name).type)
            kept = "kept" if released == {stored} else f"{stored} -> {', '.join(sorted(released)) or '-'}"
            print(f"| {name} | {form} | {kept} | {' | '.join(cells)} |")
        for s, r in results.items():
            if "error" in r:
                print(f"seed {s}: {r['error']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
