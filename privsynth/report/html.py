"""report.html: one self-contained page (images embedded as base64 PNG, inline CSS, no script, no link
out), so it opens offline and can be mailed or stored beside the release.

``render_html`` takes the DP report (public) and its figure files; ``render_audit_html`` the INTERNAL
audit, headed by its label. Text from the schema (column names, labels) is escaped.
"""

from __future__ import annotations

import base64
from html import escape
from pathlib import Path

from privsynth.report.uncertainty import NOT_MEASURED

STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:1100px;color:#222;
padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0}
td,th{border:1px solid #ddd;padding:.2em .5em;text-align:left}th{background:#f4f4f4}.nm{color:#888}
.internal{background:#fde2e1;border:2px solid #c0392b;padding:.8em;font-weight:bold}
.public{background:#e8f4ea;border:1px solid #6a9f6f;padding:.6em}figure{display:inline-block;margin:.4em}
img{max-width:100%;height:auto}figcaption{font-size:.8em;color:#555}
"""


def data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


def img(path: Path, alt: str, figure_id: str) -> str:
    return (f'<figure id="{escape(figure_id)}"><img class="report-figure" alt="{escape(alt)}" src="{data_uri(path)}">'
            f"<figcaption>{escape(alt)}</figcaption></figure>")


def page(title: str, body: list[str]) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>\n"
            + "\n".join(body) + "\n</body></html>\n")


def table(header: list[str], rows: list[list[str]]) -> str:
    """A table of already-escaped cells."""
    head = "".join(f"<th>{h}</th>" for h in header)
    return "<table><tr>" + head + "</tr>" + "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>"
                                                    for r in rows) + "</table>"


def _bound_cell(entry: dict) -> str:
    if entry["status"] != "bound":
        return f'<span class="nm">{escape(NOT_MEASURED)}</span>'
    text = f"{entry['tv_bound']:.3f}"
    if entry.get("levels") == "merged":
        text += " <small>(merged levels of " + escape(", ".join(entry["merged_columns"])) + ")</small>"
    return text


def render_html(report: dict, figures: dict, root: Path) -> str:
    """The DP report as one HTML page; ``figures`` holds paths relative to ``root`` (the run folder)."""
    acc = report.get("accuracy") or {}
    body = [f"<h1>privsynth DP report: {escape(report['mechanism'])}</h1>",
            f'<p class="public">{escape(report["visibility"])}. Privacy: {escape(str(report["privacy"]))}. '
            f'Synthetic rows: {report["synthetic_rows"]}.</p>',
            "<h2>Which columns and pairs can I trust?</h2>",
            f"<p>Each bound: with probability at least {acc.get('confidence', 0.95):.0%}, the total-variation distance "
            "between the synthetic table's marginal and the real one (as proportions) is at most this number "
            f"({escape(acc.get('coverage', ''))}). {escape(acc.get('applies', ''))}.</p>"]
    if acc.get("analysis"):
        body.append(f"<p>Analysis: {escape(acc['analysis'])}; {escape(acc.get('assumption') or '')}.</p>")
    for what in ("columns", "pairs"):
        s = acc.get(what)
        if s:
            median = f"; median bound {s['median_tv_bound']:.3f}" if s["median_tv_bound"] is not None else ""
            body.append(f"<p><b>{what}</b>: {s['bounded']} of {s['total']} bounded{median}; "
                        f"{s['not_measured']} not measured.</p>")
    body.append(img(root / figures["pairs"], "pairs of columns coloured by their 95% TV bound (grey: not measured)",
                    "figure-pairs"))
    body.append(img(root / figures["budget"], "privacy budget spent per stage", "figure-budget"))
    body.append("<h2>Columns</h2>")
    body.append(table(["column", "95% TV bound", "fit to the measurement (TV)", "measurements combined"],
                      [[escape(c["column"]), _bound_cell(c), f"{c['fit_tv']:.4f}" if c["status"] == "bound" else "-",
                        str(c.get("measurements", 0))] for c in report["columns"]]))
    for i, (c, path) in enumerate(zip(report["columns"], figures["columns"])):
        body.append(img(root / path, f"{c['column']}: synthetic vs the DP measurement", f"figure-column-{i}"))
    holds = report.get("release_holds") or []
    if holds:
        from privsynth.report.dp_report import beyond_text, share_text

        body.append("<h2>What the release holds</h2>")
        body.append("<p>Per column, the share of &lt;out-of-domain&gt; and missing values in the release: its own "
                    "noisy 1-way counts with a 95% error bar, the synthetic table's share beside it. Values beyond a "
                    "column's bounds are clipped into its edge bins (the release cannot tell them apart): discovery's "
                    "DP estimate, where this run drew the bounds.</p>")
        body.append(table(["column", "&lt;out-of-domain&gt;", "missing", "beyond the bounds"],
                          [[escape(h["column"]), escape(share_text(h["out_of_domain"])),
                            escape(share_text(h["missing"])), escape(beyond_text(h["beyond_bounds"]))] for h in holds]))
    body.append("<h2>Pairs of columns</h2>")
    rows = sorted(report["pairs"], key=lambda p: (p["status"] != "bound", -p.get("tv_bound", 0.0)))
    body.append(table(["pair", "95% TV bound"], [[escape(" x ".join(p["columns"])), _bound_cell(p)] for p in rows]))
    fits = report.get("fit_to_measurements") or []
    if fits:
        body.append("<h2>Fit to the mechanism's noisy measurements</h2>")
        body.append(table(["marginal", "cells", "noise", "scale", "TV to measurement", "expected from noise alone"],
                          [[escape(" x ".join(f["marginal"])), str(f["cells"]), escape(f["noise"]),
                            f"{f['noise_scale']:.3g}", f"{f['tv_to_measurement']:.4f}",
                            f"{f['expected_tv_from_noise_alone']:.4f}"] for f in fits]))
    return page("privsynth DP report", body)
