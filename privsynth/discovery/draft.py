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
from enum import Enum
from typing import Any

import numpy as np

from privsynth.discovery import bounds as B
from privsynth.discovery.beyond import BeyondBounds
from privsynth.discovery.categories import THRESHOLD_DELTA_FRACTION
from privsynth.discovery.declared import DeclaredColumn
from privsynth.discovery.public import PublicColumn, PublicFacts, from_flags
from privsynth.errors import ParameterError
from privsynth.privacy.accounting import DEFAULT_DELTA, PrivacyCost
from privsynth.privacy.spending import rho_allowance

DEFAULT_BINS = 8  # quantile bins of a number column of up to BINS_ROWS values; beyond, more (``bins_for_rows``)
BINS_ROWS = 10_000
BINS_COLUMNS = 48  # ... in a table of this many columns; fewer columns, more bins
MAX_BINS_BY_ROWS = 16
NUMERIC = ("integer", "float")
TEMPORAL = ("date", "timestamp")


def bins_for_rows(present: float, epsilon: float | None = None, delta: float = DEFAULT_DELTA,
                  columns: int | None = None) -> int:
    """Quantile bins for a number column of about ``present`` values (a DP estimate: post-processing) in a
    release at (``epsilon``, ``delta``) (None: as at epsilon 1) of ``columns`` columns (public; None: as at
    BINS_COLUMNS): DEFAULT_BINS up to BINS_ROWS values at epsilon 1 and BINS_COLUMNS columns, growing as
    sqrt(rows) * (rho / columns)^(1/4) (rho relative to epsilon 1's at the same delta), between DEFAULT_BINS
    and MAX_BINS_BY_ROWS.

    Why: a reader scores the release on bins of their own (documentation's round figures), and inside one of
    our bins decoding draws a value without regard to the other columns, so the error at a reader's edges that
    cut our bins falls as 1/bins, while the noise the mechanism's marginals carry, relative to a bin's rows,
    grows as bins * sigma / rows; their sum is least at bins proportional to sqrt(rows / sigma). The mechanism
    spreads rho over rounds in proportion to the columns (aim: 4 per column), so sigma goes as
    sqrt(columns / rho). Measured (benchmarks/README.md, round 5 sessions 11 and 14), 2-way error / independent
    columns', at epsilon 1: 16 bins against 8 gave 0.30 against 0.35 on 28,867 rows and 8 columns, 0.127
    against 0.142 on 51,920 rows and 14 columns (9 seeds each); on 10,000 rows and 4 columns, 0.245 against
    0.281 (40 paired seeds), where 11,598 rows and 47 columns lost with 16 bins against 9 (0.665 against 0.638,
    8 seeds)."""
    rows = max(float(present), 0.0)
    budget = 1.0 if epsilon is None else (rho_allowance(epsilon, delta) / rho_allowance(1.0, delta)) ** 0.25
    width = 1.0 if columns is None else (BINS_COLUMNS / max(int(columns), 1)) ** 0.25
    target = DEFAULT_BINS * math.sqrt(rows / BINS_ROWS) * budget * width
    return int(min(MAX_BINS_BY_ROWS, max(DEFAULT_BINS, round(target))))


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
    bins: int | None = None  # quantile bins per number column; None: by its rows (``bins_for_rows``)
    require_budget: bool = True
    peek_without_dp: bool = False  # exact categories and bins from the rows: NOT DP, labelled loudly
    # TESTING ONLY, as a run's --seed: reproducible numpy noise derived from the seed and the draft's release
    # key, not hardened against floating-point attacks. None: OpenDP's samplers.
    seed: int | None = None
    # A seed on a dataset with a budget is refused unless allowed, as a run's --allow-seed-with-budget.
    allow_seed_with_budget: bool = False
    # PUBLIC facts from data contracts and the source's catalogue (``--public``); the flags above join them
    public: PublicFacts = field(default_factory=PublicFacts)
    # the table's row count if it is public (``--public-rows``, never read from the data): a draft that could
    # find no category at its epsilon is refused before the charge
    public_rows: int | None = None

    def public_facts(self) -> PublicFacts:
        """Everything public about the columns: the contracts' facts and the --bounds / --categories flags."""
        return self.public.merged(from_flags(self.bounds, self.categories))


@dataclass
class ColumnDraft:
    column: DeclaredColumn
    entry: dict[str, Any]
    comments: list[str]
    spent: dict[str, float] = field(default_factory=dict)  # rho per measurement
    text_source: bool = False  # the type is not declared (CSV text): public facts or the DP facts decide it
    stored: str = "text"  # how the source stores it: text, or its declared type (never changes)
    ood_share: float | None = None  # DP estimate: share of present values outside the discovered domain
    # round 1's noisy histogram (edges, noisy counts, sigma: DP) and, from it and round 2, the DP estimate of
    # the present values beyond the final bounds, which the run clips into its edge bins
    bounds_histogram: tuple[np.ndarray, np.ndarray, float] | None = None
    beyond: BeyondBounds | None = None
    # a categorical column's DP category counts (category -> noisy count, sigma) for the mechanism to join
    category_counts: dict[str, tuple[float, float]] = field(default_factory=dict)


def check_options(options: DraftOptions, columns: list[DeclaredColumn], text_source: bool = False) -> None:
    """The options against the source's columns (names and declared types: metadata only); ``text_source``:
    the source declares no types (CSV), so any column may take public bounds."""
    if not options.name or not str(options.name).strip():
        raise ParameterError("--name must be a non-empty schema name")
    if options.epsilon is not None and not (isinstance(options.epsilon, (int, float)) and math.isfinite(options.epsilon)
                                            and options.epsilon > 0):
        raise ParameterError(f"--epsilon must be a finite number > 0, got {options.epsilon!r}")
    if options.peek_without_dp and options.epsilon is not None:
        raise ParameterError("--peek-without-dp and --epsilon exclude each other: a draft is DP or a labelled non-DP "
                             "peek")
    if options.public_rows is not None and (isinstance(options.public_rows, bool)
                                            or not isinstance(options.public_rows, int) or options.public_rows < 1):
        raise ParameterError(f"--public-rows must be a positive integer, got {options.public_rows!r}")
    if options.bins is not None and not (2 <= options.bins <= 100):
        raise ParameterError(f"--bins must be between 2 and 100, got {options.bins}")
    known = {c.name: c for c in columns}
    for col in options.bounds:
        if col not in known:
            raise ParameterError(f"--bounds: the source has no column {col!r}")
        if known[col].kind not in (*NUMERIC, *TEMPORAL) and not text_source:
            raise ParameterError(f"--bounds: column {col!r} is not numeric or temporal "
                                 f"(declared {known[col].declared})")
    for col, cats in options.categories.items():
        if col not in known or known[col].kind not in ("categorical", *NUMERIC):
            raise ParameterError(f"--categories: the source has no categorical or numeric column {col!r}")
        if not cats:
            raise ParameterError(f"--categories {col}: give at least one value")
    for col in options.public.columns:
        if col not in known:
            raise ParameterError(
                "--public: "
                f"{options.public.columns[col].origins and next(iter(options.public.columns[col].origins.values()))} "
                f"names column {col!r}, which the source does not have")


def public_bounds(c: DeclaredColumn, options: DraftOptions) -> tuple[float, float] | None:
    """A column's PUBLIC bounds in its unit (flags or contracts, both ends given), or None. A constant's
    bounds (low == high) are widened to one integer step for integer and temporal columns."""
    p = options.public_facts().get(c.name)
    if p is None or p.bounds is None or None in p.bounds or c.kind not in (*NUMERIC, *TEMPORAL):
        return None
    from privsynth.schema import temporal

    low, high = p.bounds
    try:
        if c.kind in TEMPORAL:
            low, high = temporal.to_unit(low, c.kind), temporal.to_unit(high, c.kind)
        low, high = float(low), float(high)
    except (TypeError, ValueError):
        raise ParameterError(f"public bounds of {c.name} ({p.origin('bounds')}): expected LOW:HIGH in the column's "
                             f"type, got {low}:{high}") from None
    if c.kind != "float" and low == high and math.isfinite(low):
        high = low + 1.0
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ParameterError(f"public bounds of {c.name} ({p.origin('bounds')}): expected finite LOW <= HIGH, got "
                             f"{low}:{high}")
    return low, high


def draft_cost(epsilon: float, delta: float, n_categorical: int) -> PrivacyCost:
    """The draft's charge: (epsilon, delta)-DP in all, the categorical thresholds' delta inside delta.

    With categorical thresholds, rho is the largest that fits (epsilon, delta - F * delta) in zCDP, F =
    ``THRESHOLD_DELTA_FRACTION``, and the thresholds use at most F * delta in total (split over the
    columns by the caller), recorded as the cost's ``extra_delta`` (approximate zCDP), so the Gaussian
    part and the thresholds together are (epsilon, delta)-DP: the statement in the header and in the
    ledger (which converts the rhos at delta less the additive deltas) is true. As ``plan_discovery``.
    """
    thresholds_delta = THRESHOLD_DELTA_FRACTION * delta if n_categorical else 0.0
    rho = rho_allowance(epsilon, delta - thresholds_delta)
    notes = ["schema draft: Gaussian histograms (values, log-scale and fine grids) and thresholds"]
    if n_categorical:
        notes.append(f"categorical thresholds: at most {THRESHOLD_DELTA_FRACTION * delta:.3g} of delta in total "
                     f"(over {n_categorical} column(s)), inside the stated delta")
    # approximate zCDP: the ledger adds the thresholds' delta and converts the rhos at the rest of delta
    return PrivacyCost.zcdp(rho, f"schema draft: {rho:.6g}-zCDP", tuple(notes),
                            extra_delta=thresholds_delta)


def declared_entry(c: DeclaredColumn, text_source: bool, facts_decide: bool = False) -> ColumnDraft:
    """A column's entry from its declared type alone (TODOs where a domain is needed). ``facts_decide``: a DP
    pass follows, so a name that looks like an identifier's does not decide alone; the column's DP facts do
    (a nearly unique value per row drops it; a two-level column named "street" is kept)."""
    entry: dict[str, Any] = {"name": c.name}
    comments: list[str] = []
    if c.kind is None:
        entry.update(type="categorical", drop=True)
        comments.append(f"declared type {c.declared} has no privsynth column type: dropped (its values were not read)")
        return ColumnDraft(c, entry, comments)
    entry["type"] = c.kind
    comments.append("CSV declares no type: TODO the type from documentation, or a DP pass decides it (--epsilon)"
                    if text_source else f"declared type: {c.declared}")
    draft = ColumnDraft(c, entry, comments, text_source=text_source,
                        stored="text" if text_source or c.kind == "categorical" else c.kind)
    if c.identifier_reason and not facts_decide:
        entry["drop"] = True
        draft.comments.append(f"drop: {c.identifier_reason}")
        return draft
    if c.identifier_reason:
        draft.comments.append(f"{c.identifier_reason.split(':')[0]}: its DP facts decide whether it is an identifier")
    if c.nullable:
        entry["nullable"] = True
    _todo(draft)
    return draft


def _todo(d: ColumnDraft) -> None:
    """The TODO entries of a column whose domain is not settled yet (its type as the entry says)."""
    kind, entry = d.entry["type"], d.entry
    d.comments = [x for x in d.comments if not x.startswith("TODO:")]
    for key in ("categories", "bounds", "bins", "bin_by", "on_out_of_domain"):
        entry.pop(key, None)
    if kind == "categorical":
        entry["categories"] = []
        d.comments.append("TODO: the public list of categories (from documentation), e.g. categories: [a, b, c]; "
                          "or re-draft with --epsilon for a DP list; free text or one value per row: set drop: true")
        entry["on_out_of_domain"] = "fail"
    elif kind in NUMERIC:
        entry["bounds"] = None
        entry["bins"] = None
        d.comments.append("TODO: public bounds and bin edges from documentation, e.g. bounds: [0, 100] and "
                          "bins: [0, 25, 50, 75, 100]; or re-draft with --epsilon for DP bounds and edges")
    elif kind in TEMPORAL:
        entry["bounds"] = None
        entry["bin_by"] = "month"
        d.comments.append("TODO: public bounds [first, last] as ISO dates from documentation, e.g. bounds: "
                          "['2015-01-01', '2024-12-31']; bin_by: year | quarter | month | week | day; or re-draft "
                          "with --epsilon for DP bounds and calendar bins")


def set_kind(d: ColumnDraft, kind: str, why: str, *, lenient: bool) -> None:
    """The column's type is now known (public, or decided under DP): its entry follows. ``lenient``: a DP
    type, so values that do not read as it become missing instead of failing the run (rule 8: a release
    never depends on an exact check of the rows)."""
    from dataclasses import replace

    d.column = replace(d.column, kind=kind)
    d.entry["type"] = kind
    d.comments = [x for x in d.comments if not x.startswith(("CSV declares no type", "declared type"))]
    d.comments.insert(0, why)
    _todo(d)
    if lenient:
        d.entry["nullable"] = True
        if kind in (*NUMERIC, *TEMPORAL):
            d.entry["on_unreadable"] = "missing"


def apply_public(d: ColumnDraft, options: DraftOptions) -> None:
    """Public facts (contracts, catalogue, --bounds / --categories) fill the entry: never read, never DP."""
    p = options.public_facts().get(d.column.name)
    if p is None:
        return
    if p.type is not None and p.type != d.column.kind:
        set_kind(d, p.type, f"PUBLIC type ({p.origin('type')})", lenient=False)
        d.text_source = False
    elif p.type is not None:
        d.text_source = False
    if p.nullable is not None:
        d.entry["nullable"] = p.nullable
        if not p.nullable:
            d.entry.pop("on_unreadable", None)
    kind = d.column.kind
    if p.categories is not None and kind in NUMERIC and d.text_source is False:
        _public_codes(d, p)
    elif p.categories is not None:
        if kind != "categorical":
            set_kind(d, "categorical", f"PUBLIC: categories listed ({p.origin('categories')})", lenient=False)
            d.text_source = False
        d.entry["categories"] = list(p.categories)
        d.entry["on_out_of_domain"] = "category"
        _settle(d, f"PUBLIC categories ({p.origin('categories')}): other values become <out-of-domain>")
    elif p.bounds is not None and kind == "integer" and None not in p.bounds:
        low, high = public_bounds(d.column, options)
        if high - low <= B.SMALL_INTEGER_DOMAIN:
            numeric_entry(d, B.FineResult(low, high, tuple(np.arange(low, high + 1.0)), True), dp=())
            _settle(d, f"PUBLIC bounds ({p.origin('bounds')}): one level per value")
    if not d.entry.get("settled") and d.column.kind in (*NUMERIC, *TEMPORAL):
        _public_bounds(d, p, options)


def _public_bounds(d: ColumnDraft, p: PublicColumn, options: DraftOptions) -> None:
    """Both public bounds written at once, with their origin (a draft without epsilon too: only the bins are
    left to fill, or to place under DP); values outside them are clipped."""
    from privsynth.schema import temporal

    bounds, kind = public_bounds(d.column, options), d.column.kind
    if bounds is None:
        return
    d.entry["bounds"] = ([temporal.format_unit(x, kind) for x in bounds] if kind in TEMPORAL else
                         [int(x) if kind == "integer" else float(x) for x in bounds])
    d.entry["on_out_of_domain"] = "clip"
    d.comments = [x for x in d.comments if not x.startswith("TODO")]
    d.comments.append(f"PUBLIC bounds ({p.origin('bounds')}): values outside them are clipped")
    if kind in NUMERIC:  # a temporal column's calendar bins (bin_by) need nothing more
        d.comments.append("TODO: public bin edges inside the bounds, e.g. bins: [low, ..., high]; or re-draft with "
                          "--epsilon for DP edges")


def _public_codes(d: ColumnDraft, p: PublicColumn) -> None:
    """A numeric column whose public accepted values are listed: a coded column (exactly those values)."""
    try:
        codes = sorted({float(v) for v in p.categories or ()})
    except ValueError:
        raise ParameterError(f"column {d.column.name!r}: public values {p.origin('categories')} are not numbers "
                             f"but the column is {d.column.kind}") from None
    for key in ("bounds", "bins", "categories"):
        d.entry.pop(key, None)
    cast = int if d.column.kind == "integer" and all(v.is_integer() for v in codes) else float
    d.entry["values"] = [cast(v) for v in codes]
    d.entry["on_out_of_domain"] = "clip"
    _settle(d, f"PUBLIC values ({p.origin('categories')}): a coded column, exactly these values")


def _settle(d: ColumnDraft, comment: str) -> None:
    d.comments = [x for x in d.comments if not x.startswith("TODO")] + [comment]
    d.entry["settled"] = True


class Need(Enum):
    """The next DP measurement a column needs (``needs``)."""

    FACTS = "facts"  # its type, whole numbers, identifier (round 0)
    CATEGORIES = "categories"  # its values, by thresholded noisy counts (round 1)
    BOUNDS = "bounds"  # its range (round 1), then its edges (round 2)
    EDGES = "edges"  # its edges inside public bounds (round 2)


def needs(d: ColumnDraft, options: DraftOptions) -> Need | None:
    """The next DP measurement a column needs, or None (settled, dropped, boolean or without a type)."""
    c, e = d.column, d.entry
    if e.get("drop") or e.get("settled") or c.kind is None:
        return None
    # a type a contract states is public and final: round 0 (which may retype or drop a column) is for the rest
    public_type = (p := options.public_facts().get(c.name)) is not None and p.type is not None
    # a typed timestamp's facts are its grain: dates a warehouse stores as timestamps come back at midnight
    if "facts" not in d.spent and not public_type and (d.text_source or c.kind in (*NUMERIC, "categorical",
                                                                                   "timestamp")):
        return Need.FACTS
    if c.kind == "boolean":
        return None
    if c.kind == "categorical":
        return Need.CATEGORIES
    return Need.EDGES if public_bounds(c, options) is not None else Need.BOUNDS


def numeric_entry(d: ColumnDraft, fine: B.FineResult, dp: tuple[str, ...]) -> None:
    c = d.column
    from privsynth.schema import temporal

    if c.kind in TEMPORAL:
        def fmt(x):
            return temporal.format_unit(x, c.kind)
        d.entry["bounds"] = [fmt(fine.low), fmt(fine.high)]
        unit = calendar_unit(fine.low, fine.high, c.kind)
        if unit is not None:
            d.entry.pop("bins", None)
            d.entry["bin_by"] = unit
        else:
            d.entry.pop("bin_by", None)
            d.entry["bins"] = [fmt(x) for x in fine.edges]
    elif fine.codes is not None:
        cast = int if c.kind == "integer" else float
        d.entry.pop("bounds", None)
        d.entry.pop("bins", None)
        d.entry["values"] = [cast(x) for x in fine.codes]
        dp = tuple("values" if x == "bins" else x for x in dp if x != "bounds") if dp else dp
    else:
        cast = int if c.kind == "integer" else float
        d.entry["bounds"] = [cast(fine.low), cast(fine.high)]
        d.entry["bins"] = [cast(x) for x in fine.edges]
    d.entry["on_out_of_domain"] = "clip"
    if dp:
        d.entry["dp_released"] = [*(["type"] if "type" in d.entry.get("dp_released", []) else []), *dp]


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


def declared_drafts(columns: list[DeclaredColumn], options: DraftOptions, text_source: bool) -> list[ColumnDraft]:
    """Each declared column's draft with the public facts applied (nothing read from the rows); the
    options are checked against the columns first."""
    check_options(options, columns, text_source)
    drafts = [declared_entry(c, text_source, facts_decide=options.epsilon is not None) for c in columns]
    for d in drafts:
        if not d.entry.get("drop"):
            apply_public(d, options)
    return drafts
