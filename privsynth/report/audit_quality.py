"""INTERNAL (not DP): the audit's quality report and pictures, and the check of the DP report's bounds.

Everything here reads the real rows, so nothing it produces may be published or sent to Prefect.

* Column shapes and column-pair trends in the shape of sdmetrics' quality report (its
  ``TVComplement`` and ``ContingencySimilarity`` metrics: 1 - total-variation distance, per column and per
  pair), computed here on the release's discretisation (every column is categorical at that point, so
  sdmetrics' numeric variants do not apply and it is not needed as a dependency). The
  independent-columns baseline (the product of the real 1-way marginals) is scored beside the synthetic
  table for pairs: a release that does not beat it has learnt no dependence.
* Coverage: for every column and pair the public report bounds, the real TV at the bound's
  granularity, and whether the bound held (the coverage benchmark reads this).
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np

from privsynth.report.figures import bars, figure, file_name, save, short
from privsynth.report.html import img, page, table
from privsynth.schema.encoding import Domain
from privsynth.schema.workload import marginal_counts, merge_levels

NOTICE = ("INTERNAL: computed from the real data; NOT differentially private. Never publish it, never send "
          "it to Prefect.")


def _proportions(codes: np.ndarray, domain: Domain, marginal: tuple[int, ...], groups=None) -> np.ndarray:
    counts = marginal_counts(codes, domain, marginal).reshape([domain.sizes[a] for a in marginal])
    if groups is not None and any(g is not None for g in groups):
        counts = merge_levels(counts, groups)
    counts = counts.ravel()
    return counts / max(counts.sum(), 1.0)


def _tv(p: np.ndarray, q: np.ndarray) -> float:
    return float(0.5 * np.abs(p - q).sum())


def column_shapes(real: np.ndarray, synthetic: np.ndarray, domain: Domain) -> dict:
    """sdmetrics' 'Column Shapes' on level codes: per column 1 - TV(real, synthetic), and their mean."""
    scores = {domain.names[a]: 1.0 - _tv(_proportions(real, domain, (a,)), _proportions(synthetic, domain, (a,)))
              for a in range(domain.n_attributes)}
    return {"metric": "TVComplement (1 - TV) on level codes", "score": float(np.mean(list(scores.values()))),
            "columns": scores}


def column_pair_trends(real: np.ndarray, synthetic: np.ndarray, domain: Domain) -> dict:
    """sdmetrics' 'Column Pair Trends' on level codes: per pair 1 - TV of the 2-way table (ContingencySimilarity),
    for the synthetic table and for the independent-columns baseline."""
    one_way = [_proportions(real, domain, (a,)) for a in range(domain.n_attributes)]
    pairs = []
    for a, b in itertools.combinations(range(domain.n_attributes), 2):
        p = _proportions(real, domain, (a, b))
        pairs.append({"columns": [domain.names[a], domain.names[b]],
                      "synthetic": 1.0 - _tv(p, _proportions(synthetic, domain, (a, b))),
                      "independent": 1.0 - _tv(p, np.multiply.outer(one_way[a], one_way[b]).ravel())})
    mean = lambda key: float(np.mean([p[key] for p in pairs])) if pairs else None  # noqa: E731
    return {"metric": "ContingencySimilarity (1 - TV of the 2-way table) on level codes",
            "score": mean("synthetic"), "independent_score": mean("independent"), "pairs": pairs}


def bound_coverage(report: dict, real: np.ndarray, synthetic: np.ndarray, domain: Domain) -> dict:
    """For every bounded column and pair of the DP report: the real TV at the bound's granularity, covered or not."""
    index = {name: i for i, name in enumerate(domain.names)}
    checks = []
    entries = [((index[c["column"]],), c) for c in report.get("columns", [])] + \
        [(tuple(index[n] for n in p["columns"]), p) for p in report.get("pairs", [])]
    for marginal, entry in entries:
        if entry.get("status") != "bound":
            continue
        groups = entry.get("level_groups")
        real_tv = _tv(_proportions(real, domain, marginal, groups), _proportions(synthetic, domain, marginal, groups))
        checks.append({"columns": [domain.names[a] for a in marginal], "k": len(marginal),
                       "tv_bound": entry["tv_bound"], "real_tv": real_tv,
                       "covered": bool(real_tv <= entry["tv_bound"] + 1e-12)})
    out: dict = {"checks": checks}
    for k in (1, 2):
        mine = [c for c in checks if c["k"] == k]
        out[str(k)] = {"bounded": len(mine), "covered": sum(c["covered"] for c in mine),
                       "fraction": (sum(c["covered"] for c in mine) / len(mine)) if mine else None}
    return out


def audit_column_figure(name: str, labels, real, synthetic, measured, path: Path) -> Path:
    labels = [short(x) for x in labels]
    fig = figure(min(12.0, max(4.0, 0.35 * len(labels) + 1.5)), 3.4)
    ax = fig.add_subplot()
    series = [("real (INTERNAL)", real, "#4c72b0"), ("synthetic", synthetic, "#dd8452")]
    if measured is not None:
        series.append(("DP measurement", measured, "#55a868"))
    bars(ax, labels, series)
    ax.set_title(f"{name}  (TV {_tv(np.asarray(real), np.asarray(synthetic)):.3f})  INTERNAL", fontsize=9)
    return save(fig, path, private=True)  # it shows the real data


def pair_trends_figure(names: list[str], trends: dict, path: Path) -> Path:
    """Two heatmaps: 1 - TV per pair for the synthetic table and for the independent baseline."""
    d = len(names)
    index = {n: i for i, n in enumerate(names)}
    side = min(8.0, max(3.5, 0.13 * d + 2.5))
    fig = figure(2 * side + 1.0, side)
    for panel, key in enumerate(("synthetic", "independent")):
        grid = np.full((d, d), np.nan)
        for p in trends["pairs"]:
            i, j = index[p["columns"][0]], index[p["columns"][1]]
            grid[i, j] = grid[j, i] = p[key]
        ax = fig.add_subplot(1, 2, panel + 1)
        image = ax.imshow(grid, cmap="RdYlGn", vmin=0.5, vmax=1.0, interpolation="nearest")
        fontsize = 8 if d <= 20 else max(4, int(8 - d / 12))
        ax.set_xticks(np.arange(d))
        ax.set_yticks(np.arange(d))
        ax.set_xticklabels([short(n) for n in names], rotation=90, fontsize=fontsize)
        ax.set_yticklabels([short(n) for n in names], fontsize=fontsize)
        score = trends["score"] if key == "synthetic" else trends["independent_score"]
        ax.set_title(f"{key}: pair trends {score:.3f} (INTERNAL)", fontsize=9)
        fig.colorbar(image, ax=ax, fraction=0.045, pad=0.03)
    return save(fig, path, private=True)  # it shows the real data


def column_shapes_figure(shapes: dict, path: Path) -> Path:
    names = list(shapes["columns"])
    fig = figure(7.0, max(2.5, 0.18 * len(names) + 1.2))
    ax = fig.add_subplot()
    ax.barh(np.arange(len(names)), [shapes["columns"][n] for n in names], color="#dd8452")
    ax.set_yticks(np.arange(len(names)))
    ax.set_yticklabels([short(n) for n in names], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_title(f"column shapes (1 - TV): {shapes['score']:.3f}  INTERNAL", fontsize=9)
    return save(fig, path, private=True)  # it shows the real data


def coverage_figure(coverage: dict, path: Path) -> Path:
    """Real TV against the public 95% bound, per bounded marginal: points under the diagonal are covered."""
    fig = figure(5.0, 4.6)
    ax = fig.add_subplot()
    for k, colour in ((1, "#4c72b0"), (2, "#dd8452")):
        pts = [c for c in coverage["checks"] if c["k"] == k]
        if pts:
            s = coverage[str(k)]
            ax.scatter([c["tv_bound"] for c in pts], [c["real_tv"] for c in pts], s=10, color=colour,
                       label=f"{k}-way: {s['covered']}/{s['bounded']} covered")
    top = max([c["tv_bound"] for c in coverage["checks"]] + [0.05])
    ax.plot([0, top], [0, top], color="#333333", linewidth=0.8)
    ax.set_xlabel("public 95% TV bound", fontsize=8)
    ax.set_ylabel("real TV (INTERNAL)", fontsize=8)
    ax.set_title("do the DP report's bounds hold?  INTERNAL", fontsize=9)
    ax.legend(fontsize=7, frameon=False)
    return save(fig, path, private=True)  # it shows the real data


def write_quality(real: np.ndarray, synthetic: np.ndarray, schema, domain: Domain, report: dict | None,
                  out_dir: Path) -> dict:
    """The quality section of the audit (dict) and its pictures, plus audit.html, into ``out_dir``."""
    shapes = column_shapes(real, synthetic, domain)
    trends = column_pair_trends(real, synthetic, domain)
    coverage = bound_coverage(report, real, synthetic, domain) if report else None
    fig_dir = out_dir / "figures"
    fig_dir.mkdir(mode=0o700, exist_ok=True)  # not DP: owner-only, created with its mode
    figures = {"column_shapes": column_shapes_figure(shapes, fig_dir / "column-shapes.png"),
               "pair_trends": pair_trends_figure(list(domain.names), trends, fig_dir / "pair-trends.png")}
    if coverage and coverage["checks"]:
        figures["coverage"] = coverage_figure(coverage, fig_dir / "coverage.png")
    public_columns = {c["column"]: c for c in (report or {}).get("columns", [])}
    columns = []
    for a, col in enumerate(schema.kept_columns):
        pub = public_columns.get(col.name) or {}
        measured = pub.get("measured") if pub.get("levels") == "original" else None
        columns.append(audit_column_figure(col.name, col.labels, _proportions(real, domain, (a,)).tolist(),
                                           _proportions(synthetic, domain, (a,)).tolist(), measured,
                                           fig_dir / file_name(a, col.name, "audit-column")))
    quality = {"visibility": "internal", "notice": NOTICE, "column_shapes": shapes, "column_pair_trends": trends,
               "bound_coverage": coverage,
               "figures": {k: f"figures/{v.name}" for k, v in figures.items()} | {
                   "columns": [f"figures/{p.name}" for p in columns]}}
    body = [f'<h1>INTERNAL: synthetic data quality audit ({schema.name})</h1>', f'<p class="internal">{NOTICE}</p>',
            f"<p>Column shapes {shapes['score']:.3f}; column pair trends {trends['score'] or 0:.3f} "
            f"(independent-columns baseline {trends['independent_score'] or 0:.3f}).</p>"]
    if coverage:
        body.append(table(["k", "bounded", "covered", "fraction"],
                          [[k, str(coverage[k]["bounded"]), str(coverage[k]["covered"]),
                            "-" if coverage[k]["fraction"] is None else f"{coverage[k]['fraction']:.3f}"]
                           for k in ("1", "2")]))
    for key, path in figures.items():
        body.append(img(path, key.replace("_", " "), f"figure-{key}"))
    for i, path in enumerate(columns):
        body.append(img(path, f"{domain.names[i]}: real, synthetic, DP measurement", f"figure-column-{i}"))
    from privsynth.io import atomic_write_bytes

    atomic_write_bytes(out_dir / "audit.html", page("INTERNAL privsynth audit", body).encode(), private=True)
    return quality
