"""The explicit NON-DP peek (``--peek-without-dp``): exact values, labelled loudly wherever written."""

from __future__ import annotations

import numpy as np

from privsynth.discovery.dp_pass import value_counts
from privsynth.discovery.draft import ColumnDraft, DraftOptions, bins_for_rows

PEEK_LABEL = "NOT DP: exact values read by --peek-without-dp"
PEEK_MIN_KEPT_MASS = 0.5
PEEK_MAX_CATEGORIES = 50


def peek_pass(table, drafts: list[ColumnDraft], options: DraftOptions) -> None:
    """The explicit NON-DP peek: exact categories (the most frequent PEEK_MAX_CATEGORIES) and exact
    quantile bins between the exact min and max. Every entry it fills says so."""
    for d in drafts:
        c = d.column
        if c.identifier_reason is not None or c.kind not in ("integer", "float", "categorical"):
            continue
        values, counts = value_counts(table, c.name)
        if not values:
            continue
        d.comments = [x for x in d.comments if not x.startswith("TODO")]
        if c.kind == "categorical":
            order = np.argsort(-counts, kind="stable")[:PEEK_MAX_CATEGORIES]
            from privsynth.schema import MISSING_LABEL, OUT_OF_DOMAIN_LABEL

            cats = sorted(str(values[i]) for i in order if str(values[i]) not in (MISSING_LABEL, OUT_OF_DOMAIN_LABEL))
            mass = float(counts[order].sum() / counts.sum())
            d.entry["categories"] = cats
            d.entry["on_out_of_domain"] = "category"
            if mass < PEEK_MIN_KEPT_MASS:
                d.entry["categories"] = []  # a dropped column's exact values are not written
                d.entry["drop"] = True
                d.comments.append(f"drop ({PEEK_LABEL}): the top {len(cats)} values hold under "
                                  f"{100 * PEEK_MIN_KEPT_MASS:.0f}% of the rows: free text or very high cardinality")
            else:
                d.comments.append(f"{PEEK_LABEL}: categories are the exact most frequent values; replace them with "
                                  "public categories before a private run")
            continue
        x = np.asarray(values, dtype=np.float64)
        order = np.argsort(x)
        x, w = x[order], counts[order]
        cum = np.cumsum(w) / w.sum()
        bins = options.bins or bins_for_rows(float(w.sum()))
        inner = [float(x[np.searchsorted(cum, i / bins)]) for i in range(1, bins)]
        edges = sorted({float(x[0]), *inner, float(x[-1])})
        if c.kind == "integer":
            edges = sorted({round(e) for e in edges})
        if len(edges) < 2:
            edges = [edges[0], edges[0] + 1]
        d.entry["bounds"] = [edges[0], edges[-1]]
        d.entry["bins"] = edges
        d.comments.append(f"{PEEK_LABEL}: bounds are the exact min and max, edges exact quantiles; replace them "
                          "with public values before a private run")
