"""Empirical privacy audit of every mechanism (privsynth.privacy.audit): per target, the claim, the delta'
compared, the 95% lower bound on epsilon with its interval, the runs per table and the time.

Three sections:
1. Isolated noise steps (the mechanisms' own statistics and scale functions, the likelihood-ratio test),
   ``--step-runs`` runs per table with seeded numpy noise: as released, noise scale x 0.5, canary x 2.
2. The same steps with OpenDP's samplers (production noise), ``--secure-runs`` runs per table.
3. Every mechanism end to end on a 60-record table with small configs: as released, and broken with
   every noise scale x 0.5 and x 0.1 (``--broken``); ``--runs`` runs per table (``--cheap-runs`` for
   microaggregation and schema_draft, whose runs take a millisecond or two). "schema_draft: singleton"
   (a value held by the canary alone: the category threshold's case) is broken by its threshold instead.

"lower bound (est, upper)": the 95% lower bound on epsilon (upper ends of the error rates' two-sided 95%
Clopper-Pearson intervals, so the bound holds with probability >= 95%), the point estimate, and the
bound from the lower ends. The test and delta' are chosen on the first half of each table's runs and
bounded on the second half; "lb@release" is the bound at the release's own delta (1e-9) with its own
test choice. A zCDP claim is compared at delta' through epsilon_from_rho(rho, delta') (the tight
conversion of privsynth.privacy.accounting); a pure claim is its epsilon at every delta'.

Run: python benchmarks/audit_privacy.py [--runs 2000] [--cheap-runs 20000] [--step-runs 1000000]
         [--secure-runs 20000] [--broken 0.5,0.1] [--broken-runs 500] [--end-to-end-noise seeded|secure]
         [--only aim,rap] [--skip-steps] [--skip-end-to-end] [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time


def parse() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=2000, help="end-to-end runs per table")
    ap.add_argument("--cheap-runs", type=int, default=20_000, help="runs per table for microaggregation, schema_draft")
    ap.add_argument("--step-runs", type=int, default=1_000_000, help="runs per table of the isolated steps")
    ap.add_argument("--secure-runs", type=int, default=20_000, help="step runs with OpenDP noise (0: skip)")
    ap.add_argument("--broken", default="0.5,0.1", help="noise-scale factors of the broken end-to-end variants")
    ap.add_argument("--broken-runs", type=int, default=500,
                    help="runs per table of the broken end-to-end variants at factors < 0.5 (0: as --runs)")
    ap.add_argument("--end-to-end-noise", choices=("seeded", "secure"), default="seeded",
                    help="noise of the end-to-end runs: seeded numpy streams or OpenDP's samplers")
    ap.add_argument("--only", default="", help="comma-separated target names (default: all)")
    ap.add_argument("--skip-steps", action="store_true")
    ap.add_argument("--skip-end-to-end", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    return ap.parse_args()


CHEAP = ("microaggregation", "schema_draft", "schema_draft: singleton")
NOISELESS = ("private_sampling",)   # no noise scale to break; its box bound caps every density ratio
# The singleton target audits the category threshold: its broken variant is the threshold (Phi^-1 forgotten),
# not a noise scale (a smaller noise only makes a count-1 value less likely to pass the unchanged threshold).
THRESHOLD_ONLY = ("schema_draft: singleton",)


def verdict(result, broken: bool) -> str:
    if broken:
        return "detected" if result.exceeds_claim else "not detected"
    return "ok" if result.within_claim else "VIOLATION"


def show(results, broken_flags) -> None:
    from privsynth.privacy.audit import format_results
    lines = format_results(results).split("\n")
    print(lines[0] + "  verdict")
    print(lines[1] + "  " + "-" * 12)
    for line, result, broken in zip(lines[2:], results, broken_flags):
        print(line + "  " + verdict(result, broken), flush=True)


def main() -> None:
    args = parse()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from privsynth.privacy.audit import (
        STEP_TARGETS,
        TARGETS,
        broken_threshold,
        run_audit,
        scaled,
        secure_noise,
        seeded_noise,
    )
    only = {s.strip() for s in args.only.split(",") if s.strip()}

    def wanted(name: str) -> bool:
        return not only or name in only or name.split(":")[0] in only

    started = time.perf_counter()
    print(f"# privsynth privacy audit; python {platform.python_version()}, {platform.machine()}, "
          f"{os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f}; seed {args.seed}")
    if not args.skip_steps:
        print(f"\n## 1. isolated steps, seeded numpy noise (SeededNoise), {args.step_runs} runs per table")
        results, flags = [], []
        for name, build in STEP_TARGETS.items():
            if not wanted(name):
                continue
            for variant, target, noise, broken in (
                    ("as released", build(), seeded_noise(args.seed), False),
                    ("noise x 0.5", build(), scaled(seeded_noise(args.seed + 1), 0.5), True),
                    ("canary x 2", build(copies=2), seeded_noise(args.seed + 2), True)):
                results.append(run_audit(target, args.step_runs, noise, variant=variant))
                flags.append(broken)
        show(results, flags)
        if args.secure_runs:
            print(f"\n## 2. isolated steps, OpenDP samplers (SecureNoise), {args.secure_runs} runs per table")
            results = [run_audit(build(), args.secure_runs, secure_noise(), variant="as released")
                       for name, build in STEP_TARGETS.items() if wanted(name)]
            show(results, [False] * len(results))
    if not args.skip_end_to_end:
        factors = [float(f) for f in args.broken.split(",") if f.strip()]
        base = (lambda offset: secure_noise()) if args.end_to_end_noise == "secure" else \
            (lambda offset: seeded_noise(args.seed + offset))
        print(f"\n## 3. end to end (60-record table, small configs), {args.end_to_end_noise} noise; {args.runs} runs "
              f"per table ({args.cheap_runs} for {', '.join(CHEAP)})")
        for name, build in TARGETS.items():
            if not wanted(name):
                continue
            runs = args.cheap_runs if name in CHEAP else args.runs
            results = [run_audit(build(), runs, base(0), variant="as released")]
            flags = [False]
            if name in THRESHOLD_ONLY:
                with broken_threshold():
                    results.append(run_audit(build(), runs, base(1), variant="threshold broken"))
                flags.append(True)
            elif name not in NOISELESS:
                for factor in factors:
                    r = args.broken_runs if (args.broken_runs and factor < 0.5 and name not in CHEAP) else runs
                    results.append(run_audit(build(), r, scaled(base(1), factor),
                                             variant=f"noise x {factor:g}"))
                    flags.append(True)
            show(results, flags)
            print(f"#   {name}: {results[0].statistic}", flush=True)
    print(f"\n# total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    sys.exit(main())
