"""Binarisation: table <-> integer level codes <-> {0,1} columns, with exact decoding.

Every kept column becomes a discrete attribute with ``size`` levels (its categories or bins, then
``<missing>`` when nullable, then ``<out-of-domain>`` when the schema asks for that category). A
record is then a vector of level codes; the mechanisms see it as

* one-hot bits (one block of ``size`` bits per column; a k-way marginal cell is a product of k bits), or
* compact binary bits (ceil(log2 size) bits per column, for the Boolean-cube mechanisms).

Decoding is exact on codes. Numeric bins decode to a value drawn uniformly inside the bin (integers: uniformly among
the integers of the bin), so synthetic values spread over the bin the way a histogram does; post-processing. Date and
timestamp columns bin as numbers in their unit (``privsynth.schema.temporal``) and decode to whole days /
whole seconds drawn uniformly inside the bin, returned as dates / UTC timestamps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd
import pyarrow as pa

from privsynth.schema import OUT_OF_DOMAIN_LABEL, Column, Schema, temporal
from privsynth.schema.fine_estimate import fine_draws
from privsynth.schema.grid import on_precision_grid
from privsynth.schema.sampling import INT64_DOUBLES, whole_draws
from privsynth.schema.written import read_written, written_form


@dataclass(frozen=True)
class Domain:
    """The discrete domain the mechanisms work on: attribute names and their numbers of levels.

    ``ordered`` (a public schema fact, empty where not known): per attribute, how many of its first levels are an
    ordered scale, a binned number or moment column's bins (0 for a categorical, boolean or coded column).
    ``structural`` (a public schema fact, empty where not known): per attribute, how many of its last levels are
    structural, ``<missing>`` and ``<out-of-domain>``, which hold no value of the column's own domain. Neither is
    part of equality: two domains with the same names and sizes hold the same records."""

    names: tuple[str, ...]
    sizes: tuple[int, ...]
    ordered: tuple[int, ...] = field(default=(), compare=False)
    structural: tuple[int, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        if len(self.names) != len(self.sizes) or not self.names:
            raise ValueError("a domain needs one size per attribute and at least one attribute")
        if any(s < 1 for s in self.sizes):
            raise ValueError(f"every attribute needs at least one level, got sizes {self.sizes}")
        if self.ordered and (len(self.ordered) != len(self.sizes)
                             or any(not 0 <= k <= s for k, s in zip(self.ordered, self.sizes))):
            raise ValueError(f"ordered levels {self.ordered} do not fit the sizes {self.sizes}")
        scales = self.ordered or (0,) * len(self.sizes)
        if self.structural and (len(self.structural) != len(self.sizes) or any(
                not 0 <= k <= s - o for k, s, o in zip(self.structural, self.sizes, scales))):
            raise ValueError(f"structural levels {self.structural} do not fit the sizes {self.sizes} after the ordered")

    @property
    def n_attributes(self) -> int:
        return len(self.sizes)

    @cached_property
    def offsets(self) -> np.ndarray:
        """Start of each attribute's block in the one-hot layout (length n_attributes + 1)."""
        return np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)

    @property
    def width(self) -> int:
        """Number of one-hot bits."""
        return int(self.offsets[-1])

    @cached_property
    def binary_widths(self) -> tuple[int, ...]:
        """Bits per attribute in the compact binary layout (0 for a one-level attribute)."""
        return tuple(max(0, math.ceil(math.log2(s))) if s > 1 else 0 for s in self.sizes)

    @property
    def binary_width(self) -> int:
        return int(sum(self.binary_widths))

    def size_of(self, attributes: tuple[int, ...]) -> int:
        return int(np.prod([self.sizes[a] for a in attributes], dtype=np.int64))

    def to_json(self) -> dict:
        return {"names": list(self.names), "sizes": list(self.sizes)} | (
            {"ordered": list(self.ordered)} if self.ordered else {}) | (
            {"structural": list(self.structural)} if self.structural else {})

    @staticmethod
    def from_json(data: dict) -> Domain:
        return Domain(tuple(data["names"]), tuple(int(s) for s in data["sizes"]),
                      tuple(int(k) for k in data.get("ordered", ())),
                      tuple(int(k) for k in data.get("structural", ())))


def _scale_levels(col: Column) -> int:
    """How many of ``col``'s first levels are an ordered scale: a number or moment column's bins (its coded values
    and the categories of the others are not)."""
    return col.domain_levels if col.type not in ("categorical", "boolean") and col.values is None else 0


def domain_of(schema: Schema) -> Domain:
    cols = schema.kept_columns
    return Domain(tuple(c.name for c in cols), tuple(len(c.labels) for c in cols),
                  tuple(_scale_levels(c) for c in cols), tuple(len(c.labels) - c.domain_levels for c in cols))


# ---------------------------------------------------------------- table <-> codes

def category_text(values: pd.Series) -> pd.Series:
    """Values as category text. An integral float reads as its integer ("3", not "3.0"): an integer-coded
    column with a missing value arrives as float64 from pandas, SQL drivers and Parquet, and its codes
    must still match the schema's categories. Missing values stay missing."""
    if values.dtype.kind == "f":
        arr = values.to_numpy(dtype=np.float64, na_value=np.nan)
        integral = np.isfinite(arr) & (arr == np.round(arr)) & (np.abs(arr) < 2.0**63)
        text = np.where(integral, np.where(integral, arr, 0).astype(np.int64).astype(str), arr.astype(str))
        return pd.Series(text, index=values.index, dtype=object).where(values.notna(), None)
    if values.dtype == object and pd.api.types.infer_dtype(values, skipna=True) not in ("string", "empty", "boolean"):
        def one(v):
            if isinstance(v, (float, np.floating)) and math.isfinite(v) and float(v).is_integer():
                return str(int(v))
            return str(v)
        return values.map(one).where(values.notna(), None)
    return values.astype(str).where(values.notna(), None)


def _clean_text(series: pd.Series) -> pd.Series:
    """The one text rule (engine/values.py): blanks around a value are not part of it; a blank value is missing."""
    return series.map(lambda v: (v.strip() or None) if isinstance(v, str) else v)


def _column_codes(col: Column, series: pd.Series) -> np.ndarray:
    """Codes of one column; raises ValueError naming the column for values the schema forbids."""
    series = read_written(col, series)
    if col.type == "categorical" and (series.dtype == object or isinstance(series.dtype, pd.CategoricalDtype)):
        series = _clean_text(series.astype(object))  # a synthetic table's dictionary column too ("MA " is "MA")
    n_levels = col.domain_levels
    missing = series.isna().to_numpy()
    if col.type in temporal.TEMPORAL_TYPES:
        in_unit, not_date = temporal.values_in_unit(series, col.type)  # blank text is missing too
        if not_date.any() and col.on_unreadable == "missing":
            in_unit = np.where(not_date, np.nan, in_unit)
        elif not_date.any():
            raise ValueError(f"column {col.name!r} has value(s) that are not {_plural(col.type)} (the schema says "
                             f"{col.type})")
        missing = np.isnan(in_unit)
    elif col.type in ("integer", "float") and col.on_unreadable == "missing":
        number = pd.to_numeric(series, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        unreadable = np.isnan(number) | (col.type == "integer") & np.isfinite(number) & (number != np.round(number))
        missing = missing | unreadable
    codes = np.zeros(len(series), dtype=np.int32)
    missing_code = n_levels if col.nullable else -1
    ood_code = len(col.labels) - 1 if col.on_out_of_domain == "category" else -1
    present = ~missing
    values = series[present]
    if col.type == "categorical":
        # A hashed index lookup (vectorised), not Series.map: binarising is on the per-row path.
        found = pd.Index([c.strip() for c in col.categories or ()]).get_indexer(
            category_text(values).to_numpy(dtype=object))
        ood = found < 0
        sub = np.where(ood, ood_code, found)
    elif col.type == "boolean":
        text = category_text(values).astype(str).str.strip().str.lower().to_numpy(dtype=object)
        found = pd.Index(["false", "true", "0", "1"]).get_indexer(text)
        ood = found < 0
        sub = np.where(ood, ood_code, found % 2)
    else:
        if col.type in temporal.TEMPORAL_TYPES:
            numeric = in_unit[present]
        else:
            numeric = pd.to_numeric(values, errors="coerce").to_numpy(dtype=np.float64)
        low, high = col.bounds
        bad = ~np.isfinite(numeric)
        if bad.any():
            raise ValueError(f"column {col.name!r}: value(s) that are not finite numbers")
        if col.on_out_of_domain == "clip":
            numeric = np.clip(numeric, low, high)
        ood = (numeric < low) | (numeric > high)
        edges = np.asarray(col.bins, dtype=np.float64)
        sub = np.clip(np.searchsorted(edges, numeric, side="right") - 1, 0, len(edges) - 2)
    if ood.any():
        if ood_code < 0:
            raise ValueError(f"column {col.name!r}: value(s) outside the schema's domain")
    codes[present] = sub
    if missing.any():
        if missing_code < 0:
            raise ValueError(f"column {col.name!r}: missing value(s) but the column is not nullable")
        codes[missing] = missing_code
    return codes


def _plural(kind: str) -> str:
    return {"date": "dates", "timestamp": "timestamps"}.get(kind, "numbers")


def encode_codes(frame: pd.DataFrame, schema: Schema) -> np.ndarray:
    """Level codes (n x kept columns, int32) of a validated frame."""
    missing = [c.name for c in schema.kept_columns if c.name not in frame.columns]
    if missing:
        raise ValueError(f"input is missing schema column(s) {missing}")
    out = np.empty((len(frame), len(schema.kept_columns)), dtype=np.int32)
    for j, col in enumerate(schema.kept_columns):
        out[:, j] = _column_codes(col, frame[col.name])
    return out


POINT_WIDTH = 1e-9  # a float bin at most this wide (relative) decodes to its lower edge
SUB_BINS = 16  # fine decoding: at most this many sub-bins per bin


def sub_edges(col: Column) -> np.ndarray:
    """Public sub-bin edges of a numeric or temporal column: each bin cut into at most SUB_BINS equal parts.

    Whole-number columns (integer, date, timestamp) get whole edges, one sub-bin per value when a bin
    holds at most SUB_BINS values; their last bin [a, b] also holds b, which gets the sub-bin [b, b + 1]
    of its own (so the edges end at b + 1). A function of the schema alone."""
    edges = np.asarray(col.bins, dtype=np.float64)
    whole = col.type != "float"
    out = [edges[:1]]
    for a, b in zip(edges[:-1], edges[1:]):
        inner = np.linspace(a, b, SUB_BINS + 1)[1:]
        if whole:
            inner = np.unique(np.round(inner))
            inner = np.append(inner[(inner > a) & (inner < b)], b)
        out.append(inner)
    if whole:
        out.append(edges[-1:] + 1.0)
    return np.unique(np.concatenate(out))


def decoded_columns(schema: Schema) -> tuple[Column, ...]:
    """The kept numeric and temporal columns whose values fine decoding places inside their bins (a coded
    column's values are exact)."""
    return tuple(c for c in schema.kept_columns if c.type not in ("categorical", "boolean") and c.values is None)


def fine_schema(schema: Schema) -> Schema | None:
    """The schema with every kept numeric and temporal column's bins replaced by its ``sub_edges`` and every
    other column dropped (None: no such column). Its 1-way marginals are the sub-bin counts."""
    numeric = decoded_columns(schema)
    if not numeric:
        return None
    columns = []
    for col in schema.columns:
        if col in numeric:
            sub = tuple(float(e) for e in sub_edges(col))
            columns.append(col.model_copy(update={"bins": sub, "bounds": (sub[0], sub[-1]), "bin_by": None}))
        else:
            columns.append(col.model_copy(update={"drop": True}))
    return schema.model_copy(update={"columns": tuple(columns)})


def structural_levels(schema: Schema) -> dict[int, tuple[int, ...]]:
    """Per kept attribute, the codes of its structural levels: ``<missing>`` (nullable columns) and
    ``<out-of-domain>`` (``on_out_of_domain: category``), which hold no value of the column's own domain."""
    # Column.labels orders the codes: the domain's levels first, then the structural ones.
    return {j: tuple(range(col.domain_levels, len(col.labels))) for j, col in enumerate(schema.kept_columns)
            if len(col.labels) > col.domain_levels}


def _decode_column(col: Column, codes: np.ndarray, rng: np.random.Generator, fine: dict | None = None) -> pd.Series:
    n_levels = col.domain_levels
    in_domain = codes < n_levels
    is_missing = col.nullable & (codes == n_levels)
    if col.type == "categorical":
        labels = np.asarray(col.labels, dtype=object)
        values = labels[codes]
        values[is_missing] = None
        return pd.Series(pd.Categorical(values, categories=list(col.labels[: n_levels]) + (
            [OUT_OF_DOMAIN_LABEL] if col.on_out_of_domain == "category" else [])))
    if col.type == "boolean":
        values = pd.array(np.where(in_domain, codes == 1, False), dtype="boolean")
        values[~in_domain] = pd.NA
        return pd.Series(values)
    edges = np.asarray(col.bins, dtype=np.float64)
    safe = np.where(in_domain, codes, 0)
    if col.values is not None:  # a coded column: exactly its values
        coded = np.asarray(col.values, dtype=np.float64)[safe]  # an integer's: as int64 writes them (a uint64's too)
        values = pd.array(np.clip(coded, *INT64_DOUBLES).astype(np.int64), dtype="Int64") \
            if col.type == "integer" else pd.array(coded, dtype="Float64")
        values[~in_domain] = pd.NA
        return pd.Series(values)
    lo, hi = bin_lo, bin_hi = edges[safe], edges[safe + 1]
    if fine is not None:
        lo, hi = fine_draws(col, safe, fine, rng)
    if col.type in ("integer", "date", "timestamp"):
        # bins are [lo, hi) except the last, which is [lo, hi]; with fine decoding its sub-bin [b, b + 1] holds b alone
        last = hi > edges[-1] if fine is not None else hi >= edges[-1]
        upper = np.where(last, np.minimum(hi, edges[-1]), hi - 1)
        draws = whole_draws(lo, upper, rng)
        if col.resolution is not None:  # hourly readings on the hour: the grain's grid inside the sub-bin or bin
            draws = on_precision_grid(draws, 0, (lo, hi), (bin_lo, bin_hi), edges[-1],
                                      step=float(temporal.GRAIN_SECONDS[col.resolution])).astype(np.int64)
        elif col.precision is not None or col.place_shares is not None:  # whole tens: the tens in the sub-bin or bin
            # the sub-bin as whole_draws reads it, [lo, upper]: a sub-bin ending at the top edge leaves it to [b, b + 1]
            draws = on_precision_grid(draws, col.precision or 0, (lo, upper + 0.5), (bin_lo, bin_hi), edges[-1],
                                      shares=col.place_shares, rng=rng).astype(np.int64)
        if col.type == "integer":
            values = pd.array(draws, dtype="Int64")
        else:
            # whole days / seconds since the epoch -> dates / naive timestamps holding UTC wall time
            moments = pd.Series(pd.to_datetime(draws, unit="D" if col.type == "date" else "s"))
            moments[~in_domain] = pd.NaT
            return moments.dt.date.where(in_domain, None).astype(object) if col.type == "date" else moments
    else:
        draws = rng.uniform(lo, hi)
        # a bin narrower than float round-off is a point (the zeros' cell of a DP grid): its lower edge exactly,
        # never a sub-bin's (fine decoding splits the point's bin too: its draws were written as 1.5625e-10)
        point = (bin_hi - bin_lo) <= POINT_WIDTH * np.maximum(1.0, np.abs(bin_lo))
        draws = np.where(point, bin_lo, draws)
        if col.precision is not None:
            draws = on_precision_grid(draws, col.precision, (lo, hi), (bin_lo, bin_hi), edges[-1],
                                      shares=col.place_shares, rng=rng)
        values = pd.array(draws, dtype="Float64")
    values[~in_domain] = pd.NA
    return pd.Series(values)


def decode_codes(codes: np.ndarray, schema: Schema, rng: np.random.Generator, fine: dict | None = None) -> pd.DataFrame:
    """Table in the schema's kept columns from level codes (post-processing).

    ``fine``: per column name, DP sub-bin counts (``{"edges", "noisy_counts"}``, as the run's fine
    decoding measured them): a value is drawn from a sub-bin chosen in proportion to them, then uniformly
    inside it; without them, uniformly inside its bin."""
    cols = schema.kept_columns
    if codes.ndim != 2 or codes.shape[1] != len(cols):
        raise ValueError(f"codes must have shape (n, {len(cols)}), got {codes.shape}")
    fine = fine or {}
    return pd.DataFrame({col.name: written_form(col, _decode_column(col, codes[:, j], rng, fine.get(col.name)))
                         for j, col in enumerate(cols)})


def arrow_schema(schema: Schema) -> pa.Schema:
    """Arrow types of a synthetic table: dictionary strings, booleans, nullable ints and floats, date32 and
    microsecond timestamps holding UTC time (Parquet DATE / TIMESTAMP, SQL DATE / TIMESTAMP)."""
    fields = []
    for col in schema.kept_columns:
        t = pa.string() if col.format is not None else {  # a written form is text ("1,234.50", 03/04/2021)
            "categorical": pa.dictionary(pa.int32(), pa.string()), "boolean": pa.bool_(),
            "integer": pa.int64(), "float": pa.float64(), "date": pa.date32(),
            "timestamp": pa.timestamp("us")}[col.type]
        fields.append(pa.field(col.name, t, nullable=True))
    return pa.schema(fields)


# ---------------------------------------------------------------- codes <-> bits

def check_codes(codes: np.ndarray, domain: Domain) -> np.ndarray:
    """The codes (n x attributes) as an array, after checking their shape and that every level lies in
    its attribute's domain: a code >= its attribute's size would silently land in the next attribute's
    block (one-hot) or in another marginal's cells (statistics)."""
    codes = np.asarray(codes)
    if codes.ndim != 2 or codes.shape[1] != domain.n_attributes:
        raise ValueError(f"codes must have shape (n, {domain.n_attributes}), got {codes.shape}")
    if codes.size and (np.any(codes < 0) or np.any(codes >= np.asarray(domain.sizes))):
        bad = [domain.names[j] for j in range(domain.n_attributes)
               if np.any((codes[:, j] < 0) | (codes[:, j] >= domain.sizes[j]))]
        raise ValueError(f"codes out of range for attribute(s) {bad}: levels outside the domain")
    return codes


def one_hot(codes: np.ndarray, domain: Domain, dtype=np.uint8) -> np.ndarray:
    """n x width one-hot matrix: exactly one 1 per attribute block."""
    check_codes(codes, domain)
    n = codes.shape[0]
    out = np.zeros((n, domain.width), dtype=dtype)
    rows = np.arange(n)
    for j in range(domain.n_attributes):
        out[rows, domain.offsets[j] + codes[:, j]] = 1
    return out


def from_one_hot(bits: np.ndarray, domain: Domain) -> np.ndarray:
    """Codes from one-hot (or relaxed, block-simplex) rows: the arg-max level of each block."""
    if bits.ndim != 2 or bits.shape[1] != domain.width:
        raise ValueError(f"one-hot rows must have width {domain.width}, got {bits.shape}")
    out = np.empty((bits.shape[0], domain.n_attributes), dtype=np.int32)
    for j in range(domain.n_attributes):
        out[:, j] = np.argmax(bits[:, domain.offsets[j]: domain.offsets[j + 1]], axis=1)
    return out


def one_hot_names(schema: Schema) -> list[str]:
    return [f"{col.name}={label}" for col in schema.kept_columns for label in col.labels]


def to_binary(codes: np.ndarray, domain: Domain) -> np.ndarray:
    """n x binary_width {0,1} matrix: each code in ceil(log2 size) bits, most significant first."""
    check_codes(codes, domain)
    blocks = []
    for j, w in enumerate(domain.binary_widths):
        if w:
            shifts = np.arange(w - 1, -1, -1)
            blocks.append(((codes[:, j, None] >> shifts) & 1).astype(np.uint8))
    return np.concatenate(blocks, axis=1) if blocks else np.zeros((codes.shape[0], 0), dtype=np.uint8)


def from_binary(bits: np.ndarray, domain: Domain) -> tuple[np.ndarray, np.ndarray]:
    """Codes from compact binary rows, and a mask of the codes that were invalid (>= size).

    An invalid code (possible for points drawn from the whole cube) maps deterministically to
    ``code mod size``: a fixed, data-independent map, so decoding stays post-processing.
    """
    if bits.ndim != 2 or bits.shape[1] != domain.binary_width:
        raise ValueError(f"binary rows must have width {domain.binary_width}, got {bits.shape}")
    codes = np.zeros((bits.shape[0], domain.n_attributes), dtype=np.int64)
    invalid = np.zeros_like(codes, dtype=bool)
    start = 0
    for j, w in enumerate(domain.binary_widths):
        if w:
            weights = 1 << np.arange(w - 1, -1, -1)
            raw = bits[:, start: start + w].astype(np.int64) @ weights
            invalid[:, j] = raw >= domain.sizes[j]
            codes[:, j] = raw % domain.sizes[j]
            start += w
    return codes.astype(np.int32), invalid
