"""The schema checks of :mod:`privsynth.engine.gx_validation`, run in place as ONE aggregate query.

Same expectations, same public JSON and the same one-line, value-free messages as
``validation.validate_frame`` (the Great Expectations path), computed as per-column counts on the
backend. Semantics follow the encoder (``engine.binning``), so a table that passes encodes without a
fault: categorical values compare as the encoder reads them, booleans accept true/false/1/0 in any
case, numeric text must parse as a number (the type check), NaN counts as missing.

Refused before any row is read (``open_source``): missing columns, repeated names, and column types no
schema column can read. Counts stay in the internal ``to_json`` form; ``public_json`` has none.
"""

from __future__ import annotations

import ibis
import pandas as pd

from privsynth.engine.binning import Fault, _plural, read_column
from privsynth.engine.gx_validation import (
    _KIND_ORDER,
    EXPECT_FINITE,
    EXPECT_MOSTLY_IN_DOMAIN,
    EXPECT_ROWS,
    EXPECT_UNIQUE_COLUMN_NAMES,
    EXPECT_WHOLE_NUMBERS,
    ExpectationOutcome,
    ValidationReport,
    _column_set_outcome,
    _message,
    _order,
    _outcome,
    mostly_in_domain,
)
from privsynth.schema import Column
from privsynth.schema.temporal import TEMPORAL_TYPES

TYPE_LIST = "expect_column_values_to_be_in_type_list"
BETWEEN = "expect_column_values_to_be_between"
IN_SET = "expect_column_values_to_be_in_set"
NOT_NULL = "expect_column_values_to_not_be_null"
NON_NULL_PROPORTION = "expect_column_proportion_of_non_null_values_to_be_between"
ROWS = "privsynth_rows"


def _count(condition) -> ibis.Value:
    return ibis.ifelse(condition, 1, 0).sum()


def _metrics(source, j: int, col: Column) -> dict[str, ibis.Value]:
    """Named counts for one column: present values, and the rows failing each of its checks."""
    values = read_column(source.table, col, source.opened.text_from_csv)
    present = ~values.missing
    key = f"m{j}_"
    out = {key + "present": _count(present)}
    if col.type in ("integer", "float", *TEMPORAL_TYPES):
        x = values.value
        number = present & x.notnull()
        if values.not_a_number is not None:
            out[key + "nan"] = _count(values.not_a_number)
        if col.type in ("integer", "float"):
            out[key + "inf"] = _count(number & x.isinf())
        if col.type == "integer":
            out[key + "whole"] = _count(number & ~x.isinf() & (x != x.floor()))
        if col.on_out_of_domain == "fail":
            low, high = col.bounds  # type: ignore[misc]
            out[key + "domain"] = _count(number & ((x < low) | (x > high)))
    elif col.on_out_of_domain == "fail":
        code = source.bins.codes[j]
        out[key + "domain"] = _count(present & (code == int(Fault.OUT_OF_DOMAIN)))
    elif col.type == "categorical" and col.on_out_of_domain == "category":
        out[key + "ood"] = _count(present & (source.bins.codes[j] == len(col.labels) - 1))
    if not col.nullable:
        out[key + "null"] = _count(values.missing)
    return out


def validate_source(source) -> ValidationReport:
    """Check ``source`` (an open :class:`~privsynth.engine.statistics.Source`) against its schema."""
    schema = source.schema
    names = list(source.table.columns)
    columns_only = pd.DataFrame(columns=names)  # names only, for the column-set message
    metrics: dict[str, ibis.Value] = {ROWS: source.table.count()}
    kept = list(schema.kept_columns)
    for j, col in enumerate(kept):
        metrics.update(_metrics(source, j, col))
    row = source._run(source.table.aggregate(**metrics)).to_pylist()[0]
    n = int(row[ROWS] or 0)

    results = [
        _outcome(EXPECT_UNIQUE_COLUMN_NAMES, None, True, schema, columns_only),  # repeats are refused at open
        _outcome(EXPECT_ROWS, None, n > 0, schema, columns_only, elements=n,
                 message=None if n > 0 else "table: 0 rows; expected at least one"),
        _column_set_outcome(columns_only, schema),
    ]
    if n > 0:
        for j, col in enumerate(kept):
            results.extend(_column_outcomes(col, {k.split("_", 1)[1]: int(v or 0) for k, v in row.items()
                                                  if k.startswith(f"m{j}_")}, n, schema))
    results.sort(key=lambda r: (r.column is not None, _order(schema, r.column), _KIND_ORDER.get(r.expectation_type, 99)))
    return ValidationReport(success=all(r.success for r in results), results=tuple(results),
                            schema_name=schema.name, schema_hash=schema.content_hash())


def _column_outcomes(col: Column, m: dict[str, int], n: int, schema) -> list[ExpectationOutcome]:
    present = m["present"]
    pct = lambda k: 100.0 * k / present if present else 0.0  # noqa: E731  (GX: relative to non-missing)
    out: list[ExpectationOutcome] = []

    def add(kind: str, bad: int, percent: float | None = None) -> None:
        out.append(_outcome(kind, col.name, bad == 0, schema, None, bad, pct(bad) if percent is None else percent, n))

    if col.type in ("integer", "float", *TEMPORAL_TYPES):
        bad = m.get("nan", 0)
        if bad:
            out.append(ExpectationOutcome(TYPE_LIST, col.name, False, bad, pct(bad), n,
                                          _message(TYPE_LIST, col.name, col, bad, None),
                                          f"column {col.name!r}: some value(s) are not {_plural(col.type)}; expected {col.type} values"))
        else:
            add(TYPE_LIST, 0)
        if col.type in ("integer", "float"):
            add(EXPECT_FINITE, m["inf"])
        if col.type == "integer":
            add(EXPECT_WHOLE_NUMBERS, m["whole"])
        if col.on_out_of_domain == "fail":
            add(BETWEEN, m["domain"])
    elif col.on_out_of_domain == "fail":
        add(IN_SET, m["domain"])
    elif col.type == "categorical" and col.on_out_of_domain == "category":
        ood = m.get("ood", 0)
        out.append(_outcome(EXPECT_MOSTLY_IN_DOMAIN, col.name, mostly_in_domain(col, ood, present), schema, None, ood,
                            pct(ood), n))
    if not col.nullable:
        add(NOT_NULL, m["null"], 100.0 * m["null"] / n)
    out.append(_outcome(NON_NULL_PROPORTION, col.name, present > 0, schema, None, None, None, n))
    return out


__all__ = ["validate_source"]
