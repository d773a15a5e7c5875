"""privsynth's mechanisms side by side with smartnoise-synth's MST and AIM, on the same binned table.

    python benchmarks/bench_peers.py                                   # the whole grid on Adult (hours: see README)
    python benchmarks/bench_peers.py --runs privsynth:aim,privsynth:rap --epsilons 0.3,1,3 --seeds 0,1,2
    python benchmarks/bench_peers.py --runs smartnoise:mst --seeds 0 --cap 900
    python benchmarks/bench_peers.py --tables gss_vocab,credit_default --runs privsynth:aim,smartnoise:aim \
        --epsilons 0.3,1,3 --peer-seeds 0 --cap 900                   # issue 40: our default against AIM

``--tables``: adult (the bundled table, ``schemas/adult.yaml``) and any bench_real table with a documented
schema (``schemas/<table>.yaml``: the same binning for both sides, as a documented run has it). Our side's
records go through the pipeline's rounding stage's suppression of structural levels (``<missing>``,
``<out-of-domain>``) without DP evidence; the peer never sees a level the data lacks (its encoder learns
the levels from the data). ``--peer-seeds`` limits the
peers' seeds (AIM once per cell, as issue 40 asks), ours take ``--seeds``. After the per-run table, one row
per (table, epsilon) gives ours / AIM for the 1-, 2- and 3-way mean TV and the wall time (ours: the mean of
our seeds; AIM: the mean of its finished runs).

Every run is one subprocess (so wall seconds and peak RSS are per run): privsynth runs in this
interpreter's environment through the module contract (collect_statistics -> run with a seeded noise
source -> rounding to n rows, as bench_mechanisms.py); smartnoise-synth runs in its own virtual
environment, ``benchmarks/.peer-venv`` (created on first use: smartnoise-synth pins mbi < 2, which
cannot live beside privsynth's mbi 2), on the same level codes (the schema's binning, as categorical
columns) with degree-3 workloads for AIM. Both sides get epsilon and delta (default 1e-9) and sample
n rows. A run that fails or passes ``--cap`` seconds (default 900) gets its row with the reason.

Metrics (INTERNAL, they read the real rows): mean total variation over all 1-, 2- and 3-way marginals
(privsynth.report.internal_audit.marginal_error_summary, as bench_mechanisms.py), plus the reference rows
``independent`` (exact product of the true 1-way marginals) and ``bootstrap`` (n rows resampled).
Peak RSS is the worker's ru_maxrss (interpreter, libraries and data included).

Caveats of the peer setup: smartnoise's categorical transformer learns the level set from the data
(with preprocessor_eps=0, not private) and samples its stated row count from the true n; smartnoise
uses numpy's global generator, seeded with the seed; the peer samples by mbi's randomized rounding, with
the rows of each parent group ranked at random (mbi 1.1.0 ranks them in row order, which breaks the joint
distribution: see worker_smartnoise).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PEER_VENV = HERE / ".peer-venv"
PEER_PACKAGES = ["smartnoise-synth==1.0.8", "mbi>=1.1,<2", "disjoint-set>=0.9,<0.10", "Faker>=17",
                 "smartnoise-sql>=1.0.10"]
KS = (1, 2, 3)


# ---------------------------------------------------------------- workers (one run per process)

def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def load_codes(table: str):
    """(level codes, Domain, structural levels) of ``table`` under its documented binning (adult:
    schemas/adult.yaml); the structural levels (``<missing>``, ``<out-of-domain>``) per attribute are those
    the pipeline's rounding stage suppresses without DP evidence (``evidence.unsupported_levels``)."""
    sys.path.insert(0, str(HERE))
    from privsynth.schema.encoding import domain_of, encode_codes, structural_levels

    if table == "adult":
        from bench_mechanisms import load_adult

        from privsynth.schema import load_schema

        codes, domain = load_adult()
        return codes, domain, structural_levels(load_schema(ROOT / "schemas" / "adult.yaml"))
    from bench_real import load_table

    from privsynth.schema import load_schema

    schema = load_schema(ROOT / "schemas" / f"{table}.yaml")  # the documented schema, as a documented run has it
    return encode_codes(load_table(table), schema), domain_of(schema), structural_levels(schema)


def saved_domain(codes_path: Path):
    """The Domain (its ordered scales too), structural levels and the schema's structural zeros (its
    ``determined_by`` rules, public) the driver saved beside the codes (``domain.json``)."""
    from privsynth.schema import load_schema
    from privsynth.schema.determined import structural_zeros
    from privsynth.schema.encoding import Domain

    found = json.loads(codes_path.with_name("domain.json").read_text())
    zeros = structural_zeros(load_schema(found["schema"])) if found.get("schema") else ()
    return (Domain.from_json(found),
            {int(j): tuple(levels) for j, levels in found["structural_levels"].items()}, zeros)


def worker_privsynth(name: str, epsilon: float, delta: float, seed: int, codes_path: Path, out: Path) -> None:
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(ROOT))
    import numpy as np

    from privsynth.mechanisms.catalogue import load
    from privsynth.privacy.noise import SeededNoise
    from privsynth.run.records import release_codes
    from privsynth.schema.workload import Histogram

    codes = np.load(codes_path)
    domain, structural, zeros = saved_domain(codes_path)
    mechanism = load(name)  # the catalogue's handle: optional members (check_config, zeros) with their defaults
    config = mechanism.configure_for(mechanism.Config(epsilon=epsilon, delta=delta), domain)  # as the run's plan
    mechanism.check_config(config, domain)
    noise = SeededNoise(seed, f"bench-peers-{name}-{epsilon}")
    noise.authorize(f"bench-peers-{name}-{epsilon}")
    t0, cpu0 = time.perf_counter(), _cpu_seconds()
    stats = mechanism.collect_statistics(Histogram.of_codes(codes), domain, config)
    release = mechanism.run(stats, domain, config, noise, zeros=zeros)  # passed to the mechanisms that take them
    synthetic = release_codes(release, domain, None if release.exact else codes.shape[0], noise.post_rng,
                              structural, zeros, release.measurements)  # the pipeline's rounding stage
    seconds = time.perf_counter() - t0
    np.save(out.with_suffix(".npy"), synthetic)
    out.write_text(json.dumps({"seconds": seconds, "cpu_seconds": _cpu_seconds() - cpu0, "peak_rss_mb": _rss_mb(),
                               "epsilon_reported": mechanism.privacy_cost(config).epsilon_at(delta)}))


def worker_smartnoise(name: str, epsilon: float, delta: float, seed: int, codes_path: Path, out: Path) -> None:
    import numpy as np
    import pandas as pd

    codes = np.load(codes_path)
    frame = pd.DataFrame(codes, columns=[f"c{j}" for j in range(codes.shape[1])])
    np.random.seed(seed)
    from mbi import markov_random_field
    from snsynth import Synthesizer

    # mbi 1.1.0's "round" sampler (randomized rounding within each parent group, as privsynth's) ranks the
    # rows of a group in row order (a stable argsort of the group ids): columns that share no parent become
    # monotone in the row index together, a spurious dependence (measured: MST's 2-way TV 0.115-0.139, worse
    # than the independent model's 0.077). The rows of each group are ranked in a random order instead: the
    # module's argsort breaks ties at random. Sampling i.i.d. instead (method="sample", used before) adds a
    # bootstrap's error to every marginal (1-way TV 0.0068 on a 10,000-row table at epsilon 3).
    def argsort_random_ties(a, *args, **kwargs):
        a = np.asarray(a)
        if a.ndim != 1:
            return np.argsort(a, *args, **kwargs)
        order = np.random.permutation(a.size)
        return order[np.argsort(a[order], kind="stable")]

    shim = types.SimpleNamespace(**{name: getattr(np, name) for name in dir(np) if not name.startswith("__")})
    shim.argsort = argsort_random_ties
    markov_random_field.np = shim

    t0, cpu0 = time.perf_counter(), _cpu_seconds()
    options = {"degree": 3, "max_cells": 10**9} if name == "aim" else {}
    synth = Synthesizer.create(name, epsilon=float(epsilon), delta=float(delta), **options)
    synth.fit(frame, categorical_columns=list(frame.columns), preprocessor_eps=0.0)
    sample = synth.sample(codes.shape[0])
    seconds = time.perf_counter() - t0
    np.save(out.with_suffix(".npy"), sample[list(frame.columns)].to_numpy().astype(np.int64))
    out.write_text(json.dumps({"seconds": seconds, "cpu_seconds": _cpu_seconds() - cpu0, "peak_rss_mb": _rss_mb(),
                               "epsilon_reported": None}))


# ---------------------------------------------------------------- driver

def ensure_peer_venv() -> tuple[Path, float | None]:
    """The peer environment's python; creates it (and says how long that took) when missing."""
    python = PEER_VENV / "bin" / "python"
    if python.exists():
        return python, None
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", str(PEER_VENV)], check=True)
    # --no-deps for smartnoise-synth itself: its torch/opacus/pac-synth dependencies serve only the
    # GAN synthesizers (several GB with CUDA wheels); MST and AIM need mbi 1.x and smartnoise-sql.
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", PEER_PACKAGES[0]], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", *PEER_PACKAGES[1:]], check=True)
    return python, time.perf_counter() - t0


def run_one(kind: str, name: str, epsilon: float, delta: float, seed: int, codes_path: Path, cap: float,
            tmp: Path, peer_python: Path | None) -> dict:
    out = tmp / f"{kind}-{name}-{epsilon}-{seed}.json"
    python = str(peer_python) if kind == "smartnoise" else sys.executable
    env = dict(os.environ)
    if kind == "privsynth":
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [python, str(Path(__file__).resolve()), "--worker", f"{kind}:{name}", "--epsilon", str(epsilon),
           "--delta", str(delta), "--seed", str(seed), "--codes", str(codes_path), "--out", str(out)]
    status = run_worker(cmd, env, cap, out)
    if status["status"] != "ok":
        return status
    import numpy as np

    facts = json.loads(out.read_text())
    return {"status": "ok", "synthetic": np.load(out.with_suffix(".npy")), **facts}


@contextmanager
def work_folder(keep: str | None, prefix: str) -> Iterator[Path]:
    """Where a benchmark writes its inputs and run folders: ``keep`` (created, and left) when given, else a
    temporary folder deleted afterwards."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp_name:
        folder = Path(keep or tmp_name)
        folder.mkdir(parents=True, exist_ok=True)
        yield folder


def print_rows(rows: list[dict], format_rows: Callable[[list[dict]], str], out: str | None) -> None:
    """A benchmark's closing table (``format_rows`` of every row), and its rows as JSON at ``out`` when given."""
    print()
    print(format_rows(rows))
    if out:
        Path(out).write_text(json.dumps(rows, indent=1, default=str))


def run_worker(cmd: list[str], env: dict, cap: float, result: Path, log: Path | None = None) -> dict:
    """One worker process under the ``cap`` (seconds): {"status": "ok"} once it wrote ``result``, else
    "timeout" or "failed" with the reason (the last line it printed), each with the wall seconds. With
    ``log``, its output (partial on a timeout) is kept there."""
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=cap)
    except subprocess.TimeoutExpired as err:
        if log is not None:
            log.write_text("".join(part.decode(errors="replace") if isinstance(part, bytes) else (part or "")
                                   for part in (err.stdout, err.stderr)))
        return {"status": "timeout", "reason": f"passed the {cap:.0f} s cap", "seconds": time.perf_counter() - t0}
    if log is not None:
        log.write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0 or not result.exists():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        where = "" if log is None else f" (log: {log})"
        return {"status": "failed", "reason": f"exit {proc.returncode}: {tail[0][:200]}{where}",
                "seconds": time.perf_counter() - t0}
    return {"status": "ok", "seconds": time.perf_counter() - t0}


def format_rows(rows: list[dict]) -> str:
    head = ("| table | run | eps | seed | 1-way mean TV | 2-way mean TV | 3-way mean TV | wall s | CPU s | peak RSS MB "
            "| note |")
    lines = [head, "|" + "---|" * 11]
    for r in rows:
        if r["status"] != "ok":
            secs = f"{r['seconds']:.0f}" if "seconds" in r else "-"
            lines.append(f"| {r.get('table', '-')} | {r['run']} | {r['epsilon']} | {r['seed']} | - | - | - | {secs} "
                         f"| - | - | {r['status']}: {r['reason']} |")
            continue
        tv = " | ".join(f"{r['errors'][str(k)]['mean_tv']:.4f}" for k in KS)
        secs = "-" if r.get("seconds") is None else f"{r['seconds']:.1f}"
        cpu = "-" if r.get("cpu_seconds") is None else f"{r['cpu_seconds']:.1f}"
        rss = "-" if r.get("peak_rss_mb") is None else f"{r['peak_rss_mb']:.0f}"
        note = "" if r.get("epsilon_reported") is None else f"reported eps {r['epsilon_reported']:.3f}"
        lines.append(f"| {r.get('table', '-')} | {r['run']} | {r['epsilon']} | {r['seed']} | {tv} | {secs} | {cpu} "
                     f"| {rss} | {note} |")
    return "\n".join(lines)


def summary_rows(rows: list[dict]) -> str:
    """Mean over seeds of each (run, epsilon) with at least one finished run."""
    import numpy as np

    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        if r["status"] == "ok" and r["seed"] != "-":
            groups.setdefault((r.get("table", "-"), r["run"], r["epsilon"]), []).append(r)
    lines = ["| table | run | eps | seeds | 1-way | 2-way | 3-way | wall s (mean) | CPU s (mean) | peak RSS MB (max) |",
             "|" + "---|" * 10]
    for (table, run, eps), rs in groups.items():
        tv = " | ".join(f"{np.mean([r['errors'][str(k)]['mean_tv'] for r in rs]):.4f}" for k in KS)
        lines.append(f"| {table} | {run} | {eps} | {','.join(str(r['seed']) for r in rs)} | {tv} | "
                     f"{np.mean([r['seconds'] for r in rs]):.1f} | {np.mean([r['cpu_seconds'] for r in rs]):.1f} | "
                     f"{max(r['peak_rss_mb'] for r in rs):.0f} |")
    return "\n".join(lines)


def grid_arguments(parser: argparse.ArgumentParser, epsilons: str, cap: float) -> None:
    """The options every benchmark grid shares (this script's and bench_wide.py's), and the hidden
    ones of its worker processes."""
    parser.add_argument("--epsilons", default=epsilons)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--delta", type=float, default=1e-9)
    parser.add_argument("--cap", type=float, default=cap, help="seconds per run before it is stopped")
    parser.add_argument("--out", default=None, help="write the rows as JSON")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--epsilon", type=float, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", default="privsynth:aim,privsynth:rap,smartnoise:mst,smartnoise:aim",
                        help="comma-separated kind:name (kind privsynth or smartnoise)")
    grid_arguments(parser, epsilons="0.3,1,3", cap=900.0)
    parser.add_argument("--no-references", action="store_true")
    parser.add_argument("--tables", default="adult", help="comma-separated: adult and bench_real tables")
    parser.add_argument("--peer-seeds", default=None, help="the smartnoise runs' seeds (default: --seeds)")
    parser.add_argument("--codes", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        kind, name = args.worker.split(":", 1)
        worker = worker_privsynth if kind == "privsynth" else worker_smartnoise
        worker(name, args.epsilon, args.delta, args.seed, Path(args.codes), Path(args.out))
        return 0

    sys.path.insert(0, str(HERE))
    runs = [r.strip() for r in args.runs.split(",") if r.strip()]
    epsilons = [float(e) for e in args.epsilons.split(",")]
    seeds = seeds_of(args.seeds)
    peer_seeds = seeds if args.peer_seeds is None else seeds_of(args.peer_seeds)
    peer_python = None
    if any(r.startswith("smartnoise:") for r in runs):
        peer_python, took = ensure_peer_venv()
        print(f"peer environment {PEER_VENV}: " + ("present" if took is None else f"created in {took:.0f} s"),
              flush=True)
    rows: list[dict] = []
    for table in [t.strip() for t in args.tables.split(",") if t.strip()]:
        rows += table_rows(table, runs, epsilons, seeds, peer_seeds, args, peer_python)
    print()
    print(format_rows(rows))
    print()
    print(summary_rows(rows))
    print()
    print(ratio_rows(rows))
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=2, default=str))
    return 0


def seeds_of(text: str) -> list[int]:
    """'0-9' (a range, both ends included) or '0,1,5' as a list of seeds."""
    if "-" in text and "," not in text:
        low, high = (int(x) for x in text.split("-"))
        return list(range(low, high + 1))
    return [int(s) for s in text.split(",") if s.strip()]


def table_rows(table: str, runs: list[str], epsilons: list[float], seeds: list[int], peer_seeds: list[int], args,
               peer_python: Path | None) -> list[dict]:
    """Every run of the grid on one table, each scored against its real rows (INTERNAL)."""
    import numpy as np
    from bench_mechanisms import independent_summary

    from privsynth.report.internal_audit import marginal_error_summary

    codes, domain, structural = load_codes(table)
    print(f"{table} n={codes.shape[0]} attributes={domain.n_attributes} delta={args.delta} cap={args.cap:.0f}s",
          flush=True)
    rows: list[dict] = []
    if not args.no_references:
        rows.append({"table": table, "run": "independent (exact, not private)", "epsilon": "-", "seed": "-",
                     "status": "ok", "errors": independent_summary(codes, domain), "seconds": None,
                     "peak_rss_mb": None})
        boot = codes[np.random.default_rng(0).integers(0, codes.shape[0], codes.shape[0])]
        rows.append({"table": table, "run": "bootstrap of real rows (not private)", "epsilon": "-", "seed": "-",
                     "status": "ok", "errors": marginal_error_summary(codes, boot, domain, ks=KS), "seconds": None,
                     "peak_rss_mb": None})
    with tempfile.TemporaryDirectory(prefix="bench-peers-") as tmp_name:
        tmp = Path(tmp_name)
        codes_path = tmp / "codes.npy"
        np.save(codes_path, codes)
        (tmp / "domain.json").write_text(json.dumps(domain.to_json() | {
            "structural_levels": {str(j): list(v) for j, v in structural.items()},
            "schema": str(ROOT / "schemas" / f"{table}.yaml")}))
        for run in runs:
            kind, name = run.split(":", 1)
            for eps in epsilons:
                for seed in (peer_seeds if kind == "smartnoise" else seeds):
                    result = run_one(kind, name, eps, args.delta, seed, codes_path, args.cap, tmp, peer_python)
                    row = {"table": table, "run": run, "epsilon": eps, "seed": seed, **result}
                    if result["status"] == "ok":
                        row["errors"] = marginal_error_summary(codes, row.pop("synthetic"), domain, ks=KS)
                        msg = f"3-way mean TV {row['errors']['3']['mean_tv']:.4f}, {row['seconds']:.1f} s"
                    else:
                        msg = f"{result['status']}: {result['reason']}"
                    rows.append(row)
                    print(f"  {table} {run} eps={eps} seed={seed}: {msg}", flush=True)
    return rows


def ratio_rows(rows: list[dict], ours: str = "privsynth:aim", peer: str = "smartnoise:aim") -> str:
    """Ours / the peer's per (table, epsilon): mean 1-, 2- and 3-way TV over the finished runs, and wall time."""
    import numpy as np

    def mean_of(table, run, eps):
        found = [r for r in rows if r.get("table") == table and r["run"] == run and r["epsilon"] == eps
                 and r["status"] == "ok"]
        if not found:
            return None
        return ([np.mean([r["errors"][str(k)]["mean_tv"] for r in found]) for k in KS],
                float(np.mean([r["seconds"] for r in found])), len(found))

    lines = [f"| table | eps | {ours} runs | {peer} runs | 1-way ours / peer | 2-way | 3-way | time ours / peer |",
             "|" + "---|" * 8]
    cells = sorted({(r.get("table"), r["epsilon"]) for r in rows if r["run"] == ours}, key=str)
    for table, eps in cells:
        a, b = mean_of(table, ours, eps), mean_of(table, peer, eps)
        if a is None:
            continue
        if b is None:
            lines.append(f"| {table} | {eps} | {a[2]} | 0 | - | - | - | - |")
            continue
        ratios = " | ".join(f"{x / y:.2f}" if y > 0 else "-" for x, y in zip(a[0], b[0]))
        lines.append(f"| {table} | {eps} | {a[2]} | {b[2]} | {ratios} | {a[1]:.0f} s / {b[1]:.0f} s "
                     f"({a[1] / b[1]:.2f}) |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
