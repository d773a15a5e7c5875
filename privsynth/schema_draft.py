"""``privsynth schema draft``: a schema file for a human to edit, from a source's declared types.

Without an epsilon NOTHING about the values is read: column names and types come from the source's
declared types (Parquet footers, the DuckDB / PostgreSQL catalog); for CSV, which declares none,
DuckDB's sniffer infers them from sample rows (a non-DP look at the values' *format*, said in the
file). Categories, bounds and bins are left as ``# TODO`` for the user to fill from documentation.

With ``epsilon`` a DP pass fills them, charged to the dataset's ledger BEFORE any value is read,
rho split evenly over the columns read (never the identifier-like ones):

* numeric columns with PUBLIC bounds (``--bounds COL=LOW:HIGH``, or the declared range of an integer
  type of at most 16 bits; others keep their TODO and are not read): the k-1 inner bin edges are DP
  quantiles i/k, each the exponential mechanism over 101 evenly spaced points of the bounds
  (``dp_quantile``), utility ``-|#{x < g} - q n|`` of sensitivity 1 under add/remove-one,
  run as report-noisy-max with Gumbel noise of scale ``1/sqrt(2 rho_q)``: rho_q-zCDP each
  (bounded-range exponential mechanism, Cesar & Rogers 2021).
* categorical columns: a Gaussian histogram with thresholding over the observed values
  (``dp_categories``): each observed value's count and the column's non-null count get
  N(0, sigma^2) noise, sigma = 1/sqrt(rho_c) (L2 sensitivity sqrt 2: one record moves one value's
  count and the total), so rho_c-zCDP for a fixed set of values; a value is released only when its
  noisy count exceeds tau = 1 + sigma * z, z = Phi^{-1}(1 - delta_tau). The set of observed values
  depends on the data: a value present in one neighbour only has count 1 there and is released with
  probability <= delta_tau. So the column is (epsilon(rho_c, delta'), delta' + delta_tau)-DP for
  every delta'. The ledger's currency is rho-zCDP (+ pure epsilon), which cannot state a pure delta
  term: we charge the Gaussian part as rho and hold the thresholds' total delta to
  ``THRESHOLD_DELTA_FRACTION`` (1/1000) of the statement's delta, split over the categorical columns;
  the cost's notes and the draft's header state it.

A non-DP look at the values is never a fallback: it happens only when asked for by name
(``peek_without_dp``, ``--peek-without-dp``), and the file and the console then say loudly that the
draft is NOT DP and leaks the data.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import yaml
from scipy.stats import norm

from privsynth.errors import ParameterError
from privsynth.privacy.accounting import DEFAULT_DELTA, PrivacyCost, epsilon_from_rho
from privsynth.privacy.spending import rho_allowance

# Name tokens that mark identifiers and free text (proposed ``drop: true``; their values are never read).
IDENTIFIER_TOKENS = frozenset({
    "id", "ids", "uuid", "guid", "key", "pk", "ssn", "nin", "passport", "email", "mail", "name", "names",
    "firstname", "lastname", "surname", "fullname", "username", "login", "title", "description", "desc",
    "notes", "note", "comment", "comments", "remark", "remarks", "text", "message", "address", "street",
    "addr", "phone", "tel", "telephone", "mobile", "fax", "url", "uri", "link", "website", "ip", "password",
    "token", "hash", "iban", "account",
})
THRESHOLD_DELTA_FRACTION = 1e-3  # the thresholds' total delta, as a fraction of the statement's delta
MIN_KEPT_MASS = 0.5  # a categorical column whose released values hold less of the rows is proposed dropped
DEFAULT_BINS = 8
GRID_POINTS = 101
MAX_DECLARED_RANGE = 2**16  # a declared integer range this narrow is used as public bounds


# ---------------------------------------------------------------- declared types

@dataclass(frozen=True)
class DeclaredColumn:
    """One source column as declared: name, privsynth type (None: no privsynth type), declared type."""

    name: str
    kind: str | None  # categorical | integer | float | boolean | None
    declared: str
    nullable: bool
    int_range: tuple[int, int] | None = None
    identifier_reason: str | None = None


def name_tokens(name: str) -> list[str]:
    """Lower-case words of a column name: split on non-alphanumerics and camelCase (``customerId`` -> customer, id)."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name)
    return [t for t in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if t]


def identifier_reason(name: str) -> str | None:
    """Why a column looks like an identifier or free text by its NAME alone (None: it does not)."""
    hits = [t for t in name_tokens(name) if t in IDENTIFIER_TOKENS]
    if not hits:
        return None
    return (f"its name contains {hits[0]!r}: looks like an identifier or free text (one value per person or "
            "per row carries no pattern DP can release); its values were not read")


def classify_dtype(dtype) -> tuple[str | None, tuple[int, int] | None]:
    """privsynth type of an ibis dtype: integer, float (also decimal), categorical (string), boolean, or None."""
    if dtype.is_boolean():
        return "boolean", None
    if dtype.is_integer():
        bounds = getattr(dtype, "bounds", None)
        return "integer", (int(bounds.lower), int(bounds.upper)) if bounds is not None else None
    if dtype.is_floating() or dtype.is_decimal():
        return "float", None
    if dtype.is_string():
        return "categorical", None
    if dtype.is_date():
        return "date", None
    if dtype.is_timestamp():
        return "timestamp", None
    return None, None


def declared_columns(table) -> list[DeclaredColumn]:
    """The columns of an ibis table from its schema (metadata only: no row is read)."""
    out = []
    for name, dtype in table.schema().items():
        kind, int_range = classify_dtype(dtype)
        out.append(DeclaredColumn(str(name), kind, str(dtype), bool(dtype.nullable), int_range,
                                  identifier_reason(str(name))))
    return out


def open_declared(source: str):
    """Open ``source`` reading metadata only; returns (OpenedTable, csv_sniffed: bool)."""
    from privsynth.engine.backends import CSV_SUFFIXES, EngineOptions, backend_error, duckdb_backend, open_table
    from privsynth.engine.sources import SourceSpec, _check_file
    from privsynth.io.connections import InputError

    path_part = str(source).split("?")[0]
    if path_part.lower().endswith(CSV_SUFFIXES) and "://" not in path_part:
        from privsynth.engine.backends import OpenedTable

        tsv = ".tsv" in path_part.lower()
        _check_file(SourceSpec("csv", path_part, delimiter="\t" if tsv else ","))
        backend = duckdb_backend(EngineOptions())
        try:
            table = backend.read_csv(path_part, table_name=f"privsynth_{uuid.uuid4().hex[:8]}", header=True,
                                     delim="\t" if tsv else ",", auto_detect=True)
        except Exception as err:  # noqa: BLE001
            backend.disconnect()
            raise backend_error(err, f"input file {path_part!r}") from None
        return OpenedTable(backend, table, f"csv:{path_part}", closers=[backend.disconnect]), True
    if path_part.lower().endswith(CSV_SUFFIXES):
        raise InputError(f"--input {path_part!r}: schema draft reads local CSV files; copy the file or use Parquet")
    return open_table(source, None), False  # the schema argument is used by local CSV only


# ---------------------------------------------------------------- DP mechanisms (pure functions + noise)

def gaussian_sigma(rho: float, l2_sensitivity_sq: float = 2.0) -> float:
    """sigma of the Gaussian mechanism that is rho-zCDP for squared L2 sensitivity ``l2_sensitivity_sq``."""
    return math.sqrt(l2_sensitivity_sq / (2.0 * rho))


def threshold(sigma: float, delta_tau: float) -> float:
    """tau = 1 + sigma * Phi^{-1}(1 - delta_tau): a count-1 value's noisy count exceeds it w.p. delta_tau."""
    return 1.0 + sigma * float(norm.isf(delta_tau))


def gumbel_scale(rho: float, sensitivity: float = 1.0) -> float:
    """Gumbel scale of report-noisy-max that is rho-zCDP for scores of sensitivity ``sensitivity``."""
    return sensitivity / math.sqrt(2.0 * rho)


def quantile_scores(values: np.ndarray, counts: np.ndarray, grid: np.ndarray, q: float) -> np.ndarray:
    """Utility -|#{x < g} - q n| of each grid point (sensitivity 1 under add/remove one record).

    ``values`` are the sorted distinct values and ``counts`` their multiplicities.
    """
    below = np.concatenate([[0], np.cumsum(counts)])[np.searchsorted(values, grid, side="left")]
    return -np.abs(below - q * float(np.sum(counts)))


def dp_quantile(values: np.ndarray, counts: np.ndarray, grid: np.ndarray, q: float, rho: float, noise) -> float:
    """A grid point near the q-quantile: exponential mechanism (Gumbel noisy max), rho-zCDP."""
    scores = quantile_scores(values, counts, grid, q)
    return float(grid[noise.noisy_max(scores, gumbel_scale(rho))])


@dataclass(frozen=True)
class CategoryRelease:
    """A categorical column's DP release: values kept, their share of the (noisy) rows, the noise used."""

    categories: tuple[str, ...]
    kept_mass: float  # noisy kept count / noisy non-null count, clipped to [0, 1]
    sigma: float
    tau: float


def dp_categories(values: Sequence[str], counts: np.ndarray, rho: float, delta_tau: float, noise) -> CategoryRelease:
    """Gaussian histogram with thresholding over the observed values (see the module docstring)."""
    sigma = gaussian_sigma(rho, 2.0)
    tau = threshold(sigma, delta_tau)
    counts = np.asarray(counts, dtype=np.float64)
    noisy = noise.add_gaussian(np.concatenate([counts, [counts.sum()]]), sigma) if len(counts) else \
        noise.add_gaussian(np.array([0.0]), sigma)
    noisy_counts, noisy_total = noisy[:-1], float(noisy[-1])
    keep = noisy_counts > tau
    kept = sorted(str(v) for v, k in zip(values, keep) if k)
    kept_count = float(np.sum(noisy_counts[keep]))
    mass = 0.0 if noisy_total <= 0 else min(1.0, max(0.0, kept_count / noisy_total))
    return CategoryRelease(tuple(kept), mass, sigma, tau)


def linear_grid(low: float, high: float, integer: bool) -> np.ndarray:
    """GRID_POINTS evenly spaced public points of [low, high] (integers for an integer column)."""
    grid = np.linspace(low, high, GRID_POINTS)
    return np.unique(np.round(grid)) if integer else grid


# ---------------------------------------------------------------- the draft

@dataclass(frozen=True)
class DraftOptions:
    """What the draft reads and spends. ``epsilon`` None: nothing about the values is read."""

    name: str
    epsilon: float | None = None
    delta: float = DEFAULT_DELTA
    dataset: str | None = None
    ledger: str | None = None
    bounds: dict[str, tuple[float, float]] = field(default_factory=dict)  # PUBLIC bounds per numeric column
    bins: int = DEFAULT_BINS
    require_budget: bool = True
    peek_without_dp: bool = False  # exact categories and bins from the rows: NOT DP, labelled loudly


@dataclass
class ColumnDraft:
    column: DeclaredColumn
    entry: dict[str, Any]
    comments: list[str]


def _check_options(options: DraftOptions, columns: list[DeclaredColumn]) -> None:
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
    for col, (low, high) in options.bounds.items():
        if col not in known:
            raise ParameterError(f"--bounds: the source has no column {col!r}")
        if known[col].kind not in ("integer", "float"):
            raise ParameterError(f"--bounds: column {col!r} is not numeric (declared {known[col].declared})")
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise ParameterError(f"--bounds {col}: expected finite LOW < HIGH, got {low}:{high}")


def public_bounds(c: DeclaredColumn, options: DraftOptions) -> tuple[tuple[float, float] | None, str]:
    """A numeric column's PUBLIC bounds: given by the user, or the declared range of a <= 16-bit integer."""
    if c.name in options.bounds:
        return options.bounds[c.name], "you gave (--bounds)"
    if c.int_range and c.int_range[1] - c.int_range[0] <= MAX_DECLARED_RANGE:
        return c.int_range, f"of the declared type {c.declared}"
    return None, ""


def _columns_to_read(columns: list[DeclaredColumn], options: DraftOptions) -> list[DeclaredColumn]:
    """Columns the DP pass reads: categorical ones, and numeric ones with public bounds; never identifiers."""
    return [c for c in columns if c.identifier_reason is None and (
        c.kind == "categorical" or (c.kind in ("integer", "float") and public_bounds(c, options)[0] is not None))]


def draft_cost(epsilon: float, delta: float, n_categorical: int) -> PrivacyCost:
    """The draft's charge: rho, the largest that fits (epsilon, delta) in zCDP, with the thresholds' note."""
    rho = rho_allowance(epsilon, delta)
    notes = ["schema draft: DP quantiles (exponential mechanism over a public grid) and Gaussian histograms"]
    if n_categorical:
        notes.append(f"categorical thresholds add at most {THRESHOLD_DELTA_FRACTION * delta:.3g} to delta "
                     f"(total, over {n_categorical} column(s)), not recorded in rho")
    return PrivacyCost.zcdp(rho, f"schema draft: {rho:.6g}-zCDP", tuple(notes))


def _declared_entry(c: DeclaredColumn, csv_sniffed: bool) -> ColumnDraft:
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
                        "free text or one value per row: set drop: true")
        entry["on_out_of_domain"] = "fail"
    elif c.kind in ("integer", "float"):
        entry["bounds"] = None
        entry["bins"] = None
        comments.append("TODO: public bounds [low, high] and bin edges (first = low, last = high) from "
                        "documentation, e.g. bounds: [0, 100] and bins: [0, 25, 50, 75, 100] (or re-draft with "
                        "--epsilon and --bounds COL=LOW:HIGH for DP bin edges)")
    elif c.kind in ("date", "timestamp"):
        entry["bounds"] = None
        entry["bin_by"] = "month"
        comments.append("TODO: public bounds [first, last] as ISO dates from documentation, e.g. bounds: "
                        "['2015-01-01', '2024-12-31']; bin_by: year | quarter | month | week | day (no DP draft of "
                        "dates: their range is public knowledge to write down)")
    return ColumnDraft(c, entry, comments)


def _numeric_release(d: ColumnDraft, table, rho: float, options: DraftOptions, noise, label: str) -> None:
    c = d.column
    integer = c.kind == "integer"
    public, source = public_bounds(c, options)
    raw, counts = _value_counts(table, c.name)
    values = np.asarray(raw, dtype=np.float64)
    order = np.argsort(values)
    values, counts = values[order], counts[order]
    inner = [i / options.bins for i in range(1, options.bins)]
    grid = linear_grid(public[0], public[1], integer)
    chosen = [dp_quantile(values, counts, grid, q, rho / len(inner), noise) for q in inner]
    edges = sorted({float(public[0]), float(public[1]), *(x for x in chosen if public[0] < x < public[1])})
    if integer:
        edges = sorted({int(round(e)) for e in edges})
    d.comments = [x for x in d.comments if not x.startswith("TODO")]
    d.entry["bounds"] = [edges[0], edges[-1]]
    d.entry["bins"] = edges
    d.entry["on_out_of_domain"] = "clip"
    d.comments.append(f"DP ({label}): bin edges are DP quantiles (exponential mechanism over {len(grid)} evenly "
                      f"spaced points of the PUBLIC bounds {source}); values outside the bounds are clipped")


def _categorical_release(d: ColumnDraft, table, rho: float, delta_tau: float, noise, label: str) -> None:
    c = d.column
    raw, counts = _value_counts(table, c.name)
    values = [str(v) for v in raw]
    release = dp_categories(values, counts, rho, delta_tau, noise)
    d.comments = [x for x in d.comments if not x.startswith("TODO")]
    from privsynth.schema import MISSING_LABEL, OUT_OF_DOMAIN_LABEL

    cats = [v for v in release.categories if v not in (MISSING_LABEL, OUT_OF_DOMAIN_LABEL)]
    share = f"about {100 * release.kept_mass:.0f}% of the non-missing rows (a DP estimate)"
    if not cats or release.kept_mass < MIN_KEPT_MASS:
        d.entry["categories"] = cats
        d.entry["drop"] = True
        d.comments.append(f"drop: the DP histogram ({label}) released {len(cats)} value(s) holding only {share}: "
                          "free text or very high cardinality. To keep the top values instead, set drop: false and "
                          "on_out_of_domain: category (every other value becomes the level <out-of-domain>)")
        return
    d.entry["categories"] = cats
    d.entry["on_out_of_domain"] = "category"
    d.comments.append(f"DP ({label}): categories are the values whose noisy count passed the threshold; they hold "
                      f"{share}; rarer values become <out-of-domain>. Add public categories the DP pass missed")


def release_key_for(ledger, columns: list[DeclaredColumn], config: dict) -> str:
    """A fresh release key (HMAC under the ledger's secret, a new nonce: each draft is its own release)."""
    from privsynth.privacy.keys import release_key

    declared = json.dumps([[c.name, c.declared] for c in columns], separators=(",", ":"))
    schema_hash = hashlib.sha256(declared.encode()).hexdigest()
    secret = ledger.release_secret()
    return release_key(secret, "schema-draft", schema_hash, "schema_draft", config, None, uuid.uuid4().hex)


@dataclass(frozen=True)
class DraftResult:
    text: str  # the YAML file's content
    columns: int
    dropped: int
    read: int  # columns whose values the DP pass read (0 without epsilon)
    cost: PrivacyCost | None
    dataset: str | None


def draft_schema(source: str, options: DraftOptions) -> DraftResult:
    """Draft a schema for ``source`` (see the module docstring for what is read and what it costs)."""
    opened, csv_sniffed = open_declared(source)
    try:
        columns = declared_columns(opened.table)
        _check_options(options, columns)
        drafts = [_declared_entry(c, csv_sniffed) for c in columns]
        read = _columns_to_read(columns, options)
        cost = None
        dataset = None
        if options.epsilon is not None and read:
            cost, dataset = _dp_pass(opened.table, drafts, read, options)
        elif options.peek_without_dp:
            _peek_pass(opened.table, drafts, options)
        text = render(drafts, options, opened.description, csv_sniffed, cost, dataset)
    finally:
        opened.close()
    dropped = sum(1 for d in drafts if d.entry.get("drop"))
    return DraftResult(text, len(drafts), dropped, len(read) if cost or options.peek_without_dp else 0, cost, dataset)


PEEK_LABEL = "NOT DP: exact values read by --peek-without-dp"
PEEK_MAX_CATEGORIES = 50


def _value_counts(table, name: str) -> tuple[list, np.ndarray]:
    """Distinct non-null values and their counts (private: they stay inside the mechanism)."""
    from privsynth.engine.backends import backend_error

    present = table.filter(table[name].notnull())
    try:
        grouped = present.group_by(name).aggregate(privsynth_n=present.count()).to_pyarrow()
    except Exception as err:  # noqa: BLE001  (the backend's message may quote a value: a value-free one instead)
        raise backend_error(err, f"column {name!r}") from None
    return grouped.column(name).to_pylist(), np.asarray(grouped.column("privsynth_n").to_numpy(), dtype=np.float64)


def _peek_pass(table, drafts: list[ColumnDraft], options: DraftOptions) -> None:
    """The explicit NON-DP peek: exact categories (the most frequent PEEK_MAX_CATEGORIES) and exact
    quantile bins between the exact min and max. Every entry it fills says so."""
    for d in drafts:
        c = d.column
        if c.identifier_reason is not None or c.kind not in ("integer", "float", "categorical"):
            continue
        values, counts = _value_counts(table, c.name)
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
            if mass < MIN_KEPT_MASS:
                d.entry["categories"] = []  # a dropped column's exact values are not written
                d.entry["drop"] = True
                d.comments.append(f"drop ({PEEK_LABEL}): the top {len(cats)} values hold under "
                                  f"{100 * MIN_KEPT_MASS:.0f}% of the rows: free text or very high cardinality")
            else:
                d.comments.append(f"{PEEK_LABEL}: categories are the exact most frequent values; replace them with "
                                  "public categories before a private run")
            continue
        x = np.asarray(values, dtype=np.float64)
        order = np.argsort(x)
        x, w = x[order], counts[order]
        cum = np.cumsum(w) / w.sum()
        inner = [float(x[np.searchsorted(cum, i / options.bins)]) for i in range(1, options.bins)]
        edges = sorted({float(x[0]), *inner, float(x[-1])})
        if c.kind == "integer":
            edges = sorted({int(round(e)) for e in edges})
        if len(edges) < 2:
            edges = [edges[0], edges[0] + 1]
        d.entry["bounds"] = [edges[0], edges[-1]]
        d.entry["bins"] = edges
        d.comments.append(f"{PEEK_LABEL}: bounds are the exact min and max, edges exact quantiles; replace them "
                          "with public values before a private run")


def _dp_pass(table, drafts: list[ColumnDraft], read: list[DeclaredColumn], options: DraftOptions):
    from privsynth.privacy.ledger import BudgetLedger
    from privsynth.privacy.noise import make_noise_source

    dataset = options.dataset or options.name
    n_cat = sum(1 for c in read if c.kind == "categorical")
    cost = draft_cost(float(options.epsilon), options.delta, n_cat)
    rho_column = cost.rho / len(read)
    delta_tau = THRESHOLD_DELTA_FRACTION * options.delta / max(n_cat, 1)
    label = f"epsilon {options.epsilon:g} at delta {options.delta:g} for the whole draft, split over {len(read)} columns"
    config = {"epsilon": options.epsilon, "delta": options.delta, "bins": options.bins,
              "bounds": {k: list(v) for k, v in sorted(options.bounds.items())}, "columns": [c.name for c in read]}
    ledger = BudgetLedger(options.ledger)
    try:
        key = release_key_for(ledger, [d.column for d in drafts], config)
        # Charge BEFORE any value is read; then claim the draw; only then may noise be drawn.
        receipt = ledger.charge(dataset, key, cost, f"schema draft {options.name} (DP categories and bins)",
                                require_budget=options.require_budget)
        ledger.claim_noise(dataset, key)
    finally:
        ledger.close()
    noise = make_noise_source(None, key)
    noise.authorize(receipt.reference)
    by_name = {d.column.name: d for d in drafts}
    for c in read:
        if c.kind == "categorical":
            _categorical_release(by_name[c.name], table, rho_column, delta_tau, noise, label)
        else:
            _numeric_release(by_name[c.name], table, rho_column, options, noise, label)
    return cost, dataset


# ---------------------------------------------------------------- YAML text

def _scalar(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=10**9, allow_unicode=True).strip().removesuffix("...").strip()


def render(drafts: list[ColumnDraft], options: DraftOptions, origin: str, csv_sniffed: bool,
           cost: PrivacyCost | None, dataset: str | None) -> str:
    """The draft as commented YAML: valid YAML; loads as a Schema once every TODO is filled."""
    head = [
        "# DRAFT SCHEMA, written by `privsynth schema draft`: a file for a human to review and edit.",
        f"# Source: {origin}",
    ]
    if csv_sniffed:
        head.append("# CSV declares no types: each column's type was INFERRED by DuckDB's sniffer from sample rows "
                    "(a non-DP look at the values' format only; no value is written here). Check every type.")
    else:
        head.append("# Column types are the source's DECLARED types (metadata only).")
    if options.peek_without_dp:
        head += ["# " + "!" * 98,
                 "# NOT DIFFERENTIALLY PRIVATE: --peek-without-dp read the exact values. The categories, bounds and",
                 "# bins below come from the private rows and LEAK them. Do not share this file; replace them",
                 "# with public values from documentation before any private run.",
                 "# " + "!" * 98]
    elif cost is None:
        head += ["# No value of the table was read: fill every TODO (categories, bounds, bins) from public",
                 "# documentation. Until then `privsynth run` refuses this file and names the column."]
    else:
        eps = epsilon_from_rho(cost.rho, options.delta)
        head += [f"# DP PASS: the values listed below are differentially private: (epsilon {eps:.4g}, delta "
                 f"{options.delta:g})-DP in total, rho {cost.rho:.6g}-zCDP, charged to dataset {dataset!r} in the "
                 "budget ledger before any value was read.",
                 f"# The categorical thresholds add at most {THRESHOLD_DELTA_FRACTION * options.delta:.3g} to delta "
                 "(a value seen in one row is released with at most that probability).",
                 "# They are data-dependent (DP) metadata: prefer public documentation where it exists."]
    head.append("# Identifier-like and free-text columns (by name) are proposed drop: true; their values were never read.")
    lines = head + [f"name: {_scalar(options.name)}", "other_columns: fail", "columns:"]
    for d in drafts:
        lines.append("")
        for comment in d.comments:
            lines.append(f"  # {comment}")
        first = True
        for key, value in d.entry.items():
            prefix = "  - " if first else "    "
            first = False
            text = "null" if value is None else _scalar(value)
            suffix = "  # TODO" if value is None or value == [] and key == "categories" and not d.entry.get("drop") else ""
            lines.append(f"{prefix}{key}: {text}{suffix}")
    return "\n".join(lines) + "\n"


def parse_bounds(pairs: Sequence[str] | None) -> dict[str, tuple[float, float]]:
    """``COL=LOW:HIGH`` pairs (public bounds) as a dict."""
    out: dict[str, tuple[float, float]] = {}
    for pair in pairs or []:
        col, sep, rng = pair.partition("=")
        low, sep2, high = rng.partition(":")
        try:
            if not (sep and sep2 and col.strip()):
                raise ValueError
            out[col.strip()] = (float(low), float(high))
        except ValueError:
            raise ParameterError(f"--bounds expects COL=LOW:HIGH, got {pair!r}") from None
    return out


def write_draft(source: str, output: str | Path, options: DraftOptions, overwrite: bool = False) -> DraftResult:
    """Draft and write the file (refusing to overwrite one unless asked, before anything is read or charged)."""
    output = Path(output)
    if output.exists() and not overwrite:
        raise ParameterError(f"--output {str(output)!r} exists; choose another path or pass --force")
    if not output.parent.is_dir():
        raise ParameterError(f"--output {str(output)!r}: folder {str(output.parent)!r} does not exist")
    result = draft_schema(source, options)
    tmp = output.with_name(output.name + ".tmp")
    tmp.write_text(result.text, encoding="utf-8")
    tmp.replace(output)
    return result


def default_name(source: str) -> str:
    """A schema name from the input: ?table=NAME, else the file's stem (letters, digits, '_')."""
    base, _, query = str(source).partition("?")
    for piece in query.split("&"):
        key, _, value = piece.partition("=")
        if key == "table" and value:
            return re.sub(r"[^A-Za-z0-9_]+", "_", value.rpartition(".")[2]) or "draft"
    stem = Path(base.split(":", 1)[-1] if base.lower().startswith("duckdb:") else base).name
    stem = re.sub(r"\.(csv|tsv|parquet|pq|gz|duckdb)$", "", re.sub(r"\.(csv|tsv)\.gz$", "", stem, flags=re.I), flags=re.I)
    return re.sub(r"[^A-Za-z0-9_]+", "_", stem).strip("_") or "draft"
