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

Beside that fit, the accuracy statement an analyst needs (``privsynth.report.uncertainty``): for every
column and every pair of columns, a 95% bound on the TV distance between the synthetic marginal and the
real one where a measurement supports it, else "not measured: no accuracy statement". The figures
(``figures``) and report.html (``html``) are drawn from this dict alone.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping

import numpy as np

from privsynth.mechanisms.base import Measurement, Release
from privsynth.report.shares import release_holds
from privsynth.report.uncertainty import (
    ASSUMPTION,
    CONFIDENCE,
    NOT_MEASURED,
    SOURCE,
    Estimate,
    marginal_statements,
    synthetic_at,
)
from privsynth.schema import Schema
from privsynth.schema.determined import structural_zeros
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


def _level_labels(labels: tuple, groups) -> list[str]:
    if groups is None:
        return [str(x) for x in labels]
    merged: dict[int, list[str]] = {}
    for level, group in enumerate(groups):
        merged.setdefault(int(group), []).append(str(labels[level]))
    return ["|".join(merged[g]) for g in sorted(merged)]


def column_view(entry: dict, a: int, schema: Schema, synthetic: np.ndarray, domain: Domain,
                est: Estimate | None) -> dict:
    """A column's entry with what its picture needs: labels, synthetic and DP-measured proportions, 95% bars."""
    labels = schema.kept_columns[a].labels
    if est is None:
        counts = np.bincount(synthetic[:, a], minlength=domain.sizes[a]).astype(np.float64)
        return {**entry, "labels": [str(x) for x in labels], "synthetic": _normalised(counts).tolist(),
                "measured": None, "error_bar": None}
    total = max(float(est.values.sum()), 1e-12)
    half_width = 1.959964 * est.cell_sd if est.cell_sd is not None else est.noise_l1
    return {**entry, "labels": _level_labels(labels, est.groups[0]),
            "synthetic": _normalised(synthetic_at(synthetic, domain, est)).tolist(),
            "measured": (est.values / total).tolist(), "error_bar": [half_width / total] * int(est.values.size)}


def run_spend_line(privacy: Mapping) -> str | None:
    """The run's one figure with its parts (privacy.json's ``spent``: the same line the console prints; older
    files: the run's or the mechanism's statement)."""
    spent = privacy.get("spent") or {}
    return spent.get("line") or spent.get("statement") or (privacy.get("run_total") or {}).get("statement") \
        or privacy.get("epsilon_statement")


def budget(privacy: dict) -> dict:
    """Privacy spent per stage (only the mechanism spends), and per step where the mechanism publishes it."""
    cost = privacy.get("cost") or {}
    rho = float(cost.get("rho_zcdp") or 0.0)
    stages = [{"stage": s, "rho": rho if s == "mechanism" else 0.0}
              for s in ("validate", "binarise", "mechanism", "rounding", "report")]
    discovery = privacy.get("discovery")
    if discovery is not None:  # a run without a schema: its discover stage spent part of the run's budget
        stages.insert(0, {"stage": "discover", "rho": float(discovery.get("rho") or 0.0)})
        rho = sum(stage["rho"] for stage in stages)
    facts = privacy.get("release_facts") or {}
    steps = []
    if "rho_per_round" in facts:
        if facts.get("rho_initial_one_way") is not None:
            steps.append({"step": "initial 1-way measurements", "rho": float(facts["rho_initial_one_way"])})
        steps += [{"step": f"round {i + 1}", "rho": float(r)} for i, r in enumerate(facts["rho_per_round"])]
    statement = run_spend_line(privacy)
    return {"statement": statement, "total_rho": rho, "stages": stages,
            "mechanism_steps": steps, "reused_stored_release": bool(privacy.get("reused_stored_release"))}


OOD_NOTE = 0.01  # a column whose DP out-of-domain share is at least this is named in the report


def discovery_summary(privacy: dict, holds: list[dict] | None = None) -> dict | None:
    """What a run without a schema discovered (public: DP facts): its share of the budget, the columns it
    dropped, and per column discovery's DP estimate of the share of present values outside the discovered
    categories (``share``: what discovery expected, not what the release holds; ``in_release``: the
    release's own ``<out-of-domain>`` entry from ``holds``), with the public flag that would keep them. A
    column is listed where either share reaches OOD_NOTE. None for a run with a schema."""
    found = privacy.get("discovery")
    if found is None:
        return None
    shares = found.get("out_of_domain_share_dp") or {}
    released = {h["column"]: h["out_of_domain"] for h in holds or () if h.get("out_of_domain")}
    listed = []
    for c, v in sorted(shares.items(), key=lambda kv: -kv[1]):
        in_release = released.get(c)
        if v >= OOD_NOTE or max((in_release or {}).get("measured") or 0.0, (in_release or {}).get("synthetic", 0.0)) \
                >= OOD_NOTE:
            listed.append({"column": c, "share": float(v), "in_release": in_release,
                           "keep_them_with": f"--public CONTRACT, or {c}'s categories in schema.yaml, passed as "
                                             "--schema"})
    return {"share_of_run": found.get("share_of_run"), "rho": found.get("rho"), "dropped": found.get("dropped", []),
            "out_of_domain": listed}


def accuracy_summary(columns: list[dict], pairs: list[dict], measured: bool) -> dict:
    def stats(entries):
        bounds = np.array([e["tv_bound"] for e in entries if e["status"] == "bound"])
        return {"total": len(entries), "bounded": int(bounds.size),
                "not_measured": len(entries) - int(bounds.size),
                "median_tv_bound": float(np.median(bounds)) if bounds.size else None,
                "max_tv_bound": float(bounds.max()) if bounds.size else None}
    return {
        "confidence": CONFIDENCE,
        "coverage": "per marginal: each bound holds with probability >= 95% on its own, not all at once",
        "analysis": SOURCE if measured else None,
        "assumption": ASSUMPTION if measured else None,
        "applies": ("Bounds for marginals contained in a measured marginal; unsupported marginals: " + NOT_MEASURED)
        if measured else ("This release publishes no noisy measurements, so nothing bounds the distance to the "
                          "real marginals: " + NOT_MEASURED),
        "columns": stats(columns), "pairs": stats(pairs),
    }


def dp_report(release: Release, measurements, synthetic: np.ndarray, schema: Schema, privacy: dict) -> dict:
    """The report as a JSON-serialisable dict (see the module docstring).

    Its inputs are the release's outputs only (release, measurements, synthetic codes, privacy.json, the
    public schema): it takes no real data, so everything in it, and everything drawn from it, is public.
    """
    domain = domain_of(schema)
    synthetic = np.asarray(synthetic, dtype=np.int64)
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
    columns, pairs, estimates = marginal_statements(measurements, synthetic, domain)
    columns = [column_view(c, a, schema, synthetic, domain, estimates.get((a,))) for a, c in enumerate(columns)]
    holds = release_holds(schema, synthetic, estimates, tuple(measurements), privacy.get("discovery"))
    return {
        "visibility": VISIBILITY,
        "mechanism": release.mechanism,
        "privacy": run_spend_line(privacy),
        "synthetic_rows": int(synthetic.shape[0]),
        "release_points": int(release.points.shape[0]),
        "exact_release": release.exact,
        "accuracy": accuracy_summary(columns, pairs, bool(measurements)),
        "columns": columns,
        "pairs": pairs,
        "release_holds": holds,
        "schema_rules": schema_rules(schema, synthetic),
        "budget": budget(privacy),
        "discovery": discovery_summary(privacy, holds),
        "fit_to_measurements": fits,
        "summary": summary,
        "fit_to_release": rounding_fit(release, synthetic, domain),
    }


def schema_rules(schema: Schema, synthetic: np.ndarray) -> list[dict]:
    """Per ``determined_by`` rule of the schema, the synthetic records that break it (public: the synthetic codes):
    none where the mechanism held the rule's zeros (aim), any number where it did not."""
    return [{"columns": list(z.names), "forbidden_cells": z.forbidden_cells,
             "synthetic_records_against": int((~z.allowed[synthetic[:, z.attributes[0]],
                                                          synthetic[:, z.attributes[1]]]).sum())}
            for z in structural_zeros(schema)]


def rules_text(report: dict) -> list[str]:
    """The report's line on the schema's ``determined_by`` rules (none: no line)."""
    rules = report.get("schema_rules") or []
    if not rules:
        return []
    said = "; ".join(f"{' x '.join(r['columns'])}: {r['synthetic_records_against']} synthetic records against it"
                     for r in rules)
    return ["", f"Rules the schema states (determined_by; {len(rules)}): {said}."]


def _bound_text(entry: dict) -> str:
    if entry["status"] != "bound":
        return NOT_MEASURED
    text = f"{entry['tv_bound']:.3f}"
    if entry.get("levels") == "merged":
        text += " (merged levels of " + ", ".join(entry["merged_columns"]) + ")"
    return text


def headline(report: dict) -> list[str]:
    """The few lines an analyst reads first (public): how many marginals are bounded, and how tightly."""
    acc = report.get("accuracy") or {}
    lines = [f"- mechanism: `{report['mechanism']}`", f"- privacy: {report['privacy']}",
             f"- synthetic rows: {report['synthetic_rows']}"]
    for what in ("columns", "pairs"):
        s = acc.get(what)
        if s:
            median = f", median 95% TV bound {s['median_tv_bound']:.3f}" if s["median_tv_bound"] is not None else ""
            lines.append(f"- {what}: {s['bounded']} of {s['total']} bounded{median}; {s['not_measured']} not measured")
    return lines


def share_text(entry: dict | None) -> str:
    """A structural level's share as report.md states it: the release's measured share with its 95% bar,
    the synthetic table's beside it ('-': the column has no such level)."""
    if entry is None:
        return "-"
    synthetic = f"synthetic {100 * entry['synthetic']:.1f}%"
    if entry["status"] != "measured":
        return f"not measured ({synthetic})"
    text = f"{100 * entry['measured']:.1f}% ± {100 * entry['error_bar']:.1f}% ({synthetic}"
    if entry.get("suppressed"):
        text += ", suppressed: no evidence in the 1-way count"
    elif entry.get("synthetic_within_error_bar") is False:
        text += ", OUTSIDE the bar: the model fits it poorly"
    return text + ")"


def beyond_text(entry: dict | None) -> str:
    """A clip column's values beyond its bounds as report.md states them ('-': not a clip column)."""
    if entry is None:
        return "-"
    edges = (f"edge bins {entry['lowest_bin']} {100 * entry['lowest_bin_synthetic']:.1f}% and "
             f"{entry['highest_bin']} {100 * entry['highest_bin_synthetic']:.1f}% of the synthetic table")
    if entry["status"] != "estimated":
        return f"no DP estimate ({edges})"
    return (f"below {100 * entry['below']:.1f}% ± {100 * entry['below_error_bar']:.1f}%, above "
            f"{100 * entry['above']:.1f}% ± {100 * entry['above_error_bar']:.1f}% of present values, written at the "
            f"{edges}")


def holds_headline(report: dict) -> list[str]:
    """Headline lines for the largest measured ``<out-of-domain>`` and missing shares and any clipping."""
    lines = []
    holds = report.get("release_holds") or []
    for key, what in (("out_of_domain", "`<out-of-domain>`"), ("missing", "missing")):
        found = [(h["column"], h[key]) for h in holds if h.get(key) and h[key]["status"] == "measured"]
        if found:
            column, top = max(found, key=lambda kv: kv[1]["measured"])
            lines.append(f"- {what}: largest in `{column}`, {share_text(top)} of its rows in the release")
    clipped = [(h["column"], h["beyond_bounds"]) for h in holds if (h.get("beyond_bounds") or {}).get("status")
               == "estimated" and any(h["beyond_bounds"][s] > max(h["beyond_bounds"][f"{s}_error_bar"], OOD_NOTE)
                                      for s in ("below", "above"))]  # named where the estimate clears its noise
    if clipped:
        lines.append("- values beyond the bounds, written at the edge bins: " + "; ".join(
            f"`{c}` " + ", ".join(f"{s} {100 * b[s]:.1f}% ± {100 * b[f'{s}_error_bar']:.1f}%"
                                  for s in ("below", "above") if b[s] > b[f"{s}_error_bar"])
            for c, b in clipped) + " of present values (discovery's DP estimates)")
    return lines


def render_holds(report: dict) -> list[str]:
    """The 'What the release holds' section of report.md."""
    holds = report.get("release_holds") or []
    if not holds:
        return []
    lines = ["", "## What the release holds", "",
             "Per column, the share of `<out-of-domain>` and missing values in the release: the release's own noisy "
             "1-way counts, with a 95% error bar, and the synthetic table's share beside it (docs/report.md). Values "
             "beyond a column's bounds are clipped into its edge bins, where the release cannot tell them apart: "
             "their share is discovery's DP estimate, where this run drew the bounds.", "",
             "| column | `<out-of-domain>` | missing | beyond the bounds |", "|---|---|---|---|"]
    lines += [f"| {h['column']} | {share_text(h['out_of_domain'])} | {share_text(h['missing'])} | "
              f"{beyond_text(h['beyond_bounds'])} |" for h in holds]
    return lines


def render_report(report: dict, figures: dict | None = None) -> str:
    """Markdown for report.md (public figures only); ``figures``: the images' paths relative to the run folder."""
    lines = ["# privsynth DP report", "", f"*{report['visibility']}*", ""] + headline(report) + holds_headline(report)
    acc = report.get("accuracy") or {}
    lines += ["", "## Which marginals can I trust?", "",
              f"Each bound: with probability >= {acc.get('confidence', CONFIDENCE):.0%}, the total-variation distance "
              "between the synthetic table's marginal and the real one is at most this "
              f"({acc.get('coverage', '')}). {acc.get('applies', '')}. See docs/report.md.", ""]
    if acc.get("analysis"):
        lines += [f"Analysis: {acc['analysis']}; {acc['assumption']}.", ""]
    if figures:
        lines += [f"![pairs of columns]({figures['pairs']})", "", f"![privacy budget]({figures['budget']})", ""]
    lines += ["| column | 95% TV bound | fit to measurement (TV) | measurements |", "|---|---|---|---|"]
    for c in report.get("columns", []):
        fit = f"{c['fit_tv']:.4f}" if c["status"] == "bound" else "-"
        lines.append(f"| {c['column']} | {_bound_text(c)} | {fit} | {c.get('measurements', 0)} |")
    lines += render_holds(report)
    lines += rules_text(report)
    bounded = sorted((p for p in report.get("pairs", []) if p["status"] == "bound"), key=lambda p: -p["tv_bound"])
    if bounded:
        lines += ["", f"Loosest bounded pairs ({len(bounded)} bounded in all; every pair is in report.json):", "",
                  "| pair | 95% TV bound |", "|---|---|"]
        lines += [f"| {' x '.join(p['columns'])} | {_bound_text(p)} |" for p in bounded[:15]]
    if figures:
        lines += ["", "## Columns: synthetic vs the DP measurement", ""]
        lines += [f"![{c['column']}]({path})" for c, path in zip(report.get("columns", []), figures["columns"])]
    summary = report.get("summary")
    if summary:
        lines += ["", "## Fit to the mechanism's noisy measurements", "",
                  f"{summary['measurements']} measured marginals: mean TV {summary['mean_tv_to_measurements']:.4f} "
                  f"(noise alone would explain about {summary['mean_expected_tv_from_noise_alone']:.4f}); "
                  "largest excess "
                  f"on {', '.join(summary['largest_excess']['marginal'])}: TV {summary['largest_excess']['tv']:.4f} vs "
                  f"{summary['largest_excess']['expected_from_noise']:.4f} from noise (every one in report.json)."]
    found = report.get("discovery")
    if found:
        lines += ["", "## The discovered schema (this run had none)", "",
                  f"Discovery spent {100 * float(found['share_of_run'] or 0):.0f}% of the run's budget (DP column "
                  "facts, categories, bounds, codes); the schema is `schema.yaml` in this folder, reusable at no new "
                  f"cost. Dropped: {', '.join(found['dropped']) or 'none'}."]
        if found["out_of_domain"]:
            lines += ["", "Columns with values outside the discovered categories: discovery's DP estimate (share of "
                      "present values, what discovery expected) and what the release holds (`<out-of-domain>` share "
                      "of its rows; the two differ where the run reads a value otherwise than discovery did):", "",
                      "| column | discovery's estimate | in the release | keep them with |", "|---|---|---|---|"]
            lines += [f"| {o['column']} | {100 * o['share']:.1f}% | {share_text(o.get('in_release'))} | "
                      f"{o['keep_them_with']} |" for o in found["out_of_domain"]]
    fit = report.get("fit_to_release")
    if fit:
        lines += ["", "## Rounding: synthetic table vs the release it was drawn from", "",
                  "| k | mean TV | max TV |", "|---|---|---|"]
        lines += [f"| {k} | {v['mean_tv']:.4f} | {v['max_tv']:.4f} |" for k, v in fit.items()]
    return "\n".join(lines) + "\n"
