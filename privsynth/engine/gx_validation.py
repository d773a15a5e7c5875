"""Schema validation of an input table with Great Expectations (GX) 1.x.

``build_suite(schema)`` turns a :class:`~privsynth.schema.Schema` into a GX ``ExpectationSuite``;
``validate_frame(frame, schema)`` runs it (plus a few cheap checks GX cannot express well, done in
pandas) and returns a :class:`ValidationReport`.

What is checked, per the schema:

* the table's columns are exactly the schema's columns, dropped ones included;
* date/timestamp columns hold dates (datetime types, Python dates, ISO text), checked in pandas as the
  encoder reads them (``privsynth.schema.temporal``), with bounds checked the same way;
* numeric (integer/float) columns have a numeric type, hold no +-inf, and integer columns hold
  whole numbers; boolean columns hold boolean-like values (only where out-of-domain values ``fail``,
  since a boolean ``category`` column turns anything else into the out-of-domain level);
* values are in the public domain (categoricals in the category list, numerics inside the bounds)
  only where ``on_out_of_domain`` is ``fail``: ``category`` and ``clip`` columns take out-of-domain
  values by design;
* no missing values (None/NaN) unless the column is nullable, and no column that is entirely missing;
* at least one row, and no repeated column names.

The checks mirror what :func:`privsynth.schema.encoding.encode_codes` accepts, so a frame that passes
validation encodes without error (categorical values are compared as strings, as the encoder does).

Two forms of the report. ``public_json`` (what the pipeline writes to ``validation.json`` and logs)
holds pass/fail and count-free messages per expectation, built only from schema metadata and
column names: counts, even the row count n, are statistics of the private table under add/remove
neighbours. ``to_json`` adds GX's counts (exact, not DP) for a data owner's own checks. GX results
are reduced to a whitelist of counts; partial_unexpected_list, observed_value, exception messages
and tracebacks (which can quote values) are dropped. GX's ``unexpected_percent`` is relative to the
non-missing values, except for the not-null check (relative to all rows).

Cost: importing GX takes about 4 s once per process; after that, validating the 48,842-row Adult
table takes about 0.6 s of CPU (mostly GX's per-expectation bookkeeping; one ephemeral context per
call costs a few milliseconds). Progress bars and analytics are off.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from privsynth.schema import Column, Schema, temporal

if TYPE_CHECKING:  # GX takes seconds to import: load it only when a suite is built
    import great_expectations as gx

# Numeric dtypes GX accepts for a numeric column: numpy dtypes, pandas nullable dtypes, and (for
# object columns, checked value by value) Python int and float.
NUMERIC_TYPES: tuple[str, ...] = (
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64",
    # pandas nullable dtypes go by their class names here (GX resolves them with getattr(pandas, name))
    "Int8Dtype", "Int16Dtype", "Int32Dtype", "Int64Dtype", "UInt8Dtype", "UInt16Dtype", "UInt32Dtype",
    "UInt64Dtype", "Float32Dtype", "Float64Dtype",
    "int", "float",
)  # fmt: skip
# Values the encoder reads as a boolean (it also lower-cases and strips strings; GX cannot, so
# padded spellings like " yes" fail here, which is stricter than the encoder, never looser).
BOOLEAN_VALUES: tuple[Any, ...] = (True, False, 1, 0, "true", "false", "True", "False", "TRUE", "FALSE", "1", "0")

# Names of the checks done in pandas; they report in the same ExpectationOutcome form as GX's.
EXPECT_UNIQUE_COLUMN_NAMES = "privsynth_expect_table_column_names_to_be_unique"
EXPECT_ROWS = "privsynth_expect_table_to_have_rows"
EXPECT_FINITE = "privsynth_expect_column_values_to_not_be_infinite"
EXPECT_WHOLE_NUMBERS = "privsynth_expect_column_values_to_be_whole_numbers"
# A categorical column whose values are mostly outside its categories is free text or has an incomplete
# list: refused with advice instead of silently becoming <out-of-domain> in the release.
EXPECT_MOSTLY_IN_DOMAIN = "privsynth_expect_most_column_values_in_domain"
MAX_OUT_OF_DOMAIN_SHARE = 0.5

# Only these keys of a GX result are kept; everything else (value lists, observed values) is dropped.
_SAFE_RESULT_KEYS = ("unexpected_count", "unexpected_percent", "element_count")


class DataValidationError(ValueError):
    """The input table does not match its schema; the message lists each failed expectation."""


@dataclass(frozen=True)
class ExpectationOutcome:
    """One expectation's result, holding counts and a value-free message only (safe to publish)."""

    expectation_type: str
    column: str | None
    success: bool
    unexpected_count: int | None = None
    unexpected_percent: float | None = None
    element_count: int | None = None
    message: str = ""
    public_message: str = ""

    def public_json(self) -> dict:
        """Pass/fail and a count-free message: what validation.json and logs may hold (DESIGN 5.4)."""
        return {"expectation_type": self.expectation_type, "column": self.column, "success": self.success,
                "message": self.public_message}

    def to_json(self) -> dict:
        return {
            "expectation_type": self.expectation_type,
            "column": self.column,
            "success": self.success,
            "unexpected_count": self.unexpected_count,
            "unexpected_percent": self.unexpected_percent,
            "element_count": self.element_count,
            "message": self.message,
        }


@dataclass(frozen=True)
class ValidationReport:
    """Outcome of validating one table against one schema; ``public_json`` is the public validation.json."""

    success: bool
    results: tuple[ExpectationOutcome, ...]
    schema_name: str = ""
    schema_hash: str = ""

    @property
    def failures(self) -> tuple[ExpectationOutcome, ...]:
        return tuple(r for r in self.results if not r.success)

    def _as_json(self, results: list[dict]) -> dict:
        return {
            "success": self.success,
            "schema": self.schema_name,
            "schema_hash": self.schema_hash,
            "evaluated_expectations": len(self.results),
            "failed_expectations": len(self.failures),
            "results": results,
        }

    def to_json(self) -> dict:
        """Internal form, with counts (for the data owner's own checks, never a public artifact)."""
        return self._as_json([r.to_json() for r in self.results])

    def public_json(self) -> dict:
        """validation.json: pass/fail per expectation, no values and no counts.

        Counts (and the row count n) are statistics of the private table; under add/remove-one
        neighbours even n is private, so the public report states only which expectation failed.
        """
        return self._as_json([r.public_json() for r in self.results])

    @property
    def row_count(self) -> int | None:
        """The table's exact row count, counted by the non-empty check: PRIVATE (never in ``public_json``),
        for checks that refuse without stating it."""
        rows = next((r for r in self.results if r.expectation_type == EXPECT_ROWS), None)
        return None if rows is None else rows.element_count

    def public_failure_message(self) -> str:
        """One count-free line per failed expectation; '' on success."""
        return "\n".join(r.public_message for r in self.failures)

    def failure_message(self) -> str:
        """One line per failed expectation naming the column and what was expected; '' on success."""
        return "\n".join(r.message for r in self.failures)

    def raise_if_failed(self) -> None:
        if not self.success:
            raise DataValidationError(
                f"input does not match schema {self.schema_name!r}:\n{self.failure_message()}"
            )


# ---------------------------------------------------------------- the suite

def _gx():
    # Analytics off before GX reads its settings; the context config also says so (belt and braces).
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations

    return great_expectations


def _column_expectations(col: Column) -> list:
    """GX expectations for one kept column (presence is checked at table level)."""
    gxe = _gx().expectations
    out: list = []
    if col.type in ("integer", "float"):
        out.append(gxe.ExpectColumnValuesToBeInTypeList(column=col.name, type_list=list(NUMERIC_TYPES)))
        if col.on_out_of_domain == "fail":
            low, high = col.bounds  # type: ignore[misc]  # numeric columns always have bounds
            out.append(gxe.ExpectColumnValuesToBeBetween(column=col.name, min_value=low, max_value=high))
    elif col.type in temporal.TEMPORAL_TYPES:
        pass  # type and bounds: _temporal_checks (GX compares dates and ISO text unreliably)
    elif col.type == "boolean":
        if col.on_out_of_domain == "fail":
            out.append(gxe.ExpectColumnValuesToBeInSet(column=col.name, value_set=list(BOOLEAN_VALUES)))
    elif col.on_out_of_domain == "fail":  # categorical
        out.append(gxe.ExpectColumnValuesToBeInSet(column=col.name, value_set=list(col.categories or ())))
    if not col.nullable:
        out.append(gxe.ExpectColumnValuesToNotBeNull(column=col.name))
    # A column present by name but empty is an ingest fault (wrong mapping), even when nullable.
    out.append(gxe.ExpectColumnProportionOfNonNullValuesToBeBetween(column=col.name, min_value=0, strict_min=True))
    return out


def _suite(schema: Schema, present: set[str] | None) -> "gx.ExpectationSuite":
    g = _gx()
    expectations = [
        g.expectations.ExpectTableColumnsToMatchSet(column_set=list(schema.column_names), exact_match=True)
    ]
    for col in schema.kept_columns:
        if present is None or col.name in present:
            expectations.extend(_column_expectations(col))
    # Built in the constructor: add_expectation would look for an active data context's store.
    suite = g.ExpectationSuite(name=f"privsynth-{schema.name}", expectations=expectations)
    if len(suite.expectations) != len(expectations):  # GX logs and skips invalid ones; we refuse
        raise RuntimeError(f"GX rejected {len(expectations) - len(suite.expectations)} expectation(s) built from schema {schema.name!r}")
    return suite


def build_suite(schema: Schema) -> "gx.ExpectationSuite":
    """The GX ExpectationSuite the schema implies (the pandas-side checks of validate_frame aside)."""
    return _suite(schema, None)


# ---------------------------------------------------------------- messages (schema metadata only)

def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def _bound(col: Column, x: float) -> str:
    return temporal.format_unit(x, col.type) if col.type in temporal.TEMPORAL_TYPES else _num(x)


def _names(names: list[str], safe: bool) -> str:
    return repr(sorted(names)) if safe else f"{len(names)} (names withheld)"


def _message(kind: str, column: str | None, col: Column | None, count: int | None, frame: pd.DataFrame | None) -> str:
    where = f"column {column!r}" if column is not None else "table"
    n = "some" if count is None else str(count)
    if kind == "expect_column_values_to_be_in_type_list" and col is not None and col.type in temporal.TEMPORAL_TYPES:
        return f"{where}: {n} value(s) are not {col.type}s; expected {col.type} values"
    if kind == "expect_column_values_to_be_in_type_list":
        dtype = str(frame[column].dtype) if frame is not None and column in frame.columns else "?"
        if count is None:
            return f"{where}: dtype {dtype!r} is not numeric; expected {col.type if col else 'numeric'} values"
        return f"{where}: {n} value(s) are not numbers; expected {col.type if col else 'numeric'} values"
    if kind == "expect_column_values_to_be_between" and col is not None and col.bounds:
        return f"{where}: {n} value(s) outside [{_bound(col, col.bounds[0])}, {_bound(col, col.bounds[1])}]"
    if kind == "expect_column_values_to_be_in_set" and col is not None:
        if col.type == "boolean":
            return f"{where}: {n} value(s) are not boolean (true/false, True/False, 1/0)"
        return f"{where}: {n} value(s) not among the schema's {len(col.categories or ())} categories"
    if kind == "expect_column_values_to_not_be_null":
        return f"{where}: {n} missing value(s) (null/NaN) but the column is not nullable"
    if kind == "expect_column_proportion_of_non_null_values_to_be_between":
        return f"{where}: every value is missing"
    if kind == EXPECT_FINITE:
        return f"{where}: {n} value(s) are +inf or -inf; numeric values must be finite"
    if kind == EXPECT_WHOLE_NUMBERS:
        return f"{where}: {n} value(s) are not whole numbers; expected integer values"
    if kind == EXPECT_MOSTLY_IN_DOMAIN and col is not None:
        return (f"{where}: most values are outside the schema's {len(col.categories or ())} categories (free text, or "
                "an incomplete list?); list its categories, exclude it (drop: true), or draft a top-k set with "
                "`privsynth schema draft --epsilon E`")
    return f"{where}: {kind} failed"


def _outcome(kind: str, column: str | None, success: bool, schema: Schema, frame: pd.DataFrame,
             unexpected: int | None = None, percent: float | None = None, elements: int | None = None,
             message: str | None = None) -> ExpectationOutcome:
    col = schema.column(column) if column is not None and column in schema.column_names else None
    if message is None:
        message = "" if success else _message(kind, column, col, unexpected, frame)
        public = "" if success else _message(kind, column, col, None, frame)
    else:
        public = message
    return ExpectationOutcome(kind, column, bool(success), unexpected, percent, elements, message, public)


# ---------------------------------------------------------------- pandas-side checks

def _schema_named(frame: pd.DataFrame, schema: Schema) -> bool:
    # When no frame column carries a schema name (a headerless CSV, a wrong file), the "column
    # names" may be a data row, so unexpected names are counted instead of listed.
    return bool(set(map(str, frame.columns)) & set(schema.column_names))


def _column_set_outcome(frame: pd.DataFrame, schema: Schema) -> ExpectationOutcome:
    kind = "expect_table_columns_to_match_set"
    have = [str(c) for c in frame.columns]
    missing = [c for c in schema.column_names if c not in have]
    unexpected = sorted(set(have) - set(schema.column_names))
    if not missing and not unexpected:
        return _outcome(kind, None, True, schema, frame)
    parts = []
    if missing:
        parts.append(f"missing column(s) {sorted(missing)}")
    if unexpected:
        parts.append(f"unexpected column(s) {_names(unexpected, _schema_named(frame, schema))}")
    msg = f"table: {'; '.join(parts)}; expected exactly the schema's {len(schema.columns)} columns"
    return _outcome(kind, None, False, schema, frame, message=msg)


def _numeric_values(series: pd.Series) -> np.ndarray | None:
    """Float values of a numeric (or object) column, NaN for missing; None for non-numeric dtypes."""
    dtype = series.dtype
    if pd.api.types.is_bool_dtype(dtype):
        return None
    if pd.api.types.is_numeric_dtype(dtype):
        return series.to_numpy(dtype=np.float64, na_value=np.nan)
    if dtype == object:  # noqa: E721  (SQL sources give Python numbers in object columns)
        return pd.to_numeric(series, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    return None


def _numeric_checks(frame: pd.DataFrame, schema: Schema) -> list[ExpectationOutcome]:
    out = []
    n = len(frame)
    for col in schema.kept_columns:
        if col.type not in ("integer", "float") or col.name not in frame.columns:
            continue
        values = _numeric_values(frame[col.name])
        if values is None:
            continue  # the GX type expectation reports a non-numeric column
        nonmissing = int((~np.isnan(values)).sum())
        pct = lambda k: 100.0 * k / nonmissing if nonmissing else 0.0  # noqa: E731
        inf = int(np.isinf(values).sum())
        out.append(_outcome(EXPECT_FINITE, col.name, inf == 0, schema, frame, inf, pct(inf), n))
        if col.type == "integer":
            finite = values[np.isfinite(values)]
            frac = int((finite != np.floor(finite)).sum())
            out.append(_outcome(EXPECT_WHOLE_NUMBERS, col.name, frac == 0, schema, frame, frac, pct(frac), n))
    return out


def mostly_in_domain(col: Column, out_of_domain: int, present: int) -> bool:
    """At most MAX_OUT_OF_DOMAIN_SHARE of a category-mapped column's present values are outside its list.

    A list released by a DP draft (``dp_released`` holds categories) passes by construction: it holds the
    frequent values, and every other value is the explicit out-of-domain level."""
    if "categories" in col.dp_released:
        return True
    return present == 0 or out_of_domain <= MAX_OUT_OF_DOMAIN_SHARE * present


def _mostly_in_domain_checks(frame: pd.DataFrame, schema: Schema) -> list[ExpectationOutcome]:
    """Categorical columns that map unknown values to <out-of-domain>: most values must be known."""
    from privsynth.schema.encoding import category_text

    out = []
    for col in schema.kept_columns:
        if col.type != "categorical" or col.on_out_of_domain != "category" or col.name not in frame.columns:
            continue
        values = category_text(frame[col.name]).dropna()
        ood = int((~values.isin(list(col.categories or ()))).sum())
        ok = mostly_in_domain(col, ood, len(values))
        out.append(_outcome(EXPECT_MOSTLY_IN_DOMAIN, col.name, ok, schema, frame, ood,
                            100.0 * ood / len(values) if len(values) else 0.0, len(frame)))
    return out


def _temporal_checks(frame: pd.DataFrame, schema: Schema) -> list[ExpectationOutcome]:
    """Type (values read as dates/timestamps) and bounds of date/timestamp columns, as the encoder reads them."""
    out = []
    n = len(frame)
    for col in schema.kept_columns:
        if col.type not in temporal.TEMPORAL_TYPES or col.name not in frame.columns:
            continue
        values, not_date = temporal.values_in_unit(frame[col.name], col.type)
        present = int((~np.isnan(values)).sum() + not_date.sum())
        pct = lambda k: 100.0 * k / present if present else 0.0  # noqa: E731
        bad = int(not_date.sum())
        out.append(_outcome("expect_column_values_to_be_in_type_list", col.name, bad == 0, schema, frame, bad, pct(bad), n))
        if col.on_out_of_domain == "fail":
            low, high = col.bounds  # type: ignore[misc]
            outside = int(((values < low) | (values > high)).sum())
            out.append(_outcome("expect_column_values_to_be_between", col.name, outside == 0, schema, frame,
                                outside, pct(outside), n))
    return out


def _prepare(frame: pd.DataFrame, schema: Schema) -> pd.DataFrame:
    """The frame GX sees: categorical values as strings (as the encoder compares them)."""
    updates = {}
    for col in schema.kept_columns:
        if col.name not in frame.columns:
            continue
        s = frame[col.name]
        if col.type == "categorical" and not isinstance(s.dtype, pd.StringDtype):
            updates[col.name] = s.astype(object).where(s.isna(), s.astype(str))
        elif col.type in temporal.TEMPORAL_TYPES and not pd.api.types.is_datetime64_any_dtype(s.dtype):
            # blank text is missing, as the encoder reads it
            updates[col.name] = s.astype(object).map(lambda v: None if isinstance(v, str) and not v.strip() else v)
        elif col.type in ("integer", "float") and isinstance(s.dtype, pd.ArrowDtype) and pd.api.types.is_numeric_dtype(s.dtype):
            updates[col.name] = s.astype("Int64" if pd.api.types.is_integer_dtype(s.dtype) else "Float64")
    return frame.assign(**updates) if updates else frame


# ---------------------------------------------------------------- running the suite

def _context():
    g = _gx()
    from great_expectations.data_context.types.base import (
        DataContextConfig,
        InMemoryStoreBackendDefaults,
        ProgressBarsConfig,
    )

    config = DataContextConfig(
        store_backend_defaults=InMemoryStoreBackendDefaults(),
        analytics_enabled=False,
        progress_bars=ProgressBarsConfig(globally=False, metric_calculations=False),
    )
    return g.get_context(mode="ephemeral", project_config=config)


def _gx_outcomes(frame: pd.DataFrame, schema: Schema, suite) -> list[ExpectationOutcome]:
    context = _context()
    batch_definition = (
        context.data_sources.add_pandas("privsynth")
        .add_dataframe_asset("input")
        .add_batch_definition_whole_dataframe("whole")
    )
    try:
        batch = batch_definition.get_batch(batch_parameters={"dataframe": frame})
        # BASIC is the least verbose format with counts; the value sample it adds is dropped below.
        result = batch.validate(suite, result_format={"result_format": "BASIC", "partial_unexpected_count": 0})
    except Exception as err:  # noqa: BLE001
        # Not chained: GX's message or traceback locals could quote data values into logs.
        raise RuntimeError(
            f"Great Expectations failed while validating against schema {schema.name!r} ({type(err).__name__})"
        ) from None
    out = []
    for r in result.results:
        kind = r.expectation_config.type
        column = r.expectation_config.kwargs.get("column")
        if kind == "expect_table_columns_to_match_set":
            continue  # reported by _column_set_outcome, which withholds names that may be data
        if _raised(r.exception_info):
            # GX's exception text can quote values: keep only the fact that the check could not run.
            col = schema.column(column) if column in schema.column_names else None
            if kind == "expect_column_values_to_be_between" and col is not None and col.bounds:
                what = f"values could not be compared with the bounds [{_bound(col, col.bounds[0])}, {_bound(col, col.bounds[1])}]"
            else:
                what = f"{kind} could not be evaluated"
            msg = f"column {column!r}: {what} (values of a type the check cannot handle)"
            out.append(_outcome(kind, column, False, schema, frame, message=msg))
            continue
        safe = {k: (r.result or {}).get(k) for k in _SAFE_RESULT_KEYS}
        out.append(_outcome(
            kind, column, bool(r.success), schema, frame,
            None if safe["unexpected_count"] is None else int(safe["unexpected_count"]),
            None if safe["unexpected_percent"] is None else float(safe["unexpected_percent"]),
            None if safe["element_count"] is None else int(safe["element_count"]),
        ))
    return out


def _raised(info: Any) -> bool:
    """Whether a GX result records an exception: flat ({'raised_exception': ...}) or per metric."""
    if not info:
        return False
    def flag(x: Any) -> bool:
        value = x.get("raised_exception") if isinstance(x, dict) else getattr(x, "raised_exception", None)
        return bool(value) and value != "False"
    return flag(info) or any(flag(v) for v in info.values())


def validate_frame(frame: pd.DataFrame, schema: Schema) -> ValidationReport:
    """Check ``frame`` against ``schema``; the report carries no data value and is safe to publish."""
    results: list[ExpectationOutcome] = []
    names = [str(c) for c in frame.columns]
    repeated = sorted({c for c in names if names.count(c) > 1})
    if repeated:
        safe = set(repeated) <= set(schema.column_names)
        results.append(_outcome(EXPECT_UNIQUE_COLUMN_NAMES, None, False, schema, frame,
                                message=f"table: column name(s) appear more than once: {_names(repeated, safe)}"))
    else:
        results.append(_outcome(EXPECT_UNIQUE_COLUMN_NAMES, None, True, schema, frame))
    n = len(frame)
    results.append(_outcome(EXPECT_ROWS, None, n > 0, schema, frame, elements=n,
                            message=None if n > 0 else "table: 0 rows; expected at least one"))
    results.append(_column_set_outcome(frame, schema))
    # Per-column checks need one column per name and at least one row to mean anything.
    if not repeated and n > 0:
        present = set(names) & set(schema.column_names)
        results.extend(_numeric_checks(frame, schema))
        results.extend(_temporal_checks(frame, schema))
        results.extend(_mostly_in_domain_checks(frame, schema))
        results.extend(_gx_outcomes(_prepare(frame, schema), schema, _suite(schema, present)))
    results.sort(key=lambda r: (r.column is not None, _order(schema, r.column), _KIND_ORDER.get(r.expectation_type, 99)))
    return ValidationReport(
        success=all(r.success for r in results),
        results=tuple(results),
        schema_name=schema.name,
        schema_hash=schema.content_hash(),
    )


# Report order within a column: type first (other failures often follow from it), then domain, nulls.
_KIND_ORDER = {
    EXPECT_UNIQUE_COLUMN_NAMES: 0,
    EXPECT_ROWS: 1,
    "expect_table_columns_to_match_set": 2,
    "expect_column_values_to_be_in_type_list": 10,
    EXPECT_FINITE: 11,
    EXPECT_WHOLE_NUMBERS: 12,
    "expect_column_values_to_be_between": 13,
    "expect_column_values_to_be_in_set": 13,
    EXPECT_MOSTLY_IN_DOMAIN: 13,
    "expect_column_values_to_not_be_null": 14,
    "expect_column_proportion_of_non_null_values_to_be_between": 15,
}


def _order(schema: Schema, column: str | None) -> int:
    names = schema.column_names
    return names.index(column) if column in names else -1


def check_frame(frame: pd.DataFrame, schema: Schema) -> ValidationReport:
    """validate_frame, raising DataValidationError (value-free message) when the frame fails."""
    report = validate_frame(frame, schema)
    report.raise_if_failed()
    return report


__all__ = [
    "BOOLEAN_VALUES",
    "NUMERIC_TYPES",
    "DataValidationError",
    "ExpectationOutcome",
    "ValidationReport",
    "build_suite",
    "check_frame",
    "validate_frame",
]
