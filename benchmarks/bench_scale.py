"""How the statistics engine scales with n: the histogram's time, peak RSS and bytes returned per backend.

Tables are generated over the Adult schema (``generate.py``: a random Bayesian network, fixed seed),
turned into typed values (categories as text, integers uniform inside their bin, missing levels as
NULL) and written as Parquet in batches (1,000,000 rows per file, 250,000 per row group), so memory
stays bounded while generating. The 10^8-row table is the 10^7-row files linked ten times
(``part-XXXX-copyK.parquet`` symlinks): DuckDB reads all 10^8 rows; the counts are ten times
those of 10^7 (it measures the scan and the GROUP BY, not new data).

Each measurement runs in a fresh child process (``--measure``): open_source + histogram(); the parent
reads the child's peak RSS from ``wait4``. PostgreSQL: a throwaway server (tests/postgres_fixture.py),
the table loaded through ibis first (load time shown apart); its RSS column is the client's only.

    python benchmarks/bench_scale.py                              # 10^6 and 10^7 on DuckDB
    python benchmarks/bench_scale.py --rows 1e6,1e7,1e8 --engines duckdb,postgres --memory-limit 1GB

The default mechanism (``--mechanism aim``): time and peak RSS of ``aim.run`` on the histogram of a
generated table (the mechanism reads a histogram, so no files are written), against n on Adult's
domain (``--rows``), against the number of columns (``--columns``, generated domains of 2 to 16 levels
per column, ``--column-rows`` records), and on the issue's 337,000-row, 18-column, 225-level class
(``--transport``). Each run is one child process (``--measure-aim``): it loads the cached histogram
and runs the mechanism with seeded noise; its peak RSS (``ru_maxrss``) includes the histogram.
Beside each run, the forecast of ``aim.forecast`` (config and domain only).

    python benchmarks/bench_scale.py --mechanism aim --rows 1e4,1e5,1e6,1e7 --columns 10,20,50,100 --transport
    python benchmarks/bench_scale.py --calibrate adult@0.3,adult@1,adult@3,loans@1,transport@1,wide50@1
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from generate import (  # noqa: E402
    TRANSPORT_ROWS,
    iter_generated_batches,
    transport_like_domain,
    wide_domain,
)

from privsynth.schema import Schema, load_schema  # noqa: E402
from privsynth.schema.encoding import domain_of  # noqa: E402

SCHEMA_PATH = REPO / "schemas" / "adult.yaml"
FILE_ROWS = 1_000_000
GROUP_ROWS = 250_000


def typed_batch(codes: np.ndarray, schema: Schema, rng: np.random.Generator) -> pa.Table:
    """Values in the source's types for level codes: text categories, int64 numbers, NULL for missing."""
    arrays, names = [], []
    for j, col in enumerate(schema.kept_columns):
        c = codes[:, j]
        n_levels = col.domain_levels
        missing = c >= n_levels
        if col.type == "categorical":
            labels = pa.array(list(col.categories) + [None] * (len(col.labels) - n_levels), pa.string())
            arrays.append(pa.DictionaryArray.from_arrays(pa.array(c, pa.int32()), labels).cast(pa.string()))
        else:
            edges = np.asarray(col.bins, dtype=np.float64)
            safe = np.where(missing, 0, c)
            lo, hi = edges[safe], edges[safe + 1]
            upper = np.where(safe == n_levels - 1, hi, hi - 1)
            values = rng.integers(lo.astype(np.int64), upper.astype(np.int64) + 1)
            arrays.append(pa.array(values, pa.int64(), mask=missing))
        names.append(col.name)
    return pa.Table.from_arrays(arrays, names=names)


def generate(folder: Path, rows: int, schema: Schema, seed: int = 0) -> list[Path]:
    """Parquet files of ``rows`` generated rows (cached in ``folder``); 1e6 rows per file."""
    folder.mkdir(parents=True, exist_ok=True)
    domain = domain_of(schema)
    files = []
    n_files = max(1, rows // FILE_ROWS)
    for i in range(n_files):
        path = folder / f"part-{i:04d}.parquet"
        files.append(path)
        if path.exists():
            continue
        rng = np.random.default_rng([seed, i])
        tmp = path.with_suffix(".tmp")
        with pq.ParquetWriter(tmp, typed_batch(next(iter_generated_batches(domain, 1, seed)), schema, rng).schema,
                              compression="zstd") as writer:
            for codes in iter_generated_batches(domain, min(FILE_ROWS, rows), seed * 1000 + i, batch_rows=GROUP_ROWS):
                writer.write_table(typed_batch(codes, schema, rng), row_group_size=GROUP_ROWS)
        os.replace(tmp, path)
    return files


def linked_copies(folder: Path, files: list[Path], copies: int) -> str:
    """A glob over ``copies`` symlinks of every file: copies x the rows, read for real."""
    folder.mkdir(parents=True, exist_ok=True)
    for k in range(copies):
        for f in files:
            link = folder / f"{f.stem}-copy{k}.parquet"
            if not link.exists():
                link.symlink_to(f.resolve())
    return str(folder / "*.parquet")


def measure(data: str, memory_limit: str | None, threads: int | None) -> dict:
    """In the child: open + histogram; seconds, bytes returned, histogram rows."""
    from privsynth.engine import EngineOptions, open_source

    schema = load_schema(SCHEMA_PATH)
    start = time.perf_counter()
    with open_source(data, schema, EngineOptions(threads=threads, memory_limit=memory_limit)) as src:
        hist = src.histogram()
        seconds = time.perf_counter() - start
        return {"seconds": seconds, "bytes": src.bytes_returned, "histogram_rows": int(hist.codes.shape[0]),
                "rows": hist.n}


def run_child(data: str, args) -> dict:
    cmd = [sys.executable, __file__, "--measure", data]
    if args.memory_limit:
        cmd += ["--memory-limit", args.memory_limit]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO)})
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        raise RuntimeError(f"measurement of {data} failed (status {status})")
    result = json.loads(out.decode().strip().splitlines()[-1])
    result["peak_rss_mb"] = usage.ru_maxrss / 1024  # Linux: kilobytes
    result["cpu_seconds"] = usage.ru_utime + usage.ru_stime  # the child's own CPU time (all its threads)
    return result


def load_postgres(url: str, files: list[Path]) -> float:
    """Load the files into table ``generated`` (through ibis, batch by batch); returns seconds."""
    from privsynth.engine import connect_url

    start = time.perf_counter()
    con = connect_url(url)
    try:
        for i, f in enumerate(files):
            for batch in pq.ParquetFile(f).iter_batches(batch_size=GROUP_ROWS):
                table = pa.Table.from_batches([batch])
                if i == 0 and not con.list_tables(like="generated"):
                    con.create_table("generated", table)
                else:
                    con.insert("generated", table)
    finally:
        con.disconnect()
    return time.perf_counter() - start


# ---------------------------------------------------------------- the mechanism (aim) at scale

def mechanism_domain(kind: str, columns: int):
    from privsynth.schema.encoding import Domain  # noqa: F401

    if kind == "adult":
        return domain_of(load_schema(SCHEMA_PATH))
    if kind == "transport":
        return transport_like_domain()
    return wide_domain(columns)


def cached_histogram(folder: Path, kind: str, columns: int, rows: int) -> Path:
    """The generated table's histogram as .npz (made once, in a child process, so the parent stays small)."""
    path = folder / f"hist-{kind}-{columns}-{rows}.npz"
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        code = (f"import sys, numpy as np; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
                f"from bench_scale import mechanism_domain; from generate import generated_histogram; "
                f"h = generated_histogram(mechanism_domain({kind!r}, {columns}), {rows}, 0); "
                f"np.savez({str(path.with_suffix('.tmp.npz'))!r}, codes=h.codes, counts=h.counts)")
        subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONPATH": str(REPO)})
        os.replace(path.with_suffix(".tmp.npz"), path)
    return path


def measure_aim(spec: dict) -> dict:
    """In the child: load the histogram, run aim (seeded noise), time it."""
    from privsynth.mechanisms.aim import mechanism as aim
    from privsynth.privacy.noise import SeededNoise
    from privsynth.schema.workload import Histogram

    data = np.load(spec["path"])
    histogram = Histogram(data["codes"], data["counts"])
    domain = mechanism_domain(spec["kind"], spec["columns"])
    config = aim.Config(epsilon=spec["epsilon"])
    noise = SeededNoise(spec["seed"], f"bench-scale-{spec['kind']}")
    noise.authorize("bench")
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    wall, cpu = time.perf_counter(), time.process_time()
    release = aim.run(aim.collect_statistics(histogram, domain, config), domain, config, noise)
    return {"seconds": time.perf_counter() - wall, "cpu_seconds": time.process_time() - cpu,
            "rounds": release.public_facts["rounds"], "histogram_rows": int(histogram.codes.shape[0]),
            "rss_before_run_mb": rss_before, "release_rows": int(release.points.shape[0])}


def run_aim_child(spec: dict) -> dict:
    proc = subprocess.Popen([sys.executable, __file__, "--measure-aim", json.dumps(spec)], stdout=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        raise RuntimeError(f"aim run {spec} failed (status {status})")
    result = json.loads(out.decode().strip().splitlines()[-1])
    result["peak_rss_mb"] = usage.ru_maxrss / 1024
    return result


def mechanism_main(args) -> None:
    from privsynth.mechanisms.aim import mechanism as aim

    folder = Path(args.folder)
    runs = [("adult", 15, int(float(r))) for r in args.rows.split(",") if r]
    runs += [("wide", int(c), int(float(args.column_rows))) for c in args.columns.split(",") if c]
    if args.transport:
        runs.append(("transport", 18, TRANSPORT_ROWS))
    results = []
    for kind, columns, rows in runs:
        t = time.perf_counter()
        path = cached_histogram(folder, kind, columns, rows)
        domain = mechanism_domain(kind, columns)
        forecast = aim.forecast(aim.Config(epsilon=args.epsilon), domain)
        spec = {"path": str(path), "kind": kind, "columns": columns, "epsilon": args.epsilon, "seed": args.seed}
        r = run_aim_child(spec)
        results.append({"table": kind, "n": rows, "columns": domain.n_attributes, "levels": domain.width,
                        "forecast_s": forecast.seconds, "forecast_mb": forecast.memory_mb,
                        "histogram_s": time.perf_counter() - t - r["seconds"], **r})
        print(json.dumps(results[-1]), flush=True)
    print()
    print(f"aim at epsilon {args.epsilon}, seed {args.seed}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} "
          "cores")
    print("| table | n | columns | one-hot levels | distinct records | rounds | aim wall s | aim CPU s | peak RSS MB | "
          "forecast s | forecast MB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['table']} | {r['n']:,} | {r['columns']} | {r['levels']} | {r['histogram_rows']:,} | {r['rounds']} "
              f"| {r['seconds']:.1f} | {r['cpu_seconds']:.1f} | {r['peak_rss_mb']:.0f} | {r['forecast_s']:.0f} | "
              f"{r['forecast_mb']:.0f} |")


# ---------------------------------------------------------------- calibrating aim's cost model

def calibration_tables(names: list[str]):
    """(name, histogram, domain, epsilon) for the calibration runs: real Adult, the loans table (with the
    bench extra), generated tables."""
    from generate import generated_histogram  # this script runs from benchmarks/, beside generate.py

    from privsynth.schema.encoding import encode_codes
    from privsynth.schema.workload import Histogram

    out = []
    for name in names:
        kind, _, eps = name.partition("@")
        eps = float(eps or 1)
        if kind == "adult":
            import pandas as pd

            schema = load_schema(SCHEMA_PATH)
            frame = pd.read_csv(REPO / "privsynth" / "data" / "adult.csv.gz")
            out.append((name, Histogram.of_codes(encode_codes(frame, schema)), domain_of(schema), eps))
        elif kind == "loans":
            from bench_wide import SCHEMA, load_loans

            schema = load_schema(SCHEMA)
            out.append((name, Histogram.of_codes(encode_codes(load_loans(), schema)), domain_of(schema), eps))
        else:                                              # transport or wide<columns>, 34,000 generated rows
            domain = transport_like_domain() if kind == "transport" else wide_domain(int(kind[4:]))
            out.append((name, generated_histogram(domain, 34_000, 0), domain, eps))
    return out


def calibrate(names: list[str]) -> None:
    """Time every fit step and every round's scoring through the mechanism's own functions, with the
    tree's cells, and fit cost.py's lines by least squares (CPU seconds)."""
    from privsynth.mechanisms.aim import inference
    from privsynth.mechanisms.aim import mechanism as aim
    from privsynth.mechanisms.aim import model as model_module
    from privsynth.privacy.noise import SeededNoise

    fits, rounds = [], []
    original_fit, original_many, original_pool = (model_module.GraphicalModel.fit, inference.Marginals.many,
                                                  aim.scored_pool)
    original_calibrate = model_module.GraphicalModel._calibrate
    steps = [0]

    def fit(self, measurements, iterations, alpha=None, tolerance=0.0):
        steps[0], start = 0, time.process_time()
        out = original_fit(self, measurements, iterations, alpha, tolerance)
        fits.append((sum(self.tree.cells), len(measurements), steps[0], time.process_time() - start))
        return out

    def counted_calibrate(self, potentials):
        steps[0] += 1
        return original_calibrate(self, potentials)

    pending = {}

    def scored(pool, marginals, eligible):
        pending["start"] = time.process_time()
        return original_pool(pool, marginals, eligible)

    def many(self, queries):
        out = original_many(self, queries)
        rounds.append((len(queries), sum(self.tree.cells),
                       time.process_time() - pending.pop("start", time.process_time())))
        return out

    model_module.GraphicalModel.fit, model_module.GraphicalModel._calibrate = fit, counted_calibrate
    inference.Marginals.many, aim.scored_pool = many, scored
    try:
        for name, histogram, domain, eps in calibration_tables(names):
            config = aim.Config(epsilon=eps)
            noise = SeededNoise(0, f"calibrate-{name}")
            noise.authorize("calibrate")
            start = time.process_time()
            release = aim.run(aim.collect_statistics(histogram, domain, config), domain, config, noise)
            print(f"{name}: {release.public_facts['rounds']} rounds, {time.process_time() - start:.1f} CPU s",
                  flush=True)
    finally:
        model_module.GraphicalModel.fit, model_module.GraphicalModel._calibrate = original_fit, original_calibrate
        inference.Marginals.many, aim.scored_pool = original_many, original_pool
    f = np.array([(1.0, cells, meas, secs / max(steps_, 1)) for cells, meas, steps_, secs in fits if steps_])
    fit_coef = np.linalg.lstsq(f[:, :3], f[:, 3], rcond=None)[0]
    r = np.array(rounds, dtype=np.float64)
    select_coef = np.linalg.lstsq(r[:, :2], r[:, 2], rcond=None)[0]
    print(f"{len(f)} fits: per step {fit_coef[0]:.2e} s + {fit_coef[1]:.2e} s/cell + {fit_coef[2]:.2e} s/measurement "
          f"(R^2 {1 - np.var(f[:, 3] - f[:, :3] @ fit_coef) / np.var(f[:, 3]):.2f})")
    print(f"{len(r)} rounds: scoring {select_coef[0]:.2e} s/candidate + {select_coef[1]:.2e} s/tree cell "
          f"(R^2 {1 - np.var(r[:, 2] - r[:, :2] @ select_coef) / np.var(r[:, 2]):.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", default="1e6,1e7", help="comma-separated row counts (1e6, 1e7, 1e8)")
    parser.add_argument("--engines", default="duckdb", help="duckdb,postgres")
    parser.add_argument("--postgres-max-rows", type=float, default=1e7)
    parser.add_argument("--folder", default="/tmp/privsynth-bench-scale")
    parser.add_argument("--memory-limit", default=None, help="DuckDB memory_limit, e.g. 1GB")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--measure", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--mechanism", choices=["aim"], default=None, help="time the mechanism instead of the engine")
    parser.add_argument("--columns", default="", help="with --mechanism: comma-separated column counts (10,20,50,100)")
    parser.add_argument("--column-rows", default="1e5", help="with --mechanism: rows of the column-scaling tables")
    parser.add_argument("--transport", action="store_true", help="with --mechanism: the 337,000-row 18-column class")
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--measure-aim", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--calibrate", default=None,
                        help="fit aim's cost model on these runs, e.g. "
                             "adult@0.3,adult@1,adult@3,loans@1,transport@1,wide50@1")
    args = parser.parse_args()
    if args.calibrate:
        calibrate(args.calibrate.split(","))
        return
    if args.measure_aim:
        print(json.dumps(measure_aim(json.loads(args.measure_aim))))
        return
    if args.mechanism:
        mechanism_main(args)
        return
    if args.measure:
        print(json.dumps(measure(args.measure, args.memory_limit, args.threads)))
        return
    schema = load_schema(SCHEMA_PATH)
    folder = Path(args.folder)
    engines = args.engines.split(",")
    rows_list = [int(float(r)) for r in args.rows.split(",")]
    base_rows = min(max(rows_list), 10**7)
    t = time.perf_counter()
    base = generate(folder / "base", base_rows, schema)
    print(f"generated/cached {base_rows:,} rows in {time.perf_counter() - t:.0f} s", flush=True)
    results = []
    for rows in rows_list:
        if rows <= base_rows:
            files = base[: max(1, rows // FILE_ROWS)]
            data = (str(files[0]) if len(files) == 1
                    else str(folder / "base" / "*.parquet") if len(files) == len(base) else None)
            if data is None:
                data = linked_copies(folder / f"rows-{rows}", files, 1)
        else:
            files = base
            data = linked_copies(folder / f"rows-{rows}", base, rows // base_rows)
        if "duckdb" in engines:
            r = run_child(data, args)
            results.append({"engine": "duckdb (Parquet)", "n": rows, **r})
            print(json.dumps(results[-1]), flush=True)
        if "postgres" in engines and rows <= args.postgres_max_rows:
            sys.path.insert(0, str(REPO / "tests"))
            from postgres_fixture import running_postgres

            with running_postgres(shared_buffers="256MB") as url:
                load = load_postgres(url, files)
                r = run_child(f"{url}?table=generated", args)
            results.append({"engine": "postgres", "n": rows, "load_seconds": load, **r})
            print(json.dumps(results[-1]), flush=True)
    print()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print("| engine | n | histogram wall s | client CPU s | peak RSS MB | bytes returned | histogram rows |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['engine']} | {r['n']:,} | {r['seconds']:.1f} | {r['cpu_seconds']:.0f} | {r['peak_rss_mb']:.0f} | "
              f"{r['bytes']:,} | {r['histogram_rows']:,} |")


if __name__ == "__main__":
    main()
