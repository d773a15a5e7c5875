"""Paired no-schema releases: discovery's and the release's settings compared on the same noise.

A no-schema run through the pipeline keys its noise with the ledger's secret, so two runs never share a draw
and a 10% change hides in the per-run spread (credit_default: 0.19-0.33 of independent columns' 2-way error).
This script runs the same steps in-process with seeded noise, so every variant of a seed shares its draws as far
as the variants allow:

1. discovery as a run's discover stage (``discover.measure`` at the run's discovery share, SeededNoise(seed));
2. aim on the discovered schema at the mechanism's epsilon (the run's rho less discovery's and fine decoding's
   shares; SeededNoise(seed)) with discovery's category counts joined, as the run joins them, randomized
   rounding, the structural levels without DP evidence suppressed;
3. fine decoding's sub-bin counts with Gaussian noise at the run's sigma (a seeded generator), and decoding;
4. the release scored as ``bench_real.py`` scores it (strictly, on the documented schema's bins).

    python benchmarks/bench_paired.py --tables credit_default --seeds 0-39 --variants "default;bins=16"
    python benchmarks/bench_paired.py --tables nmes --seeds 0-19 --variants "fine=0.2;fine=0.3"

A variant is ``default`` or ``,``-separated settings ``bins=K`` (discovery's quantile bins per number column),
``fine=S`` (fine decoding's share), ``discovery=S`` (discovery's share of the run's rho), ``earlier=0``
(aim without discovery's category counts, which a run joins with its own 1-way measurements) and ``unaccounted=0``
(round 1's bounds not checked against the facts' count of present numbers, ``discovery/unaccounted.py``); variants
are ``;``-separated. ``--unseen``: bench_unseen's tables, scored as ``bench_unseen.py`` scores them (each real
column's own binning, wrong values by the real column's form), in place of bench_real's documented schemas:

    python benchmarks/bench_paired.py --unseen --tables who,email --seeds 0-3 --variants "unaccounted=0;default"

Scores are INTERNAL (they read the real rows). The releases are not the pipeline's own: a run's validation, its DP
row count and its report are left out.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from bench_peers import seeds_of  # noqa: E402  (benchmarks/ on the path first)


def settings_of(variant: str) -> dict[str, float]:
    """'bins=16,fine=0.3' (or 'default') as settings."""
    if variant.strip() in ("", "default"):
        return {}
    out = {}
    for part in variant.split(","):
        key, value = part.split("=")
        if key.strip() not in ("bins", "fine", "discovery", "earlier", "unaccounted"):
            raise SystemExit(f"unknown setting {key!r}: expected bins=K, fine=S, discovery=S, earlier=0 or "
                             "unaccounted=0")
        out[key.strip()] = float(value)
    return out


def discovered_schema(path: Path, table: str, seed: int, bins: int | None, discovery: float | None = None,
                      unaccounted: bool = True):
    """The schema a no-schema run at epsilon 1 would discover, on seeded noise, and the rho discovery spent (its
    share of the columns it read, as the discover stage's); ``unaccounted`` False: round 1's bounds as they were
    before the facts' check (``discovery/unaccounted.py``)."""
    from privsynth.discovery import column_release

    checked = column_release.account_for_present
    if not unaccounted:
        column_release.account_for_present = lambda found, *rest: found
    try:
        return _discovered_schema(path, table, seed, bins, discovery)
    finally:
        column_release.account_for_present = checked


def _discovered_schema(path: Path, table: str, seed: int, bins: int | None, discovery: float | None):
    import yaml

    from privsynth.discovery.declared import declared_columns, open_declared
    from privsynth.discovery.discover import measure
    from privsynth.discovery.dp_pass import to_read
    from privsynth.discovery.draft import DraftOptions, declared_drafts
    from privsynth.discovery.writer import render
    from privsynth.privacy.accounting import PrivacyCost
    from privsynth.privacy.noise import SeededNoise
    from privsynth.run.discover import THRESHOLD_DELTA_FRACTION, discovery_share
    from privsynth.run.plan import run_rho_with_discovery
    from privsynth.schema import parse_schema

    options = DraftOptions(name=table, epsilon=1.0, delta=1e-9, dataset=table, require_budget=False, seed=seed,
                           bins=bins)
    opened, text_source = open_declared(str(path))
    try:
        drafts = declared_drafts(declared_columns(opened.table), options, text_source)
        read = to_read(drafts, options)
        rho = discovery_share(discovery, len(read)) * run_rho_with_discovery(1.0, 1e-9)
        noise = SeededNoise(seed, f"paired-discovery-{table}")
        noise.authorize(f"paired-discovery-{table}")
        measure(opened.table, read, options, rho, THRESHOLD_DELTA_FRACTION * 1e-9 / max(1, len(read)), noise)
        text = render(drafts, options, opened.description, text_source, PrivacyCost.zcdp(rho, "discovery"), table,
                      title=table)
    finally:
        opened.close()
    return parse_schema(yaml.safe_load(text)), rho, {d.column.name: d.category_counts for d in drafts}


def release(real, schema, table: str, seed: int, fine_share: float | None, discovery_rho: float,
            category_counts=None):
    """The synthetic table of one seeded release on ``schema``, at the run's rho less ``discovery_rho`` (see the
    module docstring)."""
    import numpy as np

    from privsynth.mechanisms import get_mechanism
    from privsynth.privacy.accounting import epsilon_from_rho, gaussian_sigma
    from privsynth.privacy.noise import SeededNoise
    from privsynth.run.fine_decoding import default_share, sub_bin_counts
    from privsynth.run.plan import run_rho_with_discovery
    from privsynth.run.records import release_codes
    from privsynth.schema.determined import structural_zeros
    from privsynth.schema.encoding import (
        decode_codes,
        decoded_columns,
        domain_of,
        encode_codes,
        structural_levels,
        sub_edges,
    )
    from privsynth.schema.workload import Histogram

    codes = np.asarray(encode_codes(real, schema))
    domain = domain_of(schema)
    rest = run_rho_with_discovery(1.0, 1e-9) - discovery_rho
    share = default_share(schema) if fine_share is None else fine_share
    aim = get_mechanism("aim")
    config = aim.Config(epsilon=epsilon_from_rho((1.0 - share) * rest, 1e-9), delta=1e-9)
    noise = SeededNoise(seed, f"paired-release-{table}")
    noise.authorize(f"paired-release-{table}")
    from privsynth.run.earlier_counts import earlier_counts

    earlier = earlier_counts(schema, category_counts) if category_counts else ()
    result = aim.run(aim.collect_statistics(Histogram.of_codes(codes), domain, config), domain, config, noise,
                     earlier=earlier)
    synthetic = release_codes(result, domain, codes.shape[0], noise.post_rng, structural_levels(schema),
                              structural_zeros(schema), result.measurements)  # the pipeline's rounding stage
    fine = None
    columns = decoded_columns(schema)
    if columns and share > 0:
        counts = sub_bin_counts(real, schema)
        sigma = gaussian_sigma(share * rest, len(columns) ** 0.5)
        rng = np.random.default_rng([seed, 1])
        fine = {c.name: {"edges": sub_edges(c).tolist(), "scale": sigma,
                         "noisy_counts": (counts[c.name] + rng.normal(0.0, sigma, len(counts[c.name]))).tolist()}
                for c in columns}
    return decode_codes(np.asarray(synthetic), schema, np.random.default_rng([seed, 2]), fine)


def unseen_inputs(table: str, folder: Path):
    """(the rows as read back from their Parquet file, that file in ``folder``) of a bench_unseen table."""
    import pandas as pd
    from bench_unseen import load_table

    path = folder / f"{table}.parquet"
    load_table(table).to_parquet(path, index=False)
    return pd.read_parquet(path), path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", default="credit_default")
    parser.add_argument("--seeds", default="0-9")
    parser.add_argument("--variants", default="default",
                        help="';'-separated variants: default, bins=K, fine=S, discovery=S, earlier=0, "
                             "unaccounted=0")
    parser.add_argument("--unseen", action="store_true",
                        help="bench_unseen's tables, scored as bench_unseen.py scores them")
    parser.add_argument("--work", default=None, help="keep the Parquet files here (default: temporary)")
    args = parser.parse_args()

    import numpy as np
    from bench_peers import work_folder
    from bench_real import score, scoring_inputs

    print("| table | variant | seeds | 1-way TV | 2-way TV / independent | wrong % | seconds |")
    print("|---|---|---|---|---|---|---|")
    with work_folder(args.work, "bench-paired-") as work:
        for table in [t.strip() for t in args.tables.split(",") if t.strip()]:
            if args.unseen:
                real, path = unseen_inputs(table, work)
            else:
                real, path, evaluation, domain, real_codes = scoring_inputs(table, work)
            for variant in [v for v in args.variants.split(";") if v.strip()]:
                settings = settings_of(variant)
                bins = int(settings["bins"]) if "bins" in settings else None
                started, rows = time.perf_counter(), []
                for seed in seeds_of(args.seeds):
                    schema, discovery_rho, counts = discovered_schema(path, table, seed, bins,
                                                                      settings.get("discovery"),
                                                                      bool(settings.get("unaccounted", 1.0)))
                    synthetic = release(real, schema, table, seed, settings.get("fine"), discovery_rho,
                                        counts if settings.get("earlier", 1.0) else None)
                    if args.unseen:
                        from bench_unseen import score as unseen_score

                        errors = unseen_score(real, synthetic)
                        rows.append((float("nan"), errors["tv2"] / errors["indep2"], errors["wrong"]))
                        continue
                    errors = score(synthetic, real_codes, evaluation, domain, 100)
                    rows.append((errors["1"]["mean_tv"], errors["2"]["mean_tv"] / errors["2"]["independent_mean_tv"],
                                 errors["wrong_share"]))
                mean = np.mean(rows, axis=0)
                print(f"| {table} | {variant} | {len(rows)} | {mean[0]:.4f} | {mean[1]:.3f} | {100 * mean[2]:.2f} "
                      f"| {time.perf_counter() - started:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
