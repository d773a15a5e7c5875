"""What the command line adds to a run: `privsynth run` against `privsynth.synthesize` on the same input.

Both run in fresh processes (interpreter start and imports included, as a user meets them), alternating,
on the first 2,000 rows of the bundled Adult table with its schema, at epsilon 1, the default mechanism.
Without PREFECT_API_URL the CLI runs in-process (no Prefect server starts); with --prefect-api URL it runs
as the flow on that server. Prints wall seconds per repeat, the medians and their ratio (target: < 1.5).

    python benchmarks/bench_cli.py [--repeats 3] [--mechanism aim] [--rows 2000] [--prefect-api URL]
    python benchmarks/bench_cli.py --startup [--repeats 7]

``--startup``: what a user typing a command, or a worker starting a process per run, waits before
anything happens: `privsynth --help`, `privsynth mechanisms` and `import privsynth` against
`python -c "import pandas"` on the same machine, in fresh processes (medians; target: --help at most
the pandas import).
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
CLI = str(Path(PYTHON).with_name("privsynth"))

API_SCRIPT = """
import sys, privsynth
privsynth.synthesize(sys.argv[1], sys.argv[2], epsilon=1.0, mechanism=sys.argv[3], unlimited=True, output=sys.argv[4])
"""


def timed(command: list[str], env: dict) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {' '.join(command)}\n{done.stderr[-2000:]}")
    return seconds


def startup(repeats: int, env: dict) -> None:
    commands = {"privsynth --help": [CLI, "--help"], "privsynth mechanisms": [CLI, "mechanisms"],
                "import privsynth": [PYTHON, "-c", "import privsynth"],
                "import privsynth; privsynth.synthesize": [PYTHON, "-c", "import privsynth; privsynth.synthesize"],
                "import pandas": [PYTHON, "-c", "import pandas"]}
    times = {name: [] for name in commands}
    for _ in range(repeats):
        for name, command in commands.items():
            times[name].append(timed(command, env))
    pandas = statistics.median(times["import pandas"])
    print(f"{'command':<40} {'median s':>9} {'/ import pandas':>16}")
    for name, values in times.items():
        print(f"{name:<40} {statistics.median(values):>9.3f} {statistics.median(values) / pandas:>16.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--mechanism", default="aim")
    parser.add_argument("--prefect-api", help="run the CLI as the flow on this Prefect API (default: in-process)")
    parser.add_argument("--startup", action="store_true", help="time the commands' start instead of a run")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-cli-"))
    if args.startup:
        startup(args.repeats, dict(os.environ, PRIVSYNTH_HOME=str(work / "home"), PREFECT_HOME=str(work / "prefect")))
        return
    data, schema = work / "adult-head.csv", REPO / "privsynth" / "data" / "adult.yaml"
    with gzip.open(REPO / "privsynth" / "data" / "adult.csv.gz", "rt") as rows:
        data.write_text("".join(itertools.islice(rows, args.rows + 1)))
    env = dict(os.environ, PRIVSYNTH_HOME=str(work / "home"), PREFECT_HOME=str(work / "prefect"),
               GX_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1")
    env.pop("PREFECT_API_URL", None)
    if args.prefect_api:
        env["PREFECT_API_URL"] = args.prefect_api
    cli, api = [], []
    for i in range(args.repeats):
        cli.append(timed([CLI, "run", "--input", str(data), "--schema", str(schema), "--mechanism", args.mechanism,
                          "--unlimited", "--output", str(work / f"cli-{i}")], env))
        api.append(timed([PYTHON, "-c", API_SCRIPT, str(data), str(schema), args.mechanism, str(work / f"api-{i}")],
                         env))
    mode = f"as the flow on {args.prefect_api}" if args.prefect_api else "in-process (no Prefect API)"
    print(f"{args.rows} rows of Adult, {args.mechanism} at epsilon 1; CLI {mode}; "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'repeat':>6}  {'privsynth run s':>16}  {'synthesize s':>13}")
    for i, (c, a) in enumerate(zip(cli, api)):
        print(f"{i:>6}  {c:>16.1f}  {a:>13.1f}")
    ratio = statistics.median(cli) / statistics.median(api)
    print(f"median  {statistics.median(cli):>16.1f}  {statistics.median(api):>13.1f}   "
          f"ratio {ratio:.2f} (target < 1.5)")


if __name__ == "__main__":
    main()
