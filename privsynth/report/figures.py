"""The DP report's pictures (public): drawn from the report's own public figures only.

Every function here takes what ``dp_report`` put in report.json (DP measurements, their error bars,
the synthetic table's proportions, privacy.json's spend) and nothing else, so no picture can carry a
value of the real rows. matplotlib's Agg canvas is used directly (no pyplot): no global backend state,
safe in worker threads. Figures are small PNGs (72 dpi); the pairs heatmap is one image whatever the
number of columns.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np

from privsynth.io import atomic_write_bytes

DPI = 72
MAX_LABEL_CHARS = 18
UNMEASURED_COLOUR = "#d9d9d9"


def figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def save(fig, path: Path, *, private: bool = False) -> Path:
    """The PNG, written atomically (a reader never sees half an image); no version string in the file.

    ``private``: a picture of the real data (the internal audit), created owner-only (0600, its folder 0700).
    """
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    atomic_write_bytes(path, buffer.getvalue(), private=private)
    return path


def short(label: object) -> str:
    text = str(label)
    return text if len(text) <= MAX_LABEL_CHARS else text[: MAX_LABEL_CHARS - 1] + "\u2026"


def file_name(index: int, name: str, prefix: str = "column") -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "column"
    return f"{prefix}-{index:02d}-{safe[:60]}.png"


def bars(ax, labels: list[str], series: list[tuple[str, list[float], str]], errors: dict | None = None) -> None:
    """Grouped bars, one group per level; ``errors`` maps a series name to its per-level error bar."""
    n, k = len(labels), len(series)
    x = np.arange(n)
    width = 0.8 / k
    for i, (name, values, colour) in enumerate(series):
        err = (errors or {}).get(name)
        ax.bar(x + (i - (k - 1) / 2) * width, values, width=width, label=name, color=colour,
               yerr=err, error_kw={"elinewidth": 0.8, "capsize": 1.5, "ecolor": "#333333"} if err is not None else None)
    many = n > 6 or any(len(lbl) > 8 for lbl in labels)
    ax.set_xticks(x)
    ax.set_xticklabels(labels, rotation=90 if many else 0, fontsize=7 if n > 20 else 8)
    ax.set_xlim(-0.6, n - 0.4)
    ax.set_ylabel("proportion")
    ax.legend(fontsize=7, frameon=False)


def column_figure(column: dict, path: Path) -> Path:
    """The synthetic proportions beside the DP measurement, with its 95% per-level error bars."""
    labels = [short(x) for x in column["labels"]]
    fig = figure(min(12.0, max(4.0, 0.3 * len(labels) + 1.5)), 3.4)
    ax = fig.add_subplot()
    series = [("synthetic", column["synthetic"], "#dd8452")]
    errors = None
    if column.get("measured") is not None:
        series.append(("DP measurement (95% bars)", column["measured"], "#4c72b0"))
        errors = {"DP measurement (95% bars)": column["error_bar"]}
    bars(ax, labels, series, errors)
    ax.set_ylim(bottom=0)
    bound = column.get("tv_bound")
    note = f"TV bound {bound:.3f} (95%)" if bound is not None else "not measured: no accuracy statement"
    merged = " [merged levels]" if column.get("levels") == "merged" else ""
    ax.set_title(f"{column['column']}{merged}: {note}", fontsize=9)
    return save(fig, path)


def pairs_heatmap(names: list[str], columns: list[dict], pairs: list[dict], path: Path) -> Path:
    """Every pair of columns coloured by its TV bound (diagonal: the column's own); grey: not measured."""
    from matplotlib import colormaps

    d = len(names)
    index = {name: i for i, name in enumerate(names)}
    grid = np.full((d, d), np.nan)
    for c in columns:
        if c["status"] == "bound":
            grid[index[c["column"]], index[c["column"]]] = c["tv_bound"]
    for p in pairs:
        if p["status"] == "bound":
            i, j = index[p["columns"][0]], index[p["columns"][1]]
            grid[i, j] = grid[j, i] = p["tv_bound"]
    side = min(11.0, max(4.5, 0.17 * d + 3.0))
    fig = figure(side + 1.2, side)
    ax = fig.add_subplot()
    cmap = colormaps["viridis_r"].with_extremes(bad=UNMEASURED_COLOUR)
    # The scale stops at the 90th percentile so one loose (or vacuous) bound does not wash out the rest.
    bounded = grid[np.isfinite(grid)]
    top = max(0.05, float(np.percentile(bounded, 90))) if bounded.size else 1.0
    image = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=0.0, vmax=top, interpolation="nearest")
    if d <= 20:
        for i, j in zip(*np.nonzero(np.isfinite(grid))):
            ax.text(j, i, f"{grid[i, j]:.2f}".lstrip("0"), ha="center", va="center", fontsize=6,
                    color="white" if grid[i, j] > 0.6 * top else "black")
    fontsize = 8 if d <= 20 else max(4, int(8 - d / 12))
    ax.set_xticks(np.arange(d))
    ax.set_yticks(np.arange(d))
    ax.set_xticklabels([short(n) for n in names], rotation=90, fontsize=fontsize)
    ax.set_yticklabels([short(n) for n in names], fontsize=fontsize)
    extend = "max" if bounded.size and top < bounded.max() else "neither"
    bar = fig.colorbar(image, ax=ax, fraction=0.045, pad=0.03, extend=extend)
    bar.set_label("95% bound on the TV distance to the real marginal", fontsize=8)
    measured = int(np.isfinite(grid[np.triu_indices(d, 1)]).sum())
    ax.set_title(f"pairs: {measured} of {d * (d - 1) // 2} bounded; grey: not measured", fontsize=9)
    return save(fig, path)


def budget_figure(budget: dict, path: Path) -> Path:
    """Privacy spent per stage (rho, zCDP), and, where the mechanism publishes it, per step inside it."""
    stages = budget["stages"]
    steps = budget.get("mechanism_steps") or []
    fig = figure(7.0, 3.2 if not steps else 5.2)
    ax = fig.add_subplot(2 if steps else 1, 1, 1)
    names = [s["stage"] for s in stages]
    values = [s["rho"] for s in stages]
    ax.barh(np.arange(len(names)), values, color="#4c72b0")
    for i, v in enumerate(values):
        ax.text(v, i, f" {v:.4g}" if v > 0 else " free", va="center", fontsize=7)
    ax.set_yticks(np.arange(len(names)))
    ax.set_yticklabels(names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("rho (zCDP) spent", fontsize=8)
    ax.set_title(budget.get("statement") or "privacy spent", fontsize=9)
    if steps:
        ax2 = fig.add_subplot(2, 1, 2)
        cumulative = np.cumsum([s["rho"] for s in steps])
        ax2.step(np.arange(1, len(steps) + 1), cumulative, where="post", color="#dd8452")
        ax2.axhline(budget["total_rho"], color="#333333", linewidth=0.8, linestyle="--", label="total")
        ax2.set_xlabel("mechanism step (1: initial measurements, then each round)", fontsize=8)
        ax2.set_ylabel("cumulative rho", fontsize=8)
        ax2.legend(fontsize=7, frameon=False)
    return save(fig, path)


def write_public_figures(report: dict, folder: Path) -> dict[str, list[str] | str]:
    """All the DP report's pictures into ``folder``; returns their paths relative to its parent."""
    folder.mkdir(parents=True, exist_ok=True)
    rel = folder.name
    out: dict = {"columns": []}
    names = [c["column"] for c in report["columns"]]
    out["pairs"] = f"{rel}/{pairs_heatmap(names, report['columns'], report['pairs'], folder / 'pairs.png').name}"
    out["budget"] = f"{rel}/{budget_figure(report['budget'], folder / 'budget.png').name}"
    for i, column in enumerate(report["columns"]):
        out["columns"].append(f"{rel}/{column_figure(column, folder / file_name(i, column['column'])).name}")
    return out
