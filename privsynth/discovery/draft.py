"""The draft: options, each column's entry, and the DP pass (charged once, before any value is read).

Without an epsilon NOTHING about the values is read: categories, bounds and bins are left as
``# TODO`` for the user to fill from documentation. With an epsilon the DP pass fills every column so
that ``privsynth run`` accepts the file as written: categories (``categories``), bounds and edges
(``bounds``), small integer domains kept exact, short date spans cut at calendar boundaries; public
bounds and categories given by the user take precedence and are never read. The budget is split by
need (``budget``) and written in the file; every DP value is labelled with its cost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from privsynth.privacy.accounting import DEFAULT_DELTA, PrivacyCost
from privsynth.privacy.spending import rho_allowance
from privsynth.run.parameters import ParameterError
from privsynth.discovery import bounds as B
from privsynth.discovery.categories import THRESHOLD_DELTA_FRACTION, dp_categories
from privsynth.discovery.declared import DeclaredColumn

DEFAULT_BINS = 8
NUMERIC = ("integer", "float")
TEMPORAL = ("date", "timestamp")


@dataclass(frozen=True)
class DraftOptions:
    """What the draft reads and spends. ``epsilon`` None: nothing about the values is read."""

    name: str
    epsilon: float | None = None
    delta: float = DEFAULT_DELTA
    dataset: str | None = None
    ledger: str | None = None
    bounds: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # PUBLIC bounds (numbers; ISO for dates)
    categories: dict[str, tuple[str, ...]] = field(default_factory=dict)  # PUBLIC categories
    bins: int = DEFAULT_BINS
    require_budget: bool = True
    peek_without_dp: bool = False  # exact categories and bins from the rows: NOT DP, labelled loudly
    # TESTING ONLY, as a run's --seed: reproducible numpy noise derived from the seed and the draft's release
    # key, not hardened against floating-point attacks. None: OpenDP's samplers.
    seed: int | None = None


@dataclass
class ColumnDraft:
    column: DeclaredColumn
    entry: dict[str, Any]
    comments: list[str]
    spent: dict[str, float] = field(default_factory=dict)  # rho per measurement


def check_options(options: DraftOptions, columns: list[DeclaredColumn]) -> None:
    if not options.name or not str(options.name).strip():
        raise ParameterError("--name must be a non-empty schema name")
    if options.epsilon is not None and not (isinstance(options.epsilon, (int, float)) and math.isfinite(options.epsilon)
                                            and options.epsilon > 0):
        raise ParameterError(f"--epsilon must be a finite number > 0, got {options.epsilon!r}")
    if options.peek_without_dp and options.epsilon is not None:
        raise ParameterError("--peek-without-dp and --epsilon exclude each other: a draft is DP or a labelled non-DP peek")
    if not (2 <= options.bins <= 100):
        raise ParameterError(f"--bins must be between 2 and 100, got {options.bins}")
    known = {c.name: c for c in columns}
    for col in options.bounds:
        if col not in known:
            raise ParameterError(f"--bounds: the source has no column {col!r}")
        if known[col].kind not in (*NUMERIC, *TEMPORAL):
            raise ParameterError(f"--bounds: column {col!r} is not numeric or temporal (declared {known[col].declared})")
        public_bounds(known[col], options)  # refuses bad values
    for col, cats in options.categories.items():
        if col not in known or known[col].kind != "categorical":
            raise ParameterError(f"--categories: the source has no categorical column {col!r}")
        if not cats:
            raise ParameterError(f"--categories {col}: give at least one value")


def public_bounds(c: DeclaredColumn, options: DraftOptions) -> tuple[float, float] | None:
    """A column's PUBLIC bounds in its unit (given by the user), or None. A constant's bounds (low == high)
    are widened to one integer step for integer and temporal columns."""
    if c.name not in options.bounds:
        return None
    from privsynth.schema import temporal

    low, high = options.bounds[c.name]
    try:
        if c.kind in TEMPORAL:
            low, high = temporal.to_unit(low, c.kind), temporal.to_unit(high, c.kind)
        low, high = float(low), float(high)
    except (TypeError, ValueError):
        raise ParameterError(f"--bounds {c.name}: expected LOW:HIGH in the column's type, got {low}:{high}") from None
    if c.kind != "float" and low == high and math.isfinite(low):
        high = low + 1.0
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ParameterError(f"--bounds {c.name}: expected finite LOW <= HIGH, got {low}:{high}")
    return low, high


def draft_cost(epsilon: float, delta: float, n_categorical: int) -> PrivacyCost:
    """The draft's charge: rho, the largest that fits (epsilon, delta) in zCDP, with the thresholds' note."""
    rho = rho_allowance(epsilon, delta)
    notes = ["schema draft: Gaussian histograms (values, log-scale and fine grids) and thresholds"]
    if n_categorical:
        notes.append(f"categorical thresholds add at most {THRESHOLD_DELTA_FRACTION * delta:.3g} to delta "
                     f"(total, over {n_categorical} column(s)), not recorded in rho")
    return PrivacyCost.zcdp(rho, f"schema draft: {rho:.6g}-zCDP", tuple(notes))


def declared_entry(c: DeclaredColumn, csv_sniffed: bool) -> ColumnDraft:
    """A column's entry from its declared type alone (TODOs where a domain is needed)."""
    entry: dict[str, Any] = {"name": c.name}
    comments: list[str] = []
    how = "type inferred by DuckDB's CSV sniffer" if csv_sniffed else "declared type"
    if c.kind is None:
        entry.update(type="categorical", drop=True)
        comments.append(f"{how} {c.declared} has no privsynth column type: dropped (its values were not read)")
        return ColumnDraft(c, entry, comments)
    entry["type"] = c.kind
    comments.append(f"{how}: {c.declared}")
    if c.identifier_reason:
        entry["drop"] = True
        comments.append(f"drop: {c.identifier_reason}")
        return ColumnDraft(c, entry, comments)
    if c.nullable:
        entry["nullable"] = True
    if c.kind == "categorical":
        entry["categories"] = []
        comments.append("TODO: the public list of categories (from documentation), e.g. categories: [a, b, c]; "
                        "or re-draft with --epsilon for a DP list; free text or one value per row: set drop: true")
        entry["on_out_of_domain"] = "fail"
    elif c.kind in NUMERIC:
        entry["bounds"] = None
        entry["bins"] = None
        comments.append("TODO: public bounds and bin edges from documentation, e.g. bounds: [0, 100] and "
                        "bins: [0, 25, 50, 75, 100]; or re-draft with --epsilon for DP bounds and edges")
    elif c.kind in TEMPORAL:
        entry["bounds"] = None
        entry["bin_by"] = "month"
        comments.append("TODO: public bounds [first, last] as ISO dates from documentation, e.g. bounds: "
                        "['2015-01-01', '2024-12-31']; bin_by: year | quarter | month | week | day; or re-draft "
                        "with --epsilon for DP bounds and calendar bins")
    return ColumnDraft(c, entry, comments)


def apply_public(d: ColumnDraft, options: DraftOptions) -> None:
    """Public categories and bounds given by the user fill the entry (never read, never DP)."""
    c = d.column
    if c.name in options.categories:
        d.entry["categories"] = list(options.categories[c.name])
        d.entry["on_out_of_domain"] = "category"
        _settle(d, "PUBLIC (you gave --categories): other values become <out-of-domain>")
    elif c.name in options.bounds and c.kind == "integer":
        low, high = public_bounds(c, options)
        if high - low <= B.SMALL_INTEGER_DOMAIN:
            _numeric_entry(d, B.FineResult(low, high, tuple(np.arange(low, high + 1.0)), True), dp=())
            _settle(d, "PUBLIC (you gave --bounds): one level per value")


def _settle(d: ColumnDraft, comment: str) -> None:
    d.comments = [x for x in d.comments if not x.startswith("TODO")] + [comment]
    d.entry["settled"] = True


def needs(d: ColumnDraft, options: DraftOptions) -> str | None:
    """The first DP measurement a column needs: categories, bounds, edges (bounds public), or None."""
    c, e = d.column, d.entry
    if e.get("drop") or e.get("settled") or c.kind in (None, "boolean"):
        return None
    if c.kind == "categorical":
        return "categories"
    return "edges" if c.name in options.bounds else "bounds"


def _numeric_entry(d: ColumnDraft, fine: B.FineResult, dp: tuple[str, ...]) -> None:
    c = d.column
    from privsynth.schema import temporal

    if c.kind in TEMPORAL:
        fmt = lambda x: temporal.format_unit(x, c.kind)
        d.entry["bounds"] = [fmt(fine.low), fmt(fine.high)]
        unit = calendar_unit(fine.low, fine.high, c.kind)
        if unit is not None:
            d.entry.pop("bins", None)
            d.entry["bin_by"] = unit
        else:
            d.entry.pop("bin_by", None)
            d.entry["bins"] = [fmt(x) for x in fine.edges]
    else:
        cast = int if c.kind == "integer" else float
        d.entry["bounds"] = [cast(fine.low), cast(fine.high)]
        d.entry["bins"] = [cast(x) for x in fine.edges]
    d.entry["on_out_of_domain"] = "clip"
    if dp:
        d.entry["dp_released"] = list(dp)


def calendar_unit(low: float, high: float, kind: str) -> str | None:
    """The natural calendar bins of a short span (None: a long span gets DP quantile edges)."""
    days = (high - low) / (1.0 if kind == "date" else 86_400.0)
    if days <= 62:
        return "day"
    if days <= 3 * 366:
        return "month"
    if days <= 12 * 366:
        return "quarter"
    if days <= 40 * 366:
        return "year"
    return None


def categorical_release(d: ColumnDraft, values: list, counts: np.ndarray, rho: float, delta_tau: float, noise) -> None:
    from privsynth.schema import MISSING_LABEL, OUT_OF_DOMAIN_LABEL

    release = dp_categories([str(v) for v in values], counts, rho, delta_tau, noise)
    d.spent["categories"] = rho
    d.comments = [x for x in d.comments if not x.startswith("TODO")]
    cats = [v for v in release.categories if v not in (MISSING_LABEL, OUT_OF_DOMAIN_LABEL)]
    if not cats:
        d.entry["categories"] = []
        d.entry["drop"] = True
        d.comments.append(f"drop: no value passed the threshold of the DP histogram (rho {rho:.4g}): free text, very "
                          "high cardinality, or too few rows for this budget; give public --categories to keep it")
        return
    d.entry["categories"] = cats
    d.entry["on_out_of_domain"] = "category"
    d.entry["dp_released"] = ["categories"]
    d.comments.append(f"DP (rho {rho:.4g}): categories are the values whose noisy count passed the threshold; every "
                      "other value becomes <out-of-domain>. Add public categories it missed")


def round_one_bounds(d: ColumnDraft, values: np.ndarray, counts: np.ndarray, rho: float,
                     noise) -> B.Bounds | None:
    """Round 1 of a numeric or temporal column: its DP bounds; None: too few values, proposed dropped."""
    c = d.column
    edges = B.year_edges(c.kind) if c.kind in TEMPORAL else B.log_edges()
    noisy, sigma = B.noisy_cells(B.cell_counts(values, counts, edges), rho, noise)
    d.spent["bounds"] = rho
    found = B.coarse_bounds(noisy, sigma, edges, integer=c.kind != "float")
    if found is None:
        _drop(d, f"drop: no cell of the DP histogram for its bounds (rho {rho:.4g}) passed the threshold: "
                 "too few non-missing values to draft; give public --bounds to keep it")
        return None
    return found


def _drop(d: ColumnDraft, reason: str) -> None:
    d.entry["drop"] = True
    for key in ("bounds", "bins", "bin_by", "on_out_of_domain", "dp_released"):
        d.entry.pop(key, None)
    d.comments = [x for x in d.comments if not x.startswith("TODO")] + [reason]


def round_two_edges(d: ColumnDraft, values: np.ndarray, counts: np.ndarray, rho: float, coarse: B.Bounds,
                    bins: int, noise, public: bool) -> None:
    """Round 2: a hierarchy of histograms over a fine public grid, read out at the finest level the noise
    supports (``bounds.fine_result``)."""
    c = d.column
    integer = c.kind != "float"
    if c.kind in TEMPORAL:
        cell_edges = B.calendar_edges(coarse.low, coarse.high, c.kind, B.CALENDAR_CELLS)
    else:
        cell_edges = B.fine_edges(coarse.low, coarse.high, integer)
    levels = B.measure_levels(values, counts, cell_edges, rho, noise)
    d.spent["edges"] = rho
    fine = B.fine_result(levels, c.kind == "integer", bins, coarse)
    if fine is None and not public:
        _drop(d, f"drop: no cell of either DP histogram (rho {d.spent.get('bounds', 0):.4g} and {rho:.4g}) passed the "
                 "threshold: too few non-missing values to draft; give public --bounds to keep it")
        return
    if fine is None:  # public bounds: equal-width bins inside them
        fine = B.FineResult(coarse.low, coarse.high, tuple(np.linspace(coarse.low, coarse.high, bins + 1)), False)
    if public:
        fine = B.FineResult(coarse.low, coarse.high, tuple(sorted({coarse.low, coarse.high,
                                                                   *(e for e in fine.edges if coarse.low < e < coarse.high)})),
                            fine.small_domain)
    _numeric_entry(d, fine, ("bins",) if public else ("bounds", "bins"))
    d.comments = [x for x in d.comments if not x.startswith("TODO")]
    what = ("one level per value" if fine.small_domain else
            f"calendar bins ({d.entry['bin_by']})" if "bin_by" in d.entry else f"{len(fine.edges) - 1} DP quantile bins")
    src = "PUBLIC bounds (you gave --bounds)" if public else f"DP bounds (rho {d.spent.get('bounds', 0):.4g})"
    d.comments.append(f"{src}; {what} from DP histograms on a fine public grid (rho {rho:.4g}); values outside "
                      "the bounds are clipped")


def numeric_values(kind: str, raw: list) -> np.ndarray:
    """Distinct values in the column's unit (temporal: days or seconds since the epoch, UTC, as the encoder)."""
    if kind in TEMPORAL:
        import pandas as pd

        from privsynth.schema import temporal

        values, _ = temporal.values_in_unit(pd.Series(raw), kind)
        return np.nan_to_num(values, nan=0.0)
    return np.asarray([float(v) for v in raw], dtype=np.float64)
