"""THE definition of a schema's expectations, run two ways.

``schema_expectations(schema)`` lists what a table must satisfy to be read under ``schema``, in report
order. The same list is

* run in place by the engine as one aggregate query (:mod:`privsynth.engine.validation`: every run's
  validate stage, on the private input), and
* written as a Great Expectations 1.x ``ExpectationSuite`` (``gx_suite`` / ``suite_json``: what
  ``privsynth schema expectations`` writes for a team's own GX project), which every run also runs on
  its synthetic table (:mod:`privsynth.engine.gx_run`).

Each :class:`Expectation` names its GX class and keyword arguments where GX can express it; the few it
cannot (finite values, whole numbers, date types and bounds, unique column names) are marked
engine-only with the reason. What is checked, per the schema: exactly the schema's columns (dropped
ones included) and at least one row; numeric columns have a numeric type, no +-inf, and integer ones
whole numbers; values are inside the public domain where ``on_out_of_domain`` is ``fail``; a categorical
column that maps unknown values to ``<out-of-domain>`` holds mostly (>= 50%) known values; no missing
value unless nullable, and no column that is entirely missing.

Messages are built from schema metadata and column names only: the public form has no count and no
value (counts of the private input are statistics of it, docs/design.md 5.4).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from privsynth.schema import Column, Schema, temporal
from privsynth.schema.determined import number_label

# Numeric dtypes GX accepts for a numeric column: numpy dtypes, pandas nullable dtypes (by class name:
# GX resolves them with getattr(pandas, name)), and Python int/float for object columns.
NUMERIC_TYPES: tuple[str, ...] = (
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64",
    "Int8Dtype", "Int16Dtype", "Int32Dtype", "Int64Dtype", "UInt8Dtype", "UInt16Dtype", "UInt32Dtype",
    "UInt64Dtype", "Float32Dtype", "Float64Dtype",
    "int", "float",
)  # fmt: skip
# Values the encoder reads as a boolean (it also strips and lower-cases text; GX cannot, so padded
# spellings fail in GX: stricter than the encoder, never looser).
BOOLEAN_VALUES: tuple[Any, ...] = (True, False, 1, 0, "true", "false", "True", "False", "TRUE", "FALSE", "1", "0")
# A category-mapped column whose values are mostly unknown is free text or has an incomplete list.
MAX_OUT_OF_DOMAIN_SHARE = 0.5

UNIQUE_COLUMN_NAMES = "privsynth_expect_table_column_names_to_be_unique"
ROWS = "privsynth_expect_table_to_have_rows"
COLUMN_SET = "expect_table_columns_to_match_set"
TYPE_LIST = "expect_column_values_to_be_in_type_list"
FINITE = "privsynth_expect_column_values_to_not_be_infinite"
WHOLE_NUMBERS = "privsynth_expect_column_values_to_be_whole_numbers"
BETWEEN = "expect_column_values_to_be_between"
IN_SET = "expect_column_values_to_be_in_set"
MOSTLY_IN_DOMAIN = "privsynth_expect_most_column_values_in_domain"
NOT_NULL = "expect_column_values_to_not_be_null"
NON_NULL_PROPORTION = "expect_column_proportion_of_non_null_values_to_be_between"

_NO_GX = "GX 1.x has no expectation for it"
_TEMPORAL = "GX compares dates and ISO text unreliably; the engine reads them as the encoder does"
_WRITTEN = "numbers written in a format (thousands, currency, percent) are text to GX; the engine reads the format"


@dataclass(frozen=True)
class Expectation:
    """One check of the schema: ``kind`` is its name in reports; ``gx`` the GX class name and kwargs, or
    None with ``engine_only`` saying why GX cannot run it."""

    kind: str
    column: str | None
    gx: str | None = None
    gx_kwargs: dict = field(default_factory=dict, hash=False, compare=False)
    engine_only: str = ""


def _column_expectations(col: Column, synthetic: bool = False) -> list[Expectation]:
    name, out = col.name, []
    if col.format is not None and col.type in ("integer", "float"):
        # numbers written as text ("1,234.50"): GX sees strings; the engine reads them in their format
        out.append(Expectation(TYPE_LIST, name, engine_only=_WRITTEN))
        out.append(Expectation(FINITE, name, engine_only=_WRITTEN))
        if col.type == "integer":
            out.append(Expectation(WHOLE_NUMBERS, name, engine_only=_WRITTEN))
        if col.on_out_of_domain == "fail":
            out.append(Expectation(BETWEEN, name, engine_only=_WRITTEN))
    elif col.type in ("integer", "float"):
        out.append(Expectation(TYPE_LIST, name, "ExpectColumnValuesToBeInTypeList", {"type_list": list(NUMERIC_TYPES)}))
        out.append(Expectation(FINITE, name, engine_only=_NO_GX))
        if col.type == "integer":
            out.append(Expectation(WHOLE_NUMBERS, name, engine_only=_NO_GX))
        if col.on_out_of_domain == "fail":
            low, high = col.bounds  # type: ignore[misc]  # numeric columns always have bounds
            out.append(Expectation(BETWEEN, name, "ExpectColumnValuesToBeBetween",
                                   {"min_value": low, "max_value": high}))
    elif col.type in temporal.TEMPORAL_TYPES:
        out.append(Expectation(TYPE_LIST, name, engine_only=_TEMPORAL))
        if col.on_out_of_domain == "fail":
            out.append(Expectation(BETWEEN, name, engine_only=_TEMPORAL))
    elif col.on_out_of_domain == "fail":
        values = list(BOOLEAN_VALUES) if col.type == "boolean" else list(col.categories or ())
        out.append(Expectation(IN_SET, name, "ExpectColumnValuesToBeInSet", {"value_set": values}))
    elif col.type == "categorical" and col.on_out_of_domain == "category" and "categories" not in col.dp_released:
        # A list released by a DP draft (dp_released) holds the frequent values by construction, every other
        # value being the explicit out-of-domain level: the draft and the run agree, so it is not checked.
        out.append(Expectation(MOSTLY_IN_DOMAIN, name, "ExpectColumnValuesToBeInSet",
                               {"value_set": list(col.categories or ()), "mostly": 1 - MAX_OUT_OF_DOMAIN_SHARE}))
    if not col.nullable:
        out.append(Expectation(NOT_NULL, name, "ExpectColumnValuesToNotBeNull"))
    # A column present by name but empty is an ingest fault (a wrong mapping), even when nullable. A synthetic
    # nullable column is empty where the release's measurements show none of its values (evidence.unsupported_values).
    if not (synthetic and col.nullable):
        out.append(Expectation(NON_NULL_PROPORTION, name, "ExpectColumnProportionOfNonNullValuesToBeBetween",
                               {"min_value": 0, "strict_min": True}))
    return out


def expected_columns(schema: Schema, synthetic: bool = False) -> list[str]:
    """The columns a table must have: the schema's (dropped ones included), or for a synthetic table the
    kept ones (a release never holds a dropped column)."""
    return [c.name for c in schema.kept_columns] if synthetic else list(schema.column_names)


def schema_expectations(schema: Schema, synthetic: bool = False) -> tuple[Expectation, ...]:
    """Every expectation of ``schema``, in report order: the table's, then each kept column's (type first,
    since other failures often follow from it, then domain, then missing values). ``synthetic``: for a
    synthetic table, which holds the kept columns only and nothing else."""
    table = [
        Expectation(UNIQUE_COLUMN_NAMES, None,
                    engine_only="a pandas frame GX validates cannot tell repeated names apart"),
        Expectation(ROWS, None, "ExpectTableRowCountToBeBetween", {"min_value": 1}),
        # other_columns: ignore: the schema's columns must be there, others may be too
        Expectation(COLUMN_SET, None, "ExpectTableColumnsToMatchSet",
                    {"column_set": expected_columns(schema, synthetic),
                     "exact_match": synthetic or schema.other_columns == "fail"}),
    ]
    return tuple(table + [e for col in schema.kept_columns for e in _column_expectations(col, synthetic)])


def mostly_in_domain(out_of_domain: int, present: int) -> bool:
    """At most MAX_OUT_OF_DOMAIN_SHARE of a category-mapped column's present values are outside its list."""
    return present == 0 or out_of_domain <= MAX_OUT_OF_DOMAIN_SHARE * present


# ---------------------------------------------------------------- the GX suite

def gx_module():
    """Great Expectations, imported on first use (seconds) with analytics off."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations

    return great_expectations


def gx_suite(schema: Schema, synthetic: bool = False):
    """The schema's expectations GX can run, as a GX ``ExpectationSuite`` (each carries its privsynth
    kind in ``meta``, so results map back to the engine's report)."""
    gx = gx_module()
    expectations = [getattr(gx.expectations, e.gx)(**({"column": e.column} if e.column else {}), **e.gx_kwargs,
                                                     meta={"privsynth": e.kind})
                    for e in schema_expectations(schema, synthetic) if e.gx]
    # Built in the constructor: add_expectation would look for an active data context's store.
    name = f"privsynth-{schema.name}" + ("-synthetic" if synthetic else "")
    suite = gx.ExpectationSuite(name=name, expectations=expectations,
                                meta={"privsynth_schema": schema.name, "privsynth_schema_hash": schema.content_hash()})
    if len(suite.expectations) != len(expectations):  # GX logs and skips invalid ones; we refuse
        raise RuntimeError(f"GX rejected {len(expectations) - len(suite.expectations)} expectation(s) of schema "
                           f"{schema.name!r}")
    return suite


def suite_json(schema: Schema) -> dict:
    """The suite as JSON: ``gx.ExpectationSuite(**suite_json(schema))`` loads it back."""
    return json.loads(json.dumps(gx_suite(schema).to_json_dict(), default=str))


# ---------------------------------------------------------------- outcomes and messages

@dataclass(frozen=True)
class ExpectationOutcome:
    """One expectation's result: counts and a value-free message (``public_message`` has no count)."""

    expectation_type: str
    column: str | None
    success: bool
    unexpected_count: int | None = None
    unexpected_percent: float | None = None
    element_count: int | None = None
    message: str = ""
    public_message: str = ""

    def public_json(self) -> dict:
        """Pass/fail and a count-free message: what validation.json and logs may hold (docs/design.md 5.4)."""
        return {"expectation_type": self.expectation_type, "column": self.column, "success": self.success,
                "message": self.public_message}

    def to_json(self) -> dict:
        return {"expectation_type": self.expectation_type, "column": self.column, "success": self.success,
                "unexpected_count": self.unexpected_count, "unexpected_percent": self.unexpected_percent,
                "element_count": self.element_count, "message": self.message}


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
        return {"success": self.success, "schema": self.schema_name, "schema_hash": self.schema_hash,
                "evaluated_expectations": len(self.results), "failed_expectations": len(self.failures),
                "results": results}

    def to_json(self) -> dict:
        """With counts: for the data owner's own checks (private input), or a public synthetic table."""
        return self._as_json([r.to_json() for r in self.results])

    def public_json(self) -> dict:
        """Pass/fail per expectation, no values and no counts: under add/remove-one neighbours even the
        row count of the private input is private."""
        return self._as_json([r.public_json() for r in self.results])

    @property
    def row_count(self) -> int | None:
        """The table's exact row count (PRIVATE for the input: never in ``public_json``)."""
        rows = next((r for r in self.results if r.expectation_type == ROWS), None)
        return None if rows is None else rows.element_count

    def public_failure_message(self) -> str:
        """One count-free line per failed expectation; '' on success."""
        return "\n".join(r.public_message for r in self.failures)

    def failure_message(self) -> str:
        """One line per failed expectation naming the column and what was expected; '' on success."""
        return "\n".join(r.message for r in self.failures)


def _bound(col: Column, x: float) -> str:
    return temporal.format_unit(x, col.type) if col.type in temporal.TEMPORAL_TYPES else number_label(x)


def plural(kind: str) -> str:
    return {"date": "dates", "timestamp": "timestamps"}.get(kind, "numbers")


def message(kind: str, column: str | None, col: Column | None, count: int | None) -> str:
    """What failed, from schema metadata only; ``count`` None gives the public (count-free) form."""
    where = f"column {column!r}" if column is not None else "table"
    n = "some" if count is None else str(count)
    if kind == TYPE_LIST:
        what = col.type if col else "numeric"
        return f"{where}: {n} value(s) are not {plural(what)}; expected {what} values"
    if kind == BETWEEN and col is not None and col.bounds:
        return f"{where}: {n} value(s) outside [{_bound(col, col.bounds[0])}, {_bound(col, col.bounds[1])}]"
    if kind == IN_SET and col is not None:
        if col.type == "boolean":
            return f"{where}: {n} value(s) are not boolean (true/false, True/False, 1/0)"
        return f"{where}: {n} value(s) not among the schema's {len(col.categories or ())} categories"
    if kind == NOT_NULL:
        return f"{where}: {n} missing value(s) (null/NaN) but the column is not nullable"
    if kind == NON_NULL_PROPORTION:
        return f"{where}: every value is missing"
    if kind == FINITE:
        return f"{where}: {n} value(s) are +inf or -inf; numeric values must be finite"
    if kind == WHOLE_NUMBERS:
        return f"{where}: {n} value(s) are not whole numbers; expected integer values"
    if kind == MOSTLY_IN_DOMAIN and col is not None:
        return (f"{where}: most values are outside the schema's {len(col.categories or ())} categories (free text, or "
                "an incomplete list?); list its categories, exclude it (drop: true), or draft a top-k set with "
                "`privsynth schema draft --epsilon E`")
    if kind == ROWS:
        return "table: 0 rows; expected at least one"
    return f"{where}: {kind} failed"


def outcome(kind: str, column: str | None, success: bool, schema: Schema, unexpected: int | None = None,
            percent: float | None = None, elements: int | None = None, text: str | None = None) -> ExpectationOutcome:
    """An outcome with its messages (``text``, when given, is both: it must hold no count or value)."""
    col = schema.column(column) if column is not None and column in schema.column_names else None
    if text is None:
        text_full = "" if success else message(kind, column, col, unexpected)
        text = "" if success else message(kind, column, col, None)
    else:
        text_full = text
    return ExpectationOutcome(kind, column, bool(success), unexpected, percent, elements, text_full, text)


def column_set_outcome(names: list[str], schema: Schema, synthetic: bool = False) -> ExpectationOutcome:
    """Exactly the schema's columns (see ``expected_columns``; others allowed with ``other_columns:
    ignore``). Unexpected names are listed only when some schema name is present: otherwise the "names"
    may be a data row (a headerless CSV), and are counted instead."""
    expected = expected_columns(schema, synthetic)
    missing = sorted(c for c in expected if c not in names)
    unexpected = sorted(set(names) - set(expected)) if synthetic or schema.other_columns == "fail" else []
    if not missing and not unexpected:
        return outcome(COLUMN_SET, None, True, schema)
    parts = [f"missing column(s) {missing}"] if missing else []
    if unexpected:
        named = bool(set(names) & set(schema.column_names))
        parts.append(f"unexpected column(s) {unexpected!r}" if named else
                     f"unexpected column(s) {len(unexpected)} (names withheld)")
    return outcome(COLUMN_SET, None, False, schema,
                   text=f"table: {'; '.join(parts)}; expected exactly the schema's {len(expected)} columns")


__all__ = ["BOOLEAN_VALUES", "NUMERIC_TYPES", "Expectation", "ExpectationOutcome", "ValidationReport",
           "column_set_outcome", "gx_suite", "message", "mostly_in_domain", "outcome", "schema_expectations",
           "suite_json"]
