"""The DP report: how well the synthetic table fits the mechanism's own noisy measurements.

Everything here is computed from the release (public, DP) and the synthetic table (post-processing
of the release), so the report is free of privacy cost and safe to show in Prefect's UI. It never
reads the real data; the internal audit (``privsynth.report.internal_audit``) does that, on request, apart.

For each measured marginal: the total-variation distance between the synthetic table's marginal and
the noisy measurement (normalised, negative cells clipped), next to the noise alone's expected share
of it: for Gaussian noise of standard deviation sigma on c cells around a total of n_hat,
E[TV] ~ 0.5 * c * sigma * sqrt(2/pi) / n_hat (Laplace of scale b: 0.5 * c * b / n_hat). A fit far above
that figure means the model, not the noise, is the limit. For mechanisms that publish no
measurements, the report compares the synthetic table with the release it was rounded from (the
rounding error alone).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from privsynth.mechanisms.base import Measurement, Release
from privsynth.schema import Schema
from privsynth.schema.encoding import Domain, domain_of
from privsynth.schema.workload import marginal_counts, merge_levels, relaxed_marginal, total_variation

VISIBILITY = "public (DP): computed from the release and the synthetic table only"


def _normalised(counts: np.ndarray) -> np.ndarray:
    clipped = np.clip(np.asarray(counts, dtype=np.float64), 0.0, None)
    total = clipped.sum()
    return clipped / total if total > 0 else np.full(clipped.size, 1.0 / clipped.size)


def expected_noise_tv(measurement: Measurement, n_hat: float) -> float:
    """Roughly the TV a perfect fit would still show against this measurement (noise alone)."""
    cells = np.asarray(measurement.noisy_counts).size
    per_cell = measurement.scale * math.sqrt(2.0 / math.pi) if measurement.noise == "gaussian" else measurement.scale
    return float(min(1.0, 0.5 * cells * per_cell / max(n_hat, 1.0)))


def measurement_fit(measurements, synthetic: np.ndarray, domain: Domain) -> list[dict]:
    rows = []
    for m in measurements:
        noisy = np.asarray(m.noisy_counts, dtype=np.float64)
        n_hat = max(float(noisy.sum()), 1.0)
        counts = marginal_counts(synthetic, domain, tuple(m.attributes))
        if m.level_groups:
            shape = [domain.sizes[a] for a in m.attributes]
            counts = merge_levels(counts.reshape(shape), m.level_groups).ravel()
        synth = _normalised(counts)
        rows.append({"marginal": [domain.names[a] for a in m.attributes], "cells": int(noisy.size),
                     "noise": m.noise, "noise_scale": float(m.scale),
                     "tv_to_measurement": total_variation(synth, _normalised(noisy)),
                     "expected_tv_from_noise_alone": expected_noise_tv(m, n_hat)})
    return rows


def rounding_fit(release: Release, synthetic: np.ndarray, domain: Domain, k_max: int = 2) -> dict:
    """Mean and max TV between the synthetic table and the release it was drawn from, for k <= k_max."""
    if release.exact:
        return {}
    if release.points.shape[0] * domain.width > 2_000_000:
        k_max = 1  # the relaxed 2-way answers of a large release cost more than they tell here
    out = {}
    for k in range(1, min(k_max, domain.n_attributes) + 1):
        tvs = []
        for marginal in itertools.combinations(range(domain.n_attributes), k):
            relaxed = relaxed_marginal(release.points, release.weights, domain, marginal)
            tvs.append(total_variation(_normalised(marginal_counts(synthetic, domain, marginal)), _normalised(relaxed)))
        out[str(k)] = {"mean_tv": float(np.mean(tvs)), "max_tv": float(np.max(tvs))}
    return out


def dp_report(release: Release, measurements, synthetic: np.ndarray, schema: Schema, privacy: dict) -> dict:
    """The report as a JSON-serialisable dict (see the module docstring)."""
    domain = domain_of(schema)
    fits = measurement_fit(measurements, synthetic, domain)
    summary = None
    if fits:
        tv = np.array([f["tv_to_measurement"] for f in fits])
        floor = np.array([f["expected_tv_from_noise_alone"] for f in fits])
        worst = int(np.argmax(tv - floor))
        summary = {"measurements": len(fits), "mean_tv_to_measurements": float(tv.mean()),
                   "mean_expected_tv_from_noise_alone": float(floor.mean()),
                   "largest_excess": {"marginal": fits[worst]["marginal"], "tv": float(tv[worst]),
                                      "expected_from_noise": float(floor[worst])}}
    return {
        "visibility": VISIBILITY,
        "mechanism": release.mechanism,
        "privacy": privacy.get("epsilon_statement"),
        "synthetic_rows": int(synthetic.shape[0]),
        "release_points": int(release.points.shape[0]),
        "exact_release": release.exact,
        "fit_to_measurements": fits,
        "summary": summary,
        "fit_to_release": rounding_fit(release, synthetic, domain),
    }


def render_report(report: dict) -> str:
    """Markdown for report.md and the Prefect artifact (public figures only)."""
    lines = ["# privsynth DP report", "", f"*{report['visibility']}*", "",
             f"- mechanism: `{report['mechanism']}`", f"- privacy: {report['privacy']}",
             f"- synthetic rows: {report['synthetic_rows']}"]
    summary = report.get("summary")
    if summary:
        lines += ["", "## Fit to the mechanism's noisy measurements", "",
                  f"{summary['measurements']} measured marginals: mean TV {summary['mean_tv_to_measurements']:.4f} "
                  f"(noise alone would explain about {summary['mean_expected_tv_from_noise_alone']:.4f}); largest excess "
                  f"on {', '.join(summary['largest_excess']['marginal'])}: TV {summary['largest_excess']['tv']:.4f} vs "
                  f"{summary['largest_excess']['expected_from_noise']:.4f} from noise.", "",
                  "| marginal | cells | noise | scale | TV to measurement | expected from noise |", "|---|---|---|---|---|---|"]
        for f in report["fit_to_measurements"][:50]:
            lines.append(f"| {' x '.join(f['marginal'])} | {f['cells']} | {f['noise']} | {f['noise_scale']:.3g} | "
                         f"{f['tv_to_measurement']:.4f} | {f['expected_tv_from_noise_alone']:.4f} |")
    fit = report.get("fit_to_release")
    if fit:
        lines += ["", "## Rounding: synthetic table vs the release it was drawn from", "",
                  "| k | mean TV | max TV |", "|---|---|---|"]
        lines += [f"| {k} | {v['mean_tv']:.4f} | {v['max_tv']:.4f} |" for k, v in fit.items()]
    return "\n".join(lines) + "\n"
